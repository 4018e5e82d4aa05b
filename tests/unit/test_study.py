"""Study spec, scenario expansion, result rows, Pareto extraction and fleet comparison (pure, no solver runs
except one tiny plan for the row formulas)."""

from __future__ import annotations

import json
import math

import pytest
from pydantic import ValidationError

from planner.optimize import PlanOptions, plan_workload
from planner.study import (
    FrontierSpec, StudyError, StudySpec, error_row, expand, fleet_comparison, frontier_points, label_of, pareto_mask,
    result_row, scenario_hash, single_device_labels, table_row, with_prices,
)

BASE = {
    "model": "llama-3.3-70b", "dtype": "fp8", "kv_dtype": "fp8",
    "classes": [
        {"name": "chat", "rate_rps": 100, "input_tokens": 1500, "output_tokens": 300, "slo": {"ttft_ms": 1000, "tpot_ms": 50}},
        {"name": "batch", "rate_rps": 10, "input_tokens": 8000, "output_tokens": 200, "slo": {"ttft_ms": 5000, "tpot_ms": 80}},
    ],
    "strategies": ["pd_disagg"],
    "constraints": {"power_budget_kw": 200, "devices": ["h100-sxm", "b200"]},
}


def spec(**kw) -> StudySpec:
    return StudySpec.model_validate({"name": "t", "base": BASE, **kw})


# ------------------------------------------------------------------------------------------ expansion
def test_grid_is_the_cartesian_product_in_file_order():
    s = spec(axes=[{"name": "power", "param": "power_budget_kw", "values": [100, 200, 400]},
                   {"name": "tpot", "param": "slo.tpot_ms", "values": [20, 40]}])
    scenarios = expand(s)
    assert [x.key for x in scenarios] == [f"power={p}, tpot={t}" for p in (100, 200, 400) for t in (20, 40)]
    assert [x.index for x in scenarios] == list(range(6))
    last = scenarios[-1].workload
    assert last.constraints.power_budget_kw == 400
    assert [c.slo.tpot_ms for c in last.classes] == [40, 40]
    assert scenarios[-1].axes == {"power": 400, "tpot": 40}


def test_zip_group_advances_axes_together_inside_a_grid():
    s = spec(axes=[{"zip": [{"name": "power", "param": "power_budget_kw", "values": [100, 200]},
                            {"name": "scale", "param": "rate_scale", "values": [1, 2]}]},
                   {"name": "tpot", "param": "slo.tpot_ms", "values": [20, 40, 60]}])
    scenarios = expand(s)
    assert len(scenarios) == 6
    assert {(x.axes["power"], x.axes["scale"]) for x in scenarios} == {(100, 1), (200, 2)}
    doubled = next(x for x in scenarios if x.axes["scale"] == 2).workload
    assert [c.rate_rps for c in doubled.classes] == [200, 20]


def test_combine_zip_pairs_every_axis():
    s = spec(combine="zip", axes=[{"name": "power", "param": "power_budget_kw", "values": [100, 200]},
                                  {"name": "tpot", "param": "slo.tpot_ms", "values": [20, 40]}])
    assert [x.key for x in expand(s)] == ["power=100, tpot=20", "power=200, tpot=40"]


def test_zipped_axes_of_different_lengths_are_rejected():
    s = spec(combine="zip", axes=[{"name": "power", "param": "power_budget_kw", "values": [100, 200]},
                                  {"name": "tpot", "param": "slo.tpot_ms", "values": [20]}])
    with pytest.raises(StudyError, match="same number of values"):
        expand(s)


def test_each_device_alone_then_named_sets_and_bundles():
    s = spec(axes=[{"name": "fleet", "each": "base", "values": {
        "both": {"devices": ["h100-sxm", "b200"], "strategies": ["aggregated", "pd_disagg"]}}}])
    scenarios = expand(s)
    assert [x.axes["fleet"] for x in scenarios] == ["h100-sxm", "b200", "both"]
    assert [x.workload.constraints.devices for x in scenarios] == [("h100-sxm",), ("b200",), ("h100-sxm", "b200")]
    assert scenarios[2].workload.strategies == ("aggregated", "pd_disagg")
    assert single_device_labels(scenarios, "fleet") == {"h100-sxm", "b200"}


def test_per_class_slo_mapping_and_class_filter():
    s = spec(axes=[{"name": "slo", "param": "slo.tpot_ms", "values": {"tight": {"chat": 10, "batch": 30}}},
                   {"name": "chat_ttft", "param": "slo.ttft_ms", "classes": ["chat"], "values": [500]}])
    (only,) = expand(s)
    chat, batch = only.workload.classes
    assert (chat.slo.tpot_ms, batch.slo.tpot_ms) == (10, 30)
    assert (chat.slo.ttft_ms, batch.slo.ttft_ms) == (500, 5000)


def test_set_objective_dotted_params_and_prices():
    s = spec(set={"strategies": ["pd_disagg", "spec_decode"],
                  "spec_decode": {"draft_model": "llama-3.2-1b", "acceptance_rate": 0.7, "draft_tokens": 4}},
             objective="min_cost",
             axes=[{"name": "alpha", "param": "spec_decode.acceptance_rate", "values": [0.6, 0.8]},
                   {"name": "price", "param": "prices", "values": {"cheap-b200": {"b200": 1.5}, "list": {}}}])
    scenarios = expand(s)
    assert len(scenarios) == 4
    assert scenarios[0].workload.objective == "min_cost"
    assert [x.workload.spec_decode.acceptance_rate for x in scenarios] == [0.6, 0.6, 0.8, 0.8]
    assert scenarios[0].prices == {"b200": {"price_usd_per_hour": 1.5}} and scenarios[1].prices == {}
    # the price override changes the hash although the workload is the same
    assert scenarios[0].workload == scenarios[1].workload and scenarios[0].hash != scenarios[1].hash


def test_hash_is_stable_and_tracks_the_workload():
    a, b = expand(spec(axes=[{"name": "power", "param": "power_budget_kw", "values": [100, 200]}]))
    again = expand(spec(axes=[{"name": "kw", "param": "power_budget_kw", "values": [100]}]))[0]
    assert a.hash == again.hash == scenario_hash(a.workload, {}) and len(a.hash) == 12
    assert a.hash != b.hash


def test_labels():
    assert [label_of(v) for v in (10, 2.5, True, ["a", "b"], {"x": 1})] == ["10", "2.5", "true", "a+b", "x:1"]


@pytest.mark.parametrize(("axes", "message"), [
    ([{"name": "a", "param": "slo.tpot_ms", "values": [-1]}], "classes.0.slo.tpot_ms"),
    ([{"name": "a", "param": "slo.tpot_ms", "values": {"x": {"nope": 5}}}], "unknown class 'nope'"),
    ([{"name": "a", "param": "power_budget_kw", "values": [1, 1]}], "duplicate values"),
    ([{"name": "a", "param": "prices", "values": [{"b200": -2}]}], "prices.b200.price_usd_per_hour"),
])
def test_bad_axes_name_the_field(axes, message):
    with pytest.raises(StudyError, match=message):
        expand(spec(axes=axes))


def test_unknown_device_is_caught_against_the_catalog(catalog):
    s = spec(axes=[{"name": "fleet", "param": "devices", "values": [["h100-sxm", "h900"]]}])
    with pytest.raises(StudyError, match="constraints.devices: unknown device 'h900'"):
        expand(s, catalog)


@pytest.mark.parametrize(("raw", "field"), [
    ({"axes": [{"name": "a", "param": "x", "values": [1]}, {"name": "a", "param": "y", "values": [1]}]}, "duplicate axis"),
    ({"axes": [{"name": "a", "param": "x", "values": [1]}], "pareto": [{"by": "b"}]}, "pareto.0.by"),
    ({"axes": [{"name": "a", "param": "x", "values": [1]}], "pareto": [{"x": "bogus"}]}, "pareto.0.x"),
    ({"axes": [{"name": "a", "values": [1]}]}, "bundle axis"),
    ({"axes": []}, "axes"),
])
def test_spec_validation_names_the_field(raw, field):
    with pytest.raises(ValidationError, match=field):
        StudySpec.model_validate({"name": "t", "base": BASE, **raw})


# ---------------------------------------------------------------------------------------------- rows
def test_result_row_formulas_on_a_real_plan(catalog):
    (scenario,) = expand(spec(axes=[{"name": "fleet", "param": "devices", "values": [["h100-sxm"]]}]), catalog)
    plan = plan_workload(scenario.workload, catalog, PlanOptions(baseline=False))
    row = result_row(plan, 0.5)
    served = {c.name: c.rate_rps_served for c in plan.classes}
    tps = served["chat"] * 300 + served["batch"] * 200
    assert row["status"] == plan.status and row["reason"] == ""
    assert row["output_tokens_per_s"] == pytest.approx(tps)
    assert row["served_rps"] == pytest.approx(sum(served.values()))
    assert row["tokens_per_s_per_mw"] == pytest.approx(tps / (plan.totals.power_kw / 1000))
    assert row["usd_per_million_tokens"] == pytest.approx(plan.totals.cost_usd_per_hour / (tps * 3600 / 1e6))
    per_user = {c.name: c.output_tokens_per_s_per_user for c in plan.classes}
    assert row["output_tokens_per_s_per_user"] == pytest.approx(
        (served["chat"] * per_user["chat"] + served["batch"] * per_user["batch"]) / sum(served.values()))
    assert json.loads(row["devices_by_type"]) == {"h100-sxm": plan.totals.devices}
    assert math.isnan(row["gain"]) and row["baseline_device"] == ""
    full = table_row(scenario, row)
    assert list(full)[:3] == ["scenario", "hash", "axis.fleet"] and full["axis.fleet"] == "h100-sxm"


def test_error_row_has_reason_and_no_numbers():
    row = error_row("boom", 1.0)
    assert row["status"] == "error" and row["reason"] == "boom" and math.isnan(row["goodput_scale"])


def test_with_prices_leaves_the_catalog_alone(catalog):
    cheap = with_prices(catalog, {"b200": {"price_usd_per_hour": 0.5}})
    assert cheap.device("b200").price_usd_per_hour == 0.5
    assert catalog.device("b200").price_usd_per_hour != 0.5
    assert with_prices(catalog, {}) is catalog


# -------------------------------------------------------------------------------------------- pareto
def test_pareto_mask_against_a_hand_made_set():
    #        0     1     2     3     4     5          6     7
    xs = [1.0, 2.0, 3.0, 2.0, 0.5, float("nan"), 3.0, 1.0]
    ys = [5.0, 4.0, 1.0, 3.0, 5.0, 9.0, 1.0, 5.0 + 1e-12]
    # 0 (1,5): non-dominated (7 is the same point to 9 digits); 1 (2,4): yes; 2 and 6 (3,1): yes, identical;
    # 3 (2,3): dominated by 1; 4 (0.5,5): dominated by 0; 5: NaN never; 7 ~ 0: kept
    assert pareto_mask(xs, ys) == [True, True, True, False, False, False, True, True]


def test_pareto_mask_with_minimised_axes():
    # cost (min) vs TTFT (min): (1, 10) (2, 5) (3, 5) (4, 1) (2, 20)
    xs, ys = [1, 2, 3, 4, 2], [10, 5, 5, 1, 20]
    assert pareto_mask(xs, ys, ("min", "min")) == [True, True, False, True, False]
    # mixed senses, e.g. interactivity (max) vs $ per million tokens (min): (1,1) (2,5) (3,5) (4,10) (2,20)
    xs, ys = [1, 2, 3, 4, 2], [1, 5, 5, 10, 20]
    assert pareto_mask(xs, ys, ("max", "min")) == [True, False, True, True, False]


def test_frontier_points_by_series_skip_failed_rows():
    rows = [
        {"scenario": "a1", "status": "optimal", "axis.fleet": "a", "output_tokens_per_s_per_user": 10, "tokens_per_s_per_mw": 9},
        {"scenario": "a2", "status": "optimal", "axis.fleet": "a", "output_tokens_per_s_per_user": 20, "tokens_per_s_per_mw": 5},
        {"scenario": "a3", "status": "optimal", "axis.fleet": "a", "output_tokens_per_s_per_user": 15, "tokens_per_s_per_mw": 4},
        {"scenario": "b1", "status": "optimal", "axis.fleet": "b", "output_tokens_per_s_per_user": 5, "tokens_per_s_per_mw": 3},
        {"scenario": "b2", "status": "infeasible", "axis.fleet": "b", "output_tokens_per_s_per_user": 99, "tokens_per_s_per_mw": 99},
    ]
    points = frontier_points(rows, FrontierSpec(by="fleet"))
    assert [(p["series"], p["scenario"]) for p in points] == [("a", "a1"), ("a", "a2"), ("b", "b1")]
    overall = frontier_points(rows, FrontierSpec(name="all"))
    assert [p["scenario"] for p in overall] == ["a1", "a2"] and overall[0]["frontier"] == "all"


def test_fleet_comparison_against_the_best_single_device_fleet():
    def row(kw, fleet, scale, status="optimal"):
        return {"axis.kw": kw, "axis.fleet": fleet, "goodput_scale": scale, "status": status}

    rows = [row(100, "x", 1.0), row(100, "y", 2.0), row(100, "mix", 5.0),
            row(200, "x", 3.0), row(200, "y", 0.0, "infeasible"), row(200, "mix", 4.5)]
    out = fleet_comparison(rows, "fleet", {"x", "y"}, "goodput_scale")
    assert [(r["group"], r["best_single"], r["gain"]) for r in out] == [("kw=100", "y", 2.5), ("kw=200", "x", 1.5)]
    cost = fleet_comparison([{**r, "cost_usd_per_hour": r["goodput_scale"] + 1} for r in rows], "fleet", {"x", "y"},
                            "cost_usd_per_hour")
    assert cost[0]["best_single"] == "x" and cost[0]["gain"] == pytest.approx(2.0 / 6.0)
