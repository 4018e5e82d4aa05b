"""The study report as one self-contained HTML page: charts embedded as base64 PNG, no network needed."""

from __future__ import annotations

import base64
import datetime
import html
import math
from collections import Counter

from planner.report.charts import title
from planner.study import RESULT_COLUMNS, StudySpec

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2em auto;max-width:1200px;color:#222;padding:0 1em}
h1{margin-bottom:.2em} h2{margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:12px;margin:.5em 0} th,td{border:1px solid #ddd;padding:3px 6px}
th{background:#f4f4f4;position:sticky;top:0} td.n{text-align:right;font-variant-numeric:tabular-nums}
.scroll{max-height:520px;overflow:auto} img{max-width:100%} .muted{color:#777}
"""
#: at most this many rows of the full results table go into the page (results.csv has them all)
MAX_ROWS = 2000


def image_tag(png: bytes, alt: str) -> str:
    """An <img> carrying its PNG inline (data URI)."""
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'


def fmt(value) -> str:
    """Numbers with sensible precision; NaN/None as a dash."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    return str(value)


def table(rows: list[dict], columns: list[str], headers: list[str] | None = None) -> str:
    """An HTML table of ``columns`` of ``rows`` (numbers right-aligned)."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers or columns)
    body = "".join(
        "<tr>" + "".join(
            f'<td class="{"n" if isinstance(r.get(c), int | float) else ""}">{html.escape(fmt(r.get(c)))}</td>'
            for c in columns) + "</tr>"
        for r in rows)
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def render(spec: StudySpec, rows: list[dict], frontiers: dict[str, list[dict]], comparison: list[dict],
           charts: dict[str, bytes]) -> str:
    """The whole report page; ``charts`` holds a PNG per frontier label and ``fleets`` for the comparison."""
    axes = [c for c in (rows[0] if rows else {}) if c.startswith("axis.")]
    counts = Counter(r["status"] for r in rows)
    parts = [
        f"<h1>{html.escape(spec.name)}</h1>",
        f"<p>{html.escape(spec.description)}</p>" if spec.description else "",
        f'<p class="muted">siliconmix study report, {datetime.datetime.now().strftime("%Y-%m-%d %H:%M")}; '
        f'{len(rows)} scenarios: {html.escape(", ".join(f"{n} {s}" for s, n in sorted(counts.items())))}; '
        f"objective {html.escape(spec.objective or spec.base.get('objective', 'max_goodput'))}; "
        f"solver {html.escape(spec.options.solver)}, baseline {'on' if spec.options.baseline else 'off'}.</p>",
    ]
    for f in spec.pareto:
        points = frontiers.get(f.label, [])
        per = f" per {html.escape(f.by)}" if f.by else ""
        parts.append(f"<h2>Pareto frontier: {html.escape(f.label)}</h2>")
        parts.append(image_tag(charts[f.label], f.label) if f.label in charts else "")
        parts.append(f"<p>{len(points)} non-dominated scenarios{per} ({html.escape(title(f.x))}: {f.senses[0]}, "
                     f"{html.escape(title(f.y))}: {f.senses[1]}).</p>")
        parts.append(table(points, ["series", "scenario", "x", "y"], ["series", "scenario", title(f.x), title(f.y)]))
    if spec.compare is not None:
        metric = spec.compare.metric
        parts.append(f"<h2>Multi-device fleets vs the best single-device fleet ({html.escape(title(metric))})</h2>")
        parts.append(image_tag(charts["fleets"], "fleets") if "fleets" in charts else "")
        cols = ["group", spec.compare.axis, metric, "best_single", f"best_single_{metric}", "gain"]
        parts.append(table(comparison, cols))
    failed = [r for r in rows if r["status"] in ("infeasible", "error")]
    if failed:
        parts.append(f"<h2>Infeasible or failed scenarios ({len(failed)})</h2>")
        parts.append(table(failed, ["scenario", "status", "reason"]))
    shown = rows[:MAX_ROWS]
    parts.append(f"<h2>All scenarios</h2><p class=muted>{len(shown)} of {len(rows)} rows (results.csv has all).</p>")
    parts.append(table(shown, ["scenario", *axes, *[c for c in RESULT_COLUMNS if c != "reason"]]))
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(spec.name)} - siliconmix study"
            f"</title><style>{STYLE}</style></head><body>{''.join(parts)}</body></html>\n")
