"""Response bodies of the service that are not planner types (those come from planner.schema)."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from planner.schema import Plan, PlanStatus


class PlanRecord(BaseModel):
    """A stored plan: its id, when it was made, how it was solved, and the plan itself."""

    id: str = Field(description="plan id (UUIDv7: sorts by creation time)",
                    examples=["019ad8a4-5b1e-7c3a-9f12-3e4d5a6b7c8d"])
    created_at: dt.datetime = Field(description="when the plan was stored (UTC)")
    status: PlanStatus = Field(description="optimal, feasible (gap), time_limit, or infeasible (see plan.diagnosis)")
    solver: str = Field(description="MILP backend", examples=["ortools"])
    engine: str = Field(description="engine inside the backend", examples=["scip"])
    time_limit_s: float = Field(description="time limit given to each MILP solve (s)", examples=[30.0])
    solve_time_s: float = Field(description="wall time of the whole plan (s)", examples=[0.6])
    plan: Plan


class PlanSummary(BaseModel):
    """One line of the plan list."""

    id: str
    created_at: dt.datetime
    status: PlanStatus
    model: str = Field(examples=["llama-3.3-70b"])
    objective: str = Field(examples=["max_goodput"])
    solver: str = Field(examples=["ortools"])
    engine: str = Field(examples=["scip"])
    solve_time_s: float
    goodput_scale: float = Field(description="served rate as a multiple of the workload's rates")
    devices: int = Field(description="accelerators in the fleet")
    power_kw: float = Field(description="facility power of the fleet (kW, IT x PUE)")
    href: str = Field(description="where the full plan is", examples=["/v1/plans/019ad8a4-5b1e-7c3a-9f12-3e4d5a6b7c8d"])


class PlanPage(BaseModel):
    """A page of plans, newest first."""

    items: list[PlanSummary]
    total: int = Field(description="plans matching the filters, over all pages")
    limit: int
    offset: int
    next_offset: int | None = Field(description="offset of the next page; null on the last page")


class TaskGraph(BaseModel):
    """The workload's task graph of a plan (networkx node-link JSON): tasks per class x strategy, transfers."""

    model_config = ConfigDict(extra="allow")

    plan_id: str
    directed: bool = True
    multigraph: bool = False
    graph: dict[str, Any] = Field(description="graph attributes (the model)", examples=[{"model": "llama-3.3-70b"}])
    nodes: list[dict[str, Any]] = Field(
        description="tasks: id 'class/strategy/task', rate_rps, prefill/cached/decode tokens per request",
        examples=[[{"id": "chat/pd_disagg/prefill", "class": "chat", "strategy": "pd_disagg", "task": "prefill",
                    "unit": "prefill", "rate_rps": 400.0, "prefill_tokens": 1050.0, "cached_tokens": 450.0,
                    "decode_tokens": 0}]])
    links: list[dict[str, Any]] = Field(
        description="transfers between tasks: kind, bytes and transfers per request, link used",
        examples=[[{"source": "chat/pd_disagg/prefill", "target": "chat/pd_disagg/decode", "kind": "kv_cache",
                    "bytes_per_request": 245760000.0, "transfers_per_request": 1.0, "link": "scale_out"}]])


class Health(BaseModel):
    status: Literal["ok"] = "ok"


class Check(BaseModel):
    ok: bool
    detail: str


class Readiness(BaseModel):
    """Whether the service can answer /v1 requests, and why not."""

    status: Literal["ready", "not_ready"]
    checks: dict[str, Check] = Field(examples=[{"database": {"ok": True, "detail": "sqlite reachable"},
                                               "catalog": {"ok": True, "detail": "18 devices, 11 models"}}])
