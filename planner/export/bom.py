"""Bill of materials and total cost of ownership of a plan, computed in Python.

The workbook writes every derived number as a live formula *and* passes the number computed here as the
formula's cached value, so the two must agree term by term: each property below states the formula the
workbook writes for it. The CSV writes these numbers directly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.catalog import Catalog
from planner.schema import Device, Plan
from planner.units import HOURS_PER_YEAR, SECONDS_PER_HOUR, TOKENS_PER_MILLION, WATTS_PER_KW

MONTHS_PER_YEAR = 12


@dataclass(frozen=True)
class Source:
    """A default input with where it comes from (shown next to the input cell)."""

    value: float
    source: str


#: defaults of the TCO inputs; PUE defaults to the plan's own (the power budget was solved with it).
ELECTRICITY_USD_PER_KWH = Source(0.081, "US industrial average retail price 2023, 8.06 cents/kWh (EIA Electric Power "
                                        "Annual, https://www.eia.gov/electricity/annual/secrev-map.php)")
DEPRECIATION_YEARS = Source(3, "3-year straight line: the rule the catalog's owner-cost hourly prices use (26,280 h); "
                               "3-5 years is usual for accelerators")
UTILIZATION = Source(1.0, "share of the year the fleet serves the plan's rate; 1 = always at the planned load")
HOSTING_USD_PER_KW_MONTH = Source(196, "colocation, 250-500 kW deployments in primary North American markets, "
                                       "H2 2025 (https://encoradvisors.com/data-center-colocation-pricing/); "
                                       "electricity billed separately")
RACK_UNITS_PER_RACK = Source(42, "a standard 42U cabinet (https://dpdatacenters.com/blogs/understanding-colocation-"
                                 "pricing-models/)")


@dataclass(frozen=True)
class TcoInputs:
    """The assumptions a procurement team changes; every total of the workbook follows them."""

    pue: float
    electricity_usd_per_kwh: float = ELECTRICITY_USD_PER_KWH.value
    depreciation_years: float = DEPRECIATION_YEARS.value
    utilization: float = UTILIZATION.value
    hosting_usd_per_kw_month: float = HOSTING_USD_PER_KW_MONTH.value
    rack_units_per_rack: float = RACK_UNITS_PER_RACK.value


@dataclass(frozen=True)
class BomLine:
    """One device type of the plan, with the catalog numbers that price and power it."""

    vendor: str
    device: str
    name: str
    devices: int
    devices_per_node: int
    rack_units: float | None
    price_usd: float
    price_usd_per_hour: float
    tdp_w: float
    node_overhead_w: float
    rack_units_per_rack: float = RACK_UNITS_PER_RACK.value

    @property
    def nodes(self) -> int:
        """CEILING(devices / devices per node, 1): whole servers, trays or systems."""
        return math.ceil(self.devices / self.devices_per_node)

    @property
    def nodes_per_rack(self) -> int | None:
        """MAX(1, FLOOR(rack units per rack / rack units per node, 1)); None when the catalog has no height."""
        if self.rack_units is None:
            return None
        return max(1, math.floor(self.rack_units_per_rack / self.rack_units))

    @property
    def racks(self) -> int | None:
        """CEILING(nodes / nodes per rack, 1): racks by space only (power density is in kW per rack)."""
        per_rack = self.nodes_per_rack
        return None if per_rack is None else math.ceil(self.nodes / per_rack)

    @property
    def extended_price_usd(self) -> float:
        """devices x unit price."""
        return self.devices * self.price_usd

    @property
    def power_per_device_w(self) -> float:
        """TDP + node overhead / devices per node: what the planner charges each device (IT)."""
        return self.tdp_w + self.node_overhead_w / self.devices_per_node

    @property
    def planned_it_power_kw(self) -> float:
        """devices x power per device / 1000: the planner's IT power (a partly filled node pays its share)."""
        return self.devices * self.power_per_device_w / WATTS_PER_KW

    @property
    def power_per_node_w(self) -> float:
        """TDP x devices per node + node overhead."""
        return self.tdp_w * self.devices_per_node + self.node_overhead_w

    @property
    def rack_it_kw(self) -> float | None:
        """nodes per rack x power per node / 1000: the IT load of one full rack."""
        per_rack = self.nodes_per_rack
        return None if per_rack is None else per_rack * self.power_per_node_w / WATTS_PER_KW

    @property
    def it_power_kw(self) -> float:
        """(devices x TDP + nodes x node overhead) / 1000: a partly filled node draws its whole overhead."""
        return (self.devices * self.tdp_w + self.nodes * self.node_overhead_w) / WATTS_PER_KW

    def facility_power_kw(self, pue: float) -> float:
        """IT power x PUE."""
        return self.it_power_kw * pue

    @property
    def fleet_usd_per_hour(self) -> float:
        """devices x hourly price."""
        return self.devices * self.price_usd_per_hour


def plan_devices(plan: Plan) -> list[str]:
    """Every device id the plan uses, pools' partner devices included, sorted."""
    used = set(plan.totals.devices_by_type)
    for pool in plan.pools:
        used.update(pool.devices_by_type)
    return sorted(used)


def bom_lines(plan: Plan, catalog: Catalog, rack_units_per_rack: float = RACK_UNITS_PER_RACK.value) -> list[BomLine]:
    """One line per device type of the plan, by vendor then device (UnknownId if the catalog lost one)."""
    lines = [_line(catalog.device(device_id), count, rack_units_per_rack)
             for device_id, count in plan.totals.devices_by_type.items() if count > 0]
    return sorted(lines, key=lambda line: (line.vendor, line.device))


def _line(device: Device, count: int, rack_units_per_rack: float) -> BomLine:
    return BomLine(
        vendor=device.vendor, device=device.id, name=device.name, devices=count,
        devices_per_node=device.devices_per_node, rack_units=device.rack_units, price_usd=device.price_usd,
        price_usd_per_hour=device.price_usd_per_hour, tdp_w=device.tdp_w, node_overhead_w=device.node_overhead_w,
        rack_units_per_rack=rack_units_per_rack,
    )


def output_tokens_per_s(plan: Plan) -> float:
    """Σ_classes served rate x output tokens per request."""
    tokens = {rc.name: rc.output_tokens for rc in plan.workload.classes}
    return sum(c.rate_rps_served * tokens[c.name] for c in plan.classes)


@dataclass(frozen=True)
class Tco:
    """Yearly cost of owning and running the fleet, and what a million output tokens costs.

    facility kW = IT kW x PUE; energy kWh/yr = facility kW x 8760 (provisioned power all year: the fleet is
    powered whether or not the traffic comes); hosting $/yr = IT kW x $/kW-month x 12; opex = energy + hosting;
    depreciation $/yr = (device capex + network capex) / years; total = depreciation + opex; million tokens/yr = tokens/s x 3600 x 8760
    x utilisation / 1e6; $/M tokens = total / million tokens per year, or, at the catalog's hourly prices,
    fleet $/h / (tokens/s x 3600 x utilisation / 1e6).
    """

    inputs: TcoInputs
    capex_usd: float
    network_capex_usd: float
    it_power_kw: float
    fleet_usd_per_hour: float
    output_tokens_per_s: float
    facility_power_kw: float
    energy_kwh_per_year: float
    energy_usd_per_year: float
    hosting_usd_per_year: float
    opex_usd_per_year: float
    depreciation_usd_per_year: float
    total_usd_per_year: float
    million_tokens_per_hour: float
    million_tokens_per_year: float
    usd_per_million_tokens: float | None
    usd_per_million_tokens_hourly: float | None


def tco_of(plan: Plan, lines: list[BomLine], inputs: TcoInputs, network_capex_usd: float = 0.0) -> Tco:
    """The TCO of a bill of materials (and its network) serving the plan's output tokens."""
    return tco_from_totals(
        inputs, capex_usd=sum(line.extended_price_usd for line in lines),
        it_power_kw=sum(line.it_power_kw for line in lines),
        fleet_usd_per_hour=sum(line.fleet_usd_per_hour for line in lines),
        output_tokens_per_s=output_tokens_per_s(plan), network_capex_usd=network_capex_usd,
    )


def tco_from_totals(inputs: TcoInputs, capex_usd: float, it_power_kw: float, fleet_usd_per_hour: float,
                    output_tokens_per_s: float, network_capex_usd: float = 0.0) -> Tco:
    """The formulas of :class:`Tco`, in the order the workbook evaluates them."""
    facility_kw = it_power_kw * inputs.pue
    energy_kwh = facility_kw * HOURS_PER_YEAR
    energy_usd = energy_kwh * inputs.electricity_usd_per_kwh
    hosting_usd = it_power_kw * inputs.hosting_usd_per_kw_month * MONTHS_PER_YEAR
    opex = energy_usd + hosting_usd
    depreciation = (capex_usd + network_capex_usd) / inputs.depreciation_years
    total = depreciation + opex
    million_per_hour = output_tokens_per_s * SECONDS_PER_HOUR * inputs.utilization / TOKENS_PER_MILLION
    million_per_year = million_per_hour * HOURS_PER_YEAR
    return Tco(
        inputs=inputs, capex_usd=capex_usd, network_capex_usd=network_capex_usd, it_power_kw=it_power_kw, fleet_usd_per_hour=fleet_usd_per_hour,
        output_tokens_per_s=output_tokens_per_s, facility_power_kw=facility_kw, energy_kwh_per_year=energy_kwh,
        energy_usd_per_year=energy_usd, hosting_usd_per_year=hosting_usd, opex_usd_per_year=opex,
        depreciation_usd_per_year=depreciation, total_usd_per_year=total, million_tokens_per_hour=million_per_hour,
        million_tokens_per_year=million_per_year,
        usd_per_million_tokens=total / million_per_year if million_per_year > 0 else None,
        usd_per_million_tokens_hourly=fleet_usd_per_hour / million_per_hour if million_per_hour > 0 else None,
    )
