"""OR-Tools backend: the IlpModel through MathOpt, SCIP by default (HiGHS as the alternative engine).

Under a cancel token (``planner.solvers.cancel``: the server) the solve runs in a child process
(``planner.solvers.isolated``) that a cancel kills: MathOpt's HiGHS ignores its SolveInterrupter and SCIP's
event handler rejects it, so killing is the one interrupt that works for both.
"""

from __future__ import annotations

import time
from datetime import timedelta

import numpy as np
from ortools.init.python import init
from ortools.math_opt.python import mathopt

from planner.milp.model import IlpModel
from planner.solvers.base import SolveOptions, SolveResult, Termination, require_finite, settle_infeasible_or_unbounded
from planner.solvers.cancel import current_token
from planner.solvers.isolated import IsolatedBackend, in_child

ENGINES = {"scip": mathopt.SolverType.GSCIP, "highs": mathopt.SolverType.HIGHS}
TARGET = "planner.solvers.ortools_backend:OrtoolsBackend"
_REASONS = {
    mathopt.TerminationReason.OPTIMAL: Termination.OPTIMAL,
    mathopt.TerminationReason.INFEASIBLE: Termination.INFEASIBLE,
    mathopt.TerminationReason.UNBOUNDED: Termination.UNBOUNDED,
}


def _finite(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


class OrtoolsBackend:
    """Translation only: variables, rows and objective in, a SolveResult out."""

    name = "ortools"
    engines = tuple(ENGINES)
    default_engine = "scip"

    def solve(self, model: IlpModel, options: SolveOptions) -> SolveResult:
        engine = options.engine or self.default_engine
        if engine not in ENGINES:
            raise ValueError(f"engine {engine!r} is not an OR-Tools engine; known: {', '.join(ENGINES)}")
        require_finite(model)
        if current_token() is not None and not in_child():
            return IsolatedBackend(self.name, TARGET).solve(model, options)  # killable there
        start = time.perf_counter()
        mo = mathopt.Model(name="siliconmix")
        xs = [
            mo.add_variable(lb=float(lb), ub=float(ub), is_integer=bool(is_int), name=name)
            for name, lb, ub, is_int in zip(model.var_names, model.var_lb, model.var_ub, model.var_is_integer)
        ]
        order = np.argsort(model.row, kind="stable")
        starts = np.searchsorted(model.row[order], np.arange(model.n_rows + 1))
        for i, name in enumerate(model.row_names):
            idx = order[starts[i]:starts[i + 1]]
            expr = mathopt.LinearSum(float(v) * xs[j] for j, v in zip(model.col[idx], model.val[idx]))
            mo.add_linear_constraint(lb=float(model.row_lo[i]), ub=float(model.row_hi[i]), expr=expr, name=name)
        mo.minimize(mathopt.LinearSum(float(c) * x for c, x in zip(model.objective, xs) if c) + model.objective_offset)
        params = mathopt.SolveParameters(
            time_limit=timedelta(seconds=options.time_limit_s),
            node_limit=options.node_limit,
            relative_gap_tolerance=options.relative_gap,
            absolute_gap_tolerance=0.0,
            # HiGHS takes its thread count from globals only and is deterministic single-threaded
            threads=None if engine == "highs" else options.threads,
            random_seed=options.seed,
        )
        hints = None
        if options.hint is not None:
            hints = mathopt.ModelSolveParameters(solution_hints=[mathopt.SolutionHint(
                variable_values={x: float(v) for x, v in zip(xs, options.hint)})])
        result = mathopt.solve(mo, ENGINES[engine], params=params, model_params=hints)
        termination, message = self._termination(result), result.termination.detail or result.termination.reason.name
        if result.termination.reason == mathopt.TerminationReason.INFEASIBLE_OR_UNBOUNDED:
            termination = settle_infeasible_or_unbounded(self, model, options)
            message += f"; the same rows under a zero objective settled it: {termination.value}"
        elapsed = time.perf_counter() - start
        has_solution = result.has_primal_feasible_solution()
        x = np.asarray([result.variable_values(v) for v in xs]) if has_solution else None
        return SolveResult(
            termination=termination,
            backend=self.name,
            engine=engine,
            objective=float(result.objective_value()) if has_solution else None,
            bound=_finite(result.termination.objective_bounds.dual_bound),
            x=x,
            time_s=elapsed,
            message=message,
            engine_version=f"ortools {init.OrToolsVersion.version_string()}",
        )

    @staticmethod
    def _termination(result) -> Termination:
        reason = result.termination.reason
        if reason in _REASONS:
            return _REASONS[reason]
        limit = result.termination.limit
        if reason in (mathopt.TerminationReason.FEASIBLE, mathopt.TerminationReason.NO_SOLUTION_FOUND):
            if limit == mathopt.Limit.TIME:
                return Termination.TIME_LIMIT
            if result.has_primal_feasible_solution():
                return Termination.FEASIBLE  # short of the gap: a node limit (the only other limit set here)
            return Termination.NODE_LIMIT if limit == mathopt.Limit.NODE else Termination.ERROR
        return Termination.ERROR
