"""The class-by-class solve (decompose.py) finds what the full MILP finds, and proves it."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import decompose
from planner.candidates import prune_dominated
from planner.milp.build import BuildOptions, build_model
from planner.optimize import PlanOptions, better, fleet_figures, plan_workload, solve_candidates
from planner.schema import Workload
from planner.solvers import SolveOptions, Termination, get_backend
from planner.solvers.base import SolverFailed
from tests.solvers.conftest import candidate, units_for, workload
from tests.solvers.test_parity_and_brute_force import PROPERTY, brute_force_scale

EXACT = SolveOptions(time_limit_s=30, relative_gap=1e-9)


def two_classes():
    """chat (1 req/s) and code (2 req/s), each with prefill on A or B and decode on C or D, 10 kW."""
    cands = []
    for k in ("chat", "code"):
        cands += [candidate(k, "prefill", "a", 2.0, 1000.0), candidate(k, "prefill", "b", 5.0, 2200.0),
                  candidate(k, "decode", "c", 3.0, 1500.0), candidate(k, "decode", "d", 7.0, 3000.0)]
    return workload({"chat": 1.0, "code": 2.0}, 10.0), units_for(["chat", "code"]), cands


def full(wl, units, cands, objective, backend="ortools"):
    """The full MILP's first-stage optimum (the objective value: −λ, kW or $/h)."""
    model = build_model(wl, units, cands, BuildOptions(objective=objective))
    result = get_backend(backend).solve(model, EXACT)
    assert result.termination is Termination.OPTIMAL
    return result.objective


@pytest.mark.parametrize("backend", ["ortools", "pulp"])
def test_two_classes_reach_the_full_milps_scale_and_power(backend):
    wl, units, cands = two_classes()
    # by hand, 10 kW, each class its own pools: λ = 3 fits, e.g. chat 3 req/s on B + C (3.7 kW) and code 6 req/s
    # on B + A and D (6.2 kW): 9.9 kW. Any λ > 3 needs chat's decode on D (or 2 C, 3 kW) and code's prefill and
    # decode above 6 req/s (B + A, D at the least): 5.2 + 6.2 = 11.4 kW > 10. Enumeration says the same:
    expected = brute_force_scale(wl, cands, 4)
    assert expected == pytest.approx(3.0)
    split = decompose.solve(wl, units, cands, backend, SolveOptions(time_limit_s=30, relative_gap=1e-6))
    first, second = split.results
    first_model, second_model = split.models
    assert first.termination is Termination.OPTIMAL and -first.objective == pytest.approx(expected, rel=1e-6)
    assert first.message == second.message == "class by class (2 classes)"  # the plan's solver info says how
    assert -first.bound <= expected * (1 + 1e-6) + 1e-9 and first.gap <= 1e-6
    # the point is a feasible point of the full MILP, in both stages
    assert first_model.max_violation(first.x) <= 1e-9 and second_model.max_violation(second.x) <= 1e-9
    # second stage: the least power at λ*, as the full MILP's second stage finds it
    stage2 = build_model(wl, units, cands, BuildOptions(objective="max_goodput", min_scale=expected * (1 - 1e-9)))
    assert second.objective == pytest.approx(get_backend(backend).solve(stage2, EXACT).objective, rel=1e-6)


@pytest.mark.parametrize("objective", ["min_power", "min_cost"])
def test_serving_the_rates_is_the_sum_of_the_classes_optima(objective):
    wl, units, cands = two_classes()
    wl = wl.model_copy(update={"objective": objective})
    (result,) = decompose.solve(wl, units, cands, "ortools", EXACT).results
    assert result.objective == pytest.approx(full(wl, units, cands, objective), rel=1e-9)
    assert result.x[list(result.x).index(1.0)] == 1.0  # λ = 1


@settings(PROPERTY, max_examples=25)
@given(st.data())
def test_random_instances_match_the_full_milp(data):
    classes = {f"k{i}": data.draw(st.floats(0.5, 3.0)) for i in range(data.draw(st.integers(2, 3)))}
    cands = [candidate(k, role, f"{role[0]}{j}", data.draw(st.floats(0.5, 8.0)), data.draw(st.floats(200.0, 3000.0)))
             for k in classes for role in ("prefill", "decode") for j in range(data.draw(st.integers(1, 2)))]
    wl, units = workload(classes, data.draw(st.floats(2.0, 12.0))), units_for(classes)
    split = decompose.solve(wl, units, cands, "ortools", SolveOptions(time_limit_s=30, relative_gap=1e-5))
    scale = -full(wl, units, cands, "max_goodput")
    if split is None:  # allowed only when no fleet serves anything (the full MILP then answers)
        assert scale == pytest.approx(0.0, abs=1e-9)
        return
    assert -split.results[0].objective == pytest.approx(scale, rel=1e-5, abs=1e-9)
    assert split.results[0].gap <= 1e-5


@pytest.mark.parametrize("objective", ["min_cost", "min_power"])
def test_fleets_that_fit_only_apart_go_to_the_full_milp(objective):
    # per class and role: a cheap 3 kW replica ($1/h) or a frugal 1 kW one ($5/h), 2 req/s each, two classes
    cands = [candidate(k, role, dev, 2.0, watts, cost=cost) for k in ("chat", "code")
             for role, cheap, frugal in (("prefill", "a", "b"), ("decode", "c", "d"))
             for dev, watts, cost in ((cheap, 3000.0, 1.0), (frugal, 1000.0, 5.0))]
    units = units_for(["chat", "code"])
    # 8 kW: each class alone takes its cheap 6 kW; together they must not exceed 8 kW (min_cost: $12/h)
    wl = workload({"chat": 1.0, "code": 1.0}, 8.0, objective=objective)
    split = decompose.solve(wl, units, cands, "ortools", EXACT)
    if objective == "min_cost":
        assert split is None and full(wl, units, cands, "min_cost") == pytest.approx(12.0)
    else:  # the least power fits: 4 kW
        assert split.results[0].objective == pytest.approx(4.0) == full(wl, units, cands, "min_power")
    # 3 kW: no fleet serves both (4 kW at the least): the full MILP says infeasible, the search says nothing
    assert decompose.solve(workload({"chat": 1.0, "code": 1.0}, 3.0, objective=objective), units, cands, "ortools", EXACT) is None


@pytest.mark.parametrize("change", [
    {"inventory": {"a": 3}}, {"cost_budget_usd_per_hour": 10.0}, {"max_device_types": 2}, {"owned": {"a": 1}},
])
def test_any_row_but_power_across_classes_means_the_full_milp(change):
    wl, _, _ = two_classes()
    assert decompose.decomposable(wl, 1e-4)
    assert not decompose.decomposable(wl.model_copy(update={"constraints": wl.constraints.model_copy(update=change)}), 1e-4)
    assert not decompose.decomposable(wl.model_copy(update={"classes": wl.classes[:1]}), 1e-4)
    assert not decompose.decomposable(wl, 1e-7)  # tighter than bisection can prove


@pytest.mark.parametrize("solver", ["ortools", "pulp"])
def test_mixed_agents_is_proven_optimal(catalog, solver):
    workload_ = Workload.model_validate(yaml.safe_load(Path("examples/workloads/mixed-agents.yaml").read_text()))
    # a time limit no machine load reaches: the proof is what is tested (its speed is benchmarks/bench_solver.py's)
    plan = plan_workload(workload_, catalog, PlanOptions(solver=solver, baseline=False, time_limit_s=300))
    assert plan.status == "optimal" and plan.solver.gap is not None and plan.solver.gap <= 1e-4
    assert plan.verification.ok
    assert np.isfinite(plan.goodput_scale) and plan.goodput_scale > 10


def test_a_bracket_the_first_probe_closes_takes_one_probe():
    # chat and code at 1 req/s each, prefill on A and decode on C (2 req/s and 1 kW each), 4 kW: λ = 2 needs one A
    # and one C per class (4 kW), and the LP relaxation says the same (2λ kW ≤ 4): the first probe at λ = 2 is
    # feasible and serves exactly 2, so the bracket [2, 2] is closed after one probe
    cands = [candidate(k, role, dev, 2.0, 1000.0) for k in ("chat", "code") for role, dev in (("prefill", "a"), ("decode", "c"))]
    split = decompose.solve(workload({"chat": 1.0, "code": 1.0}, 4.0), units_for(["chat", "code"]), cands, "ortools",
                            SolveOptions(time_limit_s=30, relative_gap=1e-6))
    assert split.probes == 1
    first, second = split.results
    assert -first.objective == pytest.approx(2.0) and -first.bound == pytest.approx(2.0)
    assert second.objective == pytest.approx(4.0)  # kW at λ = 2: every replica is needed


def test_a_class_by_class_plan_that_serves_less_for_less_is_not_better(tiny):
    """``better`` keeps the full MILP's plan unless the class-by-class one serves at least as much: by hand, 10 kW
    serve λ = 10 (2 B, 1 C and 1 D, 8.9 kW); the same candidates under 5 kW serve λ = 4 (e.g. 2 A and 2 C, 5 kW) — less
    power, but less served too."""
    wl, units, cands = tiny
    full = solve_candidates(wl, units, cands, PlanOptions(baseline=False, relative_gap=1e-9))
    less = solve_candidates(workload({"chat": 1.0}, 5.0), units, cands, PlanOptions(baseline=False, relative_gap=1e-9))
    assert (full.scale, less.scale) == (pytest.approx(10.0), pytest.approx(4.0))
    assert fleet_figures(wl, less)["power_kw"] < fleet_figures(wl, full)["power_kw"]
    assert better(wl, full, less) is full
    assert better(wl, less, full).scale == pytest.approx(10.0)  # the other way round, the one serving more wins


@pytest.mark.parametrize("objective", ["max_goodput", "min_power"])
def test_every_class_milp_is_solved_to_a_tenth_of_the_requested_gap(monkeypatch, objective):
    """A class's proven bound is what the search relies on: its engine is asked for a tenth of the plan's gap
    (at most CLASS_GAP), never left at its own default."""
    asked = []
    real = get_backend("ortools")

    class Recording:
        def solve(self, model, options):
            if model.var_is_integer.any():  # a class's MILP (the LP relaxation gets the plan's options)
                asked.append(options.relative_gap)
            return real.solve(model, options)

    monkeypatch.setattr(decompose, "get_backend", lambda name: Recording())
    wl, units, cands = two_classes()
    wl = wl.model_copy(update={"objective": objective})
    assert decompose.solve(wl, units, cands, "ortools", SolveOptions(time_limit_s=30, relative_gap=2e-6)) is not None
    assert asked and all(gap is not None and gap <= 2e-7 * (1 + 1e-9) for gap in asked)
    assert asked[0] == pytest.approx(2e-7)


def test_a_probe_the_first_classes_prove_over_budget_solves_no_more_of_them(monkeypatch):
    """Three classes (seed 29 of a random family): 17 probes, and once the proven bounds of the classes solved at a
    probe (largest first), with those the others had below it, exceed the budget, the others are left unsolved: 21
    class solves (30 when each probe solves every class whose fleet does not already serve it). The answer is the full MILP's."""
    rng = np.random.default_rng(29)
    classes = {f"k{i}": float(rng.uniform(0.5, 3)) for i in range(3)}
    cands = [candidate(k, role, f"{role[0]}{j}", float(rng.uniform(0.5, 8)), float(rng.uniform(200, 3000)))
             for k in classes for role in ("prefill", "decode") for j in range(3)]
    wl, units = workload(classes, float(rng.uniform(4, 12))), units_for(classes)
    solves, class_solve = [], decompose._class_solve

    def recorded(workload_, name, scale, *args):
        solves.append(scale)
        return class_solve(workload_, name, scale, *args)

    monkeypatch.setattr(decompose, "_class_solve", recorded)
    split = decompose.solve(wl, units, cands, "ortools", SolveOptions(time_limit_s=30, relative_gap=1e-5))
    assert -split.results[0].objective == pytest.approx(-full(wl, units, cands, "max_goodput"), rel=1e-9)
    assert (split.probes, len(solves)) == (17, 21)


def test_a_class_milp_leaves_out_what_copies_of_another_type_beat():
    """Decode on A (1 req/s, 1 kW) or B (3 req/s, 4 kW): three A serve what one B does for 3 kW, so the class MILPs
    leave B out (the homogeneous baselines keep it: it is B's own best), and the search still finds the full MILP's
    answer, with prefill on C (4 req/s, 1 kW) for both classes under 10 kW."""
    cands = [candidate("chat", "decode", "a", 1.0, 1000.0), candidate("chat", "decode", "b", 3.0, 4000.0),
             candidate("chat", "prefill", "c", 4.0, 1000.0)]
    for k in ("code",):
        cands += [candidate(k, "decode", "a", 1.0, 1000.0), candidate(k, "prefill", "c", 4.0, 1000.0)]
    wl, units = workload({"chat": 1.0, "code": 1.0}, 10.0), units_for(["chat", "code"])
    assert [c.device for c in prune_dominated(cands[:2], wl)] == ["a", "b"]
    assert [c.device for c in prune_dominated(cands[:2], wl, across_types=True)] == ["a"]
    split = decompose._split(wl, units, cands)
    assert sorted(c.device for c in split["chat"][1]) == ["a", "c"]
    solved = decompose.solve(wl, units, cands, "ortools", SolveOptions(time_limit_s=30, relative_gap=1e-6))
    # by hand: each class at λ needs ⌈λ⌉ A and ⌈λ/4⌉ C; 2·(4 + 1) = 10 kW serve λ = 4, and λ > 4 needs 12 kW
    assert -solved.results[0].objective == pytest.approx(4.0) == pytest.approx(-full(wl, units, cands, "max_goodput"))


def test_pulp_solves_two_classes_at_once_with_the_one_at_a_time_answer(monkeypatch):
    """PuLP solves in child processes, so a probe solves two classes at once (the first two meet at a barrier, which
    breaks unless both run together), the second unused when the first settles the probe, and so its failure too
    (here every solve the one-at-a-time search does not run fails): the seed-29 case ends with the same probes, fleet
    and bound, and keeps the same solves, as when each class is solved in turn."""
    rng = np.random.default_rng(29)
    classes = {f"k{i}": float(rng.uniform(0.5, 3)) for i in range(3)}
    cands = [candidate(k, role, f"{role[0]}{j}", float(rng.uniform(0.5, 8)), float(rng.uniform(200, 3000)))
             for k in classes for role in ("prefill", "decode") for j in range(3)]
    wl, units = workload(classes, float(rng.uniform(4, 12))), units_for(classes)
    class_solve, class_scale = decompose._class_solve, decompose._class_scale
    options = SolveOptions(time_limit_s=60, relative_gap=1e-5)

    def counted(*args):  # the search measures each class solve it keeps (and each fleet of a probe within budget)
        counted.calls += 1
        return class_scale(*args)

    def recorded(*args):
        solved.add((args[1], args[2]))
        return class_solve(*args)

    counted.calls, solved = 0, set()
    monkeypatch.setattr(decompose, "_class_scale", counted)
    monkeypatch.setattr(decompose, "WORKERS", 1)
    monkeypatch.setattr(decompose, "_class_solve", recorded)
    one, kept_one = decompose.solve(wl, units, cands, "pulp", options), counted.calls
    together, lock = threading.Barrier(2, timeout=20), threading.Lock()

    def meeting(*args):
        with lock:
            meeting.calls += 1
            first_two = meeting.calls <= 2
        if first_two:
            together.wait()  # BrokenBarrierError after 20 s alone
        if (args[1], args[2]) not in solved:
            raise SolverFailed("a solve the search leaves unused")
        return class_solve(*args)

    meeting.calls = counted.calls = 0
    monkeypatch.setattr(decompose, "WORKERS", 2)
    monkeypatch.setattr(decompose, "_class_solve", meeting)
    two = decompose.solve(wl, units, cands, "pulp", options)
    assert meeting.calls > len(solved) == 21 and not together.broken  # more solves ran than the 21 one at a time ...
    assert counted.calls == kept_one  # ... but the search kept the same ones
    assert two.probes == one.probes == 17
    assert np.array_equal(two.results[-1].x, one.results[-1].x)
    assert two.results[0].bound == one.results[0].bound


def test_classes_solved_at_once_stop_with_the_callers_token_and_fail_only_when_read():
    """The threads solve under a token cancelled with the caller's (a thread waiting on it sees the cancel another
    makes); a call's exception is raised only when its outcome is read."""
    from planner.solvers.cancel import CancelToken, SolveCancelled, cancellable, current_token

    seen = []

    def waits():
        token = current_token()
        seen.append(token is not None and token is not caller)  # a token of the threads' own
        seen.append(token._cancelled.wait(20))
        return "waited"

    caller = CancelToken()
    with pytest.raises(SolveCancelled), cancellable(caller):
        decompose._concurrently([waits, caller.cancel])
    assert seen == [True, True]

    def boom():
        raise ValueError("boom")

    outcomes = decompose._concurrently([boom, lambda: 7])
    assert outcomes[1]() == 7
    with pytest.raises(ValueError, match="boom"):
        outcomes[0]()
