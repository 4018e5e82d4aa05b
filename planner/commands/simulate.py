"""``siliconmix simulate``: replay a plan's fleet as a discrete-event simulation (planner.simulate) and set the
simulated latencies beside the plan's predictions. Exit 0 when every class meets its SLOs, 1 when one misses."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer
from pydantic import ValidationError
from rich.table import Table

from planner.catalog import UnknownId
from planner.cli import app, catalog_or_fail, console, fail, print_json, validation_line
from planner.export import ExportInputError, read_plan
from planner.perf.model import RooflineModel, UnsupportedDtype
from planner.simulate import Simulation, SimulationError, SimulationOptions, simulate_plan


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
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
    png: Path | None = typer.Option(None, "--png", help="write the latency distributions per class to this PNG"),
) -> None:
    """Replay a plan request by request and check it meets its SLOs (exit 1 when a class misses)."""
    if replicas < 0:
        fail(f"--replicas: must be 0 (every replica) or a positive count (got {replicas})")
    try:
        options = SimulationOptions(duration_s=duration_s, seed=seed, arrivals=arrivals.value, cv=cv,
                                    max_replicas=replicas or None, warmup_s=warmup_s)
    except ValidationError as exc:
        fail(_option_names(validation_line(exc)))
    try:
        plan = read_plan(plan_file)
    except ExportInputError as exc:
        fail(str(exc))
    costs = RooflineModel(catalog_or_fail())
    try:
        sim = simulate_plan(plan, costs, options)
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


#: SimulationOptions fields as this command's options
OPTION_NAMES = {"duration_s": "--duration-s", "seed": "--seed", "cv": "--cv", "warmup_s": "--warmup-s",
                "max_replicas": "--replicas"}


def _option_names(line: str) -> str:
    for field, option in OPTION_NAMES.items():
        line = line.replace(f"{field}:", f"{option}:")
    return line


def _ms(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


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
            table.add_row(c.name if first else "", metric, c.statistic, _ms(slo, digits), _ms(plan, digits),
                          _ms(simulated, digits), *(_ms(getattr(lat, f"p{p}_ms", None), digits) for p in (50, 90, 99)),
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
    if sim.verdict == "meets":
        console.print("verdict: meets (every class within its SLOs)", highlight=False, markup=False)
    for m in sim.misses:
        by = f"by {m.excess:,.1f} ms ({100 * m.relative:.0f}%)" if m.relative is not None else f"({m.excess:.0f} left)"
        console.print(f"verdict: misses {m.class_name} {m.metric} at {m.statistic}: {m.simulated:,.1f} vs "
                      f"{m.target:,.1f} {by}", highlight=False, markup=False)
    if png is not None:
        console.print(f"wrote {png}", highlight=False, markup=False)
