"""max_interactivity: the tightest TPOT at which a fleet within the budgets still serves the whole rate."""

from pathlib import Path

import pytest
import yaml

from planner import interactivity
from planner.optimize import PlanOptions, plan_workload
from planner.plan import gain_lines
from planner.schema import Workload


def test_the_search_walks_the_grid_then_bisects_the_last_step():
    factor, probes = interactivity.tightest(lambda f: f >= 0.3)
    # 0.9^11 = 0.3138 is the last grid factor above 0.3, 0.9^12 = 0.2824 the first below; four geometric
    # bisections of that step leave the answer within 0.9^(1/16) of 0.3, on the feasible side
    assert [round(f, 4) for f, _ in probes[:13]] == [round(0.9 ** i, 4) for i in range(13)]
    assert [ok for _, ok in probes[:13]] == [True] * 12 + [False]
    assert len(probes) == 13 + interactivity.REFINE_STEPS
    assert 0.3 <= factor < 0.3 / 0.9 ** (1 / 16)
    assert factor == min(f for f, ok in probes if ok)


def test_the_search_says_when_even_the_stated_slo_cannot_be_met():
    assert interactivity.tightest(lambda f: False) == (None, [(1.0, False)])
    factor, probes = interactivity.tightest(lambda f: True)  # every factor down to the floor: no bisection
    assert factor == pytest.approx(min(interactivity.grid())) and len(probes) == len(interactivity.grid())


def test_tightened_scales_every_tpot_and_plans_the_least_power():
    workload = Workload.model_validate(yaml.safe_load(Path("examples/workloads/mixed-agents.yaml").read_text()))
    tight = interactivity.tightened(workload, 0.5)
    assert tight.objective == "min_power"
    for before, after in zip(workload.classes, tight.classes):
        assert after.slo.tpot_ms == pytest.approx(0.5 * before.slo.tpot_ms)
        assert after.slo.ttft_ms == before.slo.ttft_ms and after.rate_rps == before.rate_rps


@pytest.fixture(scope="module")
def chat(catalog):
    doc = yaml.safe_load(Path("examples/workloads/chat-70b.yaml").read_text())
    workload = Workload.model_validate({**doc, "objective": "max_interactivity"})
    return workload, plan_workload(workload, catalog, PlanOptions())


def test_the_plan_serves_the_whole_rate_at_the_tightest_tpot_found(catalog, chat):
    workload, plan = chat
    i = plan.interactivity
    assert plan.objective == "max_interactivity" and plan.meets_demand and plan.verification.ok
    assert plan.alternatives == ()  # the default options ask for no runner-up fleets, at the tightest TPOT either
    (rc,) = workload.classes
    assert i.tpot_ms == {"chat": pytest.approx(i.tpot_factor * rc.slo.tpot_ms)}
    assert i.output_tokens_per_s_per_user["chat"] == pytest.approx(1000.0 / i.tpot_ms["chat"])
    assert all(p.tpot_ms <= i.tpot_ms["chat"] * (1 + 1e-6) for p in plan.pools if p.tpot_ms is not None)
    assert plan.workload.classes[0].slo.tpot_ms == pytest.approx(i.tpot_ms["chat"])  # verified at that SLO
    # the tightest factor the search found infeasible: no fleet within the budget serves the rate there
    below = max(f for f, ok in i.probes if not ok)
    assert below < i.tpot_factor
    tighter = plan_workload(interactivity.tightened(workload, below), catalog, PlanOptions(baseline=False))
    assert tighter.status == "infeasible"
    # a single device type is never more interactive than the mix it is part of
    assert i.best_homogeneous is not None and i.best_homogeneous_factor >= i.tpot_factor * (1 - 1e-9)
    assert i.gain == pytest.approx(i.best_homogeneous_factor / i.tpot_factor)
    assert gain_lines(plan)[0].startswith("tightest TPOT at the full rate: ")


def test_sram_draft_servers_against_an_h100_reference(catalog):
    doc = yaml.safe_load(Path("examples/workloads/spec-decode.yaml").read_text())
    workload = Workload.model_validate({**doc, "objective": "max_interactivity", "baseline_device": "h100-sxm"})
    i = plan_workload(workload, catalog, PlanOptions()).interactivity
    assert i.reference == "h100-sxm" and i.reference_factor > 2 * i.tpot_factor
