"""A node limit is a work limit: every engine stops at it, short of the gap, and answers the same every run."""

from __future__ import annotations

import pytest

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


def test_the_node_limit_reaches_every_solve_of_a_plan():
    options = PlanOptions.of({"node_limit": 50, "time_limit_s": 3.0})
    assert options.node_limit == 50 and options.solve_options().node_limit == 50
    assert options.for_baseline().solve_options().node_limit == 50
    assert PlanOptions.of({}).solve_options().node_limit is None
