"""The bill of materials as one CSV: numbers, not formulas, one row per device type."""

from __future__ import annotations

import csv
from pathlib import Path

from planner.export.bom import BomLine
from planner.export.plan_sheets import bom_values

#: columns in order, each named with its unit; the workbook's Bill of Materials quantities, and the IT power
#: as planned (each device its share of node overhead) next to the whole-node IT power.
BOM_CSV_COLUMNS = (
    "vendor", "device", "name", "devices", "devices_per_node", "nodes", "rack_units", "nodes_per_rack", "racks",
    "price_usd", "extended_price_usd", "tdp_w", "node_overhead_w", "power_per_device_w", "power_per_node_w",
    "planned_it_power_kw", "it_power_kw", "facility_power_kw", "rack_it_kw", "price_usd_per_hour", "fleet_usd_per_hour",
)


def bom_records(lines: list[BomLine], pue: float) -> list[dict[str, object]]:
    """One mapping per line; a number the catalog does not know (rack units) is empty."""
    records = [{**bom_values(line, pue), "planned_it_power_kw": line.planned_it_power_kw} for line in lines]
    return [{key: record[key] for key in BOM_CSV_COLUMNS} for record in records]


def write_bom_csv(lines: list[BomLine], pue: float, path: str | Path) -> Path:
    """Write the CSV (no totals row: every row is a line item an ERP import can take as is)."""
    path = Path(path)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=BOM_CSV_COLUMNS)
        writer.writeheader()
        for record in bom_records(lines, pue):
            writer.writerow({k: ("" if v is None else v) for k, v in record.items()})
    return path
