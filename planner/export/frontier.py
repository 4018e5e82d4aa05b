"""Study results as rows, and the frontier of non-dominated scenarios (pure: no files)."""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

#: the main frontier: throughput per MW against interactivity, both maximised.
FRONTIER_X = "output_tokens_per_s_per_user"
FRONTIER_Y = "tokens_per_s_per_mw"
#: scenarios with these statuses served nothing a frontier could use.
FAILED_STATUSES = frozenset({"infeasible", "error", "failed", "cancelled", "skipped"})
#: columns kept as text even when their values look like numbers (a hex hash can be all digits).
TEXT_COLUMNS = frozenset({"scenario", "hash", "status", "reason", "devices_by_type", "baseline_device"})


def parse_value(column: str, text: str) -> Any:
    """A CSV field as a number where it is one; empty is None; text columns stay text."""
    if text == "":
        return None
    if column in TEXT_COLUMNS:
        return text
    try:
        number = float(text)
    except ValueError:
        return text
    return int(number) if number.is_integer() and "." not in text and "e" not in text.lower() else number


def is_plottable(row: Mapping[str, Any], x: str = FRONTIER_X, y: str = FRONTIER_Y) -> bool:
    """A scenario that served traffic: not failed, with finite positive x and y."""
    if str(row.get("status", "")).lower() in FAILED_STATUSES:
        return False
    return all(isinstance(row.get(k), (int, float)) and math.isfinite(row[k]) and row[k] > 0 for k in (x, y))


def frontier_indices(rows: Sequence[Mapping[str, Any]], x: str = FRONTIER_X, y: str = FRONTIER_Y) -> list[int]:
    """Indices of the plottable rows no other plottable row dominates (both maximised), by ascending x.

    Row a dominates b when a.x >= b.x and a.y >= b.y with one strictly greater; equal points both stay.
    """
    candidates = sorted((i for i, row in enumerate(rows) if is_plottable(row, x, y)),
                        key=lambda i: (-rows[i][x], -rows[i][y]))
    kept: list[int] = []
    best_y = -math.inf
    previous: tuple[float, float] | None = None
    for i in candidates:
        point = (rows[i][x], rows[i][y])
        if point[1] > best_y or point == previous:
            kept.append(i)
            best_y = max(best_y, point[1])
            previous = point
    return sorted(kept, key=lambda i: (rows[i][x], -rows[i][y]))
