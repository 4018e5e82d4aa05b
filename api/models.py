"""Response bodies of the service that are not planner types (those come from planner.schema)."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from planner.schema import Plan, PlanStatus
from planner.simulate import Simulation, SimulationOptions


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


PlanJobState = Literal["queued", "running", "done", "cancelled", "failed"]


class PlanJobProgress(BaseModel):
    """The stage a plan job reached. The planner reports stage boundaries, not its solver's own progress:
    incumbent, bound and gap are those of the last MILP solve that finished (null before the first)."""

    stage: Literal["candidates", "solve", "tie_break", "baseline", "verify", "sensitivity"] = Field(
        description="candidates (building placement candidates), solve (the placement MILP), tie_break (least power "
                    "at the best goodput, max_goodput only), baseline (best single-device fleet), verify, sensitivity "
                    "(re-solves with each estimated input moved, only when asked)")
    candidates: int | None = Field(None, description="placement candidates generated (from the solve stage on)")
    incumbent: float | None = Field(None, description="objective of the best solution so far (the MILP's units)")
    bound: float | None = Field(None, description="the solver's bound on the objective")
    gap: float | None = Field(None, description="relative gap between incumbent and bound")
    has_plan: bool = Field(description="a plan exists already: a cancel now keeps it")


class PlanJobRecord(BaseModel):
    """A plan solved in the background: where the job is (`state`), and once it has a plan, the plan."""

    id: str = Field(description="job id, also the plan's id (UUIDv7: sorts by creation time)",
                    examples=["019ad8a4-5b1e-7c3a-9f12-3e4d5a6b7c8d"])
    state: PlanJobState = Field(description="where the job is: queued, running, done, cancelled (by DELETE; `plan` "
                                            "holds the best plan found before, if any) or failed (see `error`)")
    status: PlanStatus | None = Field(None, description="the solve's outcome, once there is a plan: optimal, "
                                                         "feasible, time_limit or infeasible")
    created_at: dt.datetime
    updated_at: dt.datetime
    time_limit_s: float = Field(description="cap on the whole job, from when it starts running (s)", examples=[20.0])
    progress: PlanJobProgress | None = Field(None, description="the last stage reached (null while queued)")
    error: str | None = Field(None, description="why the job failed")
    href: str = Field(description="the job's URL (DELETE it to cancel)")
    plan: PlanRecord | None = Field(None, description="the plan (done), or the best plan found before a cancel")


SimulationState = Literal["queued", "running", "done", "cancelled", "failed"]


class SimulationRecord(BaseModel):
    """A plan replayed in the background: where the job is (`state`), and once done the simulation."""

    id: str = Field(description="simulation id (UUIDv7: sorts by creation time)",
                    examples=["019ad8a4-5b1e-7c3a-9f12-3e4d5a6b7c8e"])
    plan_id: str = Field(description="the plan it replays")
    state: SimulationState = Field(description="queued, running, done, cancelled (by DELETE) or failed (see `error`)")
    created_at: dt.datetime
    updated_at: dt.datetime
    options: SimulationOptions
    error: str | None = Field(None, description="why the job failed")
    href: str = Field(description="the job's URL (DELETE it to cancel)")
    simulation: Simulation | None = Field(None, description="the simulation, once done: per class latencies against "
                                                            "the SLOs and the plan, per pool figures, the verdict")


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
