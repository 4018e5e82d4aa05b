"""Backends with an outcome fixed in advance (an engine failure, an unbounded model), to test where it goes.

``Failing`` and ``Unbounded`` answer every solve so; ``FailsTieBreak`` and ``FailsDiagnosis`` solve with
OR-Tools except the max_goodput power tie-break (λ bounded below) or the elastic diagnosis model (slack
variables), which fail.
"""

from __future__ import annotations

from planner.solvers.base import SolveResult, Termination
from planner.solvers.ortools_backend import OrtoolsBackend

REASON = "the engine ran out of memory"


class Failing:
    name = "fixed"
    engines = ("fixed",)
    default_engine = "fixed"
    termination = Termination.ERROR

    def solve(self, model, options):
        return SolveResult(self.termination, self.name, "fixed", message=REASON)


class Unbounded(Failing):
    termination = Termination.UNBOUNDED


class FailsTieBreak(OrtoolsBackend):
    def solve(self, model, options):
        if "scale" in model.blocks and model.var_lb[model.blocks["scale"]][0] > 0:
            return SolveResult(Termination.ERROR, self.name, "scip", message=REASON)
        return super().solve(model, options)


class FailsDiagnosis(OrtoolsBackend):
    def solve(self, model, options):
        if any(name.startswith("slack_") for name in model.blocks):
            return SolveResult(Termination.ERROR, self.name, "scip", message=REASON)
        return super().solve(model, options)
