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


def latency_figure(sim: Simulation, title: str):
    """One row per class: its TTFT and TPOT cumulative distributions."""
    rows = max(len(sim.classes), 1)
    fig, axes = plt.subplots(rows, 2, figsize=(10, ROW_INCHES * rows), squeeze=False)
    for (ttft_ax, tpot_ax), c in zip(axes, sim.classes):
        _panel(ttft_ax, c, "TTFT", c.ttft, c.slo_ttft_ms, c.predicted_ttft_ms, c.simulated_ttft_ms)
        _panel(tpot_ax, c, "TPOT", c.tpot, c.slo_tpot_ms, c.predicted_tpot_ms, c.simulated_tpot_ms)
    verdict = sim.verdict if not sim.misses else f"misses ({len(sim.misses)})"
    fig.suptitle(f"{title}: {verdict}", fontsize=11)
    fig.tight_layout()
    return fig


def latency_png(sim: Simulation, title: str) -> bytes:
    return png_of(latency_figure(sim, title))
