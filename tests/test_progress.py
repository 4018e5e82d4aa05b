"""planner.progress: the stages plan_workload reports, in order, with the best plan so far; nothing without an observer."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.files import read_document
from planner.optimize import PlanOptions, plan_workload
from planner.progress import STAGES, Progress, observed
from planner.schema import Workload


def small(objective: str = "max_goodput") -> Workload:
    body = read_document(Path(__file__).resolve().parents[1] / "examples/workloads/chat-70b.yaml")
    body["constraints"]["devices"] = ["h100-sxm"]
    body["objective"] = objective
    return Workload.model_validate(body)


def stages_of(workload: Workload, catalog, baseline: bool) -> tuple[list[Progress], object]:
    seen: list[Progress] = []
    with observed(seen.append):
        plan = plan_workload(workload, catalog, PlanOptions(baseline=baseline, time_limit_s=10))
    return seen, plan


def test_max_goodput_reports_every_stage_in_order_and_the_first_stage_plan(catalog):
    seen, plan = stages_of(small(), catalog, baseline=True)
    assert [p.stage for p in seen] == [s for s in STAGES if s != "sensitivity"]  # sensitivity: only when asked
    candidates, solve, tie_break, baseline, verify = seen
    assert candidates.best is None and candidates.candidates is None and solve.best is None
    assert solve.candidates == tie_break.candidates > 0
    assert tie_break.incumbent is not None and tie_break.bound is not None and tie_break.best is not None
    first = tie_break.best()  # the plan a cancel during the tie-break keeps: same goodput, no baseline
    assert first.goodput_scale == pytest.approx(plan.goodput_scale, rel=1e-6) and first.baseline is None
    assert first.verification.ok and first.siliconmix_version == plan.siliconmix_version
    assert baseline.best().goodput_scale == pytest.approx(plan.goodput_scale, rel=1e-6)
    assert plan.baseline is not None


def test_min_cost_has_no_tie_break_and_no_baseline_when_not_asked(catalog):
    seen, _ = stages_of(small("min_cost"), catalog, baseline=False)
    assert [p.stage for p in seen] == ["candidates", "solve", "verify"]


def test_without_an_observer_nothing_is_reported(catalog):
    seen: list[Progress] = []
    with observed(seen.append):
        pass
    plan_workload(small(), catalog, PlanOptions(baseline=False))
    assert seen == []
