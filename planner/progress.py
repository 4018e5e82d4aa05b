"""Reporting how far a plan got, to a caller watching from another thread.

A caller that shows progress (the REST service's plan jobs) runs ``plan_workload`` ``with observed(callback)``;
the planner calls ``report(Progress(...))`` at each stage boundary it passes. Without an observer nothing
happens (the CLI sets none). The planner has no solver callback: incumbent, bound and gap are those of the
last finished MILP solve, not of one still running. ``best`` builds the best plan found so far (pure
computation, on demand), so a caller that cancels the rest of the work can keep it.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterator

if TYPE_CHECKING:
    from planner.schema import Plan

#: the stages in the order a plan passes them (``tie_break`` only for max_goodput, ``baseline`` and ``sensitivity``,
#: reported once per input it moves, only when asked)
STAGES = ("candidates", "solve", "tie_break", "baseline", "verify", "sensitivity")


@dataclass(frozen=True)
class Progress:
    """The stage that starts now, what is known when it starts, and the best plan so far (if any)."""

    stage: str
    candidates: int | None = None
    incumbent: float | None = None  # objective of the best solution so far (the MILP's own units)
    bound: float | None = None
    gap: float | None = None
    best: Callable[[], "Plan"] | None = None


_OBSERVER: ContextVar[Callable[[Progress], None] | None] = ContextVar("siliconmix_progress", default=None)


@contextmanager
def observed(callback: Callable[[Progress], None]) -> Iterator[None]:
    """Plans made in this context report their stages to ``callback`` (which must not raise)."""
    reset = _OBSERVER.set(callback)
    try:
        yield
    finally:
        _OBSERVER.reset(reset)


def report(progress: Progress) -> None:
    callback = _OBSERVER.get()
    if callback is not None:
        callback(progress)
