"""A cancelled token stops the solve running under it (every engine), and every solve started after it."""

from __future__ import annotations

import os
import threading
import time

import pytest

from planner.solvers import SolveOptions, Termination, get_backend
from planner.solvers.cancel import CancelToken, SolveCancelled, cancellable
from tests.solvers.conftest import market_split

ENGINES = [("ortools", "scip"), ("ortools", "highs"), ("pulp", "highs"), ("pulp", "cbc")]
LONG = SolveOptions(time_limit_s=600, relative_gap=0.0)


@pytest.mark.parametrize("backend, engine", ENGINES)
def test_cancel_interrupts_a_running_solve(backend, engine):
    token, outcome = CancelToken(), []

    def solve() -> None:
        with cancellable(token):
            try:
                outcome.append(get_backend(backend).solve(market_split(), SolveOptions(**{**LONG.__dict__, "engine": engine})))
            except SolveCancelled as exc:
                outcome.append(exc)

    worker = threading.Thread(target=solve)
    worker.start()
    for _ in range(6000):  # until the solve registered its interrupt (a condition, not a delay)
        if token.solving:
            break
        worker.join(0.01)
    assert token.solving == 1
    token.cancel()
    worker.join(120)  # far below the 600 s limit: only the cancel can end it this soon
    assert not worker.is_alive() and isinstance(outcome[0], SolveCancelled), outcome
    assert token.solving == 0


@pytest.mark.parametrize("backend", ["ortools", "pulp"])
def test_a_cancelled_token_refuses_new_solves_and_none_means_no_change(backend, tiny):
    from planner.milp.build import BuildOptions, build_model

    wl, units, cands = tiny
    model = build_model(wl, units, cands, BuildOptions(objective="max_goodput"))
    token = CancelToken()
    token.cancel()
    with cancellable(token), pytest.raises(SolveCancelled):
        get_backend(backend).solve(model, SolveOptions())
    assert get_backend(backend).solve(model, SolveOptions(time_limit_s=120)).termination is Termination.OPTIMAL  # no token


def _cbc_processes() -> list[int]:
    """Pids of running CBC programs solving with a 600 s limit (what PuLP starts for LONG)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    words = f.read().split(b"\0")
                with open(f"/proc/{entry}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if words and words[0].endswith(b"/cbc") and b"600" in words and state != "Z":
                pids.append(int(entry))
    return pids


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_a_cancelled_cbc_solve_leaves_no_cbc_running():
    """PuLP runs CBC as a program of its own: killing the solver child must kill it too (its process group)."""
    before = set(_cbc_processes())
    token, outcome = CancelToken(), []

    def solve() -> None:
        with cancellable(token):
            try:
                outcome.append(get_backend("pulp").solve(market_split(), SolveOptions(**{**LONG.__dict__, "engine": "cbc"})))
            except SolveCancelled as exc:
                outcome.append(exc)

    worker = threading.Thread(target=solve)
    worker.start()
    for _ in range(6000):  # until CBC runs (a condition, not a delay)
        if set(_cbc_processes()) - before:
            break
        worker.join(0.01)
    started = set(_cbc_processes()) - before
    assert started, "CBC never started"
    token.cancel()
    worker.join(120)
    assert isinstance(outcome[0], SolveCancelled)
    for _ in range(500):  # the kill is asynchronous: give the kernel a bounded moment
        if not started & set(_cbc_processes()):
            break
        time.sleep(0.01)
    assert not started & set(_cbc_processes()), "CBC outlived its cancelled solve"
