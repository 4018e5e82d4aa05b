"""An owned fleet: owned devices are free to use, the plan says what it adds and what the addition buys."""

import re
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from planner.candidates import Candidate
from planner.milp.build import BuildOptions, build_model
from planner.optimize import PlanOptions, plan_workload
from planner.plan import gain_lines
from planner.schema import Constraints, Workload
from planner.solvers.base import SolveOptions, get_backend
from planner.verify import verify_plan

SEED = Path("examples/workloads/seed-prefill-decode.yaml")


def test_an_owned_inventory_entry_is_a_cap_and_an_owned_count():
    c = Constraints.model_validate({"power_budget_kw": 10, "inventory": {"cs-3": {"count": 16, "owned": True},
                                                                          "trn2": 5, "l4": {"count": 3}}})
    assert c.inventory == {"cs-3": 16, "trn2": 5, "l4": 3} and c.owned == {"cs-3": 16}
    assert Constraints.model_validate(c.model_dump()) == c  # a stored plan's workload reads back the same


@pytest.mark.parametrize(("constraints", "says"), [
    ({"inventory": {"cs-3": {"cnt": 16}}}, "inventory.cs-3.count\n  Field required"),
    ({"inventory": {"cs-3": {"count": 16, "owned": "maybe"}}}, "inventory.cs-3.owned\n  Input should be a valid boolean"),
    ({"devices": ["trn2"], "owned": {"cs-3": 4}}, "owned.cs-3: not in devices (trn2)"),
    ({"inventory": {"cs-3": 2}, "owned": {"cs-3": 4}}, "owned.cs-3: 4 owned but inventory.cs-3 allows 2"),
])
def test_a_bad_owned_fleet_names_the_field(constraints, says):
    with pytest.raises(ValidationError, match=re.escape(says)):
        Constraints.model_validate({"power_budget_kw": 10, **constraints})


def _candidate(device: str, capacity: float, cost: float) -> Candidate:
    return Candidate(class_name="chat", strategy="aggregated", role="aggregated", device=device, tp=1, batch=1,
                     devices_by_type={device: 1}, power_w=100.0, cost_usd_per_hour=cost, capex_usd=0.0,
                     capacity_rps=capacity, utilization_cap=1.0, ttft_ms=None, tpot_ms=None, limited_by="memory",
                     price_by_type={device: cost})


def _min_cost(owned: dict) -> tuple[float, dict]:
    """10 req/s on A (2 req/s, $3/h per device) or B (1 req/s, $1/h): the least money paid, and devices by type."""
    workload = Workload.model_validate({
        "model": "llama-3.1-8b", "strategies": ["aggregated"], "objective": "min_cost",
        "classes": [{"name": "chat", "rate_rps": 10, "input_tokens": 100, "output_tokens": 10,
                     "slo": {"ttft_ms": 1000, "tpot_ms": 100}}],
        "constraints": {"power_budget_kw": 100, "pue": 1.0, "owned": owned}})
    cands = [_candidate("a", 2.0, 3.0), _candidate("b", 1.0, 1.0)]
    model = build_model(workload, {("chat", "aggregated"): ["aggregated"]}, cands, BuildOptions(objective="min_cost"))
    result = get_backend("ortools").solve(model, SolveOptions(time_limit_s=10))
    counts = dict(zip("ab", result.x[model.blocks["n"]].round().astype(int)))
    return result.objective, counts


def test_owned_devices_are_free_and_more_of_them_are_paid():
    # nothing owned: 10 B at $1 = $10/h beats 5 A at $3 = $15/h
    assert _min_cost({}) == (pytest.approx(10.0), {"a": 0, "b": 10})
    # 3 A owned: they serve 6 req/s for nothing; the other 4 req/s cost 4 B = $4/h (a 4th and 5th A: $6/h)
    assert _min_cost({"a": 3}) == (pytest.approx(4.0), {"a": 3, "b": 4})
    # 5 A owned serve all 10 req/s: $0/h
    assert _min_cost({"a": 5}) == (pytest.approx(0.0), {"a": 5, "b": 0})


@pytest.fixture(scope="module")
def seed(catalog):
    workload = Workload.model_validate(yaml.safe_load(SEED.read_text()))
    return workload, plan_workload(workload, catalog, PlanOptions())


def test_the_seed_keeps_the_owned_cs3_and_adds_trainium_for_prefill(catalog, seed):
    workload, plan = seed
    f = plan.footprint
    assert plan.objective == "fixed_footprint" and plan.verification.ok
    assert f.owned == {"cs-3": 16} and f.owned_used == {"cs-3": 16}
    assert set(f.added) == {"trn2"} and f.added["trn2"] == plan.totals.devices_by_type["trn2"]
    assert {p.device for p in plan.pools if p.role == "decode"} == {"cs-3"}
    assert {p.device for p in plan.pools if p.role == "prefill"} == {"trn2"}
    # what the additions cost, at catalog prices: every Trainium2 is bought, no CS-3 is
    trn2 = catalog.device("trn2")
    assert f.added_cost_usd_per_hour == pytest.approx(f.added["trn2"] * trn2.price_usd_per_hour)
    assert f.added_capex_usd == pytest.approx(f.added["trn2"] * trn2.price_usd)
    assert f.gain == pytest.approx(plan.goodput_scale / f.owned_only.goodput_scale)
    assert f.gain > 2.0
    assert any(line.startswith("owned fleet: 16 cs-3 (16 used); adds ") for line in gain_lines(plan))


def test_the_owned_fleet_alone_is_the_plan_of_the_owned_devices_only(catalog, seed):
    workload, plan = seed
    cons = workload.constraints.model_copy(update={"devices": ("cs-3",), "owned": {}})
    alone = plan_workload(workload.model_copy(update={"constraints": cons, "objective": "max_goodput"}), catalog,
                          PlanOptions(baseline=False))
    assert plan.footprint.owned_only.goodput_scale == pytest.approx(alone.goodput_scale, rel=5e-3)


def test_a_cost_budget_counts_only_what_is_paid(catalog, seed):
    workload, plan = seed
    paid = plan.footprint.added_cost_usd_per_hour
    assert plan.totals.cost_usd_per_hour > 1.5 * paid  # the 16 CS-3 would be most of the bill
    budget = workload.constraints.model_copy(update={"cost_budget_usd_per_hour": 1.2 * paid})
    check = verify_plan(plan.model_copy(update={"workload": workload.model_copy(update={"constraints": budget})}),
                        catalog)
    assert check.checks["cost"], check.messages
    charged = budget.model_copy(update={"owned": {}, "inventory": {"cs-3": 16}})
    check = verify_plan(plan.model_copy(update={"workload": workload.model_copy(update={"constraints": charged})}),
                        catalog)
    assert not check.checks["cost"]


def test_pruning_compares_what_is_paid_with_owned_devices():
    from planner.candidates import prune_dominated

    # B uses the one owned x (free) and a y ($1/h): it pays $1/h at 1,000 W; A uses two y: $2/h at 900 W. At catalog
    # prices A looks cheaper ($2 vs $11) and would prune B; counted as paid, B is the cheaper one and stays
    def decode(devices: dict, power_w: float) -> Candidate:
        prices = {"x": 10.0, "y": 1.0}
        return Candidate(class_name="chat", strategy="pd_disagg", role="decode", device=next(iter(devices)), tp=1,
                         batch=1, devices_by_type=devices, power_w=power_w,
                         cost_usd_per_hour=sum(n * prices[d] for d, n in devices.items()), capex_usd=0.0,
                         capacity_rps=2.0, utilization_cap=1.0, ttft_ms=None, tpot_ms=None, limited_by="memory",
                         price_by_type={d: prices[d] for d in devices})

    a, b = decode({"y": 2}, 900.0), decode({"x": 1, "y": 1}, 1000.0)
    doc = {"model": "llama-3.1-8b", "strategies": ["pd_disagg"], "objective": "min_cost",
           "classes": [{"name": "chat", "rate_rps": 1, "input_tokens": 100, "output_tokens": 10,
                        "slo": {"ttft_ms": 1000, "tpot_ms": 100}}],
           "constraints": {"power_budget_kw": 10, "owned": {"x": 1}}}
    assert prune_dominated([a, b], Workload.model_validate(doc)) == [a, b]
    del doc["constraints"]["owned"]  # nothing owned: A is cheaper and leaner, B goes
    assert prune_dominated([a, b], Workload.model_validate(doc)) == [a]


def test_what_a_plan_adds_to_an_owned_type_is_beyond_the_owned_count(catalog):
    """Two classes, 3 req/s each, on H100 SXM with their own prefill and decode pools: four H100s at the least
    power (test_shared_pools). One owned, the plan adds three."""
    workload = Workload.model_validate({
        "model": "llama-3.1-8b", "dtype": "bf16", "strategies": ["pd_disagg"], "objective": "min_power",
        "classes": [{"name": name, "rate_rps": 3, "input_tokens": 1024, "output_tokens": 256,
                     "slo": {"ttft_ms": 2000, "tpot_ms": tpot}} for name, tpot in (("a", 40), ("b", 50))],
        "constraints": {"power_budget_kw": 100, "devices": ["h100-sxm"], "owned": {"h100-sxm": 1}}})
    plan = plan_workload(workload, catalog, PlanOptions(baseline=False))
    f, h100 = plan.footprint, catalog.device("h100-sxm")
    assert plan.totals.devices_by_type == {"h100-sxm": 4}
    assert f.owned_used == {"h100-sxm": 1} and f.added == {"h100-sxm": 3}
    assert f.added_cost_usd_per_hour == pytest.approx(3 * h100.price_usd_per_hour)
    assert f.added_capex_usd == pytest.approx(3 * h100.price_usd)
