"""PuLP backend: the IlpModel through PuLP, HiGHS in-process (highspy) by default, CBC as fallback.

Outcomes are read from ``sol_status``, never ``status``: with a time limit and an incumbent, PuLP
reports ``status == Optimal`` but ``sol_status == IntegerFeasible``.
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from contextlib import contextmanager
from importlib.metadata import version

import numpy as np
import pulp

from planner.milp.model import IlpModel
from planner.solvers.base import SolveOptions, SolveResult, Termination, require_finite

ENGINES = ("highs", "cbc")


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
        problem += pulp.lpSum(float(c) * xs[j] for j, c in enumerate(model.objective) if c) + model.objective_offset
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
        solver = self._solver(engine, options)
        with _stdout_to_stderr():
            problem.solve(solver)
        elapsed = time.perf_counter() - start
        sol_status = problem.sol_status
        has_solution = sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible)
        x = np.asarray([v.varValue or 0.0 for v in xs]) if has_solution else None
        objective = float(model.objective @ x + model.objective_offset) if x is not None else None
        return SolveResult(
            termination=self._termination(sol_status, elapsed, options),
            backend=self.name,
            engine=engine,
            objective=objective,
            bound=self._bound(problem, engine, objective, sol_status),
            x=x,
            time_s=elapsed,
            message=pulp.LpStatus[problem.status],
            engine_version=f"pulp {pulp.__version__}" + (f", highspy {version('highspy')}" if engine == "highs" else ""),
        )

    @staticmethod
    def _solver(engine: str, options: SolveOptions):
        if engine == "highs":
            return pulp.HiGHS(
                msg=False, timeLimit=options.time_limit_s, gapRel=options.relative_gap, gapAbs=0.0,
                threads=options.threads, random_seed=options.seed,
            )
        with warnings.catch_warnings():
            # the CBC binary bundled with pulp 3.x; deprecated only for pulp 4, which needs Python 3.12
            warnings.simplefilter("ignore", DeprecationWarning)
            return pulp.PULP_CBC_CMD(
                msg=False, timeLimit=options.time_limit_s, gapRel=options.relative_gap, threads=options.threads,
                options=[f"randomSeed {options.seed}", f"randomCbcSeed {options.seed}"],
            )

    @staticmethod
    def _termination(sol_status: int, elapsed: float, options: SolveOptions) -> Termination:
        if sol_status == pulp.LpSolutionOptimal:
            return Termination.OPTIMAL
        if sol_status == pulp.LpSolutionIntegerFeasible:
            return Termination.TIME_LIMIT if elapsed >= 0.95 * options.time_limit_s else Termination.FEASIBLE
        if sol_status == pulp.LpSolutionInfeasible:
            return Termination.INFEASIBLE
        if sol_status == pulp.LpSolutionUnbounded:
            return Termination.UNBOUNDED
        return Termination.TIME_LIMIT if elapsed >= 0.95 * options.time_limit_s else Termination.ERROR

    @staticmethod
    def _bound(problem, engine: str, objective: float | None, sol_status: int) -> float | None:
        """HiGHS reports its dual bound; CBC through PuLP reports none."""
        if engine == "highs" and getattr(problem, "solverModel", None) is not None:
            info = problem.solverModel.getInfo()
            bound = info.mip_dual_bound if problem.isMIP() else info.objective_function_value
            if np.isfinite(bound):
                return float(bound)
        return objective if sol_status == pulp.LpSolutionOptimal and engine == "highs" else None


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
