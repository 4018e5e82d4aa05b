"""The study report as one self-contained HTML page: charts embedded as base64 PNG, no network needed."""

from __future__ import annotations

import base64
import datetime
import html
import math
from collections import Counter

from planner.export.mix import mix_text
from planner.pareto import OK_STATUSES, meets_demand
from planner.report.charts import Chart, title
from planner.study import RESULT_COLUMNS, StudySpec

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2em auto;max-width:1200px;color:#222;padding:0 1em}
h1{margin-bottom:.2em} h2{margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:12px;margin:.5em 0} th,td{border:1px solid #ddd;padding:3px 6px}
th{background:#f4f4f4;position:sticky;top:0} td.n{text-align:right;font-variant-numeric:tabular-nums}
.scroll{max-height:520px;overflow:auto} img{max-width:100%} .muted{color:#777}
figcaption{font-size:13px;color:#444;margin:.3em 0 1em} figure{margin:0}
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


def figure(chart: Chart | None, alt: str) -> str:
    """The chart with its notes (log or clipped axes, hidden fleets) as the caption."""
    if chart is None:
        return ""
    caption = "".join(f"<li>{html.escape(n)}</li>" for n in chart.notes)
    caption = f"<figcaption><ul>{caption}</ul></figcaption>" if caption else ""
    return f"<figure>{image_tag(chart.png, alt)}{caption}</figure>"


def frontier_rows(points: list[dict], rows: list[dict]) -> list[dict]:
    """Frontier points with the scenario's TPOT, goodput and fleet mix (as text) beside them."""
    by_name = {r["scenario"]: r for r in rows}
    return [{**p, "tpot_ms": by_name[p["scenario"]].get("tpot_ms"),
             "goodput_scale": by_name[p["scenario"]].get("goodput_scale"),
             "mix": mix_text(by_name[p["scenario"]].get("devices_by_type"))} for p in points]


def render(spec: StudySpec, rows: list[dict], frontiers: dict[str, list[dict]], comparison: list[dict],
           charts: dict[str, Chart]) -> str:
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
    solved = [r for r in rows if r["status"] in OK_STATUSES]
    meeting = sum(meets_demand(r) for r in solved)
    for f in spec.pareto:
        points = frontiers.get(f.label, [])
        per = f" per {html.escape(f.by)}" if f.by else ""
        parts.append(f"<h2>Pareto frontier: {html.escape(f.label)}</h2>")
        parts.append(figure(charts.get(f.label), f.label))
        parts.append(f"<p>{len(points)} non-dominated scenarios{per} among the {meeting} that meet demand "
                     f"({html.escape(title(f.x))}: {f.senses[0]}, {html.escape(title(f.y))}: {f.senses[1]}); "
                     f"{len(solved) - meeting} solved scenarios serve less than demand (goodput scale &lt; 1) and are "
                     "on no frontier.</p>")
        parts.append(table(frontier_rows(points, rows),
                           ["series", "scenario", "x", "y", "tpot_ms", "goodput_scale", "mix"],
                           ["series", "scenario", title(f.x), title(f.y), "TPOT (ms)", "goodput scale", "fleet mix"]))
    if spec.compare is not None:
        metric = spec.compare.metric
        parts.append(f"<h2>Multi-device fleets vs the best single-device fleet ({html.escape(title(metric))})</h2>")
        parts.append(figure(charts.get("fleets"), "fleets"))
        cols = ["group", spec.compare.axis, metric, "best_single", f"best_single_{metric}", "gain"]
        parts.append(table(comparison, cols))
    failed = [r for r in rows if r["status"] in ("infeasible", "error")]
    if failed:
        parts.append(f"<h2>Infeasible or failed scenarios ({len(failed)})</h2>")
        parts.append(table(failed, ["scenario", "status", "reason"]))
    shown = [{**r, "devices_by_type": mix_text(r.get("devices_by_type"))} for r in rows[:MAX_ROWS]]
    parts.append(f"<h2>All scenarios</h2><p class=muted>{len(shown)} of {len(rows)} rows (results.csv has all).</p>")
    parts.append(table(shown, ["scenario", *axes, *[c for c in RESULT_COLUMNS if c != "reason"]]))
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(spec.name)} - siliconmix study"
            f"</title><style>{STYLE}</style></head><body>{''.join(parts)}</body></html>\n")


def claims_section(claims) -> str:
    """The talk's claims as a report section: per claim the talk's words and figure, the product's figure, the
    verdict and its test, what the figure rests on (with each device's confidence and estimated inputs) and why."""
    rows = []
    for c in claims:
        i = c.inputs
        devices = "".join(
            f"<li>{html.escape(d)}: {html.escape(i.confidence.get(d, 'catalog'))}"
            + (f"<details><summary>{len(i.estimated[d])} estimated catalog numbers</summary>"
               f"{html.escape(', '.join(i.estimated[d]))}</details>" if d in i.estimated else "") + "</li>"
            for d in i.devices)
        head = " ".join(html.escape(x) for x in (i.model, i.dtype) if x)
        source = f"<br><span class=muted>{html.escape(i.source)}</span>" if i.source else ""
        rows.append(
            f"<tr><td><b>{html.escape(c.title)}</b><br><span class=muted>{html.escape(c.id)}</span></td>"
            f"<td>&ldquo;{html.escape(c.talk_quote)}&rdquo; <span class=muted>({html.escape(c.talk_at)}, "
            f"sentence {c.talk_sentence})</span></td><td>{html.escape(c.talk_figure)}</td>"
            f'<td class="n">{html.escape(c.product_text)}</td>'
            f'<td class="{c.verdict}">{html.escape(c.verdict)}<br><span class=muted>{html.escape(c.test)}</span></td>'
            f"<td>{head}<ul>{devices}</ul>{html.escape(i.case)}{source}</td><td>{html.escape(c.why)}</td></tr>")
    agree = sum(c.verdict == "agrees" for c in claims)
    head = "".join(f"<th>{h}</th>" for h in ("claim", "the talk says", "talk", "product", "verdict", "rests on", "why"))
    return (f"<h2>The talk's claims, checked by the product</h2><p>{agree} of {len(claims)} agree. Each claim of the "
            "talk (Cerebras &amp; Gimlet Labs, &ldquo;How Inference Keeps Up with Our Insatiable Need for Tokens&rdquo;) "
            "run as a product case; where the talk gives no number, the verdict checks its direction.</p>"
            f'<table class="claims"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>')


CLAIMS_STYLE = """
body.claims{max-width:1500px} table.claims td{vertical-align:top;max-width:320px}
table.claims td:last-child{min-width:360px} table.claims ul{margin:.2em 0;padding-left:1.2em}
td.agrees{color:#1a7f37;font-weight:600} td.differs{color:#9a6700;font-weight:600} td .muted{font-weight:normal}
table.claims summary{color:#777;cursor:pointer}
"""


def claims_page(claims) -> str:
    """The claims section as a self-contained page."""
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>The talk's claims - siliconmix</title>"
            f"<style>{STYLE}{CLAIMS_STYLE}</style></head><body class=claims><h1>siliconmix: the talk's claims</h1>"
            f'<p class="muted">siliconmix claims, {stamp}</p>{claims_section(claims)}</body></html>\n')
