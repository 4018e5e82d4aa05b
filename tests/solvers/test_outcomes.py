"""Engine outcomes map one to one: an unbounded model is unbounded on every engine, and an engine that could
only say "infeasible or unbounded" is settled by a zero-objective solve of the same rows."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from planner.solvers import SolveOptions, Termination, get_backend
from tests.solvers.conftest import small_ilp

ENGINES = [("ortools", "scip"), ("ortools", "highs"), ("pulp", "highs"), ("pulp", "cbc")]
INF = np.inf
#: min −x0 − x1 with x0 − x1 ≤ 1.5: x0 = x1 = t is feasible for every t ≥ 0, so the objective has no floor
UNBOUNDED = small_ilp([-1, -1], [([1, -1], -INF, 1.5)])
#: 1 ≤ x0 ≤ 0.5 is infeasible, while the objective −x2 falls without end along x2
INFEASIBLE_WITH_A_RAY = small_ilp([1, 0, -1], [([1, 0, 0], 1, INF), ([1, 0, 0], -INF, 0.5)])


def _integer(model, integer: bool):
    return dataclasses.replace(model, var_is_integer=np.full(model.n_vars, integer))


@pytest.mark.parametrize("integer", [True, False], ids=["milp", "lp"])
@pytest.mark.parametrize("backend, engine", ENGINES)
def test_an_unbounded_model_is_unbounded_on_every_engine(backend, engine, integer):
    # HiGHS's MIP solver answers "unbounded or infeasible" here, which both backends used to call infeasible
    result = get_backend(backend).solve(_integer(UNBOUNDED, integer), SolveOptions(engine=engine, time_limit_s=30))
    assert result.termination is Termination.UNBOUNDED, result.message


@pytest.mark.parametrize("integer", [True, False], ids=["milp", "lp"])
@pytest.mark.parametrize("backend, engine", ENGINES)
def test_an_infeasible_model_with_an_unbounded_ray_is_infeasible(backend, engine, integer):
    # SCIP's presolve answers "infeasible or unbounded" here: a zero-objective solve of the same rows settles it
    result = get_backend(backend).solve(_integer(INFEASIBLE_WITH_A_RAY, integer), SolveOptions(engine=engine, time_limit_s=30))
    assert result.termination is Termination.INFEASIBLE, result.message
    assert result.x is None
