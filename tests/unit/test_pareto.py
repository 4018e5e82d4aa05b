"""The one Pareto frontier: dominance with a tolerance, demand, series; the report and the workbook agree."""

from __future__ import annotations

import csv
import json
import math

import pytest

from planner.export.study_workbook import read_results
from planner.pareto import frontier_points, meets_demand, pareto_mask
from planner.study import FrontierSpec


def row(name, fleet, per_user, per_mw, scale=1.2, status="optimal"):
    return {"scenario": name, "status": status, "axis.fleet": fleet, "goodput_scale": scale,
            "output_tokens_per_s_per_user": per_user, "tokens_per_s_per_mw": per_mw, "tpot_ms": 1000 / per_user,
            "devices_by_type": json.dumps({"h100-sxm": 8})}


ROWS = [
    row("a1", "a", 10, 900), row("a2", "a", 20, 500), row("a3", "a", 15, 400),  # a3 dominated by a2
    row("a4", "a", 40, 2000, scale=0.057),  # would dominate every a, serves 5.7% of demand
    row("b1", "b", 5, 300), row("b2", "b", 30, 100), row("b3", "b", 30 * (1 + 1e-9), 100),  # b3 ~ b2: both stay
    row("b4", "b", 99, 99, status="infeasible", scale=0.0),
]


def test_pareto_mask_by_hand_with_a_tolerance():
    #        0    1    2    3    4          5
    xs = [1.0, 2.0, 3.0, 2.0, 1.0 - 1e-9, float("nan")]
    ys = [5.0, 4.0, 1.0, 3.0, 5.0 + 1e-9, 9.0]
    # 3 (2,3) is dominated by 1 (2,4); 4 equals 0 within 1e-6 (neither dominates); NaN never
    assert pareto_mask(xs, ys) == [True, True, True, False, True, False]
    # a gap larger than the tolerance dominates
    assert pareto_mask([1.0, 1.0 + 1e-3], [5.0, 5.0]) == [False, True]
    assert pareto_mask([1.0, 1.0 + 1e-3], [5.0, 5.0], rel_tol=1e-2) == [True, True]


def test_minimised_axes():
    assert pareto_mask([1, 2, 3, 4, 2], [10, 5, 5, 1, 20], ("min", "min")) == [True, True, False, True, False]


def test_points_below_demand_are_never_on_a_frontier():
    assert not meets_demand(ROWS[3]) and meets_demand(ROWS[0]) and not meets_demand(ROWS[-1])
    assert meets_demand({"status": "optimal", "goodput_scale": 1 - 1e-9})  # solver round-off on λ = 1
    assert not meets_demand({"status": "optimal", "goodput_scale": math.nan})
    points = frontier_points(ROWS, FrontierSpec(by="fleet"))
    assert [(p["series"], p["scenario"]) for p in points] == [("a", "a1"), ("a", "a2"), ("b", "b1"), ("b", "b2"),
                                                               ("b", "b3")]
    overall = frontier_points(ROWS, FrontierSpec(name="all"))
    assert [p["scenario"] for p in overall] == ["a1", "a2", "b2", "b3"]


def _study_folder(tmp_path, frontier: dict):
    columns = list(ROWS[0])
    with (tmp_path / "results.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(ROWS)
    (tmp_path / "study.yaml").write_text(f"name: t\npareto:\n  - {json.dumps(frontier)}\n")
    return tmp_path


@pytest.mark.parametrize("frontier", [{"by": "fleet"}, {"name": "all"},
                                      {"name": "cost", "x": "tpot_ms", "y": "tokens_per_s_per_mw"}])
def test_the_workbook_draws_the_reports_frontier(tmp_path, frontier):
    """The study workbook reads the study's frontier and gets the report's points from its CSV copy."""
    table = read_results(_study_folder(tmp_path, frontier))
    report = frontier_points(ROWS, FrontierSpec.model_validate(frontier))
    assert [table.rows[i]["scenario"] for i in table.frontier_indices()] == [p["scenario"] for p in report]
