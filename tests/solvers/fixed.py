"""Backends with an outcome fixed in advance (an engine failure, an unbounded model), to test where it goes.

``Failing`` and ``Unbounded`` answer every solve so (``TimeLimitFindsNothing``, ``NodeLimitFindsNothing``: a
limit before any incumbent); ``FailsTieBreak`` and ``FailsDiagnosis`` solve with
OR-Tools except the max_goodput power tie-break (λ bounded below) or the elastic diagnosis model (slack
variables), which fail.
"""

from __future__ import annotations

from pathlib import Path

import planner
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


class Located(Failing):
    """Fails every solve; its name is the directory its process imported ``planner`` from."""

    name = str(Path(planner.__file__).resolve().parent)


class Unbounded(Failing):
    termination = Termination.UNBOUNDED


class TimeLimitFindsNothing(Failing):
    """Every solve stops on its time limit before any incumbent."""

    termination = Termination.TIME_LIMIT


class NodeLimitFindsNothing(Failing):
    """Every solve stops on its node limit before any incumbent."""

    termination = Termination.NODE_LIMIT


class Placed(Failing):
    """Fails every solve; its message says whether ``in_child()`` holds where it ran."""

    def solve(self, model, options):
        from planner.solvers.isolated import in_child

        return SolveResult(self.termination, self.name, "fixed", message=f"in_child: {in_child()}")


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


class TieBreakFindsNothing(OrtoolsBackend):
    """OR-Tools, except that the max_goodput power tie-break (λ bounded below) stops on its time limit with no
    incumbent."""

    def solve(self, model, options):
        if "scale" in model.blocks and model.var_lb[model.blocks["scale"]][0] > 0:
            return SolveResult(Termination.TIME_LIMIT, self.name, "scip", message="time limit, no incumbent")
        return super().solve(model, options)
