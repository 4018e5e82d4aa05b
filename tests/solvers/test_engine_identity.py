"""Which engine actually ran: each result names its backend and engine, and carries what only that engine
produces (MathOpt's per-solver termination detail; the version the HiGHS object that solved reports; CBC's
banner and status line). A wrapper that ran another engine, or handed back the other backend's answer,
matches another engine's signature and fails here."""

from __future__ import annotations

import re
from importlib.metadata import version

import pytest

from planner.milp.build import BuildOptions, build_model
from planner.solvers import SolveOptions, Termination, get_backend
from tests.solvers.conftest import candidate, units_for, workload

#: what only each engine's run leaves in ``message | engine_version``
SIGNATURES = {
    ("ortools", "scip"): r"^underlying gSCIP status: OPTIMAL \| ortools \d",
    ("ortools", "highs"): r"^HighsModelStatus is kOptimal \| ortools \d",
    ("pulp", "highs"): rf"^HiGHS: Optimal \| pulp {re.escape(version('pulp'))}, HiGHS {re.escape(version('highspy'))}$",
    ("pulp", "cbc"): rf"^CBC: Optimal - objective value -10\.0+ \| pulp {re.escape(version('pulp'))}, CBC \d+\.\d+\.\d+$",
}


def _signed(result) -> list[tuple[str, str]]:
    text = f"{result.message} | {result.engine_version}"
    return [key for key, pattern in SIGNATURES.items() if re.search(pattern, text)]


@pytest.fixture(scope="module")
def model():
    # λ = 10 (test_parity_and_brute_force's hand check); CBC's status line shows its own objective, −λ
    cands = [candidate("chat", "prefill", "a", 2.0, 1000.0), candidate("chat", "prefill", "b", 5.0, 2200.0),
             candidate("chat", "decode", "c", 3.0, 1500.0), candidate("chat", "decode", "d", 7.0, 3000.0)]
    return build_model(workload({"chat": 1.0}, 10.0), units_for(["chat"]), cands, BuildOptions(objective="max_goodput"))


@pytest.mark.parametrize("backend, engine", list(SIGNATURES))
def test_the_engine_asked_for_is_the_engine_that_ran(model, backend, engine):
    result = get_backend(backend).solve(model, SolveOptions(engine=engine, time_limit_s=30, relative_gap=1e-9))
    assert result.termination is Termination.OPTIMAL and result.objective == pytest.approx(-10.0)
    assert (result.backend, result.engine) == (backend, engine)
    assert _signed(result) == [(backend, engine)], (result.message, result.engine_version)


@pytest.mark.parametrize(("backend", "engine"), [("ortools", "scip"), ("pulp", "highs")])
def test_each_backend_runs_its_default_engine_when_none_is_named(model, backend, engine):
    result = get_backend(backend).solve(model, SolveOptions(time_limit_s=30, relative_gap=1e-9))
    assert result.engine == engine and _signed(result) == [(backend, engine)], (result.message, result.engine_version)
