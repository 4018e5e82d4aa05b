"""The Sensitivity sheet of a plan workbook: each estimated input moved by −δ and +δ, and what the re-solve did.

The moved values and the objective changes are formulas (``=base·factor``, ``=(objective − plan's)/plan's``)
over the plan's objective and each re-solve's, written with their computed values; the re-solves' objectives
and fleets are numbers and text from the plan's ``sensitivity`` section.
"""

from __future__ import annotations

from planner.export.cells import Column, cell, wrapped_height, write_header, write_row
from planner.export.mix import mix_text
from planner.schema import Sensitivity, SensitivityInput, SensitivitySide

SENSITIVITY_SHEET = "Sensitivity"
#: rows above the table: title, the plan's objective, a note
HEADER_ROW = 4
OBJECTIVE_CELL = cell(1, 1, absolute=True)
SOURCE_WIDTH = 70


def side_columns(sign: str, key: str) -> list[Column]:
    """The columns of one side (``low`` or ``high``) of the table."""
    return [
        Column(f"{key}_factor", f"Factor {sign}δ", 9, "dec3"),
        Column(f"{key}_value", f"Value {sign}δ", 12, "general", "formula", f"={{base}}*{{{key}_factor}}"),
        Column(f"{key}_objective", f"Objective {sign}δ", 12, "dec3"),
        Column(f"{key}_change", f"Objective change {sign}δ", 12, "pct2", "formula",
               f"=({{{key}_objective}}-{OBJECTIVE_CELL})/{OBJECTIVE_CELL}"),
        Column(f"{key}_mix", f"Fleet {sign}δ", 30),
        Column(f"{key}_status", f"Status {sign}δ", 10),
    ]


COLUMNS = [
    Column("key", "Input", 40),
    Column("estimate", "Estimate", 9),
    Column("devices", "Moves the number of", 24),
    Column("base", "Catalog value", 12, "general"),
    *side_columns("−", "low"),
    *side_columns("+", "high"),
    Column("flips_mix", "Flips the mix", 9),
    Column("moves_objective", "Moves the objective", 10),
    Column("source", "Source", SOURCE_WIDTH, role="note_wrap"),
]


def side_values(key: str, side: SensitivitySide) -> dict[str, object]:
    change = side.objective_change_pct / 100.0 if side.objective_change_pct is not None else None
    return {f"{key}_factor": side.factor, f"{key}_value": side.value, f"{key}_objective": side.objective_value,
            f"{key}_change": change, f"{key}_mix": mix_text(side.devices_by_type), f"{key}_status": side.status}


def row_values(row: SensitivityInput) -> dict[str, object]:
    return {"key": row.key, "estimate": row.estimate, "devices": ", ".join(row.devices), "base": row.base_value,
            **side_values("low", row.low), **side_values("high", row.high), "flips_mix": row.flips_mix,
            "moves_objective": row.moves_objective, "source": row.source}


def write_sensitivity_sheet(ws, style, section: Sensitivity) -> None:
    """Title, the plan's objective (the cell every change refers to), then one row per input and what was not tried."""
    ws.write_string(0, 0, f"Sensitivity: each input moved by ±{section.delta:.0%} and the plan re-solved "
                          f"({section.resolves} re-solves)", style("title"))
    ws.write_string(1, 0, f"Plan's objective ({section.objective_quantity})", style("label"))
    ws.write_number(1, 1, section.objective_value, style("value", "dec3"))
    ws.write_string(2, 0, f"Flagged: the device-count shares move by at least {section.share_threshold:.0%} "
                          f"(total-variation distance) or the objective by more than {section.threshold:.0%}.",
                    style("note"))
    write_header(ws, HEADER_ROW, COLUMNS, style)
    ws.freeze_panes(HEADER_ROW + 1, 1)
    for offset, row in enumerate(section.inputs, start=1):
        role = "flagged" if row.sensitive else "value"
        write_row(ws, HEADER_ROW + offset, COLUMNS, row_values(row), style)
        ws.write_string(HEADER_ROW + offset, 0, row.key, style(role))
        ws.set_row(HEADER_ROW + offset, wrapped_height(row.source, SOURCE_WIDTH))
    below = HEADER_ROW + len(section.inputs) + 2
    for offset, skipped in enumerate(section.not_tried):
        ws.write_string(below + offset, 0, f"Not tried: {skipped.key} ({skipped.reason})", style("note"))
