"""The workbook of a study: one row per scenario, and the main frontier as a native Excel scatter chart."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import xlsxwriter

from planner.export.cells import cell, put
from planner.export.frontier import FRONTIER_X, FRONTIER_Y, frontier_indices, is_plottable, parse_value
from planner.export.styles import Styles

RESULTS_FILE = "results.csv"
SCENARIOS_SHEET = "Scenarios"
FRONTIER_SHEET = "Frontier"
REQUIRED_COLUMNS = ("scenario", "status", FRONTIER_X, FRONTIER_Y)
#: frontier table: scenario, its axes, then these result columns.
FRONTIER_COLUMNS = (FRONTIER_X, FRONTIER_Y, "output_tokens_per_s", "power_kw", "cost_usd_per_hour",
                    "usd_per_million_tokens", "devices", "devices_by_type")
HEADERS = {
    FRONTIER_X: "Output tokens/s per user", FRONTIER_Y: "Output tokens/s per MW",
    "output_tokens_per_s": "Output tokens/s", "power_kw": "Power (kW)", "cost_usd_per_hour": "$/h",
    "usd_per_million_tokens": "$/M tokens", "devices": "Devices", "devices_by_type": "Devices by type",
}
MAX_LABELLED_POINTS = 30


class StudyResultsError(ValueError):
    """A study folder without a readable results table; the message names the file."""


@dataclass(frozen=True)
class StudyTable:
    """The results table: columns in file order, rows as mappings with numbers parsed."""

    columns: list[str]
    rows: list[dict[str, Any]]
    raw_rows: list[dict[str, str]]

    @property
    def axes(self) -> list[str]:
        return [c for c in self.columns if c.startswith("axis.")]


def read_results(folder: str | Path) -> StudyTable:
    """Read ``results.csv`` of a study output folder."""
    path = Path(folder) / RESULTS_FILE
    if not path.is_file():
        raise StudyResultsError(f"{folder}: not a study output folder (no {RESULTS_FILE})")
    try:
        with path.open(newline="") as handle:
            reader = csv.DictReader(handle)
            columns = list(reader.fieldnames or [])
            raw = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise StudyResultsError(f"{path}: cannot read ({exc})") from exc
    missing = [c for c in REQUIRED_COLUMNS if c not in columns]
    if missing:
        raise StudyResultsError(f"{path}: missing columns {', '.join(missing)}")
    raw = [{c: (r.get(c) or "").strip() for c in columns} for r in raw]
    return StudyTable(columns, [{c: parse_value(c, r[c]) for c in columns} for r in raw], raw)


def number_format(column: str) -> str:
    """A column's number format from its name (units are in the names)."""
    name = column.removeprefix("axis.")
    rules = (
        (("usd_per_million_tokens",), "usd3"), (("capex_usd",), "usd"), (("_usd_per_hour", "_usd"), "usd2"),
        (("_per_user",), "dec1"), (("tokens_per_s", "tokens_per_s_per_mw"), "int"), (("_kw",), "dec1"),
        (("_ms",), "dec1"), (("_rps",), "dec2"), (("goodput_scale",), "dec3"), (("gain",), "gain"),
        (("_s",), "dec2"), (("devices",), "int"),
    )
    for suffixes, number in rules:
        if any(name.endswith(s) for s in suffixes):
            return number
    return "text"


def write_study_workbook(table: StudyTable, path: str | Path, title: str = "") -> list[int]:
    """Write Scenarios and Frontier sheets; returns the frontier's row indices into ``table.rows``."""
    frontier = frontier_indices(table.rows)
    buffer = io.BytesIO()  # built in memory, so a failed write is one OSError (no half-closed zip)
    workbook = xlsxwriter.Workbook(buffer, {"in_memory": True})
    style = Styles(workbook)
    scenarios = workbook.add_worksheet(SCENARIOS_SHEET)
    front = workbook.add_worksheet(FRONTIER_SHEET)
    _write_scenarios(scenarios, style, table, set(frontier))
    _write_frontier(workbook, front, style, table, frontier, title)
    for ws in (scenarios, front):
        ws.set_landscape()
        ws.fit_to_pages(1, 0)
    workbook.set_properties({"title": f"siliconmix study {title}".strip(), "subject": "study results"})
    workbook.close()
    Path(path).write_bytes(buffer.getvalue())
    return frontier


def write_scenarios_csv(table: StudyTable, path: str | Path) -> Path:
    """The results as read (fields unchanged) with a ``frontier`` column: True on the non-dominated scenarios."""
    on_front = set(frontier_indices(table.rows))
    path = Path(path)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=[*table.columns, "frontier"])
        writer.writeheader()
        for i, raw in enumerate(table.raw_rows):
            writer.writerow({**raw, "frontier": i in on_front})
    return path


def _write_scenarios(ws, style, table: StudyTable, on_front: set[int]) -> None:
    columns = [*table.columns, "frontier"]
    for col, name in enumerate(columns):
        ws.write_string(0, col, name, style("header"))
        ws.set_column(col, col, max(10, min(len(name) + 2, 28)) if name != "devices_by_type" else 30)
    ws.set_row(0, 30)
    ws.freeze_panes(1, 1)
    for row, values in enumerate(table.rows, start=1):
        for col, name in enumerate(table.columns):
            put(ws, row, col, values[name], style("value", number_format(name) if name not in ("hash",) else "text"))
        ws.write_string(row, len(table.columns), "yes" if row - 1 in on_front else "no",
                        style("label" if row - 1 in on_front else "value"))
    ws.autofilter(0, 0, max(len(table.rows), 1), len(columns) - 1)


def _write_frontier(workbook, ws, style, table: StudyTable, frontier: list[int], title: str) -> None:
    plottable = [i for i, row in enumerate(table.rows) if is_plottable(row)]
    ws.write_string(0, 0, f"Frontier {title}".strip() + f": {len(frontier)} non-dominated of {len(plottable)} "
                    f"feasible scenarios ({len(table.rows)} in all); output tokens/s per MW against output tokens/s "
                    "per user, both maximised", style("title"))
    columns = ["scenario", *table.axes, *[c for c in FRONTIER_COLUMNS if c in table.columns]]
    header = 2
    for col, name in enumerate(columns):
        ws.write_string(header, col, HEADERS.get(name, name), style("header"))
        ws.set_column(col, col, 30 if name == "devices_by_type" else max(12, min(len(name) + 2, 24)))
    ws.set_row(header, 30)
    ws.freeze_panes(header + 1, 1)
    for row, index in enumerate(frontier, start=header + 1):
        for col, name in enumerate(columns):
            put(ws, row, col, table.rows[index][name], style("value", number_format(name)))
    # all feasible scenarios, contiguous for the chart's second series (failed ones would plot at zero)
    data_col = len(columns) + 1
    ws.write_string(header - 1, data_col, "All feasible scenarios (chart data)", style("section"))
    for offset, name in enumerate(("scenario", FRONTIER_X, FRONTIER_Y)):
        ws.write_string(header, data_col + offset, HEADERS.get(name, name), style("header"))
        ws.set_column(data_col + offset, data_col + offset, 16)
    for row, index in enumerate(plottable, start=header + 1):
        for offset, name in enumerate(("scenario", FRONTIER_X, FRONTIER_Y)):
            put(ws, row, data_col + offset, table.rows[index][name], style("value", number_format(name)))
    if plottable:
        chart = _frontier_chart(workbook, columns, frontier, len(plottable), header, data_col)
        ws.insert_chart(header + len(frontier) + 3, 0, chart)


def _frontier_chart(workbook, columns: list[str], frontier: list[int], feasible: int, header: int, data_col: int):
    """Scatter chart: every feasible scenario as a marker, the frontier as a line through its scenarios."""
    sheet = f"'{FRONTIER_SHEET}'"
    x_col, y_col = columns.index(FRONTIER_X), columns.index(FRONTIER_Y)
    first, last = header + 1, header + feasible
    chart = workbook.add_chart({"type": "scatter"})
    chart.add_series({
        "name": "All feasible scenarios",
        "categories": f"={sheet}!{cell(first, data_col + 1, True)}:{cell(last, data_col + 1, True)}",
        "values": f"={sheet}!{cell(first, data_col + 2, True)}:{cell(last, data_col + 2, True)}",
        "marker": {"type": "circle", "size": 5, "fill": {"color": "#A6A6A6"}, "border": {"color": "#7F7F7F"}},
    })
    if frontier:
        end = header + len(frontier)
        series = {
            "name": "Frontier (non-dominated)",
            "categories": f"={sheet}!{cell(first, x_col, True)}:{cell(end, x_col, True)}",
            "values": f"={sheet}!{cell(first, y_col, True)}:{cell(end, y_col, True)}",
            "line": {"color": "#1F4E79", "width": 2},
            "marker": {"type": "diamond", "size": 8, "fill": {"color": "#1F4E79"}, "border": {"color": "#1F4E79"}},
        }
        if len(frontier) <= MAX_LABELLED_POINTS:
            series["data_labels"] = {"value": True, "position": "right", "custom": [
                {"value": f"={sheet}!{cell(row, 0, True)}"} for row in range(first, end + 1)]}
        chart.add_series(series)
    chart.set_title({"name": "Throughput per MW vs interactivity"})
    chart.set_x_axis({"name": "Output tokens/s per user", "num_format": "#,##0", "major_gridlines": {"visible": True}})
    chart.set_y_axis({"name": "Output tokens/s per MW", "num_format": "#,##0"})
    chart.set_legend({"position": "bottom"})
    chart.set_size({"width": 900, "height": 520})
    return chart
