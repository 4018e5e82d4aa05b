"""Whole nodes (10) and a minimum of replicas per pool (11) on instances small enough to solve by hand: every
engine reaches the hand-computed optimum, and the LP-rounding point the solvers start from is feasible.

One class at 5 req/s, PUE 1. Prefill: ``p`` (100 req/s, 50 W, a node of its own). Decode, whole-node instance:
``a`` (1 req/s, 100 W, $1/h, 8 per node) or ``b`` (1 req/s, 150 W, $1.4/h, a node of its own). Decode,
minimum-replicas instance: ``big`` (5 req/s, 400 W) or ``small`` (1 req/s, 100 W).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from planner import decompose
from planner.milp.build import BuildOptions, build_model
from planner.milp.rounding import relaxed, rounded_solution
from planner.nodes import PerDevice
from planner.solvers import SolveOptions, Termination, get_backend
from tests.solvers.conftest import candidate, units_for, workload
from tests.solvers.test_decompose import full, two_classes

ENGINES = [("ortools", "scip"), ("ortools", "highs"), ("pulp", "highs"), ("pulp", "cbc")]
EXACT = SolveOptions(time_limit_s=30, relative_gap=1e-9)


def _sized(device: str, rps: float, watts: float, usd: float, node: int):
    c = candidate("chat", "prefill" if device == "p" else "decode", device, rps, watts, cost=usd)
    return dataclasses.replace(c, per_device={device: PerDevice(watts, usd, 1000.0 * usd, node)}, price_by_type={device: usd})


NODES = [_sized("p", 100.0, 50.0, 1.0, 1), _sized("a", 1.0, 100.0, 1.0, 8), _sized("b", 1.0, 150.0, 1.4, 1)]
REPLICAS = [_sized("p", 100.0, 50.0, 1.0, 1), _sized("big", 5.0, 400.0, 4.0, 1), _sized("small", 1.0, 100.0, 1.0, 1)]


def _workload(objective: str, budget_kw: float = 10.0, **constraints):
    wl = workload({"chat": 5.0}, budget_kw, objective)
    return wl.model_copy(update={"constraints": wl.constraints.model_copy(update=constraints)})


def _solve(wl, cands, backend, engine, **options):
    model = build_model(wl, units_for(["chat"]), cands, BuildOptions(objective=wl.objective, **options))
    result = get_backend(backend).solve(model, dataclasses.replace(EXACT, engine=engine))
    assert result.termination is Termination.OPTIMAL, result
    assert model.max_violation(result.x) <= 1e-5
    counts = dict(zip((c.device for c in cands), np.round(result.x[model.blocks["n"]]).astype(int)))
    return model, result, counts


@pytest.mark.parametrize("backend, engine", ENGINES)
def test_whole_nodes_charge_the_idle_devices_and_flip_the_decode_device(backend, engine):
    """min power: 5 x a + p = 550 W. Whole nodes: a node of a is 800 W for 8 req/s, 5 x b 750 W: 5 x b + p = 800 W."""
    _, result, counts = _solve(_workload("min_power"), NODES, backend, engine)
    assert result.objective == pytest.approx(0.55, rel=1e-6) and counts == {"p": 1, "a": 5, "b": 0}
    model, result, counts = _solve(_workload("min_power", whole_nodes=True), NODES, backend, engine)
    assert result.objective == pytest.approx(0.80, rel=1e-6) and counts == {"p": 1, "a": 0, "b": 5}
    assert result.x[model.blocks["nodes"]].tolist() == pytest.approx([0.0])  # type a: no node bought


@pytest.mark.parametrize("backend, engine", ENGINES)
def test_whole_nodes_in_min_cost_and_max_goodput(backend, engine):
    """min cost: 5 x a + p = $6/h; whole nodes: 8 x a = $8, 5 x b = $7, so 5 x b + p = $8/h. max goodput in 1.25 kW:
    p + 12 x a = 12 req/s, λ = 2.4; whole nodes: p + a node of a (800 W) + 2 x b (300 W) = 10 req/s, λ = 2.0."""
    assert _solve(_workload("min_cost"), NODES, backend, engine)[1].objective == pytest.approx(6.0, rel=1e-6)
    _, result, counts = _solve(_workload("min_cost", whole_nodes=True), NODES, backend, engine)
    assert result.objective == pytest.approx(8.0, rel=1e-6) and counts == {"p": 1, "a": 0, "b": 5}
    scale = lambda model, result: float(result.x[model.blocks["scale"]][0])  # noqa: E731
    assert scale(*_solve(_workload("max_goodput", 1.25), NODES, backend, engine)[:2]) == pytest.approx(2.4, rel=1e-6)
    model, result, counts = _solve(_workload("max_goodput", 1.25, whole_nodes=True), NODES, backend, engine)
    assert scale(model, result) == pytest.approx(2.0, rel=1e-6) and counts == {"p": 1, "a": 8, "b": 2}


@pytest.mark.parametrize("backend, engine", ENGINES)
def test_a_minimum_of_replicas_raises_every_pool_in_use(backend, engine):
    """min power: p + big = 450 W. Two replicas each: 2 x p + 2 x big = 900 W, 2 x p + 5 x small = 600 W; three:
    3 x p + 5 x small = 650 W."""
    _, result, counts = _solve(_workload("min_power"), REPLICAS, backend, engine)
    assert result.objective == pytest.approx(0.45, rel=1e-6) and counts == {"p": 1, "big": 1, "small": 0}
    model, result, counts = _solve(_workload("min_power", min_replicas_per_pool=2), REPLICAS, backend, engine)
    assert result.objective == pytest.approx(0.60, rel=1e-6) and counts == {"p": 2, "big": 0, "small": 5}
    assert result.x[model.blocks["pool_used"]].tolist() == pytest.approx([1.0, 0.0, 1.0])
    _, result, counts = _solve(_workload("min_power", min_replicas_per_pool=3), REPLICAS, backend, engine)
    assert result.objective == pytest.approx(0.65, rel=1e-6) and counts == {"p": 3, "big": 0, "small": 5}


def test_the_elastic_model_bounds_replicas_by_the_demand_not_the_budget():
    """In 0.3 kW two replicas each need 0.6 kW: the diagnosis' elastic model finds the 0.3 kW the budget lacks."""
    wl = _workload("min_power", 0.3, min_replicas_per_pool=2)
    assert _solve(wl, REPLICAS, "ortools", "highs", elastic=True)[1].objective == pytest.approx(0.3, rel=1e-6)


@pytest.mark.parametrize("constraints", [{"whole_nodes": True}, {"min_replicas_per_pool": 2},
                                         {"whole_nodes": True, "min_replicas_per_pool": 3}])
def test_the_lp_rounding_point_satisfies_the_new_rows(constraints):
    """The rounding fills what the replicas decide (u_c, nodes, idle devices), so the hint is a feasible plan."""
    wl = _workload("max_goodput", 1.25, **constraints)
    model = build_model(wl, units_for(["chat"]), NODES, BuildOptions(objective="max_goodput"))
    lp = get_backend("ortools").solve(relaxed(model), EXACT)
    point = rounded_solution(model, lp.x)
    assert point is not None and model.max_violation(point) <= 1e-6
    assert float(point[model.blocks["scale"]][0]) > 0


def test_the_class_by_class_solve_keeps_the_minimum_and_whole_nodes_turn_it_off():
    """Two classes, each its own pools: a minimum of replicas is a row of each pool, so the classes still solve apart
    (to the full MILP's optimum, at a point of the full MILP with its u_c set); whole nodes share a node's devices
    between the classes, so they do not."""
    wl, units, cands = two_classes()
    wl = wl.model_copy(update={"constraints": wl.constraints.model_copy(update={"min_replicas_per_pool": 2})})
    assert decompose.decomposable(wl, 1e-6)
    split = decompose.solve(wl, units, cands, "ortools", SolveOptions(time_limit_s=30, relative_gap=1e-6))
    assert split is not None and split.results[0].message == "class by class (2 classes)"
    assert split.results[0].objective == pytest.approx(full(wl, units, cands, "max_goodput"), rel=1e-6)
    for model, result in zip(split.models, split.results):
        assert model.max_violation(result.x) <= 1e-9
        n = np.round(result.x[model.blocks["n"]])
        assert set(n[n > 0]) and min(n[n > 0]) >= 2
    whole = wl.model_copy(update={"constraints": wl.constraints.model_copy(update={"whole_nodes": True})})
    assert not decompose.decomposable(whole, 1e-6)


@pytest.mark.parametrize("backend, engine", ENGINES)
def test_idle_devices_count_against_the_cost_budget_and_the_owned_fleet(backend, engine):
    """$5/h: p + 4 x a serve 4 req/s, λ = 0.8; with whole nodes a node of a costs $8, so p + 2 x b ($3.80): λ = 0.4.
    3 owned a (free), min cost: p + 3 owned + 2 bought a = $3/h; with whole nodes the node's 8 devices are 3 owned and
    5 bought: p + $5 = $6/h (5 x b would be $8)."""
    scale = lambda model, result: float(result.x[model.blocks["scale"]][0])  # noqa: E731
    budget = {"cost_budget_usd_per_hour": 5.0}
    assert scale(*_solve(_workload("max_goodput", **budget), NODES, backend, engine)[:2]) == pytest.approx(0.8, rel=1e-6)
    model, result, counts = _solve(_workload("max_goodput", whole_nodes=True, **budget), NODES, backend, engine)
    assert scale(model, result) == pytest.approx(0.4, rel=1e-6) and counts["a"] == 0
    owned = {"owned": {"a": 3}}
    assert _solve(_workload("min_cost", **owned), NODES, backend, engine)[1].objective == pytest.approx(3.0, rel=1e-6)
    assert _solve(_workload("min_cost", whole_nodes=True, **owned), NODES, backend, engine)[1].objective == pytest.approx(6.0, rel=1e-6)
