"""The Network and TCO by year sheets of a plan workbook: live formulas over their input cells."""

from __future__ import annotations

from planner.export.cells import cell, put, wrapped_height
from planner.export.lifetime import MAX_YEARS, Lifetime, LifetimeInputs
from planner.export.network import BYTES_PER_MB, TRAFFIC_NAMES, Fabric, NetworkInputs, Transfer, ports_per_side

NETWORK_SHEET = "Network"
LIFETIME_SHEET = "TCO by year"

NETWORK_INPUTS = (
    # name, label, unit, number format
    ("port_gbps", "Port speed", "Gb/s per port", "int"),
    ("link_utilization", "Link utilisation target", "share of line rate", "pct"),
    ("fabric_tiers", "Fabric tiers (1 = one switch, 2 = leaf-spine)", "tiers", "int"),
    ("nic_usd", "NIC (one 400G port)", "$ each", "usd"),
    ("transceiver_usd", "Optical transceiver", "$ each", "usd"),
    ("switch_port_usd", "Switch port", "$ per port", "usd2"),
)
NETWORK_HEADERS = (("Class", 18), ("Strategy", 12), ("Traffic", 30), ("Served (req/s)", 11), ("MB per request", 11),
                   ("Transfer (GB/s)", 11), ("Ports per end (sender, receiver)", 13), ("NIC ports (both ends)", 11))


LABEL_WIDTH = 44
UNIT_WIDTH = 22


def _inputs_block(workbook, ws, style, sheet: str, rows: list[tuple], first: int, last_col: int, width: float) -> int:
    """Label | input | unit | source (merged over columns 3..last_col, ``width`` characters) rows, each input a
    defined name; returns the next free row."""
    ws.set_column(0, 0, LABEL_WIDTH)
    ws.set_column(2, 2, UNIT_WIDTH)
    for col, text in enumerate(("Input", "Value", "Unit")):
        ws.write_string(first, col, text, style("header"))
    ws.merge_range(first, 3, first, last_col, "Source", style("header"))
    row = first + 1
    for name, label, unit, number, value, source in rows:
        ws.write_string(row, 0, label, style("label_wrap"))
        ws.write_number(row, 1, value, style("input", number))
        ws.write_string(row, 2, unit, style("value_wrap"))
        ws.merge_range(row, 3, row, last_col, source, style("note_wrap"))
        ws.set_row(row, max(wrapped_height(source, width), wrapped_height(unit, UNIT_WIDTH),
                            wrapped_height(label, LABEL_WIDTH)))
        workbook.define_name(name, f"='{sheet}'!{cell(row, 1, absolute=True)}")
        row += 1
    return row


def write_network_sheet(workbook, ws, style, items: list[Transfer], inputs: NetworkInputs, fabric: Fabric) -> int:
    """Transfers -> ports -> NICs, switch ports, optics -> network capex (defined name network_capex_usd)."""
    ws.write_string(0, 0, "Network between pools: sized from the plan's transfer volumes", style("title"))
    for col, (_, width) in enumerate(NETWORK_HEADERS):
        ws.set_column(col, col, width)
    rows = [(name, label, unit, number, getattr(inputs, name).value, getattr(inputs, name).source)
            for name, label, unit, number in NETWORK_INPUTS]
    width = sum(w for _, w in NETWORK_HEADERS[3:])
    row = _inputs_block(workbook, ws, style, NETWORK_SHEET, rows, 2, len(NETWORK_HEADERS) - 1, width) + 1
    ws.set_column(2, 2, 30)
    head = row
    for col, (text, _) in enumerate(NETWORK_HEADERS):
        ws.write_string(head, col, text, style("header"))
    ws.set_row(head, 45)
    first = head + 1
    for r, t in enumerate(items, start=first):
        per_end = ports_per_side(t.gb_s, inputs.port_gbps.value, inputs.link_utilization.value)
        values = [t.class_name, t.strategy, TRAFFIC_NAMES.get(t.kind, t.kind), t.served_rps,
                  t.bytes_per_request / BYTES_PER_MB, t.gb_s, per_end, 2 * per_end]
        formulas = {5: f"={cell(r, 3)}*{cell(r, 4)}/1000",
                    6: f"=CEILING({cell(r, 5)}*8/(port_gbps*link_utilization),1)", 7: f"=2*{cell(r, 6)}"}
        numbers = ("text", "text", "text", "dec2", "dec1", "dec2", "int", "int")
        for col, value in enumerate(values):
            put(ws, r, col, value, style("formula" if col in formulas else "value", numbers[col]), formulas.get(col))
    last = first + len(items) - 1
    if not items:
        ws.write_string(first, 0, "No pool-to-pool transfers: every class is served by aggregated replicas.",
                        style("note"))
        last = first
    nic = f"SUM({cell(first, 7)}:{cell(last, 7)})" if items else "0"
    total = [
        ("nic_ports", "NIC ports", fabric.nic_ports, f"={nic}", "int"),
        ("switch_ports", "Switch ports (x (2 x tiers - 1))", fabric.switch_ports, "=nic_ports*(2*fabric_tiers-1)",
         "int"),
        ("transceivers", "Transceivers (x 2 x tiers)", fabric.transceivers, "=nic_ports*2*fabric_tiers", "int"),
        ("network_capex_usd", "Network capex ($)", fabric.capex_usd,
         "=nic_ports*nic_usd+transceivers*transceiver_usd+switch_ports*switch_port_usd", "usd"),
    ]
    row = last + 2
    ws.write_string(row, 0, "Fabric", style("section"))
    for offset, (name, label, value, formula, number) in enumerate(total, start=1):
        ws.write_string(row + offset, 0, label, style("label"))
        put(ws, row + offset, 1, value, style("total", number), formula)
        workbook.define_name(name, f"='{NETWORK_SHEET}'!{cell(row + offset, 1, absolute=True)}")
    row += len(total) + 2
    for note in ("Transfers are the mean rates at the planned load; each end of a transfer (sending and receiving "
                 "pools) needs its own ports. Front-end (client) and storage networks are not counted.",
                 "Device prices are per accelerator: the fabric between pools is bought here and added to capex on "
                 "the TCO sheets. Switch and optics power is not in the IT power."):
        ws.write_string(row, 0, note, style("note"))
        row += 1
    return row


LIFETIME_INPUTS = (
    ("tco_years", "Horizon", "years (1-10)", "int",
     "assumption: a typical 4-6 year service life of an inference fleet"),
    ("discount_rate", "Discount rate", "per year", "pct1",
     "assumption: a cost of capital of ~8% a year; set your WACC"),
    ("spares_share", "Spares", "share of the fleet bought as spares", "pct1",
     "assumption: ~3% spare devices on the shelf (they draw no power)"),
    ("support_share", "Support", "share of capex bought so far, per year", "pct1",
     "assumption: ~10% of hardware price per year for vendor support contracts"),
)
LIFETIME_HEADERS = ("Year", "In service (share of fleet)", "Capex bought ($)", "Opex ($)", "Support ($)",
                    "Present value ($)", "Million tokens", "PV of million tokens", "Capital charge ($)",
                    "$ per million tokens")


def write_lifetime_sheet(workbook, ws, style, life: Lifetime, inputs: LifetimeInputs) -> int:
    """Inputs, the yearly table (ramp cells are inputs), NPV and levelised $/M tokens, all live formulas."""
    ws.write_string(0, 0, "Total cost of ownership by year: ramp, spares, support, discounting", style("title"))
    ws.set_column(1, 9, 15)
    rows = [(n, label, unit, number, getattr(inputs, n), source) for n, label, unit, number, source in LIFETIME_INPUTS]
    row = _inputs_block(workbook, ws, style, LIFETIME_SHEET, rows, 2, len(LIFETIME_HEADERS) - 1,
                        15 * (len(LIFETIME_HEADERS) - 3))
    derived = [
        ("fleet_capex_usd", "Fleet to buy (devices + network, x (1 + spares))", life.fleet_capex_usd,
         "=(capex_usd+network_capex_usd)*(1+spares_share)", "usd"),
        ("crf", "Capital recovery factor (per year, over the depreciation period)", life.crf,
         "=IF(discount_rate=0,1/depreciation_years,discount_rate/(1-(1+discount_rate)^(-depreciation_years)))", "dec3"),
    ]
    for offset, (name, label, value, formula, number) in enumerate(derived, start=1):
        ws.write_string(row + offset, 0, label, style("label_wrap"))
        ws.set_row(row + offset, wrapped_height(label, LABEL_WIDTH))
        put(ws, row + offset, 1, value, style("formula", number), formula)
        workbook.define_name(name, f"='{LIFETIME_SHEET}'!{cell(row + offset, 1, absolute=True)}")
    head = row + len(derived) + 2
    for col, text in enumerate(LIFETIME_HEADERS):
        ws.write_string(head, col, text, style("header"))
    ws.set_row(head, 30)
    first = head + 1
    for r, year in enumerate(life.years, start=first):
        _write_year(ws, style, r, first, year, inputs.ramp[year.year - 1])
    last = first + MAX_YEARS - 1
    outputs = [
        ("npv_usd", "NPV of all costs ($)", life.npv_usd, f"=SUM({cell(first, 5)}:{cell(last, 5)})", "usd"),
        ("levelised_usd_per_million_tokens", "Levelised $ per million output tokens (NPV / PV of tokens)",
         "-" if life.levelised_usd_per_million_tokens is None else life.levelised_usd_per_million_tokens,
         f'=IF(SUM({cell(first, 7)}:{cell(last, 7)})>0,npv_usd/SUM({cell(first, 7)}:{cell(last, 7)}),"-")', "usd3"),
    ]
    row = last + 2
    for offset, (name, label, value, formula, number) in enumerate(outputs):
        ws.write_string(row + offset, 0, label, style("label_wrap"))
        ws.set_row(row + offset, wrapped_height(label, LABEL_WIDTH))
        put(ws, row + offset, 1, value, style("headline", number), formula)
        workbook.define_name(name, f"='{LIFETIME_SHEET}'!{cell(row + offset, 1, absolute=True)}")
    row += len(outputs) + 1
    for note in ("Purchases follow the ramp at the start of each year (discounted one year less than that year's "
                 "opex and support). Opex is the TCO sheet's energy + hosting at the full fleet, times the share in "
                 "service; years past the horizon count nothing.",
                 "$ per million tokens in a year = (capital charge + opex + support) / million tokens; the capital "
                 "charge is the level payment (capital recovery factor) that repays each purchase at the discount "
                 "rate over the depreciation period, counted in the years it is being repaid."):
        ws.write_string(row, 0, note, style("note"))
        row += 1
    return row


def _write_year(ws, style, r: int, first: int, year, ramp: float) -> None:
    a, b, c, d, e, g, i = (cell(r, k) for k in (0, 1, 2, 3, 4, 6, 8))
    within = f"{a}<=tco_years"
    previous = cell(r - 1, 1) if r > first else "0"
    cells = [
        (year.year, None, "int", "value"),
        (ramp, None, "pct", "input"),
        (year.capex_usd, f"=IF({within},MAX(0,{b}-{previous})*fleet_capex_usd,0)", "usd", "formula"),
        (year.opex_usd, f"=IF({within},{b}*opex_usd_per_year,0)", "usd", "formula"),
        (year.support_usd, f"=IF({within},support_share*SUM({cell(first, 2)}:{c}),0)", "usd", "formula"),
        (year.pv_usd, f"={c}/(1+discount_rate)^({a}-1)+({d}+{e})/(1+discount_rate)^{a}", "usd", "formula"),
        (year.million_tokens, f"=IF({within},{b}*million_tokens_per_year,0)", "int", "formula"),
        (year.pv_million_tokens, f"={g}/(1+discount_rate)^{a}", "int", "formula"),
        (year.capital_charge_usd, f"=IF({within},crf*SUMIF({cell(first, 0)}:{a},\">\"&({a}-depreciation_years),"
                                  f"{cell(first, 2)}:{c}),0)", "usd", "formula"),
        ("-" if year.usd_per_million_tokens is None else year.usd_per_million_tokens,
         f'=IF({g}>0,({i}+{d}+{e})/{g},"-")', "usd3", "formula"),
    ]
    for col, (value, formula, number, role) in enumerate(cells):
        put(ws, r, col, value, style(role, number), formula)
