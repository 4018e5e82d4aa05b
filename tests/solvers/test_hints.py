"""A feasible point reaches the engine as a hint: the LP-rounding point before the MILP, stage 1's plan before the
power tie-break (OR-Tools passes hints to SCIP/HiGHS; a hint never changes what is optimal)."""

from __future__ import annotations

import numpy as np

import planner.solvers.ortools_backend as ortools_backend
from planner.optimize import solve_with_rounding
from planner.solvers import SolveOptions, Termination, get_backend
from planner.milp.build import BuildOptions, build_model
from tests.solvers.conftest import small_ilp


def test_ortools_hands_the_hint_to_the_engine_and_the_optimum_is_unchanged(monkeypatch):
    seen = []
    real = ortools_backend.mathopt.solve

    def recording(model, solver_type, **kwargs):
        seen.append(kwargs.get("model_params"))
        return real(model, solver_type, **kwargs)

    monkeypatch.setattr(ortools_backend.mathopt, "solve", recording)
    # max 3x + 2y s.t. x + y ≤ 7.5, integers in [0, 10]: the optimum is x = 7, y = 0 (21); hint a worse point
    model = small_ilp([-3.0, -2.0], [([1.0, 1.0], -np.inf, 7.5)], ub=[10.0, 10.0])
    hint = np.array([2.0, 5.0])
    result = ortools_backend.OrtoolsBackend().solve(model, SolveOptions(hint=hint))
    assert result.termination is Termination.OPTIMAL and result.objective == -21.0
    (params,) = seen
    (given,) = params.solution_hints
    assert sorted(given.variable_values.values()) == [2.0, 5.0]
    unhinted = ortools_backend.OrtoolsBackend().solve(model, SolveOptions())
    assert seen[-1] is None and unhinted.objective == result.objective


def test_the_rounding_point_is_the_milps_hint(tiny):
    asked = []
    backend = get_backend("ortools")

    class Recording:
        def solve(self, model, options):
            asked.append(options.hint)
            return backend.solve(model, options)

    workload, units, candidates = tiny
    model = build_model(workload, units, candidates, BuildOptions(objective="min_power"))
    solve_with_rounding(Recording(), model, SolveOptions())
    lp_hint, milp_hint = asked  # the LP first (no hint), then the MILP from the rounded LP point
    assert lp_hint is None and milp_hint is not None
    assert model.max_violation(milp_hint) <= 1e-6  # a feasible point of the same MILP
