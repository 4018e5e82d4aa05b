"""Whole nodes by hand: an 8-per-node GPU at 1,275 W per device (700 W TDP + 4,600 W node overhead / 8),
$1.69/h and $27,500 each (the catalog's H100 SXM figures, written out), and a 1-per-node system."""

from __future__ import annotations

import pytest

from planner.nodes import PerDevice, fleet_totals, in_nodes, nodes_for, nodes_text
from planner.schema import Totals

GPU = PerDevice(power_w=1_275.0, price_usd_per_hour=1.69, price_usd=27_500.0, node_size=8)
SYSTEM = PerDevice(power_w=23_000.0, price_usd_per_hour=10.0, price_usd=2_000_000.0, node_size=1)
UNITS = {"gpu": GPU, "system": SYSTEM}


@pytest.mark.parametrize("devices, nodes", [(0, 0), (1, 1), (5, 1), (8, 1), (9, 2), (16, 2), (17, 3)])
def test_nodes_are_the_devices_over_the_node_size_rounded_up(devices, nodes):
    assert nodes_for(devices, 8) == nodes


def test_whole_nodes_buy_the_rest_of_the_last_node_and_charge_it():
    r = in_nodes({"gpu": 5, "system": 3}, UNITS, whole=True)
    assert r.nodes_by_type == {"gpu": 1, "system": 3}
    assert r.devices_by_type == {"gpu": 8, "system": 3}
    assert r.idle_by_type == {"gpu": 3}  # a system is its own node: none idle
    assert r.idle_power_w == pytest.approx(3 * 1_275.0) == 3_825.0
    assert r.idle_usd_per_hour == pytest.approx(3 * 1.69) == pytest.approx(5.07)
    assert r.idle_capex_usd == pytest.approx(82_500.0)


def test_without_whole_nodes_the_fleet_is_the_devices_used_and_reports_their_nodes():
    r = in_nodes({"gpu": 9}, UNITS, whole=False)
    assert (r.nodes_by_type, r.devices_by_type, r.idle_by_type) == ({"gpu": 2}, {"gpu": 9}, {})
    assert r.idle_power_w == r.idle_usd_per_hour == r.idle_capex_usd == 0.0


def test_fleet_totals_add_the_idle_devices_power_money_and_capex():
    """5 GPUs used: 6.375 kW IT, 7.65 kW facility at PUE 1.2, $8.45/h, $137,500. A whole node: 8 devices,
    10.2 kW IT (8 x 700 W + 4,600 W), 12.24 kW facility, $13.52/h, $220,000."""
    used = Totals(devices=5, devices_by_type={"gpu": 5}, power_kw=7.65, it_power_kw=6.375, cost_usd_per_hour=8.45,
                  capex_usd=137_500.0)
    whole = fleet_totals(used, UNITS, whole=True, pue=1.2)
    assert (whole.devices, whole.devices_by_type) == (8, {"gpu": 8})
    assert whole.it_power_kw == pytest.approx(10.2)
    assert whole.power_kw == pytest.approx(12.24)
    assert whole.cost_usd_per_hour == pytest.approx(13.52)
    assert whole.capex_usd == pytest.approx(220_000.0)
    assert (whole.nodes_by_type, whole.idle_devices_by_type) == ({"gpu": 1}, {"gpu": 3})
    assert nodes_text(whole, True) == " in 1 node (1 gpu), 3 of them idle (3 gpu)"
    same = fleet_totals(used, UNITS, whole=False, pue=1.2)
    assert same.model_copy(update={"nodes_by_type": {}}) == used and same.nodes_by_type == {"gpu": 1}
    assert nodes_text(same, False) == " in 1 node (1 gpu)"
