"""The one Pareto frontier of siliconmix: which study scenarios no other scenario beats on both axes.

The report, its charts, the study workbook and ``scenarios.csv`` all ask this module, so they agree on
every frontier. Only scenarios that were solved *and meet demand* (goodput scale >= 1: the fleet serves
every class at its full rate) compete; a fleet that serves 6% of the traffic is cheap per token but is
not an answer to the workload.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

import numpy as np

Sense = Literal["max", "min"]
#: a plan with one of these statuses has numbers worth tabulating and comparing
OK_STATUSES = ("optimal", "feasible", "time_limit")
#: relative tolerance: values closer than this (solver round-off, ~1e-9 here) are equal, neither dominates
REL_TOL = 1e-6
#: goodput scale below 1 - this misses demand (the MILP meets λ = 1 to its feasibility tolerance)
DEMAND_TOL = 1e-6
#: challengers compared at once (memory ~ CHUNK x n x 2 floats)
CHUNK = 512


class FrontierLike(Protocol):
    """What a frontier needs: two result columns, their senses, an optional series axis and a label."""

    x: str
    y: str
    by: str | None

    @property
    def label(self) -> str: ...

    @property
    def senses(self) -> tuple[Sense, Sense]: ...


def finite(value: Any) -> bool:
    """A real number, not NaN or infinite (None and text are not)."""
    return isinstance(value, float | int) and not isinstance(value, bool) and math.isfinite(value)


def meets_demand(row: Mapping[str, Any]) -> bool:
    """Solved, and serving the workload's full rates: goodput_scale >= 1 − DEMAND_TOL.

    A table without a goodput_scale column cannot say otherwise, so its solved rows count as meeting it.
    """
    if row.get("status") not in OK_STATUSES:
        return False
    if "goodput_scale" not in row:
        return True
    scale = row["goodput_scale"]
    return finite(scale) and scale >= 1.0 - DEMAND_TOL


def pareto_mask(xs: Sequence[float], ys: Sequence[float], senses: tuple[Sense, Sense] = ("max", "max"),
                rel_tol: float = REL_TOL) -> list[bool]:
    """True for the non-dominated points; NaN points are never on the frontier.

    a dominates b when a is no worse than b on both axes and better on one, where "better" means by more
    than ``rel_tol · max(|a|, |b|)`` and "no worse" means not worse by more than that. Points equal within
    the tolerance do not dominate each other, so identical scenarios all stay.
    """
    sign = np.array([1.0 if s == "max" else -1.0 for s in senses])
    keep = [i for i, (x, y) in enumerate(zip(xs, ys)) if finite(x) and finite(y)]
    mask = [False] * len(xs)
    if not keep:
        return mask
    pts = np.array([[xs[i], ys[i]] for i in keep], dtype=float)
    dominated = np.zeros(len(pts), dtype=bool)
    for start in range(0, len(pts), CHUNK):  # a block of challengers at a time keeps memory linear in n
        block = pts[start:start + CHUNK, None, :]
        gain = (block - pts[None, :, :]) * sign  # gain[a, b, k]: how much challenger a beats b on axis k
        tol = rel_tol * np.maximum(np.abs(block), np.abs(pts[None, :, :]))
        dominated |= (np.all(gain >= -tol, axis=2) & np.any(gain > tol, axis=2)).any(axis=0)
    for i, flag in zip(keep, dominated):
        mask[i] = not bool(flag)
    return mask


def series_of(row: Mapping[str, Any], by: str | None) -> str:
    """The series a row belongs to: the value of the ``by`` axis, or 'all'."""
    return "all" if by is None else str(row[f"axis.{by}"])


def frontier_points(rows: Sequence[Mapping[str, Any]], frontier: FrontierLike) -> list[dict]:
    """Frontier rows (``series`` = the ``by`` axis value, or 'all'), each series sorted by x.

    Series come in the order of the axis values, solved or not; only rows that meet demand compete.
    """
    series: dict[str, list[Mapping[str, Any]]] = {series_of(r, frontier.by): [] for r in rows}
    for r in rows:
        if meets_demand(r):
            series[series_of(r, frontier.by)].append(r)
    out = []
    for name, members in series.items():
        mask = pareto_mask([r[frontier.x] for r in members], [r[frontier.y] for r in members], frontier.senses)
        on = sorted((r for r, m in zip(members, mask) if m), key=lambda r: r[frontier.x])
        out += [{"frontier": frontier.label, "series": name, "scenario": r["scenario"],
                 "x": r[frontier.x], "y": r[frontier.y]} for r in on]
    return out
