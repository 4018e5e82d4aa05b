"""The study charts as matplotlib figures: scales, tick labels, what sits apart and what the caption says."""

from __future__ import annotations

import json

import matplotlib.pyplot as plt
import pytest

from planner.pareto import frontier_points
from planner.report.charts import fleet_figure, flattened, frontier_figure, hidden_series, short_number
from planner.study import FrontierSpec


def row(name, fleet, per_user, per_mw, usd, scale=1.5, ttft=800.0):
    return {"scenario": name, "status": "optimal", "axis.fleet": fleet, "goodput_scale": scale, "ttft_ms": ttft,
            "output_tokens_per_s_per_user": per_user, "tokens_per_s_per_mw": per_mw, "tpot_ms": 1000 / per_user,
            "usd_per_million_tokens": usd, "devices_by_type": json.dumps({"h100-sxm": 8, "cs-3": 2})}


ROWS = [
    row("a1", "gpu", 25, 800_000, 0.5, ttft=990), row("a2", "gpu", 50, 600_000, 0.6, ttft=900),
    row("a3", "gpu", 75, 400_000, 0.8, ttft=700),
    row("b1", "spec", 25, 800_000, 0.5, ttft=990), row("b2", "spec", 50, 600_000, 0.6, ttft=900),  # under gpu
    row("c1", "mix", 100, 300_000, 1.2, ttft=500), row("c2", "mix", 200, 200_000, 2.0, ttft=400),
    row("c3", "mix", 1000, 15_000, 87.6, scale=0.057, ttft=300),  # serves 5.7% of demand
]


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def test_below_demand_points_are_apart_and_not_on_the_frontier():
    spec = FrontierSpec(by="fleet")
    points = frontier_points(ROWS, spec)
    assert "c3" not in {p["scenario"] for p in points}
    fig, notes = frontier_figure(ROWS, spec, points, "t")
    ax = fig.axes[0]
    lines = {line.get_label(): list(zip(line.get_xdata(), line.get_ydata())) for line in ax.get_lines()}
    assert (1000, 15_000) not in [pt for pts in lines.values() for pt in pts]
    assert any(label.startswith("below demand") for label in ax.get_legend_handles_labels()[1])
    crosses = [c for c in ax.collections if c.get_label().startswith("below demand")]
    assert len(crosses) == 1 and crosses[0].get_offsets().tolist() == [[1000, 15_000]]
    # ticks read 800k, not 800000; the axes carry their units
    assert ax.yaxis.get_major_formatter()(800_000, 0) == "800k"
    assert ax.get_ylabel() == "output tokens/s per MW (facility)"
    assert not [n for n in notes if "lies under" in n]  # gpu's a3 is visible: no fleet is fully hidden


def test_hidden_fleet_is_said():
    points = frontier_points(ROWS, FrontierSpec(by="fleet"))
    # gpu's frontier (a1, a2, a3) is not all under spec's (b1, b2): a3 is visible; spec's is all under gpu's,
    # but gpu is drawn first, so spec (drawn after) covers gpu's a1, a2 only: nothing is fully hidden ...
    assert hidden_series(points, (1000.0, 800_000.0)) == {}
    # ... until gpu's third point is gone: then gpu lies entirely under spec
    trimmed = [p for p in points if p["scenario"] != "a3"]
    assert hidden_series(trimmed, (1000.0, 800_000.0)) == {"gpu": "spec"}
    rows = [r for r in ROWS if r["scenario"] != "a3"]
    fig, notes = frontier_figure(rows, FrontierSpec(by="fleet"), trimmed, "t")
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert "gpu (hidden under spec: same frontier)" in labels
    assert any(n.startswith("gpu's frontier lies under spec's") for n in notes)


def test_an_outlier_that_would_flatten_the_cost_axis_makes_it_log():
    spec = FrontierSpec(name="cost-vs-ttft", x="ttft_ms", y="usd_per_million_tokens")
    fig, notes = frontier_figure(ROWS, spec, frontier_points(ROWS, spec), "t")
    ax = fig.axes[0]
    assert ax.get_yscale() == "log" and ax.get_xscale() == "linear"
    assert any("log scale" in n and "87.6" in n for n in notes)
    assert ax.yaxis.get_major_formatter()(2.0, 0) == "$2"


def test_without_a_positive_range_the_axis_is_clipped_and_says_so():
    rows = [row(f"r{i}", "gpu", 10 + i, 100_000 + i, float(i), ttft=500 + i) for i in range(10)]
    rows.append(row("out", "gpu", 30, 50_000, 5_000.0, ttft=600))
    spec = FrontierSpec(name="c", x="ttft_ms", y="usd_per_million_tokens")
    fig, notes = frontier_figure(rows, spec, frontier_points(rows, spec), "t")
    ax = fig.axes[0]
    assert ax.get_yscale() == "linear" and ax.get_ylim()[1] < 5_000  # r0 costs $0: no log axis
    assert any("clipped" in n and "1 point(s)" in n for n in notes)


def test_flattened_and_short_numbers():
    assert flattened([1, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 100])
    assert not flattened([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    assert short_number(800_000) == "800k" and short_number(1_500_000) == "1.5M" and short_number(2_000) == "2,000"
    assert short_number(0.5, "usd_per_million_tokens") == "$0.5"


def test_fleet_comparison_is_bars_not_lines():
    cases = ((250, "a", 1.0), (250, "b", 2.0), (250, "mix", 3.0), (1000, "a", 10.0), (1000, "mix", 22.0))
    rows = [{"axis.kw": kw, "axis.fleet": f, "goodput_scale": g, "status": "optimal"} for kw, f, g in cases]
    rows.append({"axis.kw": 1000, "axis.fleet": "b", "goodput_scale": 0.0, "status": "infeasible"})
    fig = fleet_figure(rows, "fleet", "goodput_scale", {"a", "b"}, "t")
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == 2
    for ax in panels:
        assert len(ax.get_lines()) == 1  # only the demand line at 1x: no series joined across categories
        assert len(ax.patches) == 3  # one bar per fleet
    assert [t.get_text() for t in panels[0].get_yticklabels()] == ["mix", "a", "b"]  # multi-device fleet on top
    assert panels[0].get_title() == "kw 250"
    assert "no fleet" in [t.get_text().strip() for t in panels[1].texts]
