"""Request examples of the OpenAPI docs; CHAT_70B mirrors examples/workloads/chat-70b.yaml (a test keeps them equal)."""

from __future__ import annotations

CHAT_70B = {
    "model": "llama-3.3-70b",
    "dtype": "fp8",
    "kv_dtype": "fp8",
    "classes": [
        {
            "name": "chat",
            "rate_rps": 400,
            "input_tokens": 1500,
            "output_tokens": 300,
            "prefix_cache_hit": 0.3,
            "slo": {"ttft_ms": 1000, "tpot_ms": 50},
        }
    ],
    "strategies": ["aggregated", "pd_disagg"],
    "constraints": {
        "power_budget_kw": 500,
        "pue": 1.2,
        "devices": ["h100-sxm", "h200", "b200", "mi300x", "mi355x", "gaudi3", "trn2"],
    },
    "objective": "max_goodput",
}

UNREACHABLE_SLO = {
    "model": "llama-3.3-70b",
    "classes": [
        {"name": "instant", "rate_rps": 10, "input_tokens": 8000, "output_tokens": 100,
         "slo": {"ttft_ms": 1, "tpot_ms": 50}}
    ],
    "constraints": {"power_budget_kw": 100},
}

WORKLOAD_EXAMPLES = {
    "chat-70b": {
        "summary": "Chat on Llama-3.3-70B, 500 kW",
        "description": "examples/workloads/chat-70b.yaml: 400 req/s, TTFT 1 s, TPOT 50 ms, seven accelerators.",
        "value": CHAT_70B,
    },
    "infeasible": {
        "summary": "An SLO no device meets (answered with status infeasible and the diagnosis)",
        "value": UNREACHABLE_SLO,
    },
}

ESTIMATE_EXAMPLES = {
    "h100-tp8": {
        "summary": "Llama-3.3-70B on 8x H100, batch 32",
        "value": {"model": "llama-3.3-70b", "device": "h100-sxm", "tp": 8, "batch": 32, "isl": 2048, "osl": 256},
    },
    "cs3": {
        "summary": "Llama-3.3-70B on 4 Cerebras CS-3 systems",
        "value": {"model": "llama-3.3-70b", "device": "cs-3", "tp": 4, "batch": 1, "isl": 2048, "osl": 256},
    },
}

STUDY_EXAMPLES = {
    "tpot-sweep": {
        "summary": "Two TPOT targets for chat-70b on H100s (two scenarios, seconds to solve)",
        "description": "A grid of one axis; the base is an inline workload, as in a study file.",
        "value": {
            "name": "tpot-sweep",
            "base": {**CHAT_70B, "constraints": {**CHAT_70B["constraints"], "devices": ["h100-sxm"]}},
            "axes": [{"name": "tpot_ms", "param": "slo.tpot_ms", "values": [50, 30]}],
            "options": {"time_limit_s": 2, "baseline": False},
        },
    },
}

_JOB = {"id": "019ad8a4-5b1e-7c3a-9f12-3e4d5a6b7c8d", "created_at": "2026-12-15T10:00:00.000000Z",
        "time_limit_s": 20.0, "error": None, "href": "/v1/plans/019ad8a4-5b1e-7c3a-9f12-3e4d5a6b7c8d"}

#: response examples of a plan job (POST ... Prefer: respond-async, GET and DELETE /v1/plans/{id}); a job's `plan`
#: is left out where it has one: it is the PlanRecord GET answers for a synchronous plan
PLAN_JOB_EXAMPLES = {
    "queued": {"summary": "just accepted (202)", "value": {
        **_JOB, "state": "queued", "status": None, "updated_at": "2026-12-15T10:00:00.000000Z", "progress": None,
        "plan": None}},
    "running": {"summary": "running: the first stage solved, the tie-break under way", "value": {
        **_JOB, "state": "running", "status": None, "updated_at": "2026-12-15T10:00:07.120000Z",
        "progress": {"stage": "tie_break", "candidates": 412, "incumbent": -1.38, "bound": -1.38, "gap": 0.0,
                     "has_plan": True}, "plan": None}},
    "cancelled": {"summary": "cancelled during the tie-break: the first stage's plan is kept", "value": {
        **_JOB, "state": "cancelled", "status": "optimal", "updated_at": "2026-12-15T10:00:08.500000Z",
        "progress": {"stage": "tie_break", "candidates": 412, "incumbent": -1.38, "bound": -1.38, "gap": 0.0,
                     "has_plan": True}}},
    "failed": {"summary": "failed: the time limit passed before any plan was found", "value": {
        **_JOB, "state": "failed", "status": None, "updated_at": "2026-12-15T10:00:20.010000Z",
        "progress": {"stage": "solve", "candidates": 412, "incumbent": None, "bound": None, "gap": None,
                     "has_plan": False},
        "error": "time_limit_s (20 s) passed before any plan was found", "plan": None}},
}
