"""planner.sensitivity: each estimated input moved by ±δ and the plan re-solved; hand-checked on two near-tied GPUs.

``gpu-a`` and ``gpu-b`` are the catalog's H200 under two ids, at $2.00/h and $2.10/h: under min_cost the plan buys
only gpu-a, and the same fleet of gpu-b would cost 5 % more. So:
- gpu-a's hourly price +20 % ($2.40) makes gpu-b the cheaper one: the mix flips and the cost rises by 2.10/2.00 − 1
  = +5 %; −20 % keeps gpu-a and the cost falls by exactly 20 %;
- gpu-b's hourly price −20 % ($1.68) flips the mix to gpu-b: 1.68/2.00 − 1 = −16 %; +20 % changes nothing;
- TDP does not enter a min_cost objective (the power budget is far away): 0 % either way, while the re-solved fleet's
  power is that of devices at 0.8·700 + 4600/8 = 1,135 W instead of 700 + 575 = 1,275 W (−10.98 %).
"""

from __future__ import annotations

import json
from dataclasses import replace
from types import MappingProxyType

import formulas
import openpyxl
import pytest
from openpyxl.utils import get_column_letter
from typer.testing import CliRunner

from planner.catalog import Catalog
from planner.cli import app
from planner.export import write_plan_workbook
from planner.export.sensitivity_sheet import HEADER_ROW
from planner.optimize import PlanOptions, plan_workload
from planner.progress import observed
from planner.schema import Provenance, Workload
from planner.sensitivity import (SensitivityOptions, device_inputs, perturbed, plan_inputs, scaled, share_shift,
                                 verdict)

ONLY_CATALOG_NUMBERS = SensitivityOptions(efficiency_terms=())


@pytest.fixture(scope="module")
def twins(catalog) -> Catalog:
    h200 = catalog.device("h200")
    devices = {"gpu-a": h200.model_copy(update={"id": "gpu-a", "price_usd_per_hour": 2.00}),
               "gpu-b": h200.model_copy(update={"id": "gpu-b", "price_usd_per_hour": 2.10})}
    return replace(catalog, devices=MappingProxyType(devices), fingerprint="")


def workload(objective: str = "min_cost") -> Workload:
    return Workload.model_validate({
        "model": "llama-3.1-8b", "dtype": "fp8", "objective": objective, "strategies": ["aggregated"],
        "classes": [{"name": "chat", "rate_rps": 20, "input_tokens": 1000, "output_tokens": 200,
                     "slo": {"ttft_ms": 1000, "tpot_ms": 50}}],
        "constraints": {"power_budget_kw": 1000, "devices": ["gpu-a", "gpu-b"]},
    })


@pytest.fixture(scope="module")
def plan(twins):
    return plan_workload(workload(), twins, PlanOptions(baseline=False, sensitivity=ONLY_CATALOG_NUMBERS))


def row(plan, key):
    return next(r for r in plan.sensitivity.inputs if r.key == key)


def test_the_plan_buys_the_cheaper_twin_and_its_runner_up_is_the_other(plan):
    devices = plan.totals.devices_by_type["gpu-a"]
    assert plan.totals.devices_by_type == {"gpu-a": devices}
    assert plan.totals.cost_usd_per_hour == pytest.approx(2.00 * devices)
    assert plan.sensitivity.devices == ("gpu-a", "gpu-b") and plan.sensitivity.alternative_devices == ("gpu-b",)
    assert plan.sensitivity.objective_quantity == "cost_usd_per_hour"


def test_raising_the_used_twins_price_flips_the_mix_and_costs_five_percent_more(plan):
    price = row(plan, "gpu-a.price_usd_per_hour")
    assert price.high.factor == pytest.approx(1.2) and price.high.value == pytest.approx(2.40)
    assert set(price.high.devices_by_type) == {"gpu-b"} and price.high.types_change and price.high.share_shift == 1.0
    assert price.high.mix_changes and price.flips_mix and price.sensitive
    assert price.high.objective_change_pct == pytest.approx(5.0, abs=0.01)
    assert price.low.devices_by_type == plan.totals.devices_by_type and not price.low.mix_changes
    assert price.low.objective_change_pct == pytest.approx(-20.0, abs=0.01)


def test_cutting_the_idle_twins_price_flips_the_mix_and_saves_sixteen_percent(plan):
    price = row(plan, "gpu-b.price_usd_per_hour")
    assert set(price.low.devices_by_type) == {"gpu-b"} and price.low.mix_changes
    assert price.low.objective_change_pct == pytest.approx(-16.0, abs=0.01)
    assert price.high.devices_by_type == plan.totals.devices_by_type
    assert price.high.objective_change_pct == pytest.approx(0.0, abs=1e-9)


def test_the_threshold_decides_what_moves_the_objective(plan, twins):
    price = row(plan, "gpu-b.price_usd_per_hour")  # −16 % and 0 %
    item = next(i for i in plan_inputs(plan, twins, ("gpu-a", "gpu-b"), ()) if i.key == price.key)
    assert verdict(twins, item, price.low, price.high, 0.15).moves_objective
    assert not verdict(twins, item, price.low, price.high, 0.17).moves_objective


def test_tdp_under_min_cost_moves_nothing_but_the_power(plan):
    tdp = row(plan, "gpu-a.tdp_w")
    assert not tdp.sensitive and not tdp.flips_mix and not tdp.moves_objective
    for side in (tdp.low, tdp.high):
        assert side.devices_by_type == plan.totals.devices_by_type and side.share_shift == 0.0
        assert side.objective_change_pct == pytest.approx(0.0, abs=1e-9)
    assert tdp.low.value == pytest.approx(560.0) and tdp.high.value == pytest.approx(840.0)
    assert tdp.low.power_kw / plan.totals.power_kw == pytest.approx(1135 / 1275)  # the move was applied
    assert tdp.high.power_kw / plan.totals.power_kw == pytest.approx(1415 / 1275)


def test_a_re_solve_without_a_plan_is_flagged(plan, twins):
    # gpu-a alone with 5 % of power headroom: drawing 0.2 · 700 W more each (+11 %), no fleet fits the budget
    tight = workload().model_copy(update={"constraints": workload().constraints.model_copy(
        update={"power_budget_kw": 1.05 * plan.totals.power_kw, "devices": ("gpu-a",)})})
    tdp = plan_workload(tight, twins, PlanOptions(baseline=False, sensitivity=replace(ONLY_CATALOG_NUMBERS, max_inputs=1)))
    high = tdp.sensitivity.inputs[0].high
    assert tdp.sensitivity.inputs[0].key == "gpu-a.tdp_w" and high.status == "infeasible"
    assert high.objective_change_pct is None and high.mix_changes and tdp.sensitivity.inputs[0].sensitive


def test_the_bound_keeps_the_first_kinds_and_lists_the_rest(twins):
    bounded = plan_workload(workload(), twins, PlanOptions(baseline=False, sensitivity=replace(ONLY_CATALOG_NUMBERS, max_inputs=3)))
    section = bounded.sensitivity
    # kind by kind, the most used device first: TDPs, then hourly prices, then purchase prices
    assert [r.key for r in section.inputs] == ["gpu-a.tdp_w", "gpu-b.tdp_w", "gpu-a.price_usd_per_hour"]
    assert [n.key for n in section.not_tried] == ["gpu-b.price_usd_per_hour", "gpu-a.price_usd", "gpu-b.price_usd"]
    assert all("bound of 3 inputs" in n.reason for n in section.not_tried) and section.resolves == 6


def test_a_family_term_moves_every_member_and_an_efficiency_stays_at_most_one(twins):
    items = plan_inputs(plan_workload(workload(), twins, PlanOptions(baseline=False, alternatives=1)), twins,
                        ("gpu-a", "gpu-b"), ("mbu",))
    mbu = next(i for i in items if i.field == "efficiency.mbu")
    assert mbu.target == "nvidia-hopper" and mbu.devices == ("gpu-a", "gpu-b")
    assert sum(i.field == "efficiency.mbu" for i in items) == 1  # one input per family, not per device
    moved, value, factor = perturbed(twins, mbu, 1.2)
    base = twins.device("gpu-a").mbu
    assert moved.device("gpu-b").mbu == pytest.approx(1.2 * base) and value == pytest.approx(1.2 * base)
    assert twins.device("gpu-a").mbu == base  # the input catalog is unchanged
    high = scaled(twins.device("gpu-a").model_copy(update={"mbu": 0.9}), "efficiency.mbu", 1.2)
    assert high.mbu == 1.0  # clamped at the field's bound: 0.9 × 1.2 = 1.08 is no efficiency


def test_dense_flops_are_an_input_only_where_the_catalog_marks_them_an_estimate(twins):
    published = twins.device("gpu-a")
    assert [i.field for i in device_inputs(published, "fp8")] == ["tdp_w", "price_usd_per_hour", "price_usd"]
    derived = published.model_copy(update={"provenance": {
        **published.provenance, "peak_dense_tflops.fp8": Provenance(source="half the sparse figure", estimate=True)}})
    flops = device_inputs(derived, "fp8")[-1]
    assert flops.field == "peak_dense_tflops.fp8" and flops.estimate and flops.source == "half the sparse figure"
    assert device_inputs(derived, "bf16")[-1].field == "price_usd"  # bf16 weights run the bf16 peak: published


def test_share_shift_is_the_total_variation_distance():
    assert share_shift({"a": 3, "b": 1}, {"a": 1, "b": 1}) == pytest.approx(0.25)  # ½(|.75−.5| + |.25−.5|)
    assert share_shift({"a": 4}, {"b": 2}) == 1.0
    assert share_shift({"a": 2, "b": 2}, {"a": 5, "b": 5}) == 0.0


def test_progress_reports_each_input_with_the_plan_so_far_and_not_the_re_solves(twins):
    seen = []
    options = PlanOptions(baseline=False, sensitivity=replace(ONLY_CATALOG_NUMBERS, max_inputs=2))
    with observed(seen.append):
        final = plan_workload(workload(), twins, options)
    stages = [p.stage for p in seen]
    assert stages[-2:] == ["sensitivity", "sensitivity"] and stages.count("verify") == 1  # re-solves are silent
    partial = seen[-1].best()  # what a stop during the last input keeps: the plan, one input done
    assert partial.totals == final.totals and [r.key for r in partial.sensitivity.inputs] == ["gpu-a.tdp_w"]
    assert [n.reason for n in partial.sensitivity.not_tried] == ["stopped before it was tried", *(
        n.reason for n in final.sensitivity.not_tried)]


@pytest.mark.parametrize("field, value", [("delta", 0.0), ("delta", 1.0), ("threshold", -0.1), ("max_inputs", 0),
                                          ("share_threshold", 1.5), ("efficiency_terms", ("speed",))])
def test_bad_options_name_the_field(field, value):
    with pytest.raises(ValueError, match=f"sensitivity {field}"):
        SensitivityOptions(**{field: value})


# ------------------------------------------------------------------------------------- CLI and workbook
SMALL = {"model": "llama-3.1-8b", "dtype": "fp8", "strategies": ["aggregated"],
         "classes": [{"name": "chat", "rate_rps": 20, "input_tokens": 1000, "output_tokens": 200,
                      "slo": {"ttft_ms": 1000, "tpot_ms": 50}}],
         "constraints": {"power_budget_kw": 300, "devices": ["h200", "mi300x"]}}


@pytest.fixture(scope="module")
def small_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("sensitivity") / "small.json"
    path.write_text(json.dumps(SMALL))
    return path


def test_the_cli_prints_the_table_and_the_json_holds_the_section(small_file):
    shown = CliRunner().invoke(app, ["plan", str(small_file), "--no-baseline", "--sensitivity", "--sensitivity-delta", "0.1"])
    assert shown.exit_code == 0, shown.output
    assert "Sensitivity: each input moved by ±10%" in shown.output and "flips mix?" in shown.output
    assert "−10% effect" in shown.output and "h200.tdp_w" in shown.output
    out = CliRunner().invoke(app, ["plan", str(small_file), "--no-baseline", "--sensitivity", "--json"])
    assert out.exit_code == 0, out.output
    section = json.loads(out.output)["sensitivity"]
    assert section["delta"] == 0.2 and section["inputs"] and section["resolves"] == 2 * len(section["inputs"])
    tdp = next(r for r in section["inputs"] if r["key"] == "h200.tdp_w")
    assert (tdp["low"]["factor"], tdp["high"]["factor"]) == (pytest.approx(0.8), pytest.approx(1.2))
    plain = CliRunner().invoke(app, ["plan", str(small_file), "--no-baseline", "--json"])
    assert json.loads(plain.output)["sensitivity"] is None  # only when asked


@pytest.mark.parametrize("delta", ["0", "1", "-0.2", "nan"])
def test_the_cli_refuses_a_delta_outside_zero_to_one(small_file, delta):
    out = CliRunner().invoke(app, ["plan", str(small_file), "--sensitivity", "--sensitivity-delta", delta])
    assert out.exit_code == 2 and "--sensitivity-delta" in out.output and "Traceback" not in out.output


def test_the_workbook_has_a_sensitivity_sheet_with_live_changes(plan, twins, tmp_path):
    path = tmp_path / "plan.xlsx"
    write_plan_workbook(plan, twins, path)
    book, cached = openpyxl.load_workbook(path), openpyxl.load_workbook(path, data_only=True)
    assert book.sheetnames[-2:] == ["Sensitivity", "Assumptions"]
    ws, values = book["Sensitivity"], cached["Sensitivity"]
    header = [c.value for c in ws[HEADER_ROW + 1]]
    col = {name: get_column_letter(header.index(name) + 1) for name in header}
    rows = {ws[f"A{r}"].value: r for r in range(HEADER_ROW + 2, ws.max_row + 1) if ws[f"A{r}"].value}
    r = rows["gpu-a.price_usd_per_hour"]
    change = col["Objective change +δ"]
    assert ws[f"{change}{r}"].value.startswith("=(") and "$B$2" in ws[f"{change}{r}"].value  # a formula
    assert values[f"{change}{r}"].value == pytest.approx(0.05, abs=1e-4)  # +5 %, as a fraction
    assert values[f"{col['Objective change −δ']}{r}"].value == pytest.approx(-0.20, abs=1e-4)
    assert values[f"{col['Value +δ']}{r}"].value == pytest.approx(2.40)
    assert values[f"{col['Fleet +δ']}{r}"].value.endswith("× gpu-b") and values[f"{col['Flips the mix']}{r}"].value == "yes"
    assert values["B2"].value == pytest.approx(plan.totals.cost_usd_per_hour)
    solution = formulas.ExcelModel().loads(str(path)).finish().calculate()
    recomputed = solution[f"'[{path.name}]SENSITIVITY'!{change}{r}"].value[0, 0]
    assert float(recomputed) == pytest.approx(0.05, abs=1e-4)  # the formula computes what the plan says


def test_a_plan_without_the_analysis_has_no_sensitivity_sheet(twins, tmp_path):
    path = tmp_path / "plain.xlsx"
    write_plan_workbook(plan_workload(workload(), twins, PlanOptions(baseline=False)), twins, path)
    assert "Sensitivity" not in openpyxl.load_workbook(path).sheetnames
