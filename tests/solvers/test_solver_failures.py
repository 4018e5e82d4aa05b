"""A solve that answers nothing about the workload (the engine failed, or found the placement MILP unbounded)
is a SolverFailed wherever it happens (main stage, tie-break, diagnosis): never an infeasible plan with a
budget diagnosis. plan_status maps every other outcome to its own status, and calls nothing optimal that no
reported bound proves. The CLI makes a failure one line and exit 1 (REST: tests/api/test_solver_failure.py)."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest
from typer.testing import CliRunner

from planner.cli import app
from planner.optimize import PlanOptions, Solved, plan_workload
from planner.plan import plan_status
from planner.solvers import SolveResult, Termination
from planner.solvers.base import BACKENDS, SolverFailed, check_outcome
from tests.solvers.fixed import REASON
from tests.test_cli_hardening import CHAT
from tests.test_planner import chat

QUICK = PlanOptions(time_limit_s=20, baseline=False)


def _result(termination, bound=None, objective=1.0):
    return SolveResult(termination, "ortools", "scip", objective=objective, bound=bound,
                       x=np.zeros(1) if objective is not None else None, message="out of memory")


@pytest.mark.parametrize(("termination", "bound", "status"), [
    (Termination.OPTIMAL, 1.0, "optimal"),
    (Termination.OPTIMAL, None, "feasible"),  # the engine says optimal but reports no bound: nothing proves it
    (Termination.FEASIBLE, 0.5, "feasible"),
    (Termination.TIME_LIMIT, 0.5, "time_limit"),
    (Termination.NODE_LIMIT, None, "feasible"),  # a stage the node limit ended empty: the plan kept is unproven
    (Termination.INFEASIBLE, None, "infeasible"),
])
def test_plan_status_names_each_outcome_as_what_it_is(termination, bound, status):
    objective = None if termination is Termination.INFEASIBLE else 1.0
    assert plan_status(_result(termination, bound, objective)) == status


@pytest.mark.parametrize(("termination", "says"), [
    (Termination.ERROR, r"the solver failed \(ortools/scip\): out of memory"),
    (Termination.UNBOUNDED, r"ortools/scip found the placement MILP unbounded: a modelling bug"),
])
def test_an_engine_failure_or_an_unbounded_milp_is_no_plan_status(termination, says):
    with pytest.raises(SolverFailed, match=says) as raised:
        plan_status(_result(termination, objective=None))
    assert raised.value.termination is termination
    copy = pickle.loads(pickle.dumps(raised.value))  # it crosses process pools (REST workers, studies) intact
    assert (str(copy), copy.termination) == (str(raised.value), termination)


def test_a_stage_without_a_bound_leaves_the_plan_gap_unknown():
    proven, unproven = _result(Termination.OPTIMAL, bound=1.0), _result(Termination.FEASIBLE, bound=None)
    assert Solved([], None, unproven, (proven, unproven), 0.0).gap is None
    assert Solved([], None, proven, (proven, dataclasses.replace(proven, bound=0.9)), 0.0).gap == pytest.approx(0.1)


def test_check_outcome_passes_every_answer_about_the_model():
    for termination in (Termination.OPTIMAL, Termination.FEASIBLE, Termination.TIME_LIMIT, Termination.NODE_LIMIT,
                        Termination.INFEASIBLE):
        result = _result(termination)
        assert check_outcome(result) is result


@pytest.mark.parametrize(("target", "says"), [
    ("Failing", f"the solver failed \\(fixed/fixed\\): {REASON}"),  # the first (goodput) stage
    ("Unbounded", "found the placement MILP unbounded"),
    ("FailsTieBreak", f"the solver failed \\(ortools/scip\\): {REASON}"),  # the power tie-break, after a good stage 1
])
def test_a_plan_whose_solve_fails_raises_instead_of_answering_infeasible(catalog, monkeypatch, target, says):
    monkeypatch.setitem(BACKENDS, "fixed", f"tests.solvers.fixed:{target}")
    with pytest.raises(SolverFailed, match=says):
        plan_workload(chat(), catalog, dataclasses.replace(QUICK, solver="fixed"))


def test_a_failed_diagnosis_solve_is_no_diagnosis(catalog, monkeypatch):
    monkeypatch.setitem(BACKENDS, "fixed", "tests.solvers.fixed:FailsDiagnosis")
    assert plan_workload(chat(power_kw=1.0), catalog, QUICK).diagnosis.reason == "budget"  # ortools: a diagnosis
    with pytest.raises(SolverFailed, match=REASON):  # the elastic solve failed: it cannot say what must bend
        plan_workload(chat(power_kw=1.0), catalog, dataclasses.replace(QUICK, solver="fixed"))


def test_the_cli_says_the_solver_failed_in_one_line_and_exits_1(monkeypatch):
    monkeypatch.setitem(BACKENDS, "ortools", "tests.solvers.fixed:Failing")
    result = CliRunner().invoke(app, ["plan", str(CHAT), "--no-baseline"])
    assert result.exit_code == 1, (result.exception, result.stdout)
    assert result.stderr.strip().splitlines() == [f"error: the solver failed (fixed/fixed): {REASON}"]
    assert result.stdout == ""  # no plan printed, not even an infeasible one


@pytest.mark.parametrize(("target", "says"), [
    ("TimeLimitFindsNothing", "the time limit (20 s per MILP solve; raise time_limit_s) passed before any plan was found"),
    ("NodeLimitFindsNothing", "the node limit (5 nodes per MILP solve; raise node_limit) passed before any plan was found"),
])
def test_a_plan_whose_solves_find_nothing_names_the_limit_that_passed(catalog, monkeypatch, target, says):
    monkeypatch.setitem(BACKENDS, "fixed", f"tests.solvers.fixed:{target}")
    plan = plan_workload(chat(), catalog, dataclasses.replace(QUICK, solver="fixed", node_limit=5))
    assert plan.status == "infeasible" and plan.pools == ()
    assert (plan.diagnosis.reason, plan.diagnosis.message) == ("no_candidates", says)


def test_a_tie_break_that_finds_nothing_keeps_the_first_stages_plan(catalog, monkeypatch):
    plain = plan_workload(chat(), catalog, QUICK)
    monkeypatch.setitem(BACKENDS, "fixed", "tests.solvers.fixed:TieBreakFindsNothing")
    kept = plan_workload(chat(), catalog, dataclasses.replace(QUICK, solver="fixed"))
    assert kept.status == "optimal" and kept.goodput_scale == pytest.approx(plain.goodput_scale, rel=1e-9)
    assert kept.totals.power_kw >= plain.totals.power_kw - 1e-9  # not power-minimised, but the same traffic
    assert kept.verification.ok
