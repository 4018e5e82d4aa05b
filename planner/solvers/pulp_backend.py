"""PuLP backend: the IlpModel through PuLP, HiGHS in-process (highspy) by default, CBC as the alternative.

Outcomes and bounds are what the engine that ran reports, never inferred from the clock or the objective:
HiGHS's model status, primal solution status and dual bound, read from the ``highspy.Highs`` PuLP solved
with; CBC's status line and the bound in its log (kept by ``cbc_run``, read by ``cbc_log``). PuLP's own
status codes are not used: it calls a stop on the time limit ``Optimal``. The engines see ``c·x`` only (PuLP gives HiGHS no
objective constant); the offset is added here, to the objective and the bound alike.
"""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass

import highspy
import numpy as np
import pulp

from planner.milp.model import IlpModel
from planner.solvers import cbc_log, cbc_run
from planner.solvers.base import SolveOptions, SolveResult, Termination, require_finite, settle_infeasible_or_unbounded

ENGINES = ("highs", "cbc")
_STATUS = highspy.HighsModelStatus
_HIGHS_TERMINATION: dict = {
    _STATUS.kOptimal: Termination.OPTIMAL,
    _STATUS.kTimeLimit: Termination.TIME_LIMIT,
    _STATUS.kInfeasible: Termination.INFEASIBLE,
    _STATUS.kUnbounded: Termination.UNBOUNDED,
    _STATUS.kUnboundedOrInfeasible: None,  # settled by a second solve
}
#: limits that end a solve short of its gap (FEASIBLE with an incumbent): the node limit (kSolutionLimit), and
#: others never set here
_HIGHS_LIMITS = {_STATUS.kIterationLimit, _STATUS.kSolutionLimit, _STATUS.kObjectiveBound, _STATUS.kObjectiveTarget}


@dataclass(frozen=True)
class _Report:
    """What the engine said: None as termination means "infeasible or unbounded"; bound in ``c·x``."""

    termination: Termination | None
    has_solution: bool
    bound: float | None
    message: str
    version: str


class PulpBackend:
    """Translation only: variables, rows and objective in, a SolveResult out."""

    name = "pulp"
    engines = ENGINES
    default_engine = "highs"

    def solve(self, model: IlpModel, options: SolveOptions) -> SolveResult:
        engine = options.engine or self.default_engine
        if engine not in ENGINES:
            raise ValueError(f"engine {engine!r} is not a PuLP engine; known: {', '.join(ENGINES)}")
        require_finite(model)
        start = time.perf_counter()
        problem, xs = _problem(model)
        try:
            with _stdout_to_stderr():
                report = (_solve_highs if engine == "highs" else _solve_cbc)(problem, options)
        except pulp.PulpSolverError as exc:  # CBC exited abnormally or wrote no solution
            return SolveResult(termination=Termination.ERROR, backend=self.name, engine=engine,
                               time_s=time.perf_counter() - start, message=str(exc), engine_version=f"pulp {pulp.__version__}")
        termination, message = report.termination, report.message
        if termination is None:
            termination = settle_infeasible_or_unbounded(self, model, options)
            message += f"; the same rows under a zero objective settled it: {termination.value}"
        x = np.asarray([v.varValue or 0.0 for v in xs]) if report.has_solution else None
        return SolveResult(
            termination=termination,
            backend=self.name,
            engine=engine,
            objective=float(model.objective @ x + model.objective_offset) if x is not None else None,
            bound=report.bound + model.objective_offset if report.bound is not None else None,
            x=x,
            time_s=time.perf_counter() - start,
            message=message,
            engine_version=report.version,
        )


def _problem(model: IlpModel) -> tuple[pulp.LpProblem, list]:
    """The PuLP problem of ``model`` (objective ``c·x``, no offset) and its variables in model order."""
    problem = pulp.LpProblem("siliconmix", pulp.LpMinimize)
    xs = [
        problem.add_variable(
            f"x{j}",
            lowBound=None if np.isinf(lb) else float(lb),
            upBound=None if np.isinf(ub) else float(ub),
            cat=pulp.LpInteger if is_int else pulp.LpContinuous,
        )
        for j, (lb, ub, is_int) in enumerate(zip(model.var_lb, model.var_ub, model.var_is_integer))
    ]
    problem += pulp.lpSum(float(c) * xs[j] for j, c in enumerate(model.objective) if c)
    order = np.argsort(model.row, kind="stable")
    starts = np.searchsorted(model.row[order], np.arange(model.n_rows + 1))
    for i in range(model.n_rows):
        idx = order[starts[i]:starts[i + 1]]
        expr = pulp.lpSum(float(v) * xs[j] for j, v in zip(model.col[idx], model.val[idx]))
        lo, hi = model.row_lo[i], model.row_hi[i]
        if lo == hi:
            problem += expr == float(lo), f"r{i}_eq"
            continue
        if np.isfinite(lo):
            problem += expr >= float(lo), f"r{i}_lo"
        if np.isfinite(hi):
            problem += expr <= float(hi), f"r{i}_hi"
    return problem, xs


def _solve_highs(problem: pulp.LpProblem, options: SolveOptions) -> _Report:
    """Solve with HiGHS and read its model status, solution status and dual bound from its Highs object."""
    try:  # PuLP passes HiGHS no option that is None (as it passes CBC no maxNodes in cbc_run)
        problem.solve(pulp.HiGHS(msg=False, timeLimit=options.time_limit_s, gapRel=options.relative_gap, gapAbs=0.0,
                                 threads=options.threads, random_seed=options.seed, mip_max_nodes=options.node_limit))
    except KeyError:  # PuLP 3.3 maps no status to HiGHS's node limit (coin-or/pulp#895), after it read the values
        if problem.solverModel is None or problem.solverModel.getModelStatus() != _STATUS.kSolutionLimit:
            raise
    highs = problem.solverModel
    status, info = highs.getModelStatus(), highs.getInfo()
    has_solution = info.primal_solution_status == highspy.SolutionStatus.kSolutionStatusFeasible
    termination = _HIGHS_TERMINATION.get(status, Termination.ERROR)
    if status in _HIGHS_LIMITS:
        termination = Termination.FEASIBLE if has_solution else (
            Termination.NODE_LIMIT if status == _STATUS.kSolutionLimit else Termination.ERROR)
    if problem.isMIP():
        bound = info.mip_dual_bound
    else:  # an optimal LP basis is dual feasible: its objective is the dual bound
        bound = info.objective_function_value if status == _STATUS.kOptimal else np.inf
    return _Report(termination, has_solution, float(bound) if np.isfinite(bound) else None,
                   f"HiGHS: {highs.modelStatusToString(status)}", f"pulp {pulp.__version__}, HiGHS {highs.version()}")


def _solve_cbc(problem: pulp.LpProblem, options: SolveOptions) -> _Report:
    """Solve with CBC; its status line says how it ended, its log what bound it proved and which CBC ran."""
    status_line, log = cbc_run.solve(problem, options)
    has_solution = problem.sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible)
    incumbent = pulp.value(problem.objective) if has_solution else None
    termination = cbc_log.termination_of(status_line, has_solution)
    if problem.isMIP():
        bound = cbc_log.mip_bound(log, incumbent)
    else:  # Clp's optimal LP is primal and dual feasible: its objective is the dual bound
        bound = incumbent if termination is Termination.OPTIMAL else None
    version = cbc_log.version_of(log)
    return _Report(termination, has_solution, bound, f"CBC: {status_line}",
                   f"pulp {pulp.__version__}, CBC {version or '(no banner in its log)'}")


@contextmanager
def _stdout_to_stderr():
    """Send what native solver code prints (HiGHS's banner) to stderr, keeping stdout clean for ``--json``."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
