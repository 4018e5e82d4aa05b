"""The ``siliconmix`` command: rich tables for people, ``--json`` for machines.

Exit codes: 0 ok, 1 infeasible or failed, 2 bad input (one readable line, never a traceback).
Messages are printed as plain text: a ``[...]`` in a value is shown, not read as rich markup.
"""

from __future__ import annotations

import json
import math
import sys
from enum import Enum
from pathlib import Path
from typing import Any, NoReturn, get_args

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from planner import __version__
from planner.catalog import CatalogError, UnknownId, load_catalog, sourced_value
from planner.estimate import DoesNotFit, InvalidParallelism, estimate
from planner.perf.model import UnsupportedDtype
from planner.files import InputFileError, read_document, write_json
from planner.messages import describe_errors, excerpt, one_line
from planner.nodes import nodes_text
from planner.plan import classes_text, gain_lines, partner_text, replay_line, shape_text, shortfall_warning
from planner.schema import MAX_ALTERNATIVES, MAX_TIME_LIMIT_S, EstimateRequest, WeightsDtype, Workload
from planner.units import BYTES_PER_GB, BYTES_PER_S_PER_GB_S, BYTES_PER_S_PER_TB_S, PARAMS_PER_BILLION, WATTS_PER_KW

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Heterogeneous placement optimizer for LLM inference.",
                  context_settings={"help_option_names": ["-h", "--help"]})
# a pipe gets wide tables rather than ids wrapped at 80 columns
console = Console() if sys.stdout.isatty() else Console(width=200)


class CatalogKind(str, Enum):
    hardware = "hardware"
    models = "models"


#: longest error line printed, in characters (each echoed value is cut shorter, see planner.messages)
MAX_ERROR_CHARS = 2000
#: the weights / KV-cache dtypes, as choices ``--help`` lists
DtypeChoice = Enum("DtypeChoice", [(d, d) for d in get_args(WeightsDtype)], type=str)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"siliconmix {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="print siliconmix's version and exit"),
) -> None:
    """Heterogeneous placement optimizer for LLM inference."""


def fail(message: str, code: int = 2) -> NoReturn:
    """Print one readable line on stderr (as plain text, never markup) and exit with ``code``."""
    line = Text.assemble(("error:", "bold red"), " ", one_line(message, MAX_ERROR_CHARS))
    Console(stderr=True).print(line, highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def validation_line(exc: ValidationError) -> str:
    """One line naming each wrong field, what was wrong and the given value (scalars, cut short)."""
    return describe_errors(exc)


def check_time_limit(option: str, value: float) -> None:
    """Exit 2 unless ``value`` is a solver time limit: positive, finite, at most MAX_TIME_LIMIT_S seconds."""
    if not (math.isfinite(value) and 0 < value <= MAX_TIME_LIMIT_S):
        fail(f"{option}: must be a number of seconds in (0, {MAX_TIME_LIMIT_S:g}] (got {excerpt(value)})")


def print_json(payload: Any) -> None:
    sys.stdout.write(json.dumps(payload, indent=2) + "\n")


def catalog_or_fail():
    try:
        return load_catalog()
    except CatalogError as exc:
        fail(f"catalog: {exc}")


@app.command("catalog")
def catalog_command(
    kind: CatalogKind = typer.Argument(..., help="hardware or models"),
    vendor: str | None = typer.Option(None, help="only this vendor (hardware)"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
    sources: bool = typer.Option(False, "--sources", help="hardware: every number with its source"),
) -> None:
    """List the hardware or model catalog."""
    catalog = catalog_or_fail()
    if kind is CatalogKind.hardware:
        devices = [d for d in catalog.devices.values() if vendor is None or d.vendor == vendor]
        if sources:
            show_sources(devices, as_json)
            return
        if as_json:
            print_json([{**d.model_dump(mode="json"), "calibration": _calibration(catalog, d)} for d in devices])
            return
        table = Table(title="Hardware catalog (dense peak, per device)")
        for col in ("id", "vendor", "memory GB", "weights tier TB/s", "scale-up TB/s", "bf16 TFLOP/s", "fp8 TFLOP/s",
                    "TDP W", "domain", "$/h", "calibration"):
            table.add_column(col, justify="left" if col in ("id", "vendor", "memory GB", "calibration") else "right")
        for d in devices:
            mem = ", ".join(f"{t.tier} {t.capacity_gb:g}" for t in d.memory_tiers)
            cal = _calibration(catalog, d)
            scale_up_tb_s = d.scale_up.bandwidth_gb_s * BYTES_PER_S_PER_GB_S / BYTES_PER_S_PER_TB_S
            table.add_row(
                d.id, d.vendor, mem, f"{d.weights_memory.bandwidth_tb_s:,.3f}", f"{scale_up_tb_s:,.3f}",
                _peak(d, "bf16"), _peak(d, "fp8"), f"{d.tdp_w:,.0f}", str(d.scale_up.domain_size),
                f"{d.price_usd_per_hour:.2f}",
                f"{cal['family']}: {cal['records']} records" if cal["fitted"] else "uncalibrated (priors)",
            )
        console.print(table)
        return
    from planner.perf.model import active_params, kv_bytes_per_token, total_params

    if as_json:
        print_json([{**m.model_dump(mode="json"), "vendor": m.family} for m in catalog.models.values()])
        return
    table = Table(title="Model catalog")
    for col in ("id", "layers", "hidden", "heads/kv", "attention", "experts", "params B", "active B", "KV B/token bf16"):
        table.add_column(col, justify="left" if col in ("id", "attention") else "right")
    for m in catalog.models.values():
        experts = f"{m.moe.experts_active}/{m.moe.experts}" if m.moe else "-"
        table.add_row(
            m.id, str(m.layers), str(m.hidden_size), f"{m.attention_heads}/{m.kv_heads}", m.attention, experts,
            f"{total_params(m) / PARAMS_PER_BILLION:.1f}", f"{active_params(m) / PARAMS_PER_BILLION:.1f}", f"{kv_bytes_per_token(m, 'bf16'):,.0f}",
        )
    console.print(table)


def show_sources(devices, as_json: bool) -> None:
    """Every sourced number of ``devices``: its catalog field, value, source and whether it is an estimate."""
    rows = [{"device": d.id, "field": path, "value": sourced_value(d, path), "source": p.source, "estimate": p.estimate}
            for d in devices for path, p in d.provenance.items()]
    if as_json:
        print_json(rows)
        return
    table = Table(title="Hardware catalog: the source of every number (units in the field names)")
    for col in ("device", "field", "value", "estimate", "source"):
        table.add_column(col, justify="right" if col == "value" else "left", overflow="fold")
    for r in rows:
        table.add_row(r["device"], r["field"], f"{r['value']:g}" if isinstance(r["value"], float) else str(r["value"]),
                      "yes" if r["estimate"] else "", r["source"])
    console.print(table)


def _calibration(catalog, device) -> dict:
    """The device's family and whether published measurements fitted it (catalogs/calibration/)."""
    family = catalog.families.get(device.family) if device.family else None
    return {"family": device.family, "fitted": bool(family and family.fitted),
            "records": family.records if family else 0}


def _peak(device, dtype: str) -> str:
    value = device.peak_dense_tflops.get(dtype)
    return "-" if value is None else f"{value:,.0f}"


@app.command("estimate")
def estimate_command(
    model: str = typer.Option(..., help="model id (siliconmix catalog models)"),
    device: str = typer.Option(..., help="device id (siliconmix catalog hardware)"),
    tp: int = typer.Option(1, help="devices per replica (tensor parallel; chips of a pipeline on SRAM machines)"),
    ep: int = typer.Option(1, help="MoE: expert-parallel groups, each an attention replica of tp/ep devices"),
    pp: int = typer.Option(1, help="pipeline stages across nodes (GPU-like devices), each a tp-way TP group"),
    batch: int = typer.Option(1, help="concurrent sequences in a decode step"),
    isl: int = typer.Option(2048, help="input (prompt) tokens"),
    osl: int = typer.Option(256, help="output tokens"),
    dtype: DtypeChoice = typer.Option("bf16", help="weights dtype"),
    kv_dtype: DtypeChoice | None = typer.Option(None, help="KV-cache dtype (default: the weights dtype)"),
    contiguous_kv: bool = typer.Option(False, "--contiguous-kv", help="reserve max context per request instead of paging"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
) -> None:
    """What one model costs on one device configuration (roofline model)."""
    catalog = catalog_or_fail()
    try:
        request = EstimateRequest(
            model=model, device=device, tp=tp, ep=ep, pp=pp, batch=batch, isl=isl, osl=osl,
            dtype=dtype.value, kv_dtype=kv_dtype.value if kv_dtype else None, paged_kv=not contiguous_kv,
        )
        result = estimate(request, catalog, require_fit=True)
    except ValidationError as exc:
        fail(validation_line(exc))
    except (UnknownId, DoesNotFit, InvalidParallelism, UnsupportedDtype) as exc:
        fail(str(exc))
    if as_json:
        print_json(result.model_dump(mode="json"))
        return
    shape = f"{result.tp}x" if result.pp == 1 else f"tp{result.tp}×pp{result.pp}"
    table = Table(title=f"{result.model} on {shape} {result.device} ({result.dtype}, KV {result.kv_dtype})")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    rows = [
        ("TTFT (prefill of isl)", f"{result.ttft_ms:,.1f} ms ({result.prefill_bound} bound)"),
        ("TPOT (decode step)", f"{result.tpot_ms:,.2f} ms ({result.bound} bound)"),
        ("  compute / memory / comm", f"{result.decode_compute_ms:.2f} / {result.decode_memory_ms:.2f} / {result.decode_communication_ms:.2f} ms"),
        ("output tokens/s (replica)", f"{result.output_tokens_per_s:,.0f}"),
        ("output tokens/s per user", f"{result.output_tokens_per_s_per_user:,.1f}"),
        ("output tokens/s per device", f"{result.output_tokens_per_s_per_device:,.0f}"),
        ("prefill tokens/s", f"{result.prefill_tokens_per_s:,.0f}"),
        ("weights per device", f"{result.weights_bytes_per_device / BYTES_PER_GB:,.1f} GB"),
        ("KV per token", f"{result.kv_bytes_per_token:,.0f} B"),
        ("KV per request (isl+osl)", f"{result.kv_bytes_per_request / BYTES_PER_GB:,.3f} GB"),
        ("max batch in memory", f"{result.max_batch_in_memory:,}"),
        ("power (devices + node share)", f"{result.power_w / WATTS_PER_KW:,.2f} kW"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)


class ObjectiveChoice(str, Enum):
    max_goodput = "max_goodput"
    min_cost = "min_cost"
    min_power = "min_power"
    fixed_footprint = "fixed_footprint"
    max_interactivity = "max_interactivity"


class SolverChoice(str, Enum):
    ortools = "ortools"
    pulp = "pulp"


class EngineChoice(str, Enum):
    scip = "scip"
    highs = "highs"
    cbc = "cbc"


def load_workload(path: Path, overrides: dict) -> Workload:
    """Read a workload file and apply command-line overrides; validation errors name the field."""
    raw = read_document(path)
    if not isinstance(raw, dict):
        raise InputFileError(f"{path}: a workload is a mapping (model, classes, constraints, ...)")
    constraints = raw.get("constraints", {})
    if isinstance(constraints, dict):  # anything else is left for validation to name
        constraints = {**constraints, **{k: overrides[k] for k in ("power_budget_kw", "devices")
                                         if overrides.get(k) is not None}}
    merged = {**raw, "constraints": constraints}
    if overrides.get("objective") is not None:
        merged["objective"] = overrides["objective"]
    return Workload.model_validate(merged)


@app.command("plan")
def plan_command(
    workload_file: Path = typer.Argument(..., help="workload YAML or JSON"),
    power_budget_kw: float | None = typer.Option(None, help="override the facility power budget (kW)"),
    objective: ObjectiveChoice | None = typer.Option(None, help="override the objective"),
    solver: SolverChoice = typer.Option(SolverChoice.ortools, help="MILP backend"),
    engine: EngineChoice | None = typer.Option(None, help="ortools: scip (default) | highs; pulp: highs (default) | cbc"),
    time_limit_s: float = typer.Option(5.0, help="time limit per MILP solve (s); the best plan found so far is returned"),
    gap: float = typer.Option(1e-4, help="relative optimality gap at which a solve stops (0.0001 = 0.01 %)"),
    node_limit: int | None = typer.Option(None, min=1, help="branch-and-bound nodes per MILP solve: a work limit, "
                                                            "so where it binds first the answer does not depend on load"),
    devices: str | None = typer.Option(None, help="comma-separated device ids to allow"),
    baseline: bool = typer.Option(True, help="also solve the best homogeneous fleet"),
    alternatives: int = typer.Option(0, min=0, max=MAX_ALTERNATIVES, help="also the N best plans with other device mixes"),
    sensitivity: bool = typer.Option(False, "--sensitivity",
                                     help="re-solve with each estimated input moved by ±delta: which flip the mix"),
    sensitivity_delta: float = typer.Option(0.2, help="with --sensitivity: the relative move (0.2 = ±20 %)"),
    simulate: bool = typer.Option(False, "--simulate", help="also replay the plan request by request (10 simulated "
                                                            "minutes; siliconmix simulate for every figure)"),
    as_json: bool = typer.Option(False, "--json", help="print the plan as JSON"),
    output: Path | None = typer.Option(None, "-o", "--output", help="also write the plan JSON here"),
) -> None:
    """Plan the fleet: which silicon runs which task, how many, configured how."""
    from planner.optimize import PlanOptions, plan_workload
    from planner.solvers.base import SolverFailed

    catalog = catalog_or_fail()
    check_time_limit("--time-limit-s", time_limit_s)
    if not 0 <= gap < 1:
        fail(f"--gap: must be in [0, 1) (got {excerpt(gap)})")
    if not 0 < sensitivity_delta < 1:
        fail(f"--sensitivity-delta: must be a fraction in (0, 1), e.g. 0.2 for ±20 % (got {excerpt(sensitivity_delta)})")
    overrides = {"power_budget_kw": power_budget_kw, "objective": objective.value if objective else None,
                 "devices": [d.strip() for d in devices.split(",") if d.strip()] if devices else None}
    try:
        workload = load_workload(workload_file, overrides)
        options = PlanOptions.of({"solver": solver.value, "engine": engine.value if engine else None,
                                  "time_limit_s": time_limit_s, "relative_gap": gap, "node_limit": node_limit,
                                  "baseline": baseline, "alternatives": alternatives, "sensitivity_delta": sensitivity_delta if sensitivity else None,
                                  "simulate": simulate})
        plan = plan_workload(workload, catalog, options)
    except ValidationError as exc:
        fail(f"{workload_file}: {validation_line(exc)}")
    except (InputFileError, UnknownId, UnsupportedDtype, ValueError) as exc:
        fail(str(exc))
    except SolverFailed as exc:  # no answer about the workload: neither bad input nor infeasible
        fail(str(exc), code=1)
    payload = plan.model_dump(mode="json")
    if output is not None:
        try:
            write_json(output, payload)
        except OSError as exc:
            fail(f"{output}: cannot write the plan ({exc.strerror or exc})", code=1)
    if as_json:
        print_json(payload)
    else:
        show_plan(plan)
    if plan.status == "infeasible":
        raise typer.Exit(1)


def show_plan(plan) -> None:
    """A rich summary: headline, pools, classes, totals, baseline and what binds."""
    if plan.status == "infeasible":
        reason = plan.diagnosis.message if plan.diagnosis else "the solver found no plan"
        console.print(f"[bold red]infeasible[/]: {escape(reason)}", highlight=False)
        return
    console.print(f"[bold]{plan.model}[/]  status [bold]{plan.status}[/]  objective {plan.objective}  "
                  f"goodput scale [bold]{plan.goodput_scale:.3f}[/] x the workload's rates  "
                  f"({plan.solver.backend}/{plan.solver.engine}, {plan.solver.time_s:.2f} s"
                  + (f", gap {plan.solver.gap:.2%}" if plan.solver.gap else "") + ")", highlight=False)
    if (short := shortfall_warning(plan)) is not None:
        console.print(f"[bold yellow]warning[/]: {escape(short)}", highlight=False)
    for c in plan.confidence:
        if c.level != "calibrated" or c.estimated_inputs:
            inputs = f"; estimated inputs: {', '.join(c.estimated_inputs)}" if c.estimated_inputs else ""
            console.print(f"[yellow]{c.level}[/] {c.device}: {escape('; '.join(c.reasons))}{escape(inputs)}", highlight=False)
    pools = Table(title="Pools")
    for col in ("class", "strategy", "role", "device", "tp", "partner", "batch", "replicas", "devices", "util", "TTFT ms", "TPOT ms", "slot wait ms", "kW"):
        pools.add_column(col, justify="left" if col in ("class", "strategy", "role", "device", "partner") else "right")
    for p in plan.pools:
        pools.add_row(classes_text(p), p.route, p.role, p.device, shape_text(p), partner_text(p), str(p.batch), str(p.replicas),
                      str(p.devices), f"{p.utilization:.2f}", _ms(p.ttft_ms), _ms(p.tpot_ms),
                      f"{p.slot_wait_ms:,.2f}" if p.tpot_ms is not None else "-", f"{p.power_kw:,.1f}")
    console.print(pools)
    classes = Table(title="Classes")
    for col in ("class", "rate rps", "served rps", "strategies", "TTFT ms", "TTFT range", "TPOT ms", "TPOT range", "tok/s/user"):
        classes.add_column(col, justify="left" if col in ("class", "strategies") else "right")
    for c in plan.classes:
        shares = ", ".join(f"{s} {v:.0%}" for s, v in c.strategy_shares.items())
        classes.add_row(c.name, f"{c.rate_rps:g}", f"{c.rate_rps_served:,.2f}", shares, _ms(c.ttft_ms), _range(c.ttft_ms_range),
                        _ms(c.tpot_ms), _range(c.tpot_ms_range),
                        f"{c.output_tokens_per_s_per_user:,.1f}" if c.output_tokens_per_s_per_user else "-")
    console.print(classes)
    t = plan.totals
    by_type = ", ".join(f"{n} {d}" for d, n in t.devices_by_type.items())
    console.print(f"totals: {t.devices} devices ({by_type}){nodes_text(t, plan.workload.constraints.whole_nodes)}; {t.power_kw:,.1f} kW facility "
                  f"({t.it_power_kw:,.1f} kW IT); ${t.cost_usd_per_hour:,.2f}/h; capex ${t.capex_usd:,.0f}",
                  highlight=False, markup=False)
    if plan.baseline is not None and plan.baseline.device is not None:
        gain = f"; gain {plan.gain:.2f}x" if plan.gain else ""
        console.print(f"best homogeneous fleet: {plan.baseline.device} at goodput scale {plan.baseline.goodput_scale:.3f} "
                      f"({plan.baseline.power_kw:,.1f} kW, ${plan.baseline.cost_usd_per_hour:,.2f}/h){gain}", highlight=False, markup=False)
    for line in gain_lines(plan):
        console.print(line, highlight=False, markup=False)
    for i, alt in enumerate(plan.alternatives, start=1):
        mix = ", ".join(f"{n} {d}" for d, n in alt.devices_by_type.items())
        console.print(f"alternative {i}: {mix}: goodput scale {alt.goodput_scale:.3f}, {alt.power_kw:,.1f} kW, "
                      f"${alt.cost_usd_per_hour:,.2f}/h; {alt.shortfall:.2%} short of the best ({alt.status})",
                      highlight=False, markup=False)
    console.print(f"binding: {', '.join(plan.binding_constraints) or 'none'}", highlight=False, markup=False)
    if plan.sensitivity is not None:
        show_sensitivity(plan.sensitivity)
    if plan.simulation is not None:
        console.print(replay_line(plan.simulation), highlight=False, markup=False)
    if plan.verification is not None:
        verdict = "[green]all constraints hold[/]" if plan.verification.ok else f"[red]{escape('; '.join(plan.verification.messages))}[/]"
        console.print(f"verification (recomputed without the solver): {verdict}", highlight=False)


def show_sensitivity(section) -> None:
    """The sensitivity table: each input, what moving it by −δ and +δ does, and whether it flips the mix."""
    delta = f"{section.delta:.0%}"
    table = Table(title=f"Sensitivity: each input moved by ±{delta}, {section.resolves} re-solves "
                        f"({section.objective_quantity} {section.objective_value:,.4g}; flagged: mix change or "
                        f"objective beyond ±{section.threshold:.0%})")
    for col in ("input", "estimate", "value", f"−{delta} effect", f"+{delta} effect", "flips mix?"):
        table.add_column(col, justify="right" if col == "value" else "left", overflow="fold")
    for row in section.inputs:
        flag = "[bold red]yes[/]" if row.flips_mix else "[yellow]no, moves[/]" if row.moves_objective else "no"
        value = f"{row.base_value:,.0f}" if abs(row.base_value) >= 1000 else f"{row.base_value:.4g}"
        table.add_row(escape(row.key), "yes" if row.estimate else "", value,
                      escape(_effect(row.low, 1 - section.delta)), escape(_effect(row.high, 1 + section.delta)), flag)
    console.print(table)
    if section.not_tried:
        console.print(f"not tried: {', '.join(f'{n.key} ({n.reason})' for n in section.not_tried)}",
                      highlight=False, markup=False)


def _effect(side, asked: float) -> str:
    """One side of a sensitivity row: the objective's change, the fleet when the mix changes, and the factor
    applied when the field's range clamped the ``asked`` one; a re-solve that stopped short says so."""
    if side.objective_change_pct is None:
        return f"no plan ({side.status})"
    clamped = f" (clamped to ×{side.factor:.3g})" if abs(side.factor - asked) > 1e-9 else ""
    mix = (f"; mix {', '.join(f'{n} {d}' for d, n in side.devices_by_type.items())}"
           if side.mix_changes or side.types_change else "")
    status = f" ({side.status})" if side.status != "optimal" else ""
    change = side.objective_change_pct if abs(side.objective_change_pct) >= 5e-3 else 0.0  # no "-0.00%"
    return f"{change:+.2f}%{mix}{clamped}{status}"


def _range(span: tuple[float, float] | None) -> str:
    """A predicted figure's calibration range, ``low-high`` ms."""
    return "-" if span is None else f"{_ms(span[0])}-{_ms(span[1])}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def main() -> None:
    """Console-script entry point: a usage error (an unknown option, a value not among the choices) is one
    line and exit 2; an error no command expected is still one line (exit 1), not a traceback."""
    try:
        code = app(standalone_mode=False)
    except Exception as exc:  # noqa: BLE001 - the last line of defence of "never a traceback"
        if _kind(exc, "UsageError"):  # click's, or the copy typer vendors
            ctx = getattr(exc, "ctx", None)
            command = ctx.command_path if ctx is not None else "siliconmix"
            code = _exit_code(lambda: fail(f"{exc.format_message()} (see {command} -h)"))
        elif _kind(exc, "Abort"):
            code = _exit_code(lambda: fail("interrupted", code=130))
        else:
            code = _exit_code(lambda: fail(f"internal error: {type(exc).__name__}: {exc}", code=1))
    sys.exit(code if isinstance(code, int) else 0)


def _kind(exc: BaseException, name: str) -> bool:
    return any(cls.__name__ == name for cls in type(exc).__mro__)


def _exit_code(report) -> int:
    """Run ``report`` (which ends in ``fail``) and return the exit code it chose."""
    try:
        report()
    except typer.Exit as done:
        return done.exit_code
    return 1


# Commands that live in their own modules register themselves on `app` when imported (one line each).
import planner.commands.study  # noqa: E402,F401
import planner.commands.export  # noqa: E402,F401
import planner.commands.calibrate  # noqa: E402,F401
import planner.commands.deploy  # noqa: E402,F401
import planner.commands.claims  # noqa: E402,F401
import planner.commands.simulate  # noqa: E402,F401


def _plug_in_commands() -> None:
    """Import the modules other installed packages name under the ``siliconmix.commands`` entry point
    (the REST service's ``serve``); each registers its command on ``app``."""
    from importlib.metadata import entry_points

    for entry in entry_points(group="siliconmix.commands"):
        entry.load()


_plug_in_commands()
