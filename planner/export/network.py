"""The pool-to-pool network of a plan: transfer volumes, the ports they need, and what those cost.

Traffic crosses the scale-out fabric between pools: KV cache from prefill pools to decode pools
(prefill/decode disaggregation, speculative decoding), draft and accepted tokens when the draft runs on
partner silicon, activations between attention and FFN pools. The task graph of the plan gives bytes per
request of every such edge; the pools give the requests per second they carry.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import yaml

from planner.catalog import DEFAULT_CATALOG_DIR, catalog_dir
from planner.schema import Plan
from planner.units import BYTES_PER_GB

PRICES_FILE = Path("prices") / "networking.yaml"
BITS_PER_BYTE = 8
BYTES_PER_MB = BYTES_PER_GB / 1000
#: edge kinds by what they need: KV always leaves the prefill pool; the others only reach partner silicon
KV_KINDS = ("kv_cache",)
PARTNER_KINDS = {"draft": ("draft_tokens", "accepted_tokens"), "ffn": ("activations",)}
TRAFFIC_NAMES = {"kv_cache": "KV cache, prefill to decode", "draft_tokens": "draft tokens, draft to target",
                 "accepted_tokens": "accepted tokens, target to draft", "activations": "activations, attention <-> FFN"}


@dataclass(frozen=True)
class Priced:
    """A networking number with its source (shown next to its input cell)."""

    value: float
    source: str
    estimate: bool = False


@dataclass(frozen=True)
class NetworkInputs:
    """Unit prices and sizing rules (catalogs/prices/networking.yaml)."""

    port_gbps: Priced
    nic_usd: Priced
    transceiver_usd: Priced
    switch_port_usd: Priced
    link_utilization: Priced
    fabric_tiers: Priced


def read_network_inputs(root: Path | None = None) -> NetworkInputs:
    """The prices file of the catalog in use, or of the repository's catalog when that one has none."""
    path = (root or catalog_dir()) / PRICES_FILE
    if not path.is_file():
        path = DEFAULT_CATALOG_DIR / PRICES_FILE
    doc = yaml.safe_load(path.read_text())
    fields = NetworkInputs.__dataclass_fields__
    return NetworkInputs(**{name: Priced(float(doc[name]["value"]), doc[name]["source"],
                                         bool(doc[name].get("estimate", False))) for name in fields})


@dataclass(frozen=True)
class Transfer:
    """One kind of traffic of one class and strategy: requests per second times bytes per request."""

    class_name: str
    strategy: str
    kind: str
    served_rps: float
    bytes_per_request: float

    @property
    def gb_s(self) -> float:
        """served req/s x bytes per request / 1e9."""
        return self.served_rps * self.bytes_per_request / BYTES_PER_GB


def transfers(plan: Plan) -> list[Transfer]:
    """Every pool-to-pool transfer of the plan, by class, strategy and kind (decode pools carry the requests)."""
    edges: dict[tuple[str, str], dict[str, float]] = {}
    for link in plan.graph.get("links", []):
        cls, strategy = link["source"].split("/")[:2]
        kinds = edges.setdefault((cls, strategy), {})
        kinds[link["kind"]] = kinds.get(link["kind"], 0.0) + float(link["bytes_per_request"])
    rps: dict[tuple[str, str, str], float] = {}
    for pool in plan.pools:
        if pool.role != "decode" or pool.served_rps <= 0:
            continue
        kinds = KV_KINDS + PARTNER_KINDS.get(pool.partner_role or "", ())
        for kind in kinds:
            if kind in edges.get((pool.class_name, pool.strategy), {}):
                key = (pool.class_name, pool.strategy, kind)
                rps[key] = rps.get(key, 0.0) + pool.served_rps
    return [Transfer(c, s, k, served, edges[(c, s)][k]) for (c, s, k), served in rps.items()]


def ports_per_side(gb_s: float, port_gbps: float, link_utilization: float) -> int:
    """CEILING(GB/s x 8 / (port Gb/s x utilisation), 1): links at each end (sender and receiver pools)."""
    return math.ceil(gb_s * BITS_PER_BYTE / (port_gbps * link_utilization)) if gb_s > 0 else 0


@dataclass(frozen=True)
class Fabric:
    """Endpoint ports (NIC ports, two ends per transfer), switch ports and transceivers, and their cost.

    switch ports = NIC ports x (2 x tiers - 1); transceivers = NIC ports x 2 x tiers; capex = NICs x NIC price
    + transceivers x transceiver price + switch ports x port price.
    """

    nic_ports: int
    switch_ports: int
    transceivers: int
    capex_usd: float


def fabric_of(items: list[Transfer], inputs: NetworkInputs) -> Fabric:
    nics = sum(2 * ports_per_side(t.gb_s, inputs.port_gbps.value, inputs.link_utilization.value) for t in items)
    tiers = inputs.fabric_tiers.value
    switch_ports = round(nics * (2 * tiers - 1))
    optics = round(nics * 2 * tiers)
    capex = (nics * inputs.nic_usd.value + optics * inputs.transceiver_usd.value
             + switch_ports * inputs.switch_port_usd.value)
    return Fabric(nics, switch_ports, optics, capex)
