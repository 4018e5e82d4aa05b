"""The plan's lines in words (planner/plan.py): each written out by hand for a plan built field by field."""

from __future__ import annotations

from planner.plan import classes_text, footprint_lines, gain_lines, shortfall_warning
from planner.schema import Baseline, Footprint, Plan, Pool


def _plan(**fields) -> Plan:
    """A plan with only the fields a line reads (no validation: the lines read nothing else)."""
    return Plan.model_construct(**{"footprint": None, "interactivity": None, "reference": None, "gains": None, **fields})


def test_a_reference_fleet_that_serves_says_its_size_scale_power_and_money():
    ref = Baseline(device="h100-sxm", goodput_scale=0.8, power_kw=120.0, cost_usd_per_hour=50.0, status="optimal",
                   capex_usd=1_000_000.0, devices=40)
    assert gain_lines(_plan(reference=ref)) == [
        "reference fleet h100-sxm: 40 devices at goodput scale 0.800 (120.0 kW, $50.00/h, capex $1,000,000)"]


def test_a_reference_fleet_that_cannot_serve_says_so():
    ref = Baseline(device="l4", goodput_scale=0.0, power_kw=0.0, cost_usd_per_hour=0.0, status="infeasible")
    assert gain_lines(_plan(reference=ref)) == ["reference fleet l4: cannot serve this workload under its constraints"]


def _footprint() -> Footprint:
    return Footprint(owned={"l4": 8}, owned_used={"l4": 6}, added={"h100-sxm": 2}, added_cost_usd_per_hour=10.5,
                     added_capex_usd=60_000.0, added_power_kw=2.5, gain=1.25,
                     owned_only=Baseline(device="l4", goodput_scale=0.75, power_kw=3.0, cost_usd_per_hour=4.0,
                                         status="optimal"))


def test_the_footprint_names_the_objectives_unit_without_its_min_prefix():
    head = "owned fleet: 8 l4 (6 used); adds 2 h100-sxm: $+10.50/h, capex $+60,000, +2.5 kW"
    alone = "the owned fleet alone: goodput scale 0.750, 3.0 kW, $4.00/h; with the additions 1.000: 1.250x"
    assert footprint_lines(_plan(footprint=_footprint(), objective="min_cost", goodput_scale=1.0)) == [head, alone + " cost"]
    assert footprint_lines(_plan(footprint=_footprint(), objective="min_power", goodput_scale=1.0)) == [head, alone + " power"]
    assert footprint_lines(_plan(footprint=_footprint(), objective="max_goodput", goodput_scale=1.0))[1] == alone + " goodput"


def test_a_shortfall_names_what_binds_or_the_budgets():
    short = _plan(meets_demand=False, status="optimal", goodput_scale=0.5, binding_constraints=("power", "cost"))
    assert shortfall_warning(short) == ("serves only 50.0% of the demand (goodput scale 0.500): power, cost bind; "
                                        "the rest of the traffic is not served")
    unnamed = short.model_copy(update={"binding_constraints": ()})
    assert shortfall_warning(unnamed) == ("serves only 50.0% of the demand (goodput scale 0.500): the budgets bind; "
                                          "the rest of the traffic is not served")
    assert shortfall_warning(short.model_copy(update={"meets_demand": True})) is None
    assert shortfall_warning(short.model_copy(update={"status": "infeasible"})) is None


def test_a_shared_pool_lists_the_share_of_each_class_it_serves():
    shared = Pool.model_construct(class_name="chat", serves={"rag": 3.9, "chat": 6.1, "code": 0.0})
    assert classes_text(shared) == "shared: chat 61%, rag 39%"  # sorted by class; a class it carries nothing of is left out
    assert classes_text(Pool.model_construct(class_name="chat", serves=None)) == "chat"
