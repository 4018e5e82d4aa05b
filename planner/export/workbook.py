"""The procurement workbook of a plan: Summary, Bill of Materials, Network, Pools, TCO, TCO by year, Sensitivity
(when the plan has its sensitivity analysis), Assumptions.

Every derived number is a live formula over the cells (unit prices, device counts, the TCO inputs) and is
written with the value computed in :mod:`planner.export.bom` as its cached result, so readers that do not
recalculate (pandas, openpyxl, viewers) see the same numbers Excel or LibreOffice compute.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import xlsxwriter

from planner.catalog import Catalog
from planner.export.assumptions import plan_assumptions
from planner.perf.model import default_kv_dtype
from planner.plan import gain_lines, shortfall_warning
from planner.export.bom import (
    DEPRECIATION_YEARS,
    ELECTRICITY_USD_PER_KWH,
    HOSTING_USD_PER_KW_MONTH,
    RACK_UNITS_PER_RACK,
    UTILIZATION,
    BomLine,
    Tco,
    TcoInputs,
    bom_lines,
    plan_devices,
    tco_of,
)
from planner.export.cells import cell, put, wrapped_height
from planner.export.cost_sheets import LIFETIME_SHEET, NETWORK_SHEET, write_lifetime_sheet, write_network_sheet
from planner.export.lifetime import Lifetime, LifetimeInputs, lifetime_of
from planner.export.network import Fabric, NetworkInputs, Transfer, fabric_of, read_network_inputs, transfers
from planner.export.plan_sheets import (
    ASSUMPTIONS_SHEET,
    BOM_SHEET,
    POOLS_SHEET,
    BomTotals,
    write_assumptions_sheet,
    write_bom_sheet,
    write_pools_sheet,
)
from planner.export.sensitivity_sheet import SENSITIVITY_SHEET, write_sensitivity_sheet
from planner.export.styles import Styles
from planner.nodes import nodes_text
from planner.schema import Plan
from planner.units import WATTS_PER_KW

SUMMARY_SHEET = "Summary"
TCO_SHEET = "TCO"
SHEETS = (SUMMARY_SHEET, BOM_SHEET, NETWORK_SHEET, POOLS_SHEET, TCO_SHEET, LIFETIME_SHEET, ASSUMPTIONS_SHEET)
#: per sheet: the last row repeated at the top of every printed page, pages wide, the last column repeated at
#: the left of every page (the wide tables print two pages wide at a legible size, their ids on both)
PRINT = {SUMMARY_SHEET: (0, 1, None), BOM_SHEET: (1, 2, 1), NETWORK_SHEET: (0, 1, None), POOLS_SHEET: (0, 2, 0),
         TCO_SHEET: (1, 1, None), LIFETIME_SHEET: (0, 1, None), ASSUMPTIONS_SHEET: (0, 1, None),
         SENSITIVITY_SHEET: (4, 2, 0)}


def sheet_names(plan: Plan) -> tuple[str, ...]:
    """The workbook's sheets, in order: Sensitivity (before Assumptions) only for a plan analysed for it."""
    if plan.sensitivity is None:
        return SHEETS
    return (*SHEETS[:-1], SENSITIVITY_SHEET, SHEETS[-1])


@dataclass(frozen=True)
class PlanBook:
    """What a plan workbook computes: its lines, network, TCO and years (the cached values of the formulas)."""

    lines: list[BomLine]
    tco: Tco
    transfers: list[Transfer]
    network: NetworkInputs
    fabric: Fabric
    lifetime_inputs: LifetimeInputs
    lifetime: Lifetime

    @property
    def planned_it_power_kw(self) -> float:
        """IT power as the planner charged it (each device its share of node overhead)."""
        return sum(line.planned_it_power_kw for line in self.lines)


def default_inputs(plan: Plan) -> TcoInputs:
    """The TCO inputs a workbook opens with; PUE is the plan's own."""
    return TcoInputs(pue=plan.workload.constraints.pue)


def plan_book(plan: Plan, catalog: Catalog, inputs: TcoInputs | None = None, network: NetworkInputs | None = None,
              lifetime_inputs: LifetimeInputs | None = None) -> PlanBook:
    """Bill of materials, network, TCO and years of a plan (what the workbook's formulas evaluate to);
    the network prices default to the catalog's ``prices/networking.yaml``."""
    inputs = inputs or default_inputs(plan)
    network = network or read_network_inputs()
    lifetime_inputs = lifetime_inputs or LifetimeInputs()
    lines = bom_lines(plan, catalog, inputs.rack_units_per_rack)
    items = transfers(plan)
    fabric = fabric_of(items, network)
    tco = tco_of(plan, lines, inputs, fabric.capex_usd)
    life = lifetime_of(lifetime_inputs, tco.capex_usd + fabric.capex_usd, tco.opex_usd_per_year,
                       tco.million_tokens_per_year, inputs.depreciation_years)
    return PlanBook(lines, tco, items, network, fabric, lifetime_inputs, life)


def write_plan_workbook(plan: Plan, catalog: Catalog, path: str | Path, inputs: TcoInputs | None = None,
                        source: str = "") -> PlanBook:
    """Write the workbook to ``path``; ``source`` names the plan file on the Summary sheet."""
    book = plan_book(plan, catalog, inputs)
    assumptions = plan_assumptions(plan, catalog, plan_devices(plan))  # before the file: UnknownId leaves none
    buffer = io.BytesIO()  # built in memory, so a failed write is one OSError (no half-closed zip)
    workbook = xlsxwriter.Workbook(buffer, {"in_memory": True})
    style = Styles(workbook)
    sheets = {name: workbook.add_worksheet(name) for name in sheet_names(plan)}
    totals = write_bom_sheet(sheets[BOM_SHEET], style, book.lines, book.tco.inputs.pue,
                             f"Bill of materials: {plan.model}, {plan.totals.devices:,} devices")
    for key, name in (("extended_price_usd", "capex_usd"), ("it_power_kw", "it_power_kw"),
                      ("facility_power_kw", "facility_power_kw"), ("fleet_usd_per_hour", "fleet_usd_per_hour")):
        workbook.define_name(name, f"='{BOM_SHEET}'!{totals.refs[key]}")
    write_network_sheet(workbook, sheets[NETWORK_SHEET], style, book.transfers, book.network, book.fabric)
    write_pools_sheet(sheets[POOLS_SHEET], style, plan)
    _write_tco_sheet(workbook, sheets[TCO_SHEET], style, book.tco)
    write_lifetime_sheet(workbook, sheets[LIFETIME_SHEET], style, book.lifetime, book.lifetime_inputs)
    _write_summary_sheet(workbook, sheets[SUMMARY_SHEET], style, plan, book, totals, source)
    write_assumptions_sheet(sheets[ASSUMPTIONS_SHEET], style, assumptions)
    if plan.sensitivity is not None:
        write_sensitivity_sheet(sheets[SENSITIVITY_SHEET], style, plan.sensitivity)
    for name, ws in sheets.items():
        print_setup(ws, *PRINT[name])
    workbook.set_properties({"title": f"siliconmix plan: {plan.model}", "subject": "procurement workbook",
                             "comments": "Formulas carry cached values computed by siliconmix."})
    workbook.close()
    Path(path).write_bytes(buffer.getvalue())
    return book


def print_setup(ws, header_row: int, pages_wide: int = 1, id_column: int | None = None) -> None:
    """Landscape A4, ``pages_wide`` pages wide, header rows (and id columns) repeated on every page."""
    ws.set_landscape()
    ws.set_paper(9)
    ws.fit_to_pages(pages_wide, 0)
    ws.repeat_rows(0, header_row)
    if id_column is not None:
        ws.repeat_columns(0, id_column)
    ws.set_margins(left=0.4, right=0.4, top=0.5, bottom=0.5)
    ws.set_footer("&L&A&RPage &P of &N")


# ------------------------------------------------------------------------------------------------- TCO
TCO_INPUTS = (
    # name, label, unit, number format, source, data validation
    ("electricity_usd_per_kwh", "Electricity price", "$/kWh", "usd3", ELECTRICITY_USD_PER_KWH.source,
     {"validate": "decimal", "criteria": ">=", "value": 0}),
    ("pue", "PUE", "facility / IT power", "dec2", "the plan's workload (constraints.pue); the power budget was solved "
     "with it", {"validate": "decimal", "criteria": "between", "minimum": 1, "maximum": 3}),
    ("depreciation_years", "Depreciation period", "years", "dec1", DEPRECIATION_YEARS.source,
     {"validate": "decimal", "criteria": ">", "value": 0}),
    ("utilization", "Utilisation", "share of the year", "pct", UTILIZATION.source,
     {"validate": "decimal", "criteria": "between", "minimum": 0.001, "maximum": 1}),
    ("hosting_usd_per_kw_month", "Hosting (colocation)", "$/kW-month of IT load", "usd",
     HOSTING_USD_PER_KW_MONTH.source,
     {"validate": "decimal", "criteria": ">=", "value": 0}),
    ("rack_units_per_rack", "Rack space", "U per rack", "int", RACK_UNITS_PER_RACK.source,
     {"validate": "decimal", "criteria": ">", "value": 0}),
)

# name, label, unit, number format, formula (over defined names and rows above), meaning
TCO_ROWS = (
    ("capex", "Capex (devices + network)", "$", "usd", "=capex_usd+network_capex_usd",
     "sum of extended prices (Bill of Materials) + network capex (Network)"),
    ("it_kw", "IT power", "kW", "dec1", "=it_power_kw", "devices x TDP + whole nodes x node overhead"),
    ("facility_kw", "Facility power", "kW", "dec1", "=it_power_kw*pue", "IT power x PUE"),
    ("energy_kwh", "Energy per year", "kWh/year", "int", "={facility_kw}*8760",
     "facility power x 8,760 h: provisioned power all year"),
    ("energy_usd", "Energy cost per year", "$/year", "usd", "={energy_kwh}*electricity_usd_per_kwh",
     "energy x electricity price"),
    ("hosting_usd", "Hosting per year", "$/year", "usd", "=it_power_kw*hosting_usd_per_kw_month*12",
     "IT power x hosting price x 12 months"),
    ("opex", "Opex per year", "$/year", "usd", "={energy_usd}+{hosting_usd}", "energy + hosting"),
    ("depreciation", "Depreciation per year", "$/year", "usd", "={capex}/depreciation_years",
     "capex / depreciation period (straight line)"),
    ("total", "Total cost per year", "$/year", "usd", "={depreciation}+{opex}", "depreciation + opex"),
    ("tokens_per_s", "Output tokens per second", "tokens/s", "int", "=output_tokens_per_s",
     "the plan's served rate x output tokens, summed over classes (Summary)"),
    ("mtok_hour", "Million output tokens per hour", "M tokens/h", "dec2",
     "={tokens_per_s}*3600*utilization/1000000", "tokens/s x 3,600 x utilisation / 1e6"),
    ("mtok_year", "Million output tokens per year", "M tokens/year", "int", "={mtok_hour}*8760", "per hour x 8,760"),
    ("usd_per_mtok", "Cost per million output tokens (owned)", "$/M tokens", "usd3", "={total}/{mtok_year}",
     "total cost per year / million tokens per year"),
    ("fleet_hourly", "Fleet at the catalog's hourly prices", "$/h", "usd2", "=fleet_usd_per_hour",
     "devices x hourly price (Bill of Materials)"),
    ("usd_per_mtok_hourly", "Cost per million output tokens at hourly prices", "$/M tokens", "usd3",
     "={fleet_hourly}/{mtok_hour}", "fleet $/h / million tokens per hour"),
)
TCO_NAMED = {"total": "total_usd_per_year", "usd_per_mtok": "usd_per_million_tokens",
             "usd_per_mtok_hourly": "usd_per_million_tokens_hourly", "opex": "opex_usd_per_year",
             "mtok_year": "million_tokens_per_year"}


def tco_values(tco: Tco) -> dict[str, float | None]:
    return {
        "capex": tco.capex_usd + tco.network_capex_usd, "it_kw": tco.it_power_kw, "facility_kw": tco.facility_power_kw,
        "energy_kwh": tco.energy_kwh_per_year, "energy_usd": tco.energy_usd_per_year,
        "hosting_usd": tco.hosting_usd_per_year, "opex": tco.opex_usd_per_year,
        "depreciation": tco.depreciation_usd_per_year, "total": tco.total_usd_per_year,
        "tokens_per_s": tco.output_tokens_per_s, "mtok_hour": tco.million_tokens_per_hour,
        "mtok_year": tco.million_tokens_per_year, "usd_per_mtok": tco.usd_per_million_tokens,
        "fleet_hourly": tco.fleet_usd_per_hour, "usd_per_mtok_hourly": tco.usd_per_million_tokens_hourly,
    }


def _write_tco_sheet(workbook, ws, style, tco: Tco) -> None:
    ws.write_string(0, 0, "Total cost of ownership", style("title"))
    for col, (header, width) in enumerate((("Input", 44), ("Value", 16), ("Unit", 24), ("Source or formula", 80))):
        ws.write_string(1, col, header, style("header"))
        ws.set_column(col, col, width)
    ws.freeze_panes(2, 0)
    row = 2
    for name, label, unit, number, source, validation in TCO_INPUTS:
        ws.write_string(row, 0, label, style("label"))
        ws.write_number(row, 1, getattr(tco.inputs, name), style("input", number))
        ws.data_validation(row, 1, row, 1, {**validation, "error_message": f"{label}: {unit}"})
        ws.write_string(row, 2, unit)
        ws.write_string(row, 3, source, style("note_wrap"))
        ws.set_row(row, wrapped_height(source, 80))
        workbook.define_name(name, f"='{TCO_SHEET}'!{cell(row, 1, absolute=True)}")
        row += 1
    row += 1
    for col, header in enumerate(("Quantity", "Value", "Unit", "Formula")):
        ws.write_string(row, col, header, style("header"))
    row += 1
    values, refs = tco_values(tco), {}
    for name, label, unit, number, formula, meaning in TCO_ROWS:
        refs[name] = cell(row, 1)
        role = "headline" if name.startswith("usd_per_mtok") else "formula"
        ws.write_string(row, 0, label, style("label"))
        put(ws, row, 1, values[name], style(role, number), formula.format(**refs))
        ws.write_string(row, 2, unit)
        ws.write_string(row, 3, meaning, style("note"))
        if name in TCO_NAMED:
            workbook.define_name(TCO_NAMED[name], f"='{TCO_SHEET}'!{cell(row, 1, absolute=True)}")
        row += 1


# --------------------------------------------------------------------------------------------- Summary
CLASS_HEADERS = (
    ("Class", 18, "text"), ("Rate (req/s)", 10, "dec2"), ("Served (req/s)", 11, "dec2"), ("Input tokens", 10, "int"),
    ("Output tokens", 10, "int"), ("Output tokens/s", 12, "int"), ("TTFT SLO (ms)", 10, "dec1"),
    ("TTFT predicted (ms)", 11, "dec1"), ("TPOT SLO (ms)", 10, "dec1"), ("TPOT predicted (ms)", 11, "dec2"),
    ("Tokens/s per user", 10, "dec1"), ("SLO met", 8, "text"),
)


def _write_summary_sheet(workbook, ws, style, plan: Plan, book: PlanBook, totals: BomTotals, source: str) -> None:
    for col, (_, width, _) in enumerate(CLASS_HEADERS):
        ws.set_column(col, col, width)
    ws.set_column(0, 0, 64)
    ws.set_column(1, 2, 16)
    ws.write_string(0, 0, f"siliconmix plan: {plan.model}", style("title"))
    ws.freeze_panes(1, 0)
    ws.write_string(1, 0, "Blue numbers on yellow are inputs (Bill of Materials, TCO); every total follows them.",
                    style("note"))
    row = _write_facts(ws, style, plan, source, 3)
    if (short := shortfall_warning(plan)) is not None:
        ws.write_string(row, 0, f"This plan {short}.", style("warning"))
        row += 1
    for line in gain_lines(plan):  # the reference fleet and what the plan buys over single-device fleets
        ws.write_string(row, 0, line, style("note"))
        row += 1
    row = _write_headline(ws, style, book.tco, row + 1)
    row = _write_totals(ws, style, plan, book, totals, row + 1)
    if not catalog_matches_plan(plan, book):
        ws.write_string(row, 0, "The catalog changed since this plan was solved: the workbook prices the current "
                                "catalog, the 'As planned' column shows the plan's own totals.", style("warning"))
        row += 1
    row = _write_power_notes(ws, style, plan, book, row)
    _write_classes(workbook, ws, style, plan, row + 1)


def _write_power_notes(ws, style, plan: Plan, book: PlanBook, row: int) -> int:
    """Say how the plan rounded to whole nodes (``whole_nodes``), or when whole nodes draw more than the planner
    charged, and when that breaks the power budget."""
    extra_kw = book.tco.it_power_kw - book.planned_it_power_kw
    if plan.workload.constraints.whole_nodes:
        ws.write_string(row, 0, whole_nodes_note(plan, book), style("note"))
        row += 1
    elif extra_kw > 1e-9:
        ws.write_string(row, 0, f"Partly filled nodes draw their whole overhead: {extra_kw:,.1f} kW more IT power than "
                                "the plan charged (it shared node overhead per device).", style("note"))
        row += 1
    budget = plan.workload.constraints.power_budget_kw
    if book.tco.facility_power_kw > budget * (1 + 1e-9):
        ws.write_string(row, 0, f"With whole nodes the facility power ({book.tco.facility_power_kw:,.1f} kW) exceeds "
                                f"the power budget ({budget:,.1f} kW).", style("warning"))
        row += 1
    return row


def whole_nodes_note(plan: Plan, book: PlanBook) -> str:
    """The rounding a ``whole_nodes`` plan did: its nodes, the devices they leave idle, and what the plan charged for
    those (each idle device its TDP and node-overhead share, its $/h and price, at the workbook's catalog figures)."""
    idle = plan.totals.idle_devices_by_type
    lines = {line.device: line for line in book.lines}
    idle_kw = plan.workload.constraints.pue * sum(k * lines[d].power_per_device_w for d, k in idle.items() if d in lines) / WATTS_PER_KW
    usd_per_hour = sum(k * lines[d].price_usd_per_hour for d, k in idle.items() if d in lines)
    capex = sum(k * lines[d].price_usd for d, k in idle.items() if d in lines)
    head = f"Whole nodes (whole_nodes: true): the plan buys {plan.totals.devices} devices{nodes_text(plan.totals, True)}"
    if not idle:
        return head + "."
    return (head + f"; it charged the idle devices like used ones: {idle_kw:,.1f} kW facility, ${usd_per_hour:,.2f}/h "
                   f"and ${capex:,.0f} capex of its totals.")


def _write_facts(ws, style, plan: Plan, source: str, row: int) -> int:
    w, solver = plan.workload, plan.solver
    gap = f", gap {solver.gap:.2%}" if solver.gap else ""
    verdict = "not run"
    if plan.verification is not None:
        verdict = ("all constraints hold (recomputed without the solver)" if plan.verification.ok
                   else "; ".join(plan.verification.messages))
    facts = [
        ("Plan file", source or "-"),
        ("Model", f"{w.model} (weights {w.dtype}, KV cache {w.kv_dtype or default_kv_dtype(w.dtype)})" if not w.dtypes
         else f"{w.model} (weights per pool: {', '.join(w.dtypes)}; KV cache {w.kv_dtype or 'each dtype’s default'})"),
        ("Workload", f"{len(w.classes)} classes: " + ", ".join(c.name for c in w.classes)),
        ("Strategies allowed", ", ".join(w.strategies)),
        ("Objective", plan.objective),
        ("Status", f"{plan.status} ({solver.backend}/{solver.engine}{gap})"),
        ("Power budget (kW, facility)", f"{w.constraints.power_budget_kw:,g} kW at PUE {w.constraints.pue:g}"),
        ("Goodput scale (x the workload's rates)", plan.goodput_scale),
        ("Binding constraints", ", ".join(plan.binding_constraints) or "none"),
        ("Verification", verdict),
    ]
    ws.write_string(row, 0, "Plan", style("section"))
    for offset, (label, value) in enumerate(facts, start=1):
        ws.write_string(row + offset, 0, label, style("label"))
        put(ws, row + offset, 1, value, style("value", "dec3"))
    return row + len(facts) + 1


def _write_classes(workbook, ws, style, plan: Plan, row: int) -> int:
    """Per class: rates, tokens, SLO vs prediction (SLO met is a formula); then served and tokens totals."""
    ws.write_string(row, 0, "Classes", style("section"))
    header = row + 1
    for col, (text, _, _) in enumerate(CLASS_HEADERS):
        ws.write_string(header, col, text, style("header"))
    ws.set_row(header, 45)
    spec = {rc.name: rc for rc in plan.workload.classes}
    first = header + 1
    for r, result in enumerate(plan.classes, start=first):
        rc = spec[result.name]
        met = _slo_met(result.ttft_ms, rc.slo.ttft_ms) and _slo_met(result.tpot_ms, rc.slo.tpot_ms)
        values = [result.name, result.rate_rps, result.rate_rps_served, rc.input_tokens, rc.output_tokens,
                  result.rate_rps_served * rc.output_tokens, rc.slo.ttft_ms, result.ttft_ms, rc.slo.tpot_ms,
                  result.tpot_ms, result.output_tokens_per_s_per_user, "yes" if met else "no"]
        formulas = {5: f"={cell(r, 2)}*{cell(r, 4)}",
                    11: f'=IF(AND(ISNUMBER({cell(r, 7)}),ISNUMBER({cell(r, 9)}),ROUND({cell(r, 7)},3)<={cell(r, 6)},'
                        f'ROUND({cell(r, 9)},3)<={cell(r, 8)}),"yes","no")'}
        for col, value in enumerate(values):
            put(ws, r, col, value, style("formula" if col in formulas else "value", CLASS_HEADERS[col][2]),
                formulas.get(col))
    last = first + len(plan.classes) - 1
    total = last + 1
    ws.write_string(total, 0, "Total", style("total"))
    served = sum(c.rate_rps_served for c in plan.classes)
    tokens = sum(c.rate_rps_served * spec[c.name].output_tokens for c in plan.classes)
    all_met = all(_slo_met(c.ttft_ms, spec[c.name].slo.ttft_ms) and _slo_met(c.tpot_ms, spec[c.name].slo.tpot_ms)
                  for c in plan.classes)
    for col in range(1, len(CLASS_HEADERS)):
        ws.write_blank(total, col, None, style("total"))
    put(ws, total, 2, served, style("total", "dec2"), f"=SUM({cell(first, 2)}:{cell(last, 2)})")
    put(ws, total, 5, tokens, style("total", "int"), f"=SUM({cell(first, 5)}:{cell(last, 5)})")
    put(ws, total, 11, "all" if all_met else "NOT ALL", style("total"),
        f'=IF(COUNTIF({cell(first, 11)}:{cell(last, 11)},"no")=0,"all","NOT ALL")')
    workbook.define_name("output_tokens_per_s", f"='{SUMMARY_SHEET}'!{cell(total, 5, absolute=True)}")
    return total + 1


def _slo_met(predicted: float | None, slo: float) -> bool:
    """Predicted within the SLO to the microsecond (the solver meets SLOs with equality up to rounding)."""
    return predicted is not None and round(predicted, 3) <= slo


def _write_headline(ws, style, tco: Tco, row: int) -> int:
    ws.write_string(row, 0, "Headline", style("section"))
    lines = [
        ("$ per million output tokens (owned: depreciation, energy, hosting)", tco.usd_per_million_tokens,
         "=usd_per_million_tokens"),
        ("$ per million output tokens at the catalog's hourly prices", tco.usd_per_million_tokens_hourly,
         "=usd_per_million_tokens_hourly"),
    ]
    for offset, (label, value, formula) in enumerate(lines, start=1):
        ws.write_string(row + offset, 0, label, style("label"))
        put(ws, row + offset, 1, value, style("headline", "usd3"), formula)
    return row + len(lines) + 1


def _write_totals(ws, style, plan: Plan, book: PlanBook, totals: BomTotals, row: int) -> int:
    """Totals as formulas over the other sheets, next to the plan's own numbers for comparison."""
    ws.write_string(row, 0, "Totals", style("section"))
    for col, text in enumerate(("Quantity", "This workbook", "As planned")):
        ws.write_string(row + 1, col, text, style("header"))
    bom = f"'{BOM_SHEET}'!"
    t, tco = plan.totals, book.tco
    lines = [
        ("Devices", totals.values["devices"], f"={bom}{totals.refs['devices']}", t.devices, "int"),
        ("Nodes", totals.values["nodes"], f"={bom}{totals.refs['nodes']}",
         sum(t.nodes_by_type.values()) if t.nodes_by_type else None, "int"),
        ("Racks (by space, where the catalog knows rack units)", totals.values["racks"],
         f"={bom}{totals.refs['racks']}", None, "int"),
        ("Capex ($)", tco.capex_usd, "=capex_usd", t.capex_usd, "usd"),
        ("Network capex ($, between pools)", tco.network_capex_usd, "=network_capex_usd", None, "usd"),
        ("IT power (kW)", tco.it_power_kw, "=it_power_kw", t.it_power_kw, "dec1"),
        ("Facility power (kW)", totals.values["facility_power_kw"], "=facility_power_kw", t.power_kw, "dec1"),
        ("Fleet at hourly prices ($/h)", tco.fleet_usd_per_hour, "=fleet_usd_per_hour", t.cost_usd_per_hour, "usd2"),
        ("Opex per year ($)", tco.opex_usd_per_year, "=opex_usd_per_year", None, "usd"),
        ("Total cost per year ($)", tco.total_usd_per_year, "=total_usd_per_year", None, "usd"),
    ]
    for offset, (label, value, formula, planned, number) in enumerate(lines, start=2):
        ws.write_string(row + offset, 0, label, style("label"))
        put(ws, row + offset, 1, value, style("formula", number), formula)
        put(ws, row + offset, 2, planned, style("value", number))
    return row + len(lines) + 2


def catalog_matches_plan(plan: Plan, book: PlanBook, rel: float = 1e-6) -> bool:
    """True when today's catalog prices and powers the plan as it was solved."""
    pairs = ((book.tco.capex_usd, plan.totals.capex_usd), (book.planned_it_power_kw, plan.totals.it_power_kw),
             (book.tco.fleet_usd_per_hour, plan.totals.cost_usd_per_hour))
    return all(abs(a - b) <= rel * max(abs(b), 1.0) for a, b in pairs)

