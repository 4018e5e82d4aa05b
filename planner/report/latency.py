"""A simulation's latency distributions per class (PNG): TTFT and TPOT as cumulative curves over the measured
requests, each against its SLO and the plan's prediction."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from planner.report.charts import png_of  # noqa: E402
from planner.simulate.outcome import CURVE_PERCENTILES, ClassSimulation, Latency, Simulation  # noqa: E402

#: figure height per class row (inches)
ROW_INCHES = 2.6


def _panel(ax, c: ClassSimulation, metric: str, latency: Latency | None, slo_ms: float, predicted_ms: float | None,
           simulated_ms: float | None) -> None:
    ax.set_title(f"{c.name}: {metric} ({c.statistic})", fontsize=9)
    ax.set_xlabel(f"{metric} (ms)", fontsize=8)
    ax.set_ylabel("requests within (%)", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    if latency is None:
        ax.text(0.5, 0.5, "no measured requests", ha="center", va="center", transform=ax.transAxes, fontsize=8)
        return
    ax.plot(latency.curve_ms, CURVE_PERCENTILES, color="tab:blue", label="simulated")
    ax.axvline(slo_ms, color="tab:red", linestyle="--", label=f"SLO {slo_ms:,.0f} ms")
    if predicted_ms is not None:
        ax.axvline(predicted_ms, color="tab:green", linestyle=":", label=f"plan {predicted_ms:,.1f} ms")
    if simulated_ms is not None:
        ax.axvline(simulated_ms, color="tab:blue", linestyle="-.", alpha=0.6, label=f"sim {simulated_ms:,.1f} ms")
    ax.set_ylim(0, 100)
    ax.set_xlim(left=0)
    ax.legend(fontsize=7, loc="lower right")


def _timeline(ax, sim: Simulation) -> None:
    """Each class's TTFT and TPOT statistic over its SLO per stretch of the window, beside the load."""
    ax.set_title("over time, by arrival: statistic / SLO (above 1: behind)", fontsize=9)
    ax.set_xlabel("arrival (s)", fontsize=8)
    ax.set_ylabel("statistic / SLO", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    ax.axhline(1.0, color="tab:red", linestyle="--", linewidth=1)
    for c in sim.classes:
        mid = [(p.start_s + p.end_s) / 2 for p in c.timeline]
        for metric, slo, style in (("ttft_ms", c.slo_ttft_ms, "-"), ("tpot_ms", c.slo_tpot_ms, ":")):
            ratio = [getattr(p, metric) / slo if getattr(p, metric) is not None else float("nan") for p in c.timeline]
            ax.plot(mid, ratio, linestyle=style, marker=".", label=f"{c.name} {metric[:4].upper()}")
    ax.set_yscale("log")
    load = ax.twinx()
    first = sim.classes[0].timeline
    load.step([p.start_s for p in first] + [first[-1].end_s], [p.load for p in first] + [first[-1].load],
              where="post", color="grey", alpha=0.6)
    load.set_ylabel("load (x plan)", fontsize=8, color="grey")
    load.tick_params(labelsize=7)
    ax.legend(fontsize=7, loc="upper left", ncol=2)


def latency_figure(sim: Simulation, title: str):
    """One row per class: its TTFT and TPOT cumulative distributions; under a load curve, a last row over time."""
    rows = max(len(sim.classes), 1) + (1 if sim.options.load and sim.classes else 0)
    fig, axes = plt.subplots(rows, 2, figsize=(10, ROW_INCHES * rows), squeeze=False)
    if rows > len(sim.classes):
        for ax in axes[-1]:
            ax.remove()
        _timeline(fig.add_subplot(rows, 1, rows), sim)
    for (ttft_ax, tpot_ax), c in zip(axes, sim.classes):
        _panel(ttft_ax, c, "TTFT", c.ttft, c.slo_ttft_ms, c.predicted_ttft_ms, c.simulated_ttft_ms)
        _panel(tpot_ax, c, "TPOT", c.tpot, c.slo_tpot_ms, c.predicted_tpot_ms, c.simulated_tpot_ms)
    verdict = sim.verdict if not sim.misses else f"misses ({len(sim.misses)})"
    fig.suptitle(f"{title}: {verdict}", fontsize=11)
    fig.tight_layout()
    return fig


def latency_png(sim: Simulation, title: str) -> bytes:
    return png_of(latency_figure(sim, title))
