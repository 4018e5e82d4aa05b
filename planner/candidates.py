"""SLO-feasible replica configurations: the columns of the MILP.

For every (class, strategy, pool unit, device [, partner device], parallelism) the cost model is
evaluated over all batch sizes at once; the batch that gives the most SLO-feasible capacity is kept
(throughput grows with batch while power does not, so smaller feasible batches are dominated), and
candidates that another candidate beats on every count are pruned. Capacity is in requests per second
per replica; ``utilization_cap`` is how much of it the queueing approximation (queueing.py) allows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from planner.catalog import Catalog
from planner.graph import TOKEN_ID_BYTES, edge_bytes, strategies_of, units
from planner.perf import memory
from planner.perf.af import af_decode_step, attention_side, expert_side
from planner.perf.comm import transfer_s
from planner.perf.profile import HardwareArrays, ModelProfile, UnsupportedDtype
from planner.perf.roofline import chunked_prefill_tokens_per_step, decode_step, kv_share, prefill_pass
from planner.perf.spec import expected_tokens_per_round, spec_round_s, spec_tpot_s
from planner.queueing import DECODE_UTILIZATION, max_utilization, md1_wait_s
from planner.schema import STRATEGIES, Device, RequestClass, Workload
from planner.units import gb_s_to_bytes_s, gb_to_bytes, ms_to_s, s_to_ms, us_to_s


class StrategyError(ValueError):
    """A serving strategy the workload's model cannot use."""


@dataclass(frozen=True)
class CandidateOptions:
    """Search space of the candidate generator."""

    batches: tuple[int, ...] = tuple(2**i for i in range(12))  # 1 .. 2048 sequences
    prefill_batches: tuple[int, ...] = (1, 2, 4, 8, 16)  # prompts prefilled together
    max_tp: int = 64
    chunk_tokens: int = 2048  # chunked-prefill token budget per step in aggregated replicas


@dataclass(frozen=True)
class Candidate:
    """One replica configuration for one pool unit of one (class, strategy)."""

    class_name: str
    strategy: str
    role: str  # aggregated | prefill | decode
    device: str
    tp: int
    batch: int
    devices_by_type: dict[str, int]
    power_w: float  # IT power of one replica: TDP plus its share of node overhead
    cost_usd_per_hour: float
    capex_usd: float
    capacity_rps: float  # requests/s one replica completes at full utilisation
    utilization_cap: float
    ttft_ms: float | None
    tpot_ms: float | None
    limited_by: str
    partner_device: str | None = None
    partner_tp: int | None = None
    partner_role: str | None = None
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def key(self) -> str:
        partner = f"+{self.partner_role}:{self.partner_device}x{self.partner_tp}" if self.partner_device else ""
        return f"{self.class_name}/{self.strategy}/{self.role}/{self.device}x{self.tp}{partner}"

    @property
    def devices(self) -> int:
        return sum(self.devices_by_type.values())

    @property
    def effective_rps(self) -> float:
        """Capacity the MILP may use: ``utilization_cap · capacity``."""
        return self.utilization_cap * self.capacity_rps


@dataclass(frozen=True)
class _Silicon:
    """One device with its arrays at the workload's dtype."""

    device: Device
    hw: HardwareArrays

    @property
    def id(self) -> str:
        return self.device.id

    @property
    def usable_kv_bytes(self) -> float:
        return memory.USABLE_MEMORY_FRACTION * gb_to_bytes(self.device.kv_memory.capacity_gb)

    @property
    def nic_bytes_s(self) -> float:
        return gb_s_to_bytes_s(self.device.scale_out.bandwidth_gb_s)

    @property
    def nic_latency_s(self) -> float:
        return us_to_s(self.device.scale_out.latency_us)

    def replica_power_w(self, n: int) -> float:
        d = self.device
        return n * (d.tdp_w + d.node_overhead_w / d.devices_per_node)

    def tp_options(self, weights_bytes: float, max_tp: int) -> list[int]:
        return device_counts(self.device, weights_bytes, max_tp)

    def kv_room(self, weights_bytes_per_device, extra_weights_per_device=0.0):
        """Bytes per device left for KV next to the weights."""
        if self.device.weights_tier == self.device.kv_tier:
            return self.usable_kv_bytes - weights_bytes_per_device - extra_weights_per_device
        return self.usable_kv_bytes


def device_counts(device: Device, weights_bytes: float, max_tp: int = 64) -> list[int]:
    """Device counts per replica that hold ``weights_bytes``.

    GPUs and other HBM devices: powers of two from the least count that fits to the scale-up domain
    (at most ``max_tp``). SRAM machines: the least chip count that holds the weights, and its double.
    """
    usable = memory.USABLE_MEMORY_FRACTION * gb_to_bytes(device.weights_memory.capacity_gb)
    least = max(1, math.ceil(weights_bytes / usable))
    domain = device.scale_up.domain_size
    if device.is_sram_machine:
        return [n for n in (least, 2 * least) if n <= domain]
    return [2**i for i in range(0, 13) if least <= 2**i <= min(domain, max_tp)]


def generate_candidates(workload: Workload, catalog: Catalog, graph: nx.DiGraph,
                        options: CandidateOptions = CandidateOptions()) -> tuple[list[Candidate], list[str]]:
    """All non-dominated SLO-feasible candidates, and notes on devices that were skipped.

    Raises StrategyError (bad input) when the workload allows a strategy its model cannot use.
    """
    arch = catalog.model(workload.model)
    if "af_disagg" in workload.strategies and not arch.is_moe:
        raise StrategyError(f"strategies: af_disagg needs an MoE model ({workload.model} is dense); "
                            f"allowed for it: {', '.join(s for s in STRATEGIES if s != 'af_disagg')}")
    model = ModelProfile.of(arch, workload.dtype, workload.kv_dtype)
    draft = None
    if workload.spec_decode is not None:
        draft = ModelProfile.of(catalog.model(workload.spec_decode.draft_model), workload.dtype, workload.kv_dtype)
    silicon, notes = _silicon(workload, catalog)
    candidates: list[Candidate] = []
    for rc in sorted(workload.classes, key=lambda c: c.name):
        for strategy in strategies_of(graph, rc.name):
            for unit in units(graph, rc.name, strategy):
                found = _UNIT_BUILDERS[(strategy, unit)](rc, strategy, model, draft, workload, silicon, graph, options)
                candidates.extend(prune_dominated(found, workload))
    return candidates, notes


def _silicon(workload: Workload, catalog: Catalog) -> tuple[list[_Silicon], list[str]]:
    allowed = workload.constraints.devices or tuple(catalog.devices)
    out, notes = [], []
    for device_id in allowed:
        device = catalog.device(device_id)
        if workload.constraints.inventory.get(device_id, 1) == 0:
            notes.append(f"{device_id}: inventory 0")
            continue
        try:
            out.append(_Silicon(device, HardwareArrays.of([device], workload.dtype)))
        except UnsupportedDtype as exc:
            notes.append(str(exc))
    return out, notes


def prune_dominated(candidates: list[Candidate], workload: Workload) -> list[Candidate]:
    """Drop a candidate when another of the same pool unit is at least as good on every count the MILP sees.

    A dominates B when A has at least B's usable capacity while using no more of every resource the
    model constrains or prices: power always; $/h when the objective is min_cost or a cost budget is
    set; devices of each type that has an inventory. Swapping each B replica for an A replica then keeps
    every constraint and never worsens the objective, so B is never needed. Exact ties keep the smaller key.
    A must also use only device types B uses, so every single-device-type fleet keeps its own best
    candidates (the homogeneous baselines are solved over subsets of this list).
    """
    if len(candidates) < 2:
        return list(candidates)
    cons = workload.constraints
    priced = workload.objective == "min_cost" or cons.cost_budget_usd_per_hour is not None
    counted = sorted(cons.inventory)
    capacity = np.array([c.effective_rps for c in candidates])
    costs = np.array([[c.power_w] + ([c.cost_usd_per_hour] if priced else [])
                      + [c.devices_by_type.get(t, 0) for t in counted] for c in candidates], dtype=float)
    keys = np.array([c.key for c in candidates])
    all_types = sorted({t for c in candidates for t in c.devices_by_type})
    uses = np.array([[t in c.devices_by_type for t in all_types] for c in candidates])
    subset = np.all(~uses[:, None, :] | uses[None, :, :], axis=2)  # a's types ⊆ b's types
    # [a, b]: does a dominate b?
    no_worse = subset & (capacity[:, None] >= capacity[None, :]) & np.all(costs[:, None, :] <= costs[None, :, :], axis=2)
    strictly = (capacity[:, None] > capacity[None, :]) | np.any(costs[:, None, :] < costs[None, :, :], axis=2)
    dominates = no_worse & (strictly | (keys[:, None] < keys[None, :]))
    np.fill_diagonal(dominates, False)
    return [c for c, beaten in zip(candidates, dominates.any(axis=0)) if not beaten]


def _money(parts: list[tuple[_Silicon, int]]) -> dict:
    return {
        "devices_by_type": {s.id: n for s, n in parts},
        "power_w": sum(s.replica_power_w(n) for s, n in parts),
        "cost_usd_per_hour": sum(n * s.device.price_usd_per_hour for s, n in parts),
        "capex_usd": sum(n * s.device.price_usd for s, n in parts),
    }


def _best(mask: np.ndarray, score: np.ndarray) -> int | None:
    """Index of the largest score where mask holds, or None."""
    if not np.any(mask):
        return None
    return int(np.argmax(np.where(mask, score, -np.inf)))


def _context(rc: RequestClass) -> float:
    return rc.input_tokens + rc.output_tokens / 2.0


def _prefill(rc, strategy, model, draft, workload, silicon, graph, options) -> list[Candidate]:
    new = rc.input_tokens * (1 - rc.prefix_cache_hit)
    cached = rc.input_tokens - new
    kv_out = edge_bytes(graph, rc.name, strategy, "prefill", "decode" if strategy == "pd_disagg"
                        else "verify" if strategy == "spec_decode" else "attention")
    slo_s = ms_to_s(rc.slo.ttft_ms)
    m = np.asarray(options.prefill_batches, dtype=float)
    out = []
    for s in silicon:
        for n in s.tp_options(model.weights_bytes, options.max_tp):
            service = prefill_pass(model, s.hw, n, new, cached, prompts=m).total_s.reshape(-1)
            kv_per_device = m * model.kv_bytes(rc.input_tokens) * kv_share(model, s.hw, n).reshape(-1)
            fits = kv_per_device <= s.kv_room(model.weights_bytes / n)
            move = float(transfer_s(kv_out, n * s.nic_bytes_s, s.nic_latency_s)) if kv_out else 0.0
            rho = max_utilization(slo_s, service, move)
            network_rps = n * s.nic_bytes_s / kv_out if kv_out else np.inf
            capacity = np.minimum(m / service, network_rps)
            i = _best(fits & (rho > 0), rho * capacity)
            if i is None:
                continue
            ttft = md1_wait_s(rho[i], service[i]) + service[i] + move
            out.append(Candidate(
                class_name=rc.name, strategy=strategy, role="prefill", device=s.id, tp=n, batch=int(m[i]),
                **_money([(s, n)]), capacity_rps=float(capacity[i]), utilization_cap=float(rho[i]),
                ttft_ms=s_to_ms(float(ttft)), tpot_ms=None,
                limited_by="network" if capacity[i] >= network_rps else "slo.ttft_ms",
                extra={"service_s": float(service[i]), "transfer_s": move},
            ))
    return out


def _decode_choice(rc, tpot, fits, batch, network_rps):
    """Best batch for a decode unit: TPOT within SLO, fits; capacity = b / (TPOT · osl)."""
    slo_s = ms_to_s(rc.slo.tpot_ms)
    capacity = np.minimum(batch / (tpot * rc.output_tokens), network_rps)
    i = _best(fits & (tpot <= slo_s), capacity)
    if i is None:
        return None
    larger_fits = i + 1 < len(batch) and fits[i + 1]
    limited = "network" if capacity[i] >= network_rps else ("slo.tpot_ms" if larger_fits else "memory")
    return i, float(capacity[i]), limited


def _decode(rc, strategy, model, draft, workload, silicon, graph, options) -> list[Candidate]:
    kv_in = edge_bytes(graph, rc.name, strategy, "prefill", "decode")
    b = np.asarray(options.batches, dtype=float)
    out = []
    for s in silicon:
        for n in s.tp_options(model.weights_bytes, options.max_tp):
            tpot = decode_step(model, s.hw, n, b, _context(rc)).total_s.reshape(-1)
            per_seq = model.kv_bytes(memory.paged_kv_tokens(rc.input_tokens, rc.output_tokens)) * kv_share(model, s.hw, n).reshape(-1)
            fits = b * per_seq <= s.kv_room(model.weights_bytes / n)
            choice = _decode_choice(rc, tpot, fits, b, n * s.nic_bytes_s / kv_in if kv_in else np.inf)
            if choice is None:
                continue
            i, capacity, limited = choice
            out.append(Candidate(
                class_name=rc.name, strategy=strategy, role="decode", device=s.id, tp=n, batch=int(b[i]),
                **_money([(s, n)]), capacity_rps=capacity, utilization_cap=DECODE_UTILIZATION,
                ttft_ms=None, tpot_ms=s_to_ms(float(tpot[i])), limited_by=limited,
            ))
    return out


def _aggregated(rc, strategy, model, draft, workload, silicon, graph, options) -> list[Candidate]:
    new = rc.input_tokens * (1 - rc.prefix_cache_hit)
    b = np.asarray(options.batches, dtype=float)
    chunk = float(min(options.chunk_tokens, new))
    q = chunked_prefill_tokens_per_step(b, rc.input_tokens, rc.output_tokens, rc.prefix_cache_hit)
    out = []
    for s in silicon:
        for n in s.tp_options(model.weights_bytes, options.max_tp):
            step = decode_step(model, s.hw, n, b, _context(rc), prefill_tokens=q).total_s.reshape(-1)
            chunk_step = decode_step(model, s.hw, n, b, _context(rc), prefill_tokens=chunk).total_s.reshape(-1)
            service = math.ceil(new / chunk) * chunk_step  # the prompt's chunks ride on that many steps
            rho = max_utilization(ms_to_s(rc.slo.ttft_ms), service)
            per_seq = model.kv_bytes(memory.paged_kv_tokens(rc.input_tokens, rc.output_tokens)) * kv_share(model, s.hw, n).reshape(-1)
            fits = (b * per_seq <= s.kv_room(model.weights_bytes / n)) & (q <= options.chunk_tokens)
            capacity = b / (step * rc.output_tokens)
            ok = fits & (step <= ms_to_s(rc.slo.tpot_ms)) & (rho > 0)
            i = _best(ok, rho * capacity)
            if i is None:
                continue
            ttft = md1_wait_s(rho[i], service[i]) + service[i]
            if i + 1 < len(b) and fits[i + 1]:
                limited = "slo.tpot_ms" if step[i + 1] > ms_to_s(rc.slo.tpot_ms) else "slo.ttft_ms"
            else:
                limited = "memory"
            out.append(Candidate(
                class_name=rc.name, strategy=strategy, role="aggregated", device=s.id, tp=n, batch=int(b[i]),
                **_money([(s, n)]), capacity_rps=float(capacity[i]), utilization_cap=float(rho[i]),
                ttft_ms=s_to_ms(float(ttft)), tpot_ms=s_to_ms(float(step[i])),
                limited_by=limited, extra={"service_s": float(service[i]), "transfer_s": 0.0},
            ))
    return out


def _spec_decode(rc, strategy, model, draft, workload, silicon, graph, options) -> list[Candidate]:
    spec = workload.spec_decode
    k, alpha = spec.draft_tokens, spec.acceptance_rate
    tokens_per_round = float(expected_tokens_per_round(alpha, k))
    b = np.asarray(options.batches, dtype=float)
    c = _context(rc)
    live = memory.paged_kv_tokens(rc.input_tokens, rc.output_tokens)
    kv_in = edge_bytes(graph, rc.name, strategy, "prefill", "verify")
    # a draft on other silicon runs on the fewest devices that hold it; its step does not depend on the target
    remote = {}
    for d in silicon:
        counts = d.tp_options(draft.weights_bytes, options.max_tp)
        if counts:
            nd = counts[0]
            step = decode_step(draft, d.hw, nd, b, c).total_s.reshape(-1)
            kv = b * draft.kv_bytes(live) * kv_share(draft, d.hw, nd).reshape(-1)
            remote[d.id] = (d, nd, step, kv <= d.kv_room(draft.weights_bytes / nd))
    out = []
    for v in silicon:
        for n in v.tp_options(model.weights_bytes, options.max_tp):
            verify = decode_step(model, v.hw, n, b, c, prefill_tokens=b * k).total_s.reshape(-1)
            target_kv = b * model.kv_bytes(live) * kv_share(model, v.hw, n).reshape(-1)
            network_rps = n * v.nic_bytes_s / kv_in if kv_in else np.inf
            # draft on the target's own devices
            local_step = decode_step(draft, v.hw, n, b, c).total_s.reshape(-1)
            local_kv = b * draft.kv_bytes(live) * kv_share(draft, v.hw, n).reshape(-1)
            layouts = [(None, n, local_step, target_kv + local_kv <= v.kv_room(model.weights_bytes / n, draft.weights_bytes / n), 0.0)]
            target_fits = target_kv <= v.kv_room(model.weights_bytes / n)
            for d_id, (d, nd, step, draft_fits) in remote.items():
                if d_id == v.id:
                    continue
                link = min(n * v.nic_bytes_s, nd * d.nic_bytes_s)
                round_trip = 2.0 * transfer_s(b * k * TOKEN_ID_BYTES, link, max(v.nic_latency_s, d.nic_latency_s))
                layouts.append((d, nd, step, target_fits & draft_fits, round_trip))
            for d, nd, step, fits, round_trip in layouts:
                round_s = spec_round_s(step, k, verify, round_trip)
                tpot = spec_tpot_s(round_s, alpha, k)
                choice = _decode_choice(rc, tpot, fits, b, network_rps)
                if choice is None:
                    continue
                i, capacity, limited = choice
                parts = [(v, n)] if d is None else [(v, n), (d, nd)]
                out.append(Candidate(
                    class_name=rc.name, strategy=strategy, role="decode", device=v.id, tp=n, batch=int(b[i]),
                    **_money(parts), capacity_rps=capacity, utilization_cap=DECODE_UTILIZATION,
                    ttft_ms=None, tpot_ms=s_to_ms(float(tpot[i])), limited_by=limited,
                    partner_device=None if d is None else d.id, partner_tp=None if d is None else nd,
                    partner_role=None if d is None else "draft",
                    extra={"tokens_per_round": tokens_per_round, "round_ms": s_to_ms(float(round_s[i]))},
                ))
    return out


def _af_decode(rc, strategy, model, draft, workload, silicon, graph, options) -> list[Candidate]:
    attn, experts = attention_side(model), expert_side(model)
    b = np.asarray(options.batches, dtype=float)
    c = _context(rc)
    live = memory.paged_kv_tokens(rc.input_tokens, rc.output_tokens)
    kv_in = edge_bytes(graph, rc.name, strategy, "prefill", "attention")
    out = []
    for a in silicon:
        for na in a.tp_options(attn.weights_bytes, options.max_tp):
            kv = b * model.kv_bytes(live) * kv_share(model, a.hw, na).reshape(-1)
            fits_a = kv <= a.kv_room(attn.weights_bytes / na)
            for f in silicon:
                for nf in f.tp_options(experts.weights_bytes, options.max_tp)[:2]:
                    link = min(na * a.nic_bytes_s, nf * f.nic_bytes_s)
                    latency = max(a.nic_latency_s, f.nic_latency_s)
                    step, _, _ = af_decode_step(model, a.hw, na, f.hw, nf, b, c, link, latency)
                    step = step.reshape(-1)
                    choice = _decode_choice(rc, step, fits_a, b, na * a.nic_bytes_s / kv_in if kv_in else np.inf)
                    if choice is None:
                        continue
                    i, capacity, limited = choice
                    parts = [(a, na), (f, nf)] if a.id != f.id else [(a, na + nf)]
                    out.append(Candidate(
                        class_name=rc.name, strategy=strategy, role="decode", device=a.id, tp=na, batch=int(b[i]),
                        **_money(parts), capacity_rps=capacity, utilization_cap=DECODE_UTILIZATION,
                        ttft_ms=None, tpot_ms=s_to_ms(float(step[i])), limited_by=limited,
                        partner_device=f.id, partner_tp=nf, partner_role="ffn",
                    ))
    return out


_UNIT_BUILDERS = {
    ("aggregated", "aggregated"): _aggregated,
    ("pd_disagg", "prefill"): _prefill,
    ("pd_disagg", "decode"): _decode,
    ("spec_decode", "prefill"): _prefill,
    ("spec_decode", "decode"): _spec_decode,
    ("af_disagg", "prefill"): _prefill,
    ("af_disagg", "decode"): _af_decode,
}
