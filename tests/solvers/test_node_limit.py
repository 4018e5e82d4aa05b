"""A node limit is a work limit: every engine stops at it, short of the gap, and answers the same every run."""

from __future__ import annotations

import numpy as np
import pytest

from planner.milp.model import IlpModel
from planner.optimize import PlanOptions
from planner.solvers.base import SolveOptions, Termination, get_backend
from tests.solvers.conftest import market_split

ENGINES = [("ortools", "scip"), ("ortools", "highs"), ("pulp", "highs"), ("pulp", "cbc")]


@pytest.mark.parametrize("solver, engine", ENGINES)
def test_every_engine_stops_at_the_node_limit_with_the_same_answer(solver, engine):
    """Market split runs far past 30 s unbounded (test_outcomes); 20 nodes end it with an incumbent, not the clock."""
    model = market_split(rows=4, columns=30)
    options = SolveOptions(time_limit_s=30.0, node_limit=20, engine=engine)
    first, again = (get_backend(solver).solve(model, options) for _ in range(2))
    assert first.termination is Termination.FEASIBLE, first.message
    assert first.bound is not None and first.bound < first.objective  # short of the gap, and says by how much
    assert (first.x == again.x).all() and first.objective == again.objective


def market_split_without_slack(rows: int = 4, columns: int = 30, seed: int = 1) -> IlpModel:
    """Market split as pure feasibility (Σ a_ij x_j = ⌊Σ_j a_ij / 2⌋ exactly): no heuristic finds a point at the root."""
    a = np.random.default_rng(seed).integers(0, 100, size=(rows, columns))
    return IlpModel(var_names=tuple(f"x{j}" for j in range(columns)), var_lb=np.zeros(columns), var_ub=np.ones(columns),
                    var_is_integer=np.ones(columns, bool), objective=np.ones(columns),
                    row_names=tuple(f"r{i}" for i in range(rows)), row_lo=(a.sum(axis=1) // 2).astype(float),
                    row_hi=(a.sum(axis=1) // 2).astype(float), row=np.repeat(np.arange(rows), columns),
                    col=np.tile(np.arange(columns), rows), val=a.ravel().astype(float))


@pytest.mark.parametrize("solver, engine", ENGINES)
def test_a_node_limit_before_any_incumbent_is_named_so_not_a_time_limit(solver, engine):
    result = get_backend(solver).solve(market_split_without_slack(), SolveOptions(time_limit_s=30.0, node_limit=1, engine=engine))
    assert result.termination is Termination.NODE_LIMIT and not result.has_solution, result.message


def test_the_node_limit_reaches_every_solve_of_a_plan():
    options = PlanOptions.of({"node_limit": 50, "time_limit_s": 3.0})
    assert options.node_limit == 50 and options.solve_options().node_limit == 50
    assert options.for_baseline().solve_options().node_limit == 50
    assert PlanOptions.of({}).solve_options().node_limit is None
