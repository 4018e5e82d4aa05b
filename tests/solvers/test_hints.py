"""A feasible point reaches the engine as a hint: the LP-rounding point before the MILP, stage 1's plan before the
power tie-break (OR-Tools passes hints to SCIP/HiGHS; a hint never changes what is optimal)."""

from __future__ import annotations

import numpy as np
import pytest

import planner.solvers.ortools_backend as ortools_backend
from planner import decompose
from planner.optimize import PlanOptions, solve_candidates, solve_with_rounding
from planner.solvers import SolveOptions, Termination, get_backend
from planner.milp.build import BuildOptions, build_model
from tests.solvers.conftest import candidate, small_ilp, units_for, workload
from tests.test_shared_pools import shared_candidate


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


def test_a_rounding_point_the_engine_cannot_beat_is_the_answer(tiny):
    """PuLP gives its engine no hint; HiGHS stopped at the root (node limit 0) finds no fleet of its own. By hand,
    LP rounding covers λ = 7 with 2 B (10 req/s of prefill) and 1 D (7 of decode), 7.4 kW of the 10: that point is
    returned, short of the gap (a node limit with an incumbent: FEASIBLE) under the engine's own bound."""
    workload, units, candidates = tiny
    model = build_model(workload, units, candidates, BuildOptions(objective="max_goodput"))
    options = SolveOptions(engine="highs", node_limit=0, time_limit_s=30)
    backend = get_backend("pulp")
    alone = backend.solve(model, options)
    assert not alone.has_solution and alone.termination is Termination.NODE_LIMIT
    result = solve_with_rounding(backend, model, options)
    assert result.termination is Termination.FEASIBLE and result.bound == alone.bound
    assert result.objective == pytest.approx(-7.0) and model.max_violation(result.x) <= 1e-6
    x = dict(zip(model.var_names, result.x))
    assert [x[f"n:{c.key}"] for c in candidates] == pytest.approx([0.0, 2.0, 0.0, 1.0])
    assert result.message.endswith("; LP rounding beat the incumbent")


def test_the_full_milp_starts_from_the_class_by_class_plan():
    """Three classes that only the power budget ties, plus one shared decode replica (so the full MILP runs after
    the class-by-class search). Stopped at the root (node limit 0), HiGHS (no hints under PuLP) finds no fleet and
    LP rounding serves half the scale the class-by-class plan does: the full MILP's first stage is that plan."""
    rng = np.random.default_rng(11)
    classes = [f"k{i}" for i in range(3)]
    rates = {k: float(rng.uniform(0.5, 3)) for k in classes}
    cands = [candidate(k, role, f"{role[0]}{j}", float(rng.uniform(0.5, 6)), float(rng.uniform(300, 3000)))
             for k in classes for role in ("prefill", "decode") for j in range(3)]
    work, units = workload(rates, float(rng.uniform(5, 15))), units_for(classes)
    shared = shared_candidate([(k, float(rng.uniform(1, 5)), 0.02) for k in classes], tpot_ms=40.0,
                              power_w=float(rng.uniform(1000, 4000)))
    options = PlanOptions(solver="pulp", node_limit=0, baseline=False, time_limit_s=30, relative_gap=1e-6)
    apart = decompose.solve(work, units, cands, "pulp", options.solve_options())
    full = build_model(work, units, cands + [shared], BuildOptions(objective="max_goodput"))
    rounding = solve_with_rounding(get_backend("pulp"), full, options.solve_options())
    assert rounding.message.endswith("LP rounding beat the incumbent")
    assert -rounding.objective < 0.6 * -apart.results[0].objective  # the start is worth having
    solved = solve_candidates(work, units, cands + [shared], options)
    first = solved.stages[0]
    assert first.objective == pytest.approx(apart.results[0].objective, rel=1e-9)
    assert first.message.endswith("; the class-by-class plan beat the incumbent")
    assert solved.scale == pytest.approx(-apart.results[0].objective, rel=1e-6)
