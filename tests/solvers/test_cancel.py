"""A cancelled token stops the solve running under it (every engine), and every solve started after it."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from planner.milp.model import IlpModel
from planner.solvers import SolveOptions, Termination, get_backend
from planner.solvers.cancel import CancelToken, SolveCancelled, cancellable

ENGINES = [("ortools", "scip"), ("ortools", "highs"), ("pulp", "highs"), ("pulp", "cbc")]
LONG = SolveOptions(time_limit_s=600, relative_gap=0.0)


def market_split(rows: int = 5, columns: int = 40, seed: int = 1) -> IlpModel:
    """Cornuéjols–Dawande market split: binary x with Σ a_ij x_j = ⌊Σ_j a_ij / 2⌋ (slack penalised), a_ij in
    [0, 99]. Branch and bound needs far longer than any test waits for this size (every engine hits its limit)."""
    a = np.random.default_rng(seed).integers(0, 100, size=(rows, columns))
    target = (a.sum(axis=1) // 2).astype(float)
    n = columns + 2 * rows
    row = np.concatenate([np.repeat(np.arange(rows), columns), np.arange(rows), np.arange(rows)])
    col = np.concatenate([np.tile(np.arange(columns), rows), columns + np.arange(rows), columns + rows + np.arange(rows)])
    val = np.concatenate([a.ravel().astype(float), np.ones(rows), -np.ones(rows)])
    return IlpModel(var_names=tuple(f"x{j}" for j in range(n)), var_lb=np.zeros(n),
                    var_ub=np.r_[np.ones(columns), np.full(2 * rows, np.inf)],
                    var_is_integer=np.r_[np.ones(columns, bool), np.zeros(2 * rows, bool)],
                    objective=np.r_[np.zeros(columns), np.ones(2 * rows)], row_names=tuple(f"r{i}" for i in range(rows)),
                    row_lo=target, row_hi=target, row=row, col=col, val=val)


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
    assert get_backend(backend).solve(model, SolveOptions()).termination is Termination.OPTIMAL  # no token here
