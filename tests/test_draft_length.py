"""The draft length k of speculative decoding is a decision when the workload leaves it unset: each pool takes the
k that gives it the most SLO-feasible capacity, so the plan is at least as good as with any fixed k."""

from __future__ import annotations

import pytest

from planner.optimize import PlanOptions, plan_workload
from planner.schema import DRAFT_LENGTHS, Workload

EXACT = PlanOptions(relative_gap=1e-9, time_limit_s=30, baseline=False)


def spec(draft_tokens: int | None) -> Workload:
    return Workload.model_validate({
        "model": "llama-3.3-70b", "dtype": "fp8", "kv_dtype": "fp8",
        "classes": [{"name": "fast", "rate_rps": 10, "input_tokens": 1000, "output_tokens": 400,
                     "slo": {"ttft_ms": 1500, "tpot_ms": 15}}],
        "strategies": ["spec_decode"],
        "spec_decode": {"draft_model": "llama-3.2-1b", "acceptance_rate": 0.8,
                        **({"draft_tokens": draft_tokens} if draft_tokens else {})},
        "constraints": {"power_budget_kw": 400, "devices": ["h200", "cs-3"]},
    })


@pytest.fixture(scope="module")
def chosen(catalog):
    return plan_workload(spec(None), catalog, EXACT)


def test_each_speculative_pool_names_the_draft_length_it_was_priced_with(chosen):
    decode = [p for p in chosen.pools if p.role == "decode"]
    assert chosen.status == "optimal" and chosen.verification.ok and decode
    assert all(p.draft_tokens in DRAFT_LENGTHS for p in decode)


@pytest.mark.parametrize("k", [1, 2, 4, 8])
def test_choosing_k_is_never_worse_than_fixing_it(catalog, chosen, k):
    fixed = plan_workload(spec(k), catalog, EXACT)
    assert all(p.draft_tokens == k for p in fixed.pools if p.role == "decode")
    assert chosen.goodput_scale >= fixed.goodput_scale * (1 - 1e-7)
