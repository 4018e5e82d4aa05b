"""``whole_nodes: true`` on the real catalog, checked by hand with the H100 SXM's catalog figures written out:
700 W TDP, 4,600 W node overhead, 8 per node (1,275 W a device, 10.2 kW a node), $1.69/h and $27,500 a device.

llama-3.1-8b in fp8 on H100s, one aggregated class: one tp=1 replica at batch 192 serves about 30 req/s, so
140 req/s needs 5 of them.
"""

from __future__ import annotations

import json
from dataclasses import replace

import openpyxl
import pytest
import yaml
from typer.testing import CliRunner

from planner.cli import app
from planner.export import write_plan_workbook
from planner.optimize import PlanOptions, plan_workload
from planner.schema import Workload
from planner.verify import verify_plan

EXACT = PlanOptions(relative_gap=1e-9, time_limit_s=30, baseline=False)


def chat(rate: float, objective: str = "min_cost", budget_kw: float = 100.0, **constraints) -> dict:
    return {"model": "llama-3.1-8b", "dtype": "fp8", "kv_dtype": "fp8", "objective": objective,
            "classes": [{"name": "chat", "rate_rps": rate, "input_tokens": 1000, "output_tokens": 200,
                         "slo": {"ttft_ms": 1000, "tpot_ms": 30}}],
            "strategies": ["aggregated"],
            "constraints": {"power_budget_kw": budget_kw, "pue": 1.2, "devices": ["h100-sxm"], **constraints}}


def solve(catalog, body: dict, options: PlanOptions = EXACT):
    return plan_workload(Workload.model_validate(body), catalog, options)


@pytest.fixture(scope="module")
def used(catalog):
    return solve(catalog, chat(140))


@pytest.fixture(scope="module")
def whole(catalog):
    return solve(catalog, chat(140, whole_nodes=True))


def test_five_devices_on_an_eight_per_node_type_pay_for_the_whole_node(used, whole):
    """5 devices: $8.45/h, 5 x 1,275 W x 1.2 = 7.65 kW, $137,500. One whole node: 8 x $1.69 = $13.52/h,
    10.2 kW x 1.2 = 12.24 kW, $220,000; the 3 idle devices add $5.07/h, 4.59 kW and $82,500."""
    assert used.status == whole.status == "optimal"
    assert used.totals.devices_by_type == {"h100-sxm": 5} and sum(p.devices for p in used.pools) == 5
    assert (used.totals.cost_usd_per_hour, used.totals.power_kw, used.totals.capex_usd) == pytest.approx((8.45, 7.65, 137_500))
    assert used.totals.nodes_by_type == {"h100-sxm": 1} and used.totals.idle_devices_by_type == {}
    assert whole.totals.devices_by_type == {"h100-sxm": 8} and whole.totals.nodes_by_type == {"h100-sxm": 1}
    assert whole.totals.idle_devices_by_type == {"h100-sxm": 3} and sum(p.devices for p in whole.pools) == 5
    assert (whole.totals.cost_usd_per_hour, whole.totals.power_kw, whole.totals.capex_usd) == pytest.approx((13.52, 12.24, 220_000))
    assert whole.totals.it_power_kw == pytest.approx(10.2)
    assert whole.verification.ok and used.verification.ok, whole.verification.messages


def test_both_backends_buy_the_same_whole_node(catalog, whole):
    other = solve(catalog, chat(140, whole_nodes=True), replace(EXACT, solver="pulp"))
    assert other.solver.backend == "pulp" and other.status == "optimal" and other.verification.ok
    assert other.totals.cost_usd_per_hour == pytest.approx(whole.totals.cost_usd_per_hour, rel=1e-6)
    assert other.totals.devices_by_type == whole.totals.devices_by_type


def test_a_budget_of_one_and_a_half_nodes_serves_one_node_of_replicas(catalog):
    """19 kW facility: 19 / (1.275 x 1.2) = 12.4, so 12 devices without whole nodes; a node is 12.24 kW, two are
    24.48 kW, so one node: 8 devices. The same tp=1 replicas either way, so the goodput falls to exactly 8/12."""
    free = solve(catalog, chat(100, "max_goodput", 19.0))
    nodes = solve(catalog, chat(100, "max_goodput", 19.0, whole_nodes=True))
    assert free.totals.devices_by_type == {"h100-sxm": 12} and nodes.totals.devices_by_type == {"h100-sxm": 8}
    assert {(p.tp, p.batch) for p in free.pools} == {(p.tp, p.batch) for p in nodes.pools} == {(1, 192)}
    assert nodes.goodput_scale / free.goodput_scale == pytest.approx(8 / 12, rel=1e-6)
    assert nodes.totals.power_kw == pytest.approx(12.24) and nodes.totals.idle_devices_by_type == {}
    assert nodes.verification.ok


def _failed(plan, catalog) -> set[str]:
    return {name for name, ok in verify_plan(plan, catalog).checks.items() if not ok}


def _totals(plan, **update):
    return plan.model_copy(update={"totals": plan.totals.model_copy(update=update)})


def test_the_verifier_recounts_the_nodes(catalog, used, whole):
    assert _failed(whole, catalog) == set()
    assert _failed(_totals(whole, nodes_by_type={"h100-sxm": 2}), catalog) == {"whole_nodes"}
    assert _failed(_totals(whole, idle_devices_by_type={}), catalog) == {"whole_nodes"}
    # the plan's fleet of 5 devices relabelled as bought in whole nodes: 5 is no whole node of 8
    relabelled = used.model_copy(update={"workload": whole.workload})
    assert "whole_nodes" in _failed(relabelled, catalog)
    # a careless editor who drops the idle devices and their power and money: the recount buys them back
    dropped = _totals(whole, devices=5, devices_by_type={"h100-sxm": 5}, idle_devices_by_type={},
                      power_kw=used.totals.power_kw, it_power_kw=used.totals.it_power_kw,
                      cost_usd_per_hour=used.totals.cost_usd_per_hour, capex_usd=used.totals.capex_usd)
    assert {"whole_nodes", "devices", "power", "cost"} <= _failed(dropped, catalog)


def test_an_inventory_short_of_a_whole_node_leaves_no_plan(catalog):
    """7 H100s are no node of 8: with whole nodes nothing can be bought; the diagnosis asks for the eighth."""
    assert solve(catalog, chat(140, inventory={"h100-sxm": 7})).status == "optimal"
    short = solve(catalog, chat(140, whole_nodes=True, inventory={"h100-sxm": 7}))
    assert short.status == "infeasible" and short.diagnosis.relaxations == {"inventory_h100-sxm": 1.0}


def test_the_workbook_says_what_the_rounding_did(catalog, whole, used, tmp_path):
    for plan, name in ((whole, "whole.xlsx"), (used, "used.xlsx")):
        write_plan_workbook(plan, catalog, tmp_path / name)
    def notes(name):
        ws = openpyxl.load_workbook(tmp_path / name, data_only=True)["Summary"]
        return [c for row in ws.iter_rows(values_only=True) for c in row if isinstance(c, str)]
    summary = openpyxl.load_workbook(tmp_path / "whole.xlsx", data_only=True)["Summary"]
    totals = {row[0]: row[1:3] for row in summary.iter_rows(values_only=True) if row[0] in ("Devices", "Nodes")}
    assert totals == {"Devices": (8, 8), "Nodes": (1, 1)}  # this workbook, as planned
    assert ("Whole nodes (whole_nodes: true): the plan buys 8 devices in 1 node (1 h100-sxm), 3 of them idle "
            "(3 h100-sxm); it charged the idle devices like used ones: 4.6 kW facility, $5.07/h and $82,500 capex "
            "of its totals.") in notes("whole.xlsx")
    assert not any(n.startswith("Partly filled nodes") for n in notes("whole.xlsx"))
    assert any(n.startswith("Partly filled nodes draw their whole overhead") for n in notes("used.xlsx"))


def test_the_cli_shows_the_nodes_and_names_a_bad_value(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(chat(140, whole_nodes=True)))
    result = CliRunner().invoke(app, ["plan", str(path), "--no-baseline"])
    assert result.exit_code == 0, result.output
    assert "totals: 8 devices (8 h100-sxm) in 1 node (1 h100-sxm), 3 of them idle (3 h100-sxm); 12.2 kW" in result.output
    out = json.loads(CliRunner().invoke(app, ["plan", str(path), "--no-baseline", "--json"]).output)
    assert out["totals"]["nodes_by_type"] == {"h100-sxm": 1} and out["totals"]["idle_devices_by_type"] == {"h100-sxm": 3}
    path.write_text(yaml.safe_dump(chat(140, whole_nodes="sometimes")))
    bad = CliRunner().invoke(app, ["plan", str(path)])
    assert bad.exit_code == 2 and len(bad.output.strip().splitlines()) == 1
    assert "constraints.whole_nodes: Input should be a valid boolean" in bad.output and "sometimes" in bad.output


def test_whole_nodes_move_a_small_fleet_to_a_one_per_node_system(catalog, used):
    """Beside the GH200 (one superchip per node, $2.13/h): 5 H100s cost $8.45/h, but their whole node $13.52/h;
    5 GH200s cost 5 x $2.13 = $10.65/h, so with whole nodes the plan moves to GH200."""
    both = {"devices": ["h100-sxm", "gh200"]}
    assert solve(catalog, chat(140, **both)).totals.devices_by_type == {"h100-sxm": 5}
    moved = solve(catalog, chat(140, whole_nodes=True, **both), replace(EXACT, baseline=True, alternatives=1))
    # the runner-up mix and the best single-device fleet are counted in whole nodes too: the H100 node at $13.52/h
    (runner_up,) = moved.alternatives
    assert runner_up.devices_by_type == {"h100-sxm": 8} and runner_up.cost_usd_per_hour == pytest.approx(13.52)
    assert moved.baseline.device == "gh200" and moved.baseline.cost_usd_per_hour == pytest.approx(10.65)
    assert moved.totals.devices_by_type == {"gh200": 5} and moved.totals.idle_devices_by_type == {}
    assert moved.totals.cost_usd_per_hour == pytest.approx(10.65) and moved.verification.ok
