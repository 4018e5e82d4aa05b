"""``siliconmix simulate``: replay a plan's fleet as a discrete-event simulation (planner.simulate) and set the
simulated latencies beside the plan's predictions. Exit 0 when every class meets its SLOs, 1 when one misses."""

from __future__ import annotations

import csv
import io
import re
from enum import Enum
from pathlib import Path

import typer
from pydantic import ValidationError
from rich.table import Table

from planner.catalog import UnknownId
from planner.cli import app, catalog_or_fail, console, fail, print_json, validation_line
from planner.export import ExportInputError, read_plan
from planner.files import InputFileError, read_text
from planner.perf.model import RooflineModel, UnsupportedDtype
from planner.provenance import stamp
from planner.simulate import Simulation, SimulationError, SimulationOptions, simulate_plan
from planner.simulate.traffic import diurnal_load


class ArrivalChoice(str, Enum):
    poisson = "poisson"
    gamma = "gamma"


@app.command("simulate")
def simulate_command(
    plan_file: Path = typer.Argument(..., help="a plan JSON file (siliconmix plan ... -o plan.json)"),
    duration_s: float = typer.Option(600.0, "--duration-s", help="simulated window (s) in which requests are measured"),
    seed: int = typer.Option(1, "--seed", help="random seed (same seed, same result)"),
    arrivals: ArrivalChoice = typer.Option(ArrivalChoice.poisson, "--arrivals", help="arrival process per replica"),
    cv: float = typer.Option(2.0, "--cv", help="gamma arrivals: coefficient of variation of the gaps"),
    replicas: int = typer.Option(4, "--replicas", help="replicas simulated per pool (0: every replica)"),
    warmup_s: float | None = typer.Option(None, "--warmup-s", help="arrivals before this are not measured "
                                                                    "(default: a tenth of the window)"),
    diurnal: float | None = typer.Option(None, "--diurnal", help="a day compressed into the window: the rates swing "
                                                                 "by this share around the plan's (0.5: x0.5 .. x1.5)"),
    trace: Path | None = typer.Option(None, "--trace", help="CSV of the load over time: start_s,multiplier rows "
                                                            "(x the plan's rates from start_s on; the first at 0)"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
    png: Path | None = typer.Option(None, "--png", help="write the latency distributions per class to this PNG"),
) -> None:
    """Replay a plan request by request and check it meets its SLOs (exit 1 when a class misses)."""
    if replicas < 0:
        fail(f"--replicas: must be 0 (every replica) or a positive count (got {replicas})")
    if diurnal is not None and trace is not None:
        fail("--diurnal, --trace: give one load over time, not both")
    if diurnal is not None and not 0 <= diurnal < 1:
        fail(f"--diurnal: the swing must be in [0, 1) (got {diurnal:g})")
    load = read_trace(trace) if trace is not None else diurnal_load(duration_s, diurnal) if diurnal else ()
    try:
        options = SimulationOptions(duration_s=duration_s, seed=seed, arrivals=arrivals.value, cv=cv,
                                    max_replicas=replicas or None, warmup_s=warmup_s,
                                    load=tuple({"start_s": s, "multiplier": m} for s, m in load))
    except ValidationError as exc:
        fail(_option_names(validation_line(exc)))
    try:
        plan = read_plan(plan_file)
    except ExportInputError as exc:
        fail(str(exc))
    costs = RooflineModel(catalog_or_fail())
    try:
        sim = simulate_plan(plan, costs, options).model_copy(update=stamp(costs.catalog))
    except (UnknownId, UnsupportedDtype) as exc:
        fail(f"{plan_file}: {exc}")
    except SimulationError as exc:
        fail(f"{plan_file}: {exc}", code=1 if plan.status == "infeasible" or not plan.pools else 2)
    if png is not None:
        from planner.report.latency import latency_png

        try:
            png.write_bytes(latency_png(sim, f"{plan.model} ({plan_file.name})"))
        except OSError as exc:
            fail(f"{png}: cannot write ({exc.strerror or exc})", code=1)
    if as_json:
        print_json(sim.model_dump(mode="json"))
    else:
        show_simulation(sim, png)
    raise typer.Exit(0 if sim.verdict == "meets" else 1)


def read_trace(path: Path) -> list[tuple[float, float]]:
    """``start_s,multiplier`` rows of a load CSV (a header row of those names first); exit 2 naming the row."""
    try:
        text = read_text(path)
    except InputFileError as exc:
        fail(str(exc))
    rows = [r for r in csv.reader(io.StringIO(text)) if r and any(c.strip() for c in r)]
    if not rows or [c.strip() for c in rows[0]] != ["start_s", "multiplier"]:
        fail(f"{path}: the first row must be the header start_s,multiplier")
    steps = []
    for number, row in enumerate(rows[1:], start=2):
        try:
            start, multiplier = (float(c) for c in row)
        except ValueError:
            fail(f"{path}: row {number}: want two numbers start_s,multiplier (got {','.join(row)[:80]!r})")
        if not steps and start != 0:
            fail(f"{path}: row {number}: the first step must start at 0 s (got {start:g})")
        if steps and start <= steps[-1][0]:
            fail(f"{path}: row {number}: start_s {start:g} must be after the previous row's {steps[-1][0]:g}")
        steps.append((start, multiplier))
    if not steps:
        fail(f"{path}: no load rows after the header")
    return steps


#: SimulationOptions fields as this command's options
OPTION_NAMES = {"duration_s": "--duration-s", "seed": "--seed", "cv": "--cv", "warmup_s": "--warmup-s",
                "max_replicas": "--replicas"}


def _option_names(line: str) -> str:
    for field, option in OPTION_NAMES.items():
        line = line.replace(f"{field}:", f"{option}:")
    return re.sub(r"\bload\.(\d+)\.", lambda m: f"load step {int(m.group(1)) + 1}: ", line)


def _ms(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def show_timeline(sim: Simulation) -> None:
    """Each stretch of the window: the load and every class's statistic there (* over its SLO); when each falls behind."""
    table = Table(title="Over time, by arrival (ms at each class's statistic; * over the SLO)")
    table.add_column("from s", justify="right")
    table.add_column("load", justify="right")
    for c in sim.classes:
        table.add_column(f"{c.name} TTFT", justify="right")
        table.add_column(f"{c.name} TPOT", justify="right")
    for i, first in enumerate(sim.classes[0].timeline):
        cells = [f"{first.start_s:g}", f"x{first.load:.2f}"]
        for c in sim.classes:
            p = c.timeline[i]
            cells += [_flagged(p.ttft_ms, c.slo_ttft_ms, 1), _flagged(p.tpot_ms, c.slo_tpot_ms, 2)]
        table.add_row(*cells)
    console.print(table)
    for c in sim.classes:
        when = "keeps up throughout" if c.behind_from_s is None else f"falls behind from {c.behind_from_s:g} s"
        console.print(f"{c.name}: {when}", highlight=False, markup=False)


def _flagged(value: float | None, slo: float, digits: int) -> str:
    return _ms(value, digits) + ("*" if value is not None and value > slo else "")


def show_simulation(sim: Simulation, png: Path | None) -> None:
    o = sim.options
    console.print(f"simulated {o.duration_s:g} s ({o.arrivals}{f', cv {o.cv:g}' if o.arrivals == 'gamma' else ''}, "
                  f"seed {o.seed}, {o.max_replicas or 'every'} replica(s) per pool): {sim.requests:,} requests, "
                  f"measured from {o.window_start_s:g} s", highlight=False, markup=False)
    table = Table(title="Classes: simulated against the plan (ms)")
    for col in ("class", "metric", "statistic", "SLO", "plan", "simulated", "p50", "p90", "p99", "within SLO",
                "req/s plan", "req/s sim"):
        table.add_column(col, justify="left" if col in ("class", "metric", "statistic") else "right")
    for c in sim.classes:
        for metric, lat, slo, plan, simulated, within, digits in (
                ("TTFT", c.ttft, c.slo_ttft_ms, c.predicted_ttft_ms, c.simulated_ttft_ms, c.ttft_attainment, 1),
                ("TPOT", c.tpot, c.slo_tpot_ms, c.predicted_tpot_ms, c.simulated_tpot_ms, c.tpot_attainment, 2)):
            first = metric == "TTFT"
            noise = c.ttft_noise_ms if first else c.tpot_noise_ms
            shown = _ms(simulated, digits) + (f" ±{noise:,.{digits}f}" if noise is not None else "")
            table.add_row(c.name if first else "", metric, c.statistic, _ms(slo, digits), _ms(plan, digits),
                          shown, *(_ms(getattr(lat, f"p{p}_ms", None), digits) for p in (50, 90, 99)),
                          _share(within), f"{c.predicted_rps:,.2f}" if first else "",
                          f"{c.throughput_rps:,.2f}" if first else "")
    console.print(table)
    pools = Table(title="Pools (per replica: queue, in system; utilisation: time busy; occupancy: batch used)")
    for col in ("class", "strategy", "role", "device", "replicas sim/all", "util plan", "util sim", "occupancy",
                "queue", "in system", "link", "Little", "TTFT plan/sim", "TPOT plan/sim"):
        pools.add_column(col, justify="left" if col in ("class", "strategy", "role", "device") else "right")
    for p in sim.pools:
        pools.add_row(p.class_name, p.strategy, p.role, p.device, f"{p.simulated_replicas}/{p.replicas}",
                      f"{p.predicted_utilization:.2f}", f"{p.utilization:.2f}", f"{p.occupancy:.2f}",
                      f"{p.mean_queue:.2f}", f"{p.mean_in_system:.2f}", _share(p.link_utilization),
                      _ms(p.littles_ratio, 3), f"{_ms(p.predicted_ttft_ms)} / {_ms(p.simulated_ttft_ms)}",
                      f"{_ms(p.predicted_tpot_ms, 2)} / {_ms(p.simulated_tpot_ms, 2)}")
    console.print(pools)
    if o.load:
        show_timeline(sim)
    if sim.verdict == "meets":
        within = " (or over by less than the sampling noise)" if sim.misses else ""
        console.print(f"verdict: meets (every class within its SLOs{within})", highlight=False, markup=False)
    for m in sim.misses:
        by = f"by {m.excess:,.1f} ms ({100 * m.relative:.0f}%)" if m.relative is not None else f"({m.excess:.0f} left)"
        head = "at the SLO within noise:" if m.within_noise else "verdict: misses"
        noise = (f"; the sampling noise is ±{m.noise:,.1f} ms (run longer or with more --replicas)"
                 if m.noise is not None else "")
        console.print(f"{head} {m.class_name} {m.metric} at {m.statistic}: {m.simulated:,.1f} vs "
                      f"{m.target:,.1f} {by}{noise}", highlight=False, markup=False)
    if png is not None:
        console.print(f"wrote {png}", highlight=False, markup=False)
