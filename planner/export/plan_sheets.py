"""The Bill of Materials, Pools and Assumptions sheets of a plan workbook."""

from __future__ import annotations

from dataclasses import dataclass

from planner.export.assumptions import Assumption
from planner.export.bom import BomLine
from planner.export.cells import Column, cell, put, wrapped_height, write_header, write_row
from planner.export.mix import mix_text
from planner.plan import classes_text, partner_text
from planner.schema import Plan, Pool

BOM_SHEET = "Bill of Materials"
POOLS_SHEET = "Pools"
ASSUMPTIONS_SHEET = "Assumptions"

BOM_COLUMNS = [
    Column("vendor", "Vendor", 11),
    Column("device", "Device", 16),
    Column("name", "Name", 28),
    Column("devices", "Devices", 10, "int", "input"),
    Column("devices_per_node", "Devices per node", 10, "int", "input"),
    Column("nodes", "Nodes", 9, "int", "formula", "=CEILING({devices}/{devices_per_node},1)"),
    Column("rack_units", "Rack units per node (U)", 10, "dec1", "input"),
    Column("nodes_per_rack", "Nodes per rack", 9, "int", "formula",
           "=MAX(1,FLOOR(rack_units_per_rack/{rack_units},1))"),
    Column("racks", "Racks (by space)", 9, "int", "formula", "=CEILING({nodes}/{nodes_per_rack},1)"),
    Column("price_usd", "Unit price ($ per device)", 13, "usd", "input"),
    Column("extended_price_usd", "Extended price ($)", 15, "usd", "formula", "={devices}*{price_usd}"),
    Column("tdp_w", "TDP (W per device)", 10, "int", "input"),
    Column("node_overhead_w", "Node overhead (W per node)", 11, "int", "input"),
    Column("power_per_device_w", "Power per device as planned (W, TDP + overhead share)", 14, "dec1", "formula",
           "={tdp_w}+{node_overhead_w}/{devices_per_node}"),
    Column("power_per_node_w", "Power per node (W)", 11, "int", "formula",
           "={tdp_w}*{devices_per_node}+{node_overhead_w}"),
    Column("it_power_kw", "IT power (kW, whole nodes)", 11, "dec1", "formula",
           "=({devices}*{tdp_w}+{nodes}*{node_overhead_w})/1000"),
    Column("facility_power_kw", "Facility power (kW, x PUE)", 12, "dec1", "formula", "={it_power_kw}*pue"),
    Column("rack_it_kw", "IT kW per full rack", 10, "dec1", "formula", "={nodes_per_rack}*{power_per_node_w}/1000"),
    Column("price_usd_per_hour", "Hourly price ($ per device-hour)", 12, "usd2", "input"),
    Column("fleet_usd_per_hour", "Fleet at hourly prices ($/h)", 13, "usd2", "formula",
           "={devices}*{price_usd_per_hour}"),
]
BOM_TOTALS = ("devices", "nodes", "racks", "extended_price_usd", "it_power_kw", "facility_power_kw",
              "fleet_usd_per_hour")


@dataclass(frozen=True)
class BomTotals:
    """A1 references (on the BoM sheet) and computed values of the totals row."""

    refs: dict[str, str]
    values: dict[str, float]


def bom_values(line: BomLine, pue: float) -> dict[str, object]:
    """The cells of one BoM line: inputs from the catalog and the plan, formulas' values from BomLine."""
    return {
        "vendor": line.vendor, "device": line.device, "name": line.name, "devices": line.devices,
        "devices_per_node": line.devices_per_node, "nodes": line.nodes, "rack_units": line.rack_units,
        "nodes_per_rack": line.nodes_per_rack, "racks": line.racks, "price_usd": line.price_usd,
        "extended_price_usd": line.extended_price_usd, "tdp_w": line.tdp_w, "node_overhead_w": line.node_overhead_w,
        "power_per_device_w": line.power_per_device_w, "power_per_node_w": line.power_per_node_w,
        "it_power_kw": line.it_power_kw, "facility_power_kw": line.facility_power_kw(pue),
        "rack_it_kw": line.rack_it_kw,
        "price_usd_per_hour": line.price_usd_per_hour, "fleet_usd_per_hour": line.fleet_usd_per_hour,
    }


def write_bom_sheet(ws, style, lines: list[BomLine], pue: float, title: str) -> BomTotals:
    """One row per device type, then a totals row of SUM formulas; returns where the totals are."""
    ws.write_string(0, 0, title, style("title"))
    write_header(ws, 1, BOM_COLUMNS, style)
    ws.freeze_panes(2, 2)
    first = 2
    rows = [bom_values(line, pue) for line in lines]
    for offset, values in enumerate(rows):
        write_row(ws, first + offset, BOM_COLUMNS, values, style)
    total_row = first + len(rows)
    ws.write_string(total_row, 0, "Total", style("total"))
    refs, values = {}, {}
    for col, column in enumerate(BOM_COLUMNS):
        if column.key not in BOM_TOTALS:
            if col > 0:
                ws.write_blank(total_row, col, None, style("total"))
            continue
        value = sum(v[column.key] for v in rows if isinstance(v[column.key], (int, float)))
        put(ws, total_row, col, value, style("total", column.number),
            f"=SUM({cell(first, col)}:{cell(total_row - 1, col)})")
        refs[column.key] = cell(total_row, col, absolute=True)
        values[column.key] = value
    notes = [
        "Blue cells on yellow are inputs (catalog numbers and the plan's device counts): change them and every "
        "total follows.",
        "IT power charges every node its whole overhead (devices x TDP + nodes x node overhead): a partly filled "
        "node draws all of it.",
        "The planner charged each device its share (Power per device as planned): IT power here can exceed the "
        "plan's by up to one node's overhead per device type.",
        "Racks count space only (rack units per rack is an input on the TCO sheet); compare IT kW per full rack with "
        "what the facility can feed and cool per rack.",
    ]
    for i, note in enumerate(notes):
        ws.write_string(total_row + 2 + i, 0, note, style("note"))
    return BomTotals(refs, values)


POOL_COLUMNS = [
    Column("class", "Class (shared: its share of the pool's req/s)", 40),
    Column("strategy", "Strategy (@ dtype)", 14),
    Column("role", "Role", 11),
    Column("device", "Device", 14),
    Column("tp", "TP (devices per stage)", 12, "int"),
    Column("pp", "PP stages (replica: TP x PP devices)", 12, "int"),
    Column("ep", "EP groups", 8, "int"),
    Column("partner", "Partner (role device x TP)", 22),
    Column("batch", "Batch", 8, "int"),
    Column("replicas", "Replicas", 9, "int"),
    Column("devices", "Devices", 9, "int"),
    Column("devices_by_type", "Devices by type", 22),
    Column("utilization", "Utilisation", 10, "pct1"),
    Column("served_rps", "Served (req/s)", 10, "dec2"),
    Column("capacity_rps", "Capacity (req/s)", 10, "dec2"),
    Column("ttft_ms", "TTFT (ms)", 9, "dec1"),
    Column("tpot_ms", "TPOT (ms)", 9, "dec2"),
    Column("slot_wait_ms", "Slot wait (ms per token)", 9, "dec2"),
    Column("power_kw", "Facility power (kW, plan PUE)", 11, "dec1"),
    Column("cost_usd_per_hour", "At hourly prices ($/h)", 12, "usd2"),
    Column("capex_usd", "Capex ($)", 14, "usd"),
    Column("limited_by", "Limited by", 14),
]
POOL_TOTALS = ("replicas", "devices", "power_kw", "cost_usd_per_hour", "capex_usd")


def pool_values(pool: Pool) -> dict[str, object]:
    partner = partner_text(pool)
    by_type = mix_text(pool.devices_by_type)
    values = {column.key: getattr(pool, column.key, None) for column in POOL_COLUMNS}
    return {**values, "class": classes_text(pool), "strategy": pool.route, "partner": partner, "devices_by_type": by_type}


def write_pools_sheet(ws, style, plan: Plan) -> None:
    """Every pool of the plan as the solver placed it (numbers, not formulas), then SUM totals."""
    write_header(ws, 0, POOL_COLUMNS, style)
    ws.freeze_panes(1, 1)
    rows = [pool_values(pool) for pool in plan.pools]
    for row, values in enumerate(rows, start=1):
        write_row(ws, row, POOL_COLUMNS, values, style)
    total_row = len(rows) + 1
    ws.autofilter(0, 0, total_row - 1, len(POOL_COLUMNS) - 1)
    ws.write_string(total_row, 0, "Total", style("total"))
    for col, column in enumerate(POOL_COLUMNS[1:], start=1):
        if column.key in POOL_TOTALS:
            put(ws, total_row, col, sum(v[column.key] for v in rows), style("total", column.number),
                f"=SUM({cell(1, col)}:{cell(total_row - 1, col)})")
        else:
            ws.write_blank(total_row, col, None, style("total"))
    ws.write_string(total_row + 2, 0, f"Power is facility power at the plan's PUE ({plan.workload.constraints.pue:g}); "
                                      "the Bill of Materials and TCO sheets follow the PUE input.", style("note"))


ASSUMPTION_COLUMNS = [
    Column("item", "Device or model", 16),
    Column("field", "Catalog field", 34),
    Column("value", "Value", 12, "dec3"),
    Column("unit", "Unit", 10),
    Column("estimate", "Estimate", 9),
    Column("source", "Source", 90),
]


def write_assumptions_sheet(ws, style, rows: list[Assumption]) -> None:
    """Every catalog number the plan uses, its unit and source; estimates in orange."""
    write_header(ws, 0, ASSUMPTION_COLUMNS, style)
    ws.freeze_panes(1, 2)
    for row, a in enumerate(rows, start=1):
        role = "estimate" if a.estimate else "value"
        number = "dec3" if isinstance(a.value, float) and not float(a.value).is_integer() else "int"
        ws.write_string(row, 0, a.item, style(role))
        ws.write_string(row, 1, a.field, style(role))
        ws.write_number(row, 2, a.value, style(role, number))
        ws.write_string(row, 3, a.unit, style(role))
        ws.write_string(row, 4, "yes" if a.estimate else "no", style(role))
        ws.write_string(row, 5, a.source, style(role + "_wrap"))
        ws.set_row(row, wrapped_height(a.source, ASSUMPTION_COLUMNS[5].width))
    ws.autofilter(0, 0, max(len(rows), 1), len(ASSUMPTION_COLUMNS) - 1)
