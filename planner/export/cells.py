"""Small helpers to lay out sheets: columns with formats, and formulas written with their cached values."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from xlsxwriter.utility import xl_rowcol_to_cell


@dataclass(frozen=True)
class Column:
    """One column of a table: key, header text, width, and the number format of its cells."""

    key: str
    header: str
    width: float
    number: str = "text"
    role: str = "value"  # value | input | formula
    formula: str | None = None  # "=CEILING({devices}/{devices_per_node},1)": braces name same-row cells


def cell(row: int, col: int, absolute: bool = False) -> str:
    """A1 reference of zero-based (row, col)."""
    return xl_rowcol_to_cell(row, col, row_abs=absolute, col_abs=absolute)



#: points per line of wrapped 11-point text, and characters per unit of column width
LINE_POINTS = 15
CHARS_PER_WIDTH = 1.1


def wrapped_height(text: str, width: float) -> float:
    """Row height (points) that shows ``text`` wrapped in a column ``width`` characters wide."""
    lines = max(1, math.ceil(len(text) / max(1.0, width * CHARS_PER_WIDTH)))
    return LINE_POINTS * lines


def write_header(ws, row: int, columns: list[Column], style) -> None:
    """Header cells, widths, and a taller row so wrapped headers read."""
    for col, column in enumerate(columns):
        ws.write_string(row, col, column.header, style("header"))
        ws.set_column(col, col, column.width)
    ws.set_row(row, 45)


def put(ws, row: int, col: int, value: Any, fmt=None, formula: str | None = None) -> None:
    """Write a formula with its computed value as the cached result, or a plain value (None and NaN: blank)."""
    if formula is not None:
        ws.write_formula(row, col, formula, fmt, value)
    elif value is None or (isinstance(value, float) and not math.isfinite(value)):
        ws.write_blank(row, col, None, fmt)
    elif isinstance(value, bool):
        ws.write_string(row, col, "yes" if value else "no", fmt)
    elif isinstance(value, (int, float)):
        ws.write_number(row, col, value, fmt)
    else:
        ws.write_string(row, col, str(value), fmt)


def write_row(ws, row: int, columns: list[Column], values: dict[str, Any], style) -> dict[str, str]:
    """One table row: inputs and values as numbers, formulas with their cached values; returns key -> A1."""
    refs = {column.key: cell(row, col) for col, column in enumerate(columns)}
    for col, column in enumerate(columns):
        value = values.get(column.key)
        # a number the catalog does not know (a rack height) is a visible "n/a", neither a zero nor a formula
        if value is None and (column.formula is not None or column.role == "input"):
            ws.write_string(row, col, "n/a", style("note"))
            continue
        formula = column.formula.format(**refs) if column.formula else None
        put(ws, row, col, value, style(column.role, column.number), formula)
    return refs
