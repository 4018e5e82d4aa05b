"""Two native HiGHS copies never share a process: PuLP (highspy) solves in a child, OR-Tools in this one.

In one interpreter, a PuLP/HiGHS solve followed by an OR-Tools/HiGHS solve dies with SIGSEGV (exit 139);
each sequence runs in a fresh interpreter here, so the result does not depend on what this one imported.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from planner.solvers import SolveOptions, Termination, get_backend
import planner
from planner.solvers.isolated import Child, IsolatedBackend
from tests.api.apitest import REPO

SEQUENCE = """
import sys
from tests.solvers.conftest import candidate, units_for, workload
from planner.milp.build import BuildOptions, build_model
from planner.solvers import SolveOptions, get_backend

cands = [candidate("chat", "prefill", "a", 2.0, 1000.0), candidate("chat", "decode", "d", 7.0, 3000.0)]
model = build_model(workload({"chat": 1.0}, 10.0), {("chat", "pd_disagg"): ["decode", "prefill"]}, cands,
                    BuildOptions(objective="max_goodput"))
for step in sys.argv[1:]:
    backend, engine = step.split(":")
    result = get_backend(backend).solve(model, SolveOptions(engine=engine, time_limit_s=120))  # never the limit
    print(step, result.termination.value, round(-result.objective, 6), flush=True)
print("loaded:", sorted(m for m in ("pulp", "highspy", "ortools") if m in sys.modules))
"""


def run_sequence(*steps: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SEQUENCE, *steps], cwd=REPO, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("steps", [
    ("pulp:highs", "ortools:highs"),  # the order that crashed (exit 139)
    ("ortools:highs", "pulp:highs"),
    ("pulp:cbc", "ortools:highs", "pulp:highs", "ortools:scip", "ortools:highs"),
])
def test_pulp_and_ortools_highs_solve_in_either_order(steps):
    done = run_sequence(*steps)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    lines = done.stdout.splitlines()
    # by hand: 4 A (2 rps, 1 kW each) + 2 D (7 rps, 3 kW each) = 10 kW, λ = min(8, 14) = 8; with 1 D: 7 A,
    # λ = min(14, 7) = 7; with 3 D: 1 A, λ = 2
    assert lines[:-1] == [f"{step} optimal 8.0" for step in steps]
    assert lines[-1] == "loaded: ['ortools']"  # highspy never loaded here


def test_the_child_imports_only_its_backend():
    backend = get_backend("pulp")
    assert isinstance(backend, IsolatedBackend)
    assert backend.engines == ("highs", "cbc") and backend.default_engine == "highs"
    child = backend._pool.acquire()
    try:
        assert child.hello["modules"] and not any(m.startswith("ortools") for m in child.hello["modules"])
    finally:
        backend._pool.release(child)


def test_engine_errors_of_the_child_are_raised_here(tiny):
    from planner.milp.build import BuildOptions, build_model

    wl, units, cands = tiny
    model = build_model(wl, units, cands, BuildOptions(objective="max_goodput"))
    with pytest.raises(ValueError, match="not a PuLP engine"):
        get_backend("pulp").solve(model, SolveOptions(engine="nope"))
    assert get_backend("pulp").solve(model, SolveOptions(time_limit_s=120)).termination is Termination.OPTIMAL  # still serves


def _tiny_model(tiny):
    from planner.milp.build import BuildOptions, build_model

    wl, units, cands = tiny
    return build_model(wl, units, cands, BuildOptions(objective="max_goodput"))


def test_a_child_that_crashes_answers_an_error_result_and_is_replaced(tiny):
    model = _tiny_model(tiny)
    backend = IsolatedBackend("crashing", "tests.solvers.crashing:CrashingBackend")
    first = backend.solve(model, SolveOptions())
    assert first.termination is Termination.ERROR and first.x is None
    assert "signal 11" in first.message
    second = backend.solve(model, SolveOptions())  # a new child, which crashes again: still an answer
    assert second.termination is Termination.ERROR
    backend._pool.close()


def test_a_child_that_exits_without_answering_says_its_exit_status(tiny):
    backend = IsolatedBackend("exiting", "tests.solvers.crashing:ExitingBackend")
    result = backend.solve(_tiny_model(tiny), SolveOptions())
    assert result.termination is Termination.ERROR and result.x is None
    assert result.message == "the solver process exited with 0"  # no signal killed it
    backend._pool.close()


def test_a_child_imports_the_parents_planner_from_any_directory(tmp_path, monkeypatch):
    """The child runs ``python -m planner.solvers.isolated`` with the parent's source tree first on its path, so
    it imports the same ``planner`` (and finds the target) wherever the parent runs and whatever it has installed."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    # under a mutation run's tracing (mutmut), a child would look for mutmut's configuration in this directory
    monkeypatch.delenv("MUTANT_UNDER_TEST", raising=False)
    child = Child("tests.solvers.fixed:Located")
    try:
        assert child.hello["name"] == str(Path(planner.__file__).resolve().parent)
    finally:
        child.close()


def test_a_child_knows_it_is_one(tiny):
    """``in_child()`` holds in the child whose loop (``serve``) answers the solve, and not in this process."""
    from planner.milp.build import BuildOptions, build_model
    from planner.solvers.isolated import in_child

    wl, units, cands = tiny
    model = build_model(wl, units, cands, BuildOptions(objective="max_goodput"))
    backend = IsolatedBackend("fixed", "tests.solvers.fixed:Placed")
    assert backend.solve(model, SolveOptions()).message == "in_child: True"
    assert not in_child()
    backend._pool.close()
