"""Whole nodes: devices are bought, racked and powered by the node (a server, tray or system of ``node_size``
devices), so a fleet's count of each device type is ``node_size · ⌈used / node_size⌉`` (``whole_nodes: true``).

Idle devices in a partly used node are charged as if they ran: their TDP and their share of the node's overhead
(a capacity planner provisions the nameplate power of every node it racks, and buys every device in it), their
$/h (unless owned) and capex. Without ``whole_nodes`` a fleet counts the devices it uses, each charged its share
of node overhead, and reports the nodes those devices occupy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from planner.schema import Totals
from planner.units import WATTS_PER_KW


@dataclass(frozen=True)
class PerDevice:
    """What one device of a type draws and costs, and how many make a node (from the catalog)."""

    power_w: float  # IT power: TDP + node overhead / node size
    price_usd_per_hour: float
    price_usd: float
    node_size: int  # devices per node


def nodes_for(devices: int, node_size: int) -> int:
    """Nodes ``devices`` occupy: ``⌈devices / node_size⌉``."""
    return -(-devices // node_size)


@dataclass(frozen=True)
class NodeRounding:
    """A fleet by device type in nodes: the nodes, the devices bought, those no pool uses, and what those cost."""

    nodes_by_type: dict[str, int]
    devices_by_type: dict[str, int]
    idle_by_type: dict[str, int]
    idle_power_w: float  # IT power of the idle devices: idle · (TDP + node overhead / node size)
    idle_usd_per_hour: float  # $/h of the idle devices (owned ones included: what they would cost)
    idle_capex_usd: float


def in_nodes(used: Mapping[str, int], per_device: Mapping[str, PerDevice], whole: bool) -> NodeRounding:
    """``used`` devices by type in nodes; with ``whole`` each type is bought in whole nodes (``idle`` are the
    devices of its last node no pool uses), else the fleet is the devices used (none idle; nodes of the types
    ``per_device`` knows)."""
    if not whole:
        return NodeRounding({d: nodes_for(k, per_device[d].node_size) for d, k in sorted(used.items()) if d in per_device},
                            dict(sorted(used.items())), {}, 0.0, 0.0, 0.0)
    nodes = {d: nodes_for(k, per_device[d].node_size) for d, k in sorted(used.items())}
    bought = {d: nodes[d] * per_device[d].node_size for d in nodes}
    idle = {d: bought[d] - k for d, k in sorted(used.items())}
    return NodeRounding(
        nodes_by_type=nodes, devices_by_type=bought, idle_by_type={d: k for d, k in idle.items() if k},
        idle_power_w=sum(k * per_device[d].power_w for d, k in idle.items()),
        idle_usd_per_hour=sum(k * per_device[d].price_usd_per_hour for d, k in idle.items()),
        idle_capex_usd=sum(k * per_device[d].price_usd for d, k in idle.items()))


def fleet_totals(totals: Totals, per_device: Mapping[str, PerDevice], whole: bool, pue: float) -> Totals:
    """``totals`` of the pools (the devices they use) as the fleet bought: with ``whole``, each type rounded up to
    whole nodes, the idle devices' facility power (``PUE · idle IT power``), $/h and capex added."""
    r = in_nodes(totals.devices_by_type, per_device, whole)
    idle_kw = r.idle_power_w / WATTS_PER_KW
    return totals.model_copy(update={
        "devices": sum(r.devices_by_type.values()), "devices_by_type": r.devices_by_type,
        "power_kw": totals.power_kw + pue * idle_kw, "it_power_kw": totals.it_power_kw + idle_kw,
        "cost_usd_per_hour": totals.cost_usd_per_hour + r.idle_usd_per_hour,
        "capex_usd": totals.capex_usd + r.idle_capex_usd,
        "nodes_by_type": r.nodes_by_type, "idle_devices_by_type": r.idle_by_type})


def per_device_of(candidates) -> dict[str, PerDevice]:
    """Each device type's ``PerDevice`` over ``candidates``."""
    return {d: unit for c in candidates for d, unit in c.per_device.items()}


def _listed(by_type: Mapping[str, int]) -> str:
    return ", ".join(f"{k} {d}" for d, k in sorted(by_type.items()))


def nodes_text(totals: Totals, whole: bool) -> str:
    """A fleet's nodes in words: `` in 2 nodes (1 h100-sxm, 1 mi300x), 3 of them idle (3 h100-sxm)`` (the idle part
    with ``whole``; '' for totals without nodes)."""
    if not totals.nodes_by_type:
        return ""
    nodes = sum(totals.nodes_by_type.values())
    text = f" in {nodes} node{'s' if nodes != 1 else ''} ({_listed(totals.nodes_by_type)})"
    idle = sum(totals.idle_devices_by_type.values())
    if whole:
        text += f", {idle} of them idle ({_listed(totals.idle_devices_by_type)})" if idle else ", every node full"
    return text
