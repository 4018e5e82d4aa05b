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
from planner.perf.model import (
    CostModel,
    RooflineModel,
    Silicon,
    UnsupportedDtype,
    attention_side,
    chunked_prefill_tokens_per_step,
    expert_side,
    paged_kv_tokens,
    transfer_s,
)
from planner.queueing import DECODE_UTILIZATION, max_utilization, md1_wait_s
from planner.schema import STRATEGIES, RequestClass, Workload
from planner.units import ms_to_s, s_to_ms


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


def generate_candidates(workload: Workload, catalog: Catalog, graph: nx.DiGraph,
                        options: CandidateOptions = CandidateOptions(),
                        costs: CostModel | None = None) -> tuple[list[Candidate], list[str]]:
    """All non-dominated SLO-feasible candidates, and notes on devices that were skipped.

    Raises StrategyError (bad input) when the workload allows a strategy its model cannot use.
    """
    arch = catalog.model(workload.model)
    if "af_disagg" in workload.strategies and not arch.is_moe:
        raise StrategyError(f"strategies: af_disagg needs an MoE model ({workload.model} is dense); "
                            f"allowed for it: {', '.join(s for s in STRATEGIES if s != 'af_disagg')}")
    costs = costs or RooflineModel(catalog)
    model = costs.profile(workload.model, workload.dtype, workload.kv_dtype)
    draft = None
    if workload.spec_decode is not None:
        draft = costs.profile(workload.spec_decode.draft_model, workload.dtype, workload.kv_dtype)
    silicon, notes = _silicon(workload, catalog, costs)
    candidates: list[Candidate] = []
    for rc in sorted(workload.classes, key=lambda c: c.name):
        for strategy in strategies_of(graph, rc.name):
            for unit in units(graph, rc.name, strategy):
                found = _UNIT_BUILDERS[(strategy, unit)](rc, strategy, model, draft, workload, silicon, graph, options, costs)
                candidates.extend(prune_dominated(found, workload))
    return candidates, notes


def _silicon(workload: Workload, catalog: Catalog, costs: CostModel) -> tuple[list[Silicon], list[str]]:
    allowed = workload.constraints.devices or tuple(catalog.devices)
    out, notes = [], []
    for device_id in allowed:
        if workload.constraints.inventory.get(device_id, 1) == 0:
            notes.append(f"{device_id}: inventory 0")
            continue
        try:
            out.append(costs.silicon(device_id, workload.dtype))
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
    keys = [c.key for c in candidates]
    all_types = sorted({t for c in candidates for t in c.devices_by_type})
    uses = np.array([[t in c.devices_by_type for t in all_types] for c in candidates])
    # Sweep in an order where every dominator comes before what it dominates (capacity down, then the
    # costs and the key up): a candidate survives iff no earlier survivor dominates it, since
    # dominance is transitive. O(n · survivors) instead of O(n²).
    order = sorted(range(len(candidates)), key=lambda i: (-capacity[i], *costs[i], keys[i]))
    rank = np.empty(len(candidates), dtype=int)
    rank[sorted(range(len(candidates)), key=keys.__getitem__)] = np.arange(len(candidates))
    kept: list[int] = []
    for i in order:
        if kept:
            k = np.asarray(kept)
            subset = np.all(~uses[k] | uses[i], axis=1)  # the survivor's types ⊆ this one's
            no_worse = subset & (capacity[k] >= capacity[i]) & np.all(costs[k] <= costs[i], axis=1)
            strictly = (capacity[k] > capacity[i]) | np.any(costs[k] < costs[i], axis=1)
            if np.any(no_worse & (strictly | (rank[k] < rank[i]))):
                continue
        kept.append(i)
    survivors = set(kept)
    return [c for i, c in enumerate(candidates) if i in survivors]


def _money(parts: list[tuple[Silicon, int]]) -> dict:
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


def _prefill(rc, strategy, model, draft, workload, silicon, graph, options, costs) -> list[Candidate]:
    new = rc.input_tokens * (1 - rc.prefix_cache_hit)
    cached = rc.input_tokens - new
    kv_out = edge_bytes(graph, rc.name, strategy, "prefill", "decode" if strategy == "pd_disagg"
                        else "verify" if strategy == "spec_decode" else "attention")
    slo_s = ms_to_s(rc.slo.ttft_ms)
    m = np.asarray(options.prefill_batches, dtype=float)
    out = []
    for s in silicon:
        for n in s.device_counts(model.weights_bytes, options.max_tp):
            service = costs.prefill(model, s, n, new, cached, prompts=m).total_s.reshape(-1)
            kv_per_device = m * model.kv_bytes(rc.input_tokens) * costs.kv_share(model, s, n).reshape(-1)
            fits = kv_per_device <= s.kv_room_bytes(model.weights_bytes / n)
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


def _decode(rc, strategy, model, draft, workload, silicon, graph, options, costs) -> list[Candidate]:
    kv_in = edge_bytes(graph, rc.name, strategy, "prefill", "decode")
    b = np.asarray(options.batches, dtype=float)
    out = []
    for s in silicon:
        for n in s.device_counts(model.weights_bytes, options.max_tp):
            tpot = costs.decode(model, s, n, b, _context(rc)).total_s.reshape(-1)
            per_seq = model.kv_bytes(paged_kv_tokens(rc.input_tokens, rc.output_tokens)) * costs.kv_share(model, s, n).reshape(-1)
            fits = b * per_seq <= s.kv_room_bytes(model.weights_bytes / n)
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


def _aggregated(rc, strategy, model, draft, workload, silicon, graph, options, costs) -> list[Candidate]:
    new = rc.input_tokens * (1 - rc.prefix_cache_hit)
    b = np.asarray(options.batches, dtype=float)
    chunk = float(min(options.chunk_tokens, new))
    q = chunked_prefill_tokens_per_step(b, rc.input_tokens, rc.output_tokens, rc.prefix_cache_hit)
    out = []
    for s in silicon:
        for n in s.device_counts(model.weights_bytes, options.max_tp):
            step = costs.decode(model, s, n, b, _context(rc), prefill_tokens=q).total_s.reshape(-1)
            chunk_step = costs.decode(model, s, n, b, _context(rc), prefill_tokens=chunk).total_s.reshape(-1)
            service = math.ceil(new / chunk) * chunk_step  # the prompt's chunks ride on that many steps
            rho = max_utilization(ms_to_s(rc.slo.ttft_ms), service)
            per_seq = model.kv_bytes(paged_kv_tokens(rc.input_tokens, rc.output_tokens)) * costs.kv_share(model, s, n).reshape(-1)
            fits = (b * per_seq <= s.kv_room_bytes(model.weights_bytes / n)) & (q <= options.chunk_tokens)
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


def _spec_decode(rc, strategy, model, draft, workload, silicon, graph, options, costs) -> list[Candidate]:
    spec = workload.spec_decode
    k, alpha = spec.draft_tokens, spec.acceptance_rate
    tokens_per_round = float(costs.expected_tokens_per_round(alpha, k))
    b = np.asarray(options.batches, dtype=float)
    c = _context(rc)
    live = paged_kv_tokens(rc.input_tokens, rc.output_tokens)
    kv_in = edge_bytes(graph, rc.name, strategy, "prefill", "verify")
    # a draft on other silicon runs on the fewest devices that hold it; its step does not depend on the target
    remote = {}
    for d in silicon:
        counts = d.device_counts(draft.weights_bytes, options.max_tp)
        if counts:
            nd = counts[0]
            step = costs.decode(draft, d, nd, b, c).total_s.reshape(-1)
            kv = b * draft.kv_bytes(live) * costs.kv_share(draft, d, nd).reshape(-1)
            remote[d.id] = (d, nd, step, kv <= d.kv_room_bytes(draft.weights_bytes / nd))
    out = []
    for v in silicon:
        for n in v.device_counts(model.weights_bytes, options.max_tp):
            verify = costs.decode(model, v, n, b, c, prefill_tokens=b * k).total_s.reshape(-1)
            target_kv = b * model.kv_bytes(live) * costs.kv_share(model, v, n).reshape(-1)
            network_rps = n * v.nic_bytes_s / kv_in if kv_in else np.inf
            # draft on the target's own devices
            local_step = costs.decode(draft, v, n, b, c).total_s.reshape(-1)
            local_kv = b * draft.kv_bytes(live) * costs.kv_share(draft, v, n).reshape(-1)
            layouts = [(None, n, local_step, target_kv + local_kv <= v.kv_room_bytes(model.weights_bytes / n, draft.weights_bytes / n), 0.0)]
            target_fits = target_kv <= v.kv_room_bytes(model.weights_bytes / n)
            for d_id, (d, nd, step, draft_fits) in remote.items():
                if d_id == v.id:
                    continue
                link = min(n * v.nic_bytes_s, nd * d.nic_bytes_s)
                round_trip = 2.0 * transfer_s(b * k * TOKEN_ID_BYTES, link, max(v.nic_latency_s, d.nic_latency_s))
                layouts.append((d, nd, step, target_fits & draft_fits, round_trip))
            for d, nd, step, fits, round_trip in layouts:
                round_s = costs.spec_round_s(step, k, verify, round_trip)
                tpot = costs.spec_tpot_s(step, verify, k, alpha, round_trip)
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


def _af_decode(rc, strategy, model, draft, workload, silicon, graph, options, costs) -> list[Candidate]:
    attn, experts = attention_side(model), expert_side(model)
    b = np.asarray(options.batches, dtype=float)
    c = _context(rc)
    live = paged_kv_tokens(rc.input_tokens, rc.output_tokens)
    kv_in = edge_bytes(graph, rc.name, strategy, "prefill", "attention")
    out = []
    for a in silicon:
        for na in a.device_counts(attn.weights_bytes, options.max_tp):
            kv = b * model.kv_bytes(live) * costs.kv_share(model, a, na).reshape(-1)
            fits_a = kv <= a.kv_room_bytes(attn.weights_bytes / na)
            for f in silicon:
                for nf in f.device_counts(experts.weights_bytes, options.max_tp)[:2]:
                    link = min(na * a.nic_bytes_s, nf * f.nic_bytes_s)
                    latency = max(a.nic_latency_s, f.nic_latency_s)
                    step = costs.af_decode(model, a, na, f, nf, b, c, link, latency).total_s.reshape(-1)
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
