"""Study charts (matplotlib, headless): Pareto frontiers and fleet comparisons, as figures and PNG bytes.

Each chart comes with notes (a fleet hidden under another, a clipped axis) that its caption must say.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from planner.export.mix import mix_text  # noqa: E402
from planner.pareto import OK_STATUSES, REL_TOL, finite, meets_demand, series_of  # noqa: E402
from planner.study import FrontierSpec  # noqa: E402

#: readable axis titles for result columns, each with its unit
TITLES = {
    "goodput_scale": "goodput scale (x workload rates)", "served_rps": "served requests/s",
    "output_tokens_per_s": "output tokens/s",
    "output_tokens_per_s_per_user": "output tokens/s per user (interactivity)",
    "tokens_per_s_per_mw": "output tokens/s per MW (facility)", "ttft_ms": "TTFT (ms)", "tpot_ms": "TPOT (ms)",
    "power_kw": "facility power (kW)", "cost_usd_per_hour": "cost ($/h)", "capex_usd": "capex ($)",
    "devices": "devices", "usd_per_million_tokens": "$ per million output tokens", "gain": "gain (x)",
}
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
STYLES = ("-", "--", "-.", ":")
#: an axis is "flattened" when 90% of its points sit in less than this share of its range
FLATTENED_SHARE = 0.1
#: log scale when the values span more than this ratio (and are all positive); else the axis is clipped
LOG_RATIO = 20.0
MAX_LABELS = 60
#: a point within this share of both axis spans of another sits under its marker
HIDDEN_SHARE = 0.01
#: label offsets (points) tried in turn until one overlaps no other label
OFFSETS = ((8, 4), (8, -16), (-8, 4), (-8, -16), (14, 16), (14, -28), (-14, 16), (-14, -28), (24, 0), (-24, 0))


@dataclass(frozen=True)
class Chart:
    """A rendered chart and what its caption must say."""

    png: bytes
    notes: tuple[str, ...] = ()


def title(column: str) -> str:
    """The readable title of a result column."""
    return TITLES.get(column, column)


def png_of(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def short_number(value: float, column: str = "") -> str:
    """Tick text: 800000 -> '800k', 1.5e6 -> '1.5M', 2000 -> '2,000', 0.5 -> '0.5'; money gets a '$'."""
    sign = "$" if "usd" in column else ""
    size = abs(value)
    for factor, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if size >= max(factor, 1e4):
            return f"{sign}{value / factor:,.3g}{suffix}"
    if size >= 1000:
        return f"{sign}{value:,.0f}"
    return f"{sign}{value:.3g}" if size >= 0.01 or value == 0 else f"{sign}{value:.1e}"


def flattened(values: list[float]) -> bool:
    """True when one or a few outliers squeeze the other points into a sliver of the axis."""
    v = sorted(x for x in values if finite(x))
    if len(v) < 5 or v[-1] == v[0]:
        return False
    p90 = v[int(0.9 * (len(v) - 1))]
    return (p90 - v[0]) < FLATTENED_SHARE * (v[-1] - v[0])


def scale_axis(ax, which: str, values: list[float], column: str) -> str | None:
    """Readable ticks with units; log or clipped when an outlier would flatten the rest. Returns a note."""
    axis = ax.xaxis if which == "x" else ax.yaxis
    note = None
    v = [x for x in values if finite(x)]
    if flattened(v):
        if min(v) > 0 and max(v) / min(v) > LOG_RATIO:
            (ax.set_xscale if which == "x" else ax.set_yscale)("log")
            axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            axis.set_minor_formatter(NullFormatter())
            note = f"{title(column)} on a log scale: the values span {min(v):,.3g} to {max(v):,.3g}"
        else:
            ordered = sorted(v)
            top = ordered[int(0.9 * (len(ordered) - 1))]
            limit = top + 0.15 * (top - ordered[0])
            hidden = [x for x in v if x > limit]
            (ax.set_xlim if which == "x" else ax.set_ylim)(None, limit)
            note = (f"{title(column)} clipped at {limit:,.3g}: {len(hidden)} point(s) above it not shown "
                    f"(up to {max(hidden):,.3g})") if hidden else None
    axis.set_major_formatter(FuncFormatter(lambda value, _pos: short_number(value, column)))
    return note


def hidden_series(points: list[dict], spans: tuple[float, float]) -> dict[str, str]:
    """Series drawn under a later one that covers every point (within HIDDEN_SHARE of each axis): name -> cover."""
    order = list(dict.fromkeys(p["series"] for p in points))
    by_series = {name: [(p["x"], p["y"]) for p in points if p["series"] == name] for name in order}

    def covers(a, b) -> bool:
        return all(abs(u - w) <= HIDDEN_SHARE * span for u, w, span in zip(a, b, spans))

    hidden = {}
    for i, name in enumerate(order):
        for other in order[i + 1:]:
            if all(any(covers(a, b) for b in by_series[other]) for a in by_series[name]):
                hidden[name] = other
                break
    return hidden


def point_label(row: dict) -> str:
    """'TPOT 12 ms' and the fleet mix, on two lines."""
    tpot = f"TPOT {row['tpot_ms']:.3g} ms" if finite(row.get("tpot_ms")) else "TPOT -"
    return f"{tpot}\n{mix_text(row.get('devices_by_type'))}"


def frontier_figure(rows: list[dict], frontier: FrontierSpec, points: list[dict], study: str):
    """Scenarios meeting demand as dots, each series' frontier as a labelled line, below-demand ones as crosses."""
    fig, ax = plt.subplots(figsize=(12, 7.5))
    x, y = frontier.x, frontier.y
    solved = [r for r in rows if r["status"] in OK_STATUSES and finite(r[x]) and finite(r[y])]
    meeting = [r for r in solved if meets_demand(r)]
    short = [r for r in solved if not meets_demand(r)]
    series = list(dict.fromkeys(p["series"] for p in points))
    colors = {s: plt.cm.tab10(i % 10) for i, s in enumerate(series)}
    spans = tuple(_span([r[c] for r in solved]) for c in (x, y))
    hidden = hidden_series(points, spans)
    by_name = {r["scenario"]: r for r in rows}
    for i, name in enumerate(series):
        members = [r for r in meeting if series_of(r, frontier.by) == name]
        ax.scatter([r[x] for r in members], [r[y] for r in members], s=14, alpha=0.35, color=colors[name])
        line = [p for p in points if p["series"] == name]
        label = name if frontier.by else "frontier"
        if name in hidden:
            label += f" (hidden under {hidden[name]}: same frontier)"
        ax.plot([p["x"] for p in line], [p["y"] for p in line], marker=MARKERS[i % len(MARKERS)],
                ls=STYLES[i % len(STYLES)], lw=2, ms=6, color=colors[name], label=label)
    if short:
        ax.scatter([r[x] for r in short], [r[y] for r in short], marker="x", s=40, color="#C00000",
                   label=f"below demand (goodput scale < 1): {len(short)}, not on any frontier")
    notes = [note for note in (scale_axis(ax, "x", [r[x] for r in solved], x),
                               scale_axis(ax, "y", [r[y] for r in solved], y)) if note]
    notes += [f"{name}'s frontier lies under {cover}'s: every point of it is (within 1% of each axis) a point "
              f"of {cover}" for name, cover in hidden.items()]
    ax.set_xlabel(title(x))
    ax.set_ylabel(title(y))
    ax.set_title(f"{study}: {frontier.label}")
    ax.grid(alpha=0.3, which="major")
    if series or short:
        ax.legend(title=frontier.by, fontsize=8, loc="best")
    _label_points(ax, [p for p in points if p["series"] not in hidden], by_name, colors)
    return fig, tuple(notes)


def _span(values: list[float]) -> float:
    v = [a for a in values if finite(a)]
    return (max(v) - min(v)) or 1.0 if v else 1.0


def _label_points(ax, points: list[dict], rows: dict[str, dict], colors: dict) -> None:
    """TPOT and mix next to each distinct frontier point, at the first offset that overlaps no placed label."""
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    placed, seen = [], []
    for p in points[:MAX_LABELS]:
        here = (p["x"], p["y"])
        if any(math.isclose(here[0], a, rel_tol=REL_TOL) and math.isclose(here[1], b, rel_tol=REL_TOL)
               for a, b in seen):
            continue
        seen.append(here)
        for dx, dy in OFFSETS:
            note = ax.annotate(point_label(rows[p["scenario"]]), here, xytext=(dx, dy), textcoords="offset points",
                               fontsize=6, color=colors[p["series"]], ha="left" if dx > 0 else "right")
            box = note.get_window_extent(renderer).expanded(1.05, 1.1)
            if not any(box.overlaps(other) for other in placed):
                placed.append(box)
                break
            note.remove()  # a point with no free spot keeps no label: the report's table lists it


def frontier_chart(rows: list[dict], frontier: FrontierSpec, points: list[dict], study: str) -> Chart:
    fig, notes = frontier_figure(rows, frontier, points, study)
    return Chart(png_of(fig), notes)


def fleet_figure(rows: list[dict], axis: str, metric: str, singles: set[str], study: str):
    """One panel of horizontal bars per combination of the other axes: ``metric`` per fleet, mixes dark."""
    column = f"axis.{axis}"
    others = [c for c in (rows[0] if rows else {}) if c.startswith("axis.") and c != column]
    groups = list(dict.fromkeys(tuple(r[c] for c in others) for r in rows))
    fleets = list(dict.fromkeys(str(r[column]) for r in rows))
    fleets = [f for f in fleets if f not in singles] + [f for f in fleets if f in singles]  # mixes on top
    cols = min(3, max(1, len(groups)))
    nrows = math.ceil(len(groups) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(5.2 * cols, 0.28 * len(fleets) * nrows + 1.2 * nrows),
                             squeeze=False, sharey=True)
    for k, group in enumerate(groups):
        ax = axes[k // cols][k % cols]
        values = {str(r[column]): r[metric] for r in rows if tuple(r[c] for c in others) == group
                  and r["status"] in OK_STATUSES and finite(r[metric])}
        ys = range(len(fleets))
        bars = [values.get(f, 0.0) for f in fleets]
        best = max((values[f] for f in fleets if f in singles and f in values), default=None)
        colors = ["#1F1F1F" if f not in singles else "#2E75B6" if values.get(f) == best else "#9DC3E6"
                  for f in fleets]
        ax.barh(ys, bars, color=colors)
        for i, f in enumerate(fleets):
            text = short_number(values[f], metric) if f in values else "no fleet"
            ax.text(values.get(f, 0.0), i, f" {text}", va="center", fontsize=7)
        if metric == "goodput_scale":
            ax.axvline(1.0, color="#C00000", lw=1, ls="--")
        ax.set_yticks(list(ys), fleets, fontsize=8)
        ax.set_title(", ".join(_axis_text(c[5:], v) for c, v in zip(others, group)) or "all", fontsize=9)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _pos: short_number(value, metric)))
        ax.set_xlim(0, max(bars + [1.0]) * 1.25)
        ax.grid(alpha=0.3, axis="x")
    axes[0][0].invert_yaxis()  # shared by every panel: first fleet on top
    for k in range(len(groups), nrows * cols):
        axes[k // cols][k % cols].set_visible(False)
    fig.supxlabel(title(metric) + ("; dashed red: demand (1x)" if metric == "goodput_scale" else ""), fontsize=9)
    fig.suptitle(f"{study}: {title(metric)} by {axis} (dark: multi-device fleet, mid blue: best single device)",
                 fontsize=10)
    fig.tight_layout()
    return fig


def _axis_text(name: str, value) -> str:
    """'power_budget_kw', 250 -> 'power budget 250 kW'."""
    units = {"_kw": "kW", "_mw": "MW", "_ms": "ms", "_usd": "$", "_rps": "req/s", "_s": "s"}
    for suffix, unit in units.items():
        if name.endswith(suffix):
            return f"{name[: -len(suffix)].replace('_', ' ')} {value:,} {unit}" if finite(value) else f"{name} {value}"
    return f"{name.replace('_', ' ')} {value}"


def fleet_chart(rows: list[dict], axis: str, metric: str, singles: set[str], study: str) -> Chart:
    return Chart(png_of(fleet_figure(rows, axis, metric, singles, study)))
