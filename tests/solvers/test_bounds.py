"""Termination and bound are what the engine reports: a stop on the time limit is one because the engine says
so (not because the clock ran long), the bound is the engine's dual bound (never the objective standing in for
it), it includes the objective offset, and where no engine reports one the gap is unknown (None)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from planner.solvers import SolveOptions, Termination, get_backend
from planner.solvers import cbc_log
from planner.solvers.isolated import IsolatedBackend
from tests.solvers.conftest import knapsack, market_split, small_ilp

ENGINES = [("ortools", "scip"), ("ortools", "highs"), ("pulp", "highs"), ("pulp", "cbc")]
INF = np.inf
#: min 7 − x0 − x1 s.t. 2·x0 + 3·x1 ≤ 12.5, x0 ≤ 2.5. Integer: x0 ≤ 2, and x0 + x1 = 5 needs x1 = 5 − x0 ≥ 3,
#: so 2·x0 + 3·x1 = 15 − x0 ≥ 13 > 12.5; (2, 2) reaches 4: optimum 7 − 4 = 3. Continuous: x0 + x1 =
#: x0 + (12.5 − 2·x0) / 3 = (12.5 + x0) / 3 grows with x0, so x0 = 2.5, x1 = 2.5: optimum 7 − 5 = 2.
WITH_OFFSET = small_ilp([-1, -1], [([2, 3], -INF, 12.5), ([1, 0], -INF, 2.5)], offset=7.0)
EXACT = SolveOptions(time_limit_s=30, relative_gap=1e-9)


@pytest.mark.parametrize(("integer", "optimum"), [(True, 3.0), (False, 2.0)], ids=["milp", "lp"])
@pytest.mark.parametrize("backend, engine", ENGINES)
def test_a_proven_optimum_reports_the_engines_bound_offset_included(backend, engine, integer, optimum):
    model = dataclasses.replace(WITH_OFFSET, var_is_integer=np.full(2, integer))
    result = get_backend(backend).solve(model, dataclasses.replace(EXACT, engine=engine))
    assert result.termination is Termination.OPTIMAL, result.message
    assert result.objective == pytest.approx(optimum, abs=1e-6)
    # PuLP gives HiGHS no objective constant: its dual bound came back 7 too low (gap 233%); CBC's came back None
    assert result.bound == pytest.approx(optimum, abs=1e-6)
    assert result.gap is not None and result.gap <= 1e-6


@pytest.mark.parametrize("backend, engine", ENGINES)
def test_a_stop_within_the_gap_reports_a_bound_between_the_lp_bound_and_the_optimum(backend, engine):
    model = knapsack()
    optimum = get_backend("ortools").solve(model, EXACT)
    lp_bound = get_backend("ortools").solve(dataclasses.replace(model, var_is_integer=np.zeros(model.n_vars, bool)), EXACT)
    assert optimum.termination is Termination.OPTIMAL and lp_bound.termination is Termination.OPTIMAL
    result = get_backend(backend).solve(model, SolveOptions(engine=engine, relative_gap=0.05, time_limit_s=30))
    assert result.termination is Termination.OPTIMAL, result.message
    # a dual bound: no better than the LP relaxation's, no worse than the optimum (an incumbent standing in for
    # the bound is worse than the optimum whenever the engine stopped short of it, as most do at 5%)
    assert lp_bound.objective - 1e-6 <= result.bound <= optimum.objective + 1e-6, (result.bound, result.objective)
    assert result.objective >= optimum.objective - 1e-6
    assert 0 <= result.gap <= 0.05 + 1e-9


@pytest.mark.parametrize("backend, engine", ENGINES)
def test_a_stop_on_the_time_limit_reports_the_bound_it_reached(backend, engine):
    result = get_backend(backend).solve(market_split(), SolveOptions(engine=engine, time_limit_s=1.0))
    assert result.termination is Termination.TIME_LIMIT, result.message
    # every term of the objective (the slacks) is ≥ 0: a valid bound is ≥ 0 and ≤ any incumbent
    assert result.bound is not None and -1e-9 <= result.bound
    if result.has_solution:
        assert result.bound <= result.objective + 1e-9 and result.gap is not None


@pytest.mark.parametrize("engine", ["highs", "cbc"])
def test_pulp_reads_the_time_limit_from_the_engine_not_from_the_clock(engine):
    # the backend under a clock that never moves: it used to infer "time limit" from elapsed ≥ 95% of the limit,
    # and answered FEASIBLE (with an incumbent) or ERROR (without) for what the engine reports as its time limit
    frozen = IsolatedBackend("pulp", "tests.solvers.frozen_clock:PulpBackend")
    result = frozen.solve(market_split(), SolveOptions(engine=engine, time_limit_s=1.0))
    assert result.termination is Termination.TIME_LIMIT, result.message
    assert result.time_s == 0.0  # the clock really was frozen
    frozen._pool.close()


GAP_EXIT = """Cbc0012I Integer solution of -1757 found by feasibility pump after 0 iterations and 0 nodes (0.00 seconds)
Cbc0011I Exiting as integer gap of 25.02439 less than 1e-10 or 5%
Cbc0001I Search completed - best objective -1757, took 0 iterations and 0 nodes (0.01 seconds)
"""
PARTIAL = """Cbc0010I After 8000 nodes, 4144 on tree, 22 best solution, best possible 0 (1.85 seconds)
Cbc0020I Exiting on maximum time
Cbc0005I Partial search - best objective 22 (best possible 0.5), took 30598 iterations and 8503 nodes (2.02 seconds)
"""
PARTIAL_NO_INCUMBENT = "Cbc0005I Partial search - best objective 1e+50 (best possible 24.600045), took 12768 iterations\n"
COMPLETED = "Cbc0001I Search completed - best objective -1781, took 780 iterations and 38 nodes (0.08 seconds)\n"


@pytest.mark.parametrize(("log", "incumbent", "bound"), [
    (GAP_EXIT, -1757.0, -1757.0 - 25.02439),  # exited on the gap: incumbent − the absolute gap CBC names
    (PARTIAL, 22.0, 0.5),  # stopped by a limit: its "best possible", not the incumbent
    (PARTIAL_NO_INCUMBENT, None, 24.600045),
    (COMPLETED, -1781.0, -1781.0),  # the search tree was exhausted: the incumbent is proven
    (COMPLETED, None, None),
    ("Cbc3007W No integer variables - nothing to do\n", -3.0, None),  # no bound named: unknown, not the incumbent
    ("Cbc0005I Partial search - best objective 1e+50 (best possible 1e+50), took 0 iterations\n", None, None),
])
def test_cbc_bound_is_the_one_its_log_names(log, incumbent, bound):
    assert cbc_log.mip_bound(log, incumbent) == (pytest.approx(bound) if bound is not None else None)


@pytest.mark.parametrize(("line", "has_solution", "termination"), [
    ("Optimal - objective value -4.00000000", True, Termination.OPTIMAL),
    ("Stopped on time - objective value 33.00000000", True, Termination.TIME_LIMIT),
    ("Stopped on time (no integer solution - continuous used) - objective value 24.46915213", False, Termination.TIME_LIMIT),
    ("Stopped on iterations - objective value 57597.00000000", True, Termination.FEASIBLE),
    ("Stopped on iterations - objective value 57597.00000000", False, Termination.NODE_LIMIT),  # no incumbent
    ("Infeasible - objective value 3.50000000", False, Termination.INFEASIBLE),
    ("Integer infeasible - objective value 1.50000000", False, Termination.INFEASIBLE),
    ("Unbounded - objective value 0.00000000", False, None),  # CBC cannot tell: settled by a second solve
    ("Stopped on difficulties - objective value 1.0", True, Termination.ERROR),
    ("Stopped on ctrl-c - objective value 1.0", True, Termination.ERROR),
    ("", False, Termination.ERROR),
])
def test_cbc_status_line_maps_to_its_termination(line, has_solution, termination):
    assert cbc_log.termination_of(line, has_solution) is termination


def test_cbc_version_comes_from_its_banner():
    assert cbc_log.version_of("Welcome to the CBC MILP Solver \nVersion: 2.10.3 \nBuild Date: Dec 15 2019\n") == "2.10.3"
    assert cbc_log.version_of("Running HiGHS 1.16.0\n") is None
