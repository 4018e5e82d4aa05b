"""A TTFT SLO stated as a percentile: the prefill queues run cooler, the plan reports TTFT at that percentile,
and the verifier recomputes it the same way."""

from __future__ import annotations

import pytest

from planner.optimize import PlanOptions, plan_workload
from planner.schema import Workload
from planner.verify import verify_plan

EXACT = PlanOptions(relative_gap=1e-9, time_limit_s=30, baseline=False)


def chat(percentile: float | None) -> Workload:
    slo = {"ttft_ms": 400, "tpot_ms": 50, **({"percentile": percentile} if percentile else {})}
    return Workload.model_validate({
        "model": "llama-3.1-8b", "dtype": "fp8",
        "classes": [{"name": "chat", "rate_rps": 40, "input_tokens": 4000, "output_tokens": 200, "slo": slo}],
        "strategies": ["pd_disagg"], "objective": "min_cost",
        "constraints": {"power_budget_kw": 300, "devices": ["h100-sxm"]},
    })


@pytest.fixture(scope="module")
def plans(catalog):
    return {p: plan_workload(chat(p), catalog, EXACT) for p in (None, 90, 99)}


def test_a_tail_slo_runs_prefill_cooler_and_costs_no_less(plans):
    prefill = {p: next(x for x in plan.pools if x.role == "prefill") for p, plan in plans.items()}
    assert prefill[None].utilization_cap > prefill[90].utilization_cap > prefill[99].utilization_cap
    assert plans[None].totals.cost_usd_per_hour <= plans[90].totals.cost_usd_per_hour <= plans[99].totals.cost_usd_per_hour


def test_the_plan_reports_ttft_at_the_slos_percentile_and_verifies(catalog, plans):
    for p, plan in plans.items():
        assert plan.status == "optimal" and plan.verification.ok
        assert all(x.ttft_ms <= 400 * (1 + 1e-9) for x in plan.pools if x.ttft_ms is not None)
    # the same pools judged against a mean SLO: the recomputed (mean) TTFT no longer equals the reported p99 one
    tail = plans[99]
    as_mean = tail.model_copy(update={"workload": chat(None)})
    assert not verify_plan(as_mean, catalog).checks["latency_recomputed"]


def test_tail_tpot_hand_case():
    from planner.strategies.aggregated import tail_tpot_s

    # 30 % of the steps carry a chunk (q/C = 0.3): p90 waits for one (0.3 > 0.1), p50 does not (0.3 < 0.5)
    assert float(tail_tpot_s(0.012, 0.040, 0.010, 0.3, 90)) == 0.040
    assert float(tail_tpot_s(0.012, 0.040, 0.010, 0.3, 50)) == 0.010
    assert float(tail_tpot_s(0.012, 0.040, 0.010, 0.3, None)) == 0.012  # the mean
    assert float(tail_tpot_s(0.012, 0.011, 0.010, 1.0, 99)) == 0.012  # a carrying step is never below the mean


def test_a_tail_tpot_slo_never_admits_more_than_the_same_mean_slo(catalog):
    """Short prompts at a big batch: a step must carry more prefill (q = b·isl/osl) than one prompt holds, so the
    carrying step packs several; the p99 pool is never bigger or faster than the mean one."""
    def plan(percentile):
        slo = {"ttft_ms": 2000, "tpot_ms": 30, **({"percentile": percentile} if percentile else {})}
        return plan_workload(Workload.model_validate({
            "model": "llama-3.1-8b", "dtype": "fp8", "strategies": ["aggregated"],
            "classes": [{"name": "short", "rate_rps": 200, "input_tokens": 300, "output_tokens": 60, "slo": slo}],
            "constraints": {"power_budget_kw": 50, "devices": ["h100-sxm"]},
        }), catalog, EXACT)
    mean, tail = plan(None), plan(99)
    assert tail.goodput_scale <= mean.goodput_scale * (1 + 1e-9)
    assert max(p.batch for p in tail.pools) <= max(p.batch for p in mean.pools)
    assert all(p.tpot_ms <= 30 * (1 + 1e-9) for p in tail.pools) and tail.verification.ok


def test_a_tail_tpot_slo_sees_the_chunks_aggregation_puts_on_decode(catalog):
    """Same GPUs and SLO numbers: at p99 the aggregated pools must keep chunked prefill off the TPOT budget, so
    disaggregation (whose decode steps carry no prefill) serves more."""
    def workload(strategies, percentile):
        slo = {"ttft_ms": 2000, "tpot_ms": 25, **({"percentile": percentile} if percentile else {})}
        return Workload.model_validate({
            "model": "llama-3.1-8b", "dtype": "fp8", "strategies": strategies,
            "classes": [{"name": "code", "rate_rps": 40, "input_tokens": 3000, "output_tokens": 150, "slo": slo}],
            "constraints": {"power_budget_kw": 100, "devices": ["h100-sxm"]},
        })
    agg_mean = plan_workload(workload(["aggregated"], None), catalog, EXACT)
    agg_tail = plan_workload(workload(["aggregated"], 99), catalog, EXACT)
    pd_tail = plan_workload(workload(["pd_disagg"], 99), catalog, EXACT)
    assert agg_tail.goodput_scale < agg_mean.goodput_scale  # the tail SLO bites where the mean does not
    assert pd_tail.goodput_scale > agg_tail.goodput_scale
    assert agg_tail.verification.ok and pd_tail.verification.ok
