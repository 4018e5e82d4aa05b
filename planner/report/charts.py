"""Study charts as PNG bytes (matplotlib, headless): Pareto frontiers and fleet comparisons."""

from __future__ import annotations

import io
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from planner.study import OK_STATUSES, FrontierSpec  # noqa: E402

#: readable axis titles for result columns
TITLES = {
    "goodput_scale": "goodput scale (x workload rates)", "served_rps": "served requests/s",
    "output_tokens_per_s": "output tokens/s", "output_tokens_per_s_per_user": "output tokens/s per user (interactivity)",
    "tokens_per_s_per_mw": "output tokens/s per MW (facility)", "ttft_ms": "TTFT (ms)", "tpot_ms": "TPOT (ms)",
    "power_kw": "facility power (kW)", "cost_usd_per_hour": "cost ($/h)", "capex_usd": "capex ($)",
    "devices": "devices", "usd_per_million_tokens": "$ per million output tokens", "gain": "gain",
}


MARKERS = ("o", "s", "^", "D", "v", "P", "X")
STYLES = ("-", "--", "-.", ":")


def title(column: str) -> str:
    """The readable title of a result column."""
    return TITLES.get(column, column)


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _finite(*values) -> bool:
    return all(isinstance(v, float | int) and math.isfinite(v) for v in values)


def frontier_chart(rows: list[dict], frontier: FrontierSpec, points: list[dict], study: str) -> bytes:
    """Every solved scenario as a dot, each series' frontier as a line (the overall one dashed)."""
    fig, ax = plt.subplots(figsize=(8.5, 5.5))
    usable = [r for r in rows if r["status"] in OK_STATUSES and _finite(r[frontier.x], r[frontier.y])]
    series = sorted({p["series"] for p in points}, key=lambda s: [p["series"] for p in points].index(s))
    colors = {s: plt.cm.tab10(i % 10) for i, s in enumerate(series)}
    for name in series:
        members = [r for r in usable if frontier.by is None or str(r[f"axis.{frontier.by}"]) == name]
        ax.scatter([r[frontier.x] for r in members], [r[frontier.y] for r in members], s=14, alpha=0.35,
                   color=colors[name])
        line = [p for p in points if p["series"] == name]
        i = series.index(name)
        ax.plot([p["x"] for p in line], [p["y"] for p in line], marker=MARKERS[i % len(MARKERS)],
                ls=STYLES[i % len(STYLES)], lw=2, ms=6, color=colors[name], label=name if frontier.by else "frontier")
    ax.set_xlabel(title(frontier.x))
    ax.set_ylabel(title(frontier.y))
    ax.set_title(f"{study}: {frontier.label}")
    ax.grid(alpha=0.3)
    if series:
        ax.legend(title=frontier.by, fontsize=8)
    return _png(fig)


def fleet_chart(rows: list[dict], axis: str, metric: str, singles: set[str], study: str) -> bytes:
    """``metric`` per combination of the other axes, one line per fleet; multi-device fleets bold."""
    column = f"axis.{axis}"
    others = [c for c in (rows[0] if rows else {}) if c.startswith("axis.") and c != column]
    groups: list[tuple] = []
    for r in rows:
        key = tuple(r[c] for c in others)
        if key not in groups:
            groups.append(key)
    fig, ax = plt.subplots(figsize=(9, 5.5))
    fleets = list(dict.fromkeys(str(r[column]) for r in rows))
    for i, fleet in enumerate(fleets):
        values = {tuple(r[c] for c in others): r[metric] for r in rows
                  if str(r[column]) == fleet and r["status"] in OK_STATUSES}
        ys = [values.get(g, math.nan) for g in groups]
        bold = fleet not in singles
        ax.plot(range(len(groups)), ys, marker="o" if bold else ".", lw=3 if bold else 1, alpha=1 if bold else 0.7,
                color="black" if bold and len(fleets) - len(singles) == 1 else plt.cm.tab20(i % 20), label=fleet)
    ax.set_xticks(range(len(groups)), [", ".join(f"{c[5:]}={v}" for c, v in zip(others, g)) for g in groups],
                  rotation=20, ha="right", fontsize=8)
    ax.set_ylabel(title(metric))
    positive = [r[metric] for r in rows if r["status"] in OK_STATUSES and _finite(r[metric]) and r[metric] > 0]
    if positive and max(positive) / min(positive) > 20:
        ax.set_yscale("log")
    ax.set_title(f"{study}: {title(metric)} by {axis}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2, title=axis)
    return _png(fig)
