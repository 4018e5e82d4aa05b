"""Backend protocol, options and the result every backend returns (never None)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Protocol

import numpy as np

from planner.milp.model import IlpModel


class Termination(str, Enum):
    """How a solve ended, as the engine reported it (never inferred from the clock)."""

    OPTIMAL = "optimal"  # the engine proved the incumbent within the requested relative gap
    FEASIBLE = "feasible"  # stopped with an incumbent by a limit other than time (the engine names which)
    TIME_LIMIT = "time_limit"  # stopped by the time limit; x holds the incumbent if there is one
    NODE_LIMIT = "node_limit"  # stopped by the node limit before any incumbent (with one: FEASIBLE)
    INFEASIBLE = "infeasible"
    UNBOUNDED = "unbounded"
    ERROR = "error"  # the engine failed (or its process died): it says nothing about the model


@dataclass(frozen=True)
class SolveOptions:
    """Engine-independent knobs. One thread and a fixed seed keep results deterministic."""

    time_limit_s: float = 5.0
    relative_gap: float = 1e-4
    threads: int = 1
    seed: int = 7
    engine: str | None = None  # backend-specific engine name; None picks the backend's default
    #: branch-and-bound nodes a MILP may explore (None: no limit): a work limit, so where it binds first the answer
    #: does not depend on the machine's load as a time limit's does
    node_limit: int | None = None
    #: a feasible point (aligned with ``IlpModel.var_names``) the engine may start from; a hint, never a constraint
    #: (OR-Tools passes it to its engine; PuLP ignores it)
    hint: np.ndarray | None = field(default=None, compare=False)


@dataclass(frozen=True)
class SolveResult:
    """Outcome of one solve; ``x`` is aligned with ``IlpModel.var_names`` (None without a solution)."""

    termination: Termination
    backend: str
    engine: str
    objective: float | None = None
    bound: float | None = None
    x: np.ndarray | None = None
    time_s: float = 0.0
    message: str = ""
    engine_version: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def has_solution(self) -> bool:
        return self.x is not None

    @property
    def gap(self) -> float | None:
        """Relative gap ``|obj − bound| / max(1e-9, |obj|)`` (None when the engine gives no bound)."""
        if self.objective is None or self.bound is None or not np.isfinite(self.bound):
            return None
        return abs(self.objective - self.bound) / max(1e-9, abs(self.objective))


class SolverFailed(RuntimeError):
    """A solve that answered nothing about the workload: the engine failed, or called a placement MILP unbounded
    (every one is bounded by its power budget, so that is a modelling bug). Not an infeasible answer."""

    def __init__(self, message: str, termination: Termination = Termination.ERROR):
        super().__init__(message)
        self.termination = termination

    def __reduce__(self):  # pickled across process pools with its termination
        return type(self), (str(self), self.termination)


def check_outcome(result: SolveResult) -> SolveResult:
    """``result``, unless the engine failed or found the model unbounded: then SolverFailed saying so."""
    who = f"{result.backend}/{result.engine}"
    if result.termination is Termination.ERROR:
        raise SolverFailed(f"the solver failed ({who}): {result.message or 'it gave no reason'}")
    if result.termination is Termination.UNBOUNDED:
        raise SolverFailed(f"{who} found the placement MILP unbounded: a modelling bug in siliconmix (a power budget "
                           "bounds every plan), not an answer about the workload; please report it with the workload",
                           Termination.UNBOUNDED)
    return result


def settle_infeasible_or_unbounded(backend: Backend, model: IlpModel, options: SolveOptions) -> Termination:
    """What an engine that could only say "infeasible or unbounded" meant: the same rows under a zero objective
    are infeasible (so is the model) or have a solution (then the objective is unbounded)."""
    if not model.objective.any():
        return Termination.ERROR  # a zero objective cannot be unbounded: the engine contradicts itself
    probe = backend.solve(replace(model, objective=np.zeros_like(model.objective)), options)  # its value is never read
    if probe.termination is Termination.INFEASIBLE:
        return Termination.INFEASIBLE
    if probe.has_solution:
        return Termination.UNBOUNDED
    return probe.termination  # no point and not infeasible: a limit passed first, or the engine failed


def require_finite(model: IlpModel) -> None:
    """Raise ValueError naming the first non-finite coefficient, objective term or row bound (bounds may be ±inf,
    never NaN); the engines answer such a model with errors of their own words, or crash."""
    for j in np.flatnonzero(~np.isfinite(model.objective)):
        raise ValueError(f"the MILP's objective has a non-finite coefficient on {model.var_names[j]}")
    for k in np.flatnonzero(~np.isfinite(model.val)):
        raise ValueError(f"MILP row {model.row_names[model.row[k]]} has a non-finite coefficient on "
                         f"{model.var_names[model.col[k]]}; an input is infinite or not a number")
    for i in np.flatnonzero(np.isnan(model.row_lo) | np.isnan(model.row_hi) | (model.row_lo == np.inf) | (model.row_hi == -np.inf)):
        raise ValueError(f"MILP row {model.row_names[i]} has a bound that is not a number or infinite on the wrong side")
    if not np.isfinite(model.objective_offset):
        raise ValueError("the MILP's objective offset is not finite")


class Backend(Protocol):
    """A solver backend: translation only, no modelling decisions."""

    name: str
    engines: tuple[str, ...]
    default_engine: str

    def solve(self, model: IlpModel, options: SolveOptions) -> SolveResult: ...


#: backend name -> module:attribute, imported lazily so one missing library does not break the other.
BACKENDS: dict[str, str] = {
    "ortools": "planner.solvers.ortools_backend:OrtoolsBackend",
    "pulp": "planner.solvers.pulp_backend:PulpBackend",
}
#: backends that solve in a child process (planner.solvers.isolated): PuLP loads highspy's HiGHS, which must
#: never share a process with the HiGHS inside OR-Tools
IN_CHILD = frozenset({"pulp"})


def get_backend(name: str) -> Backend:
    """The backend called ``name`` (``ortools`` in this process; ``pulp`` in a child process)."""
    if name not in BACKENDS:
        raise ValueError(f"unknown solver {name!r}; known: {', '.join(BACKENDS)}")
    if name in IN_CHILD:
        from planner.solvers.isolated import IsolatedBackend

        return IsolatedBackend(name, BACKENDS[name])
    module_name, attr = BACKENDS[name].split(":")
    return getattr(importlib.import_module(module_name), attr)()
