"""Study charts (PNG) and the self-contained HTML report, written into a study's output folder."""

from __future__ import annotations

from pathlib import Path

from planner.report.charts import Chart, fleet_chart, frontier_chart
from planner.report.html import render
from planner.study import Analysis, StudySpec

__all__ = ["write_report"]


def write_report(out_dir: Path, spec: StudySpec, rows: list[dict], analysis: Analysis) -> list[Path]:
    """pareto.png (the first frontier), pareto-<name>.png (the others), fleets.png (with ``compare``),
    and report.html embedding them all."""
    charts: dict[str, Chart] = {}
    paths = []
    for i, f in enumerate(spec.pareto):
        chart = frontier_chart(rows, f, analysis.frontiers.get(f.label, []), spec.name)
        charts[f.label] = chart
        path = out_dir / ("pareto.png" if i == 0 else f"pareto-{f.label}.png")
        path.write_bytes(chart.png)
        paths.append(path)
    if spec.compare is not None and rows:
        chart = fleet_chart(rows, spec.compare.axis, spec.compare.metric, analysis.singles, spec.name)
        charts["fleets"] = chart
        paths.append(out_dir / "fleets.png")
        paths[-1].write_bytes(chart.png)
    paths.append(out_dir / "report.html")
    paths[-1].write_text(render(spec, rows, analysis.frontiers, analysis.comparison, charts))
    return paths
