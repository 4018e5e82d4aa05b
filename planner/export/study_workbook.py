"""The workbook of a study: one row per scenario, and the study's main frontier as a native Excel scatter chart.

The frontier is the one the study's report draws (``planner.pareto`` on the first ``pareto`` entry of the
study's ``study.yaml``): the same series, the same scenarios, the same demand rule.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import xlsxwriter

from planner.export.cells import cell, put
from planner.export.frontier import main_frontier, parse_value
from planner.export.mix import mix_text
from planner.export.styles import Styles
from planner.pareto import OK_STATUSES, finite, frontier_points, meets_demand
from planner.study import FrontierSpec

RESULTS_FILE = "results.csv"
SCENARIOS_SHEET = "Scenarios"
FRONTIER_SHEET = "Frontier"
REQUIRED_COLUMNS = ("scenario", "status", "goodput_scale")
#: frontier table: series, scenario, its axes, x, y, then these result columns (when the table has them).
FRONTIER_COLUMNS = ("goodput_scale", "output_tokens_per_s", "tpot_ms", "power_kw", "cost_usd_per_hour",
                    "usd_per_million_tokens", "devices", "devices_by_type")
HEADERS = {
    "output_tokens_per_s_per_user": "Output tokens/s per user", "tokens_per_s_per_mw": "Output tokens/s per MW",
    "output_tokens_per_s": "Output tokens/s", "power_kw": "Power (kW)", "cost_usd_per_hour": "$/h",
    "usd_per_million_tokens": "$/M tokens", "devices": "Devices", "devices_by_type": "Fleet mix",
    "goodput_scale": "Goodput scale (x demand)", "tpot_ms": "TPOT (ms)", "ttft_ms": "TTFT (ms)",
    "meets_demand": "Meets demand", "frontier": "On frontier",
}
SERIES_COLORS = ("#1F4E79", "#C55A11", "#548235", "#7030A0", "#BF9000", "#2E75B6", "#C00000", "#404040")
MAX_LABELLED_POINTS = 30


class StudyResultsError(ValueError):
    """A study folder without a readable results table; the message names the file."""


@dataclass(frozen=True)
class StudyTable:
    """The results table: columns in file order, rows with numbers parsed, and the frontier to draw."""

    columns: list[str]
    rows: list[dict[str, Any]]
    raw_rows: list[dict[str, str]]
    frontier: FrontierSpec = FrontierSpec()

    @property
    def axes(self) -> list[str]:
        return [c for c in self.columns if c.startswith("axis.")]

    def frontier_indices(self) -> list[int]:
        """Row indices of the frontier's points, series by series, each by ascending x."""
        where = {row["scenario"]: i for i, row in enumerate(self.rows)}
        return [where[p["scenario"]] for p in frontier_points(self.rows, self.frontier)]


def read_results(folder: str | Path) -> StudyTable:
    """Read ``results.csv`` of a study output folder, and its main frontier from ``study.yaml``."""
    path = Path(folder) / RESULTS_FILE
    if not path.is_file():
        raise StudyResultsError(f"{folder}: not a study output folder (no {RESULTS_FILE})")
    try:
        with path.open(newline="") as handle:
            reader = csv.DictReader(handle)
            columns = list(reader.fieldnames or [])
            raw = list(reader)
        frontier = main_frontier(folder)
    except (OSError, UnicodeDecodeError, csv.Error, ValueError) as exc:
        raise StudyResultsError(f"{path}: cannot read ({exc})") from exc
    needed = [*REQUIRED_COLUMNS, frontier.x, frontier.y, *([f"axis.{frontier.by}"] if frontier.by else [])]
    missing = [c for c in dict.fromkeys(needed) if c not in columns]
    if missing:
        raise StudyResultsError(f"{path}: missing columns {', '.join(missing)}")
    raw = [{c: (r.get(c) or "").strip() for c in columns} for r in raw]
    return StudyTable(columns, [{c: parse_value(c, r[c]) for c in columns} for r in raw], raw, frontier)


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


def header(column: str) -> str:
    return HEADERS.get(column, column)


def write_study_workbook(table: StudyTable, path: str | Path, title: str = "") -> list[int]:
    """Write Scenarios and Frontier sheets; returns the frontier's row indices into ``table.rows``."""
    frontier = table.frontier_indices()
    buffer = io.BytesIO()  # built in memory, so a failed write is one OSError (no half-closed zip)
    workbook = xlsxwriter.Workbook(buffer, {"in_memory": True})
    style = Styles(workbook)
    scenarios = workbook.add_worksheet(SCENARIOS_SHEET)
    front = workbook.add_worksheet(FRONTIER_SHEET)
    last = _write_scenarios(scenarios, style, table, set(frontier))
    _print_setup(scenarios, len(table.rows), last, header_rows=1, pages_wide=2)
    scenarios.repeat_columns(0, 0)
    last = _write_frontier(workbook, front, style, table, frontier, title)
    _print_setup(front, len(frontier) + 30, last, header_rows=3)
    workbook.set_properties({"title": f"siliconmix study {title}".strip(), "subject": "study results"})
    workbook.close()
    Path(path).write_bytes(buffer.getvalue())
    return frontier


def _print_setup(ws, last_row: int, last_col: int, header_rows: int, pages_wide: int = 1) -> None:
    """Landscape A4, ``pages_wide`` pages wide, header rows repeated on every page."""
    ws.set_landscape()
    ws.set_paper(9)
    ws.fit_to_pages(pages_wide, 0)
    ws.repeat_rows(0, header_rows - 1)
    ws.print_area(0, 0, last_row, last_col)
    ws.set_margins(left=0.4, right=0.4, top=0.5, bottom=0.5)


def write_scenarios_csv(table: StudyTable, path: str | Path) -> Path:
    """The results as read (fields unchanged) with ``meets_demand`` and ``frontier`` (True on the main frontier)."""
    on_front = set(table.frontier_indices())
    path = Path(path)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=[*table.columns, "meets_demand", "frontier"])
        writer.writeheader()
        for i, raw in enumerate(table.raw_rows):
            writer.writerow({**raw, "meets_demand": meets_demand(table.rows[i]), "frontier": i in on_front})
    return path


# Scenarios: the results table; the long text columns come last, outside the print area (results.csv has them).
WIDE = {"scenario": 34, "devices_by_type": 30, "reason": 40, "hash": 13}
NOT_PRINTED = ("hash", "reason", "baseline_device", "solve_time_s")


def scenario_columns(table: StudyTable) -> list[str]:
    """scenario, the axes, the results, meets_demand and frontier, then the columns left out of print."""
    first = ["scenario", *table.axes]
    results = [c for c in table.columns if c not in first and c not in NOT_PRINTED]
    return [*first, *results, "meets_demand", "frontier", *[c for c in NOT_PRINTED if c in table.columns]]


def _write_scenarios(ws, style, table: StudyTable, on_front: set[int]) -> int:
    """The sheet; returns the last printed column."""
    columns = scenario_columns(table)
    for col, name in enumerate(columns):
        ws.write_string(0, col, header(name), style("header"))
        ws.set_column(col, col, WIDE.get(name, max(9, min(len(header(name)) * 0.6 + 2, 16))))
        if name == "capex_usd":
            ws.set_column(col, col, 13)
    ws.set_row(0, 45)
    ws.freeze_panes(1, 1)
    for row, values in enumerate(table.rows, start=1):
        met, front = meets_demand(values), row - 1 in on_front
        for col, name in enumerate(columns):
            if name == "meets_demand":
                ws.write_string(row, col, "yes" if met else "no", style("value" if met else "warning"))
            elif name == "frontier":
                ws.write_string(row, col, "yes" if front else "no", style("label" if front else "value"))
            else:
                value = mix_text(values[name]) if name == "devices_by_type" else values[name]
                put(ws, row, col, value, style("value", number_format(name) if name != "hash" else "text"))
    ws.autofilter(0, 0, max(len(table.rows), 1), len(columns) - 1)
    return columns.index("frontier")


def _frontier_columns(table: StudyTable) -> list[str]:
    f = table.frontier
    wanted = ["scenario", *table.axes, f.x, f.y, *FRONTIER_COLUMNS]
    return [c for c in dict.fromkeys(wanted) if c in table.columns]


def _write_frontier(workbook, ws, style, table: StudyTable, frontier: list[int], title: str) -> int:
    f, rows = table.frontier, table.rows
    solved = [i for i, r in enumerate(rows) if r["status"] in OK_STATUSES
              and finite(r[f.x]) and finite(r[f.y])]
    meeting = [i for i in solved if meets_demand(rows[i])]
    short = [i for i in solved if not meets_demand(rows[i])]
    per = f", one frontier per {f.by}" if f.by else ""
    ws.write_string(0, 0, f"Frontier {title}".strip() + f" ({f.label}): {len(frontier)} non-dominated of "
                    f"{len(meeting)} scenarios that meet demand{per}", style("title"))
    ws.write_string(1, 0, f"{header(f.y)} ({f.senses[1]}) against {header(f.x)} ({f.senses[0]}). {len(short)} solved "
                    f"scenarios serve less than demand (goodput scale < 1) and are not on any frontier; "
                    f"{len(rows) - len(solved)} found no fleet.", style("note"))
    columns = ["series", *_frontier_columns(table)] if f.by else _frontier_columns(table)
    head = 2
    for col, name in enumerate(columns):
        ws.write_string(head, col, header(name), style("header"))
        ws.set_column(col, col, WIDE.get(name, 14))
    ws.set_row(head, 30)
    ws.freeze_panes(head + 1, 1)
    for row, index in enumerate(frontier, start=head + 1):
        for col, name in enumerate(columns):
            value = (str(rows[index][f"axis.{f.by}"]) if name == "series" else
                     mix_text(rows[index][name]) if name == "devices_by_type" else rows[index][name])
            put(ws, row, col, value, style("value", number_format(name)))
    data_col = len(columns) + 1
    blocks = {"Other scenarios that meet demand": [i for i in meeting if i not in set(frontier)],
              "Below demand (not on the frontier)": short}
    refs = {}
    for name, indices in blocks.items():
        refs[name] = _write_points(ws, style, table, name, indices, head, data_col)
        data_col += 4
    if meeting or short:
        chart = _frontier_chart(workbook, table, columns, frontier, head, refs)
        ws.insert_chart(head + len(frontier) + 3, 0, chart)
    return len(columns) - 1


def _write_points(ws, style, table: StudyTable, name: str, indices: list[int], head: int, col: int):
    """A block of (scenario, x, y) chart data to the right of the table; returns its x and y ranges."""
    f = table.frontier
    ws.write_string(head - 1, col, f"{name} (chart data)", style("section"))
    for offset, column in enumerate(("scenario", f.x, f.y)):
        ws.write_string(head, col + offset, header(column), style("header"))
        ws.set_column(col + offset, col + offset, 16)
    for row, index in enumerate(indices, start=head + 1):
        for offset, column in enumerate(("scenario", f.x, f.y)):
            put(ws, row, col + offset, table.rows[index][column], style("value", number_format(column)))
    if not indices:
        return None
    last = head + len(indices)
    sheet = f"'{FRONTIER_SHEET}'"
    return (f"={sheet}!{cell(head + 1, col + 1, True)}:{cell(last, col + 1, True)}",
            f"={sheet}!{cell(head + 1, col + 2, True)}:{cell(last, col + 2, True)}")


def _frontier_chart(workbook, table: StudyTable, columns: list[str], frontier: list[int], head: int, refs: dict):
    """Scatter chart: one line per frontier series, other scenarios grey, below-demand ones as red crosses."""
    f, sheet = table.frontier, f"'{FRONTIER_SHEET}'"
    x_col, y_col = columns.index(f.x), columns.index(f.y)
    chart = workbook.add_chart({"type": "scatter"})
    for name, marker in (("Other scenarios that meet demand", {"type": "circle", "size": 5,
                                                                "fill": {"color": "#BFBFBF"},
                                                                "border": {"color": "#7F7F7F"}}),
                         ("Below demand (not on the frontier)", {"type": "x", "size": 7,
                                                                  "border": {"color": "#C00000"}})):
        if refs.get(name):
            chart.add_series({"name": name, "categories": refs[name][0], "values": refs[name][1], "marker": marker})
    series_names = [str(table.rows[i][f"axis.{f.by}"]) if f.by else "Frontier (non-dominated)" for i in frontier]
    first = head + 1
    for k, name in enumerate(dict.fromkeys(series_names)):
        start = first + series_names.index(name)
        end = start + series_names.count(name) - 1
        color = SERIES_COLORS[k % len(SERIES_COLORS)]
        series = {
            "name": name,
            "categories": f"={sheet}!{cell(start, x_col, True)}:{cell(end, x_col, True)}",
            "values": f"={sheet}!{cell(start, y_col, True)}:{cell(end, y_col, True)}",
            "line": {"color": color, "width": 2},
            "marker": {"type": "diamond", "size": 7, "fill": {"color": color}, "border": {"color": color}},
        }
        if len(frontier) <= MAX_LABELLED_POINTS:
            series["data_labels"] = {"value": True, "position": "right", "font": {"size": 7}, "custom": [
                {"value": f"={sheet}!{cell(row, columns.index('scenario'), True)}"} for row in range(start, end + 1)]}
        chart.add_series(series)
    chart.set_title({"name": f"{header(f.y)} vs {header(f.x)}"})
    chart.set_x_axis({"name": header(f.x), "num_format": "#,##0", "major_gridlines": {"visible": True}})
    chart.set_y_axis({"name": header(f.y), "num_format": "#,##0"})
    chart.set_legend({"position": "bottom"})
    chart.set_size({"width": 960, "height": 560})
    return chart
