"""What every serving strategy shares: the candidate type, the pricing context, task nodes, and the
prefill pool (priced and re-checked the same way whatever decode side it feeds).

A strategy module (aggregated.py, pd_disagg.py, spec_decode.py, af_disagg.py) owns three things:
``add_tasks`` (its task shape in the graph), ``price`` (SLO-feasible candidates of each of its pool
units, through the ``CostModel``) and ``recheck`` (an independent recomputation of one of its pools
from the catalog and the cost model, for ``verify``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from planner.nodes import PerDevice
from planner.perf.model import CostModel, ModelProfile, Silicon, paged_kv_tokens, transfer_s
from planner.queueing import DECODE_UTILIZATION, max_slot_utilization, max_utilization_at, slot_holding, slot_wait_s, wait_s
from planner.schema import Pool, RequestClass, Workload, route_of
from planner.units import ms_to_s, s_to_ms

#: token ids crossing between draft and verifier, bytes per token.
TOKEN_ID_BYTES = 4.0
#: relative tolerance of a re-check against the plan's own figures.
REL_TOL = 1e-6


#: decode batches tried: powers of two and steps of about 1.5x between them, 1 .. 2048 sequences
BATCH_GRID: tuple[int, ...] = tuple(sorted({2**i for i in range(12)} | {3 * 2**i for i in range(10)}))


@dataclass(frozen=True)
class CandidateOptions:
    """Search space of the candidate generator."""

    batches: tuple[int, ...] = BATCH_GRID  # 1 .. 2048 sequences
    prefill_batches: tuple[int, ...] = (1, 2, 4, 8, 16)  # prompts prefilled together
    max_tp: int = 64
    chunk_tokens: int = 2048  # chunked-prefill token budget per step in aggregated replicas
    #: target (verify or attention) replicas one partner replica (draft server or expert pool) may serve
    partner_shares: tuple[int, ...] = (1, 2, 4, 8, 16)


@dataclass(frozen=True)
class ClassLoad:
    """One class a shared replica may serve: requests/s a replica carrying only this class's sequences at the
    pool's batch would complete (``b / (τ_k · osl_k)``, its slots' limit), that batch's step time τ_k (s), and its
    network's and prompt server's limits."""

    class_name: str
    capacity_rps: float
    step_s: float
    network_rps: float = float("inf")  # requests/s of this class whose KV hand-off the replica's NICs take in
    #: requests/s of this class whose prompts an aggregated replica's chunked prefill completes at full use (1 / S)
    prompt_rps: float = float("inf")


@dataclass(frozen=True)
class Candidate:
    """One replica configuration for one pool unit of one (class, strategy).

    With a partner on its own silicon (a draft server, an expert pool) one MILP replica is a group:
    ``partner_share`` target replicas of ``tp`` devices and one partner replica of ``partner_tp`` devices
    serving all of them; devices, power, money and capacity are the group's.
    """

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
    partner_share: int = 1  # target replicas per partner replica (M:N)
    price_by_type: dict[str, float] = field(default_factory=dict, compare=False)  # $/h of one device of each type
    extra: dict = field(default_factory=dict, compare=False)
    per_device: dict[str, PerDevice] = field(default_factory=dict, compare=False)  # power, prices, node size by type
    #: its weights dtype when the workload lets pools choose (``Workload.dtypes``), else None
    dtype: str | None = None
    #: expert-parallel groups: ``ep`` attention replicas of ``tp / ep`` devices (data-parallel attention), the routed
    #: experts split over all ``tp`` (1: tensor parallelism alone)
    ep: int = 1
    #: pipeline stages across nodes, each a ``tp``-way TP group: ``tp × pp`` devices per replica (1: no pipeline)
    pp: int = 1
    #: a shared replica: every class it may serve (``class_name`` is the one whose TPOT SLO bounds the mix's step);
    #: empty for a replica of ``class_name`` alone
    mix: tuple[ClassLoad, ...] = ()

    @property
    def key(self) -> str:
        partner = f"+{self.partner_role}:{self.partner_device}x{self.partner_tp}" if self.partner_device else ""
        share = f"/{self.partner_share}" if self.partner_share > 1 else ""
        pp = f"pp{self.pp}" if self.pp > 1 else ""
        ep = f"ep{self.ep}" if self.ep > 1 else ""
        if self.mix:  # the classes it may serve too: tiers of one tightest class may differ in their members
            k = f"k{self.extra['draft_tokens']}" if "draft_tokens" in self.extra else ""
            members = "+".join(sorted(load.class_name for load in self.mix))
            bound = f"<{self.tpot_ms:.4f}" if self.role != "prefill" and self.tpot_ms is not None else ""  # its mix-step bound
            return (f"shared:{self.class_name}/{self.route}/{self.role}/{self.device}x{self.tp}{pp}{ep}{partner}{share}"
                    f"#{self.batch}{k}{bound}@{members}")
        return f"{self.class_name}/{self.route}/{self.role}/{self.device}x{self.tp}{pp}{ep}{partner}{share}"

    @property
    def route(self) -> str:
        """The (class traffic) split it serves: its strategy, at its dtype when pools choose (``route_of``)."""
        return route_of(self.strategy, self.dtype)

    @property
    def devices(self) -> int:
        return sum(self.devices_by_type.values())

    def paid_usd_per_hour(self, owned) -> float:
        """``$'_c``: the $/h of this replica's devices of types not in ``owned`` (owned devices are free)."""
        return self.cost_usd_per_hour - sum(k * self.price_by_type.get(d, 0.0) for d, k in self.devices_by_type.items()
                                            if d in owned)

    @property
    def effective_rps(self) -> float:
        """Capacity the MILP may use: ``utilization_cap · capacity``."""
        return self.utilization_cap * self.capacity_rps


@dataclass(frozen=True)
class Pricing:
    """What a strategy prices its candidates with: the workload, its model (and draft) at the plan's dtype,
    the allowed silicon, the task graph, the search space and the cost model."""

    workload: Workload
    model: ModelProfile
    draft: ModelProfile | None
    silicon: list[Silicon]
    graph: nx.DiGraph
    options: CandidateOptions
    costs: CostModel


@dataclass(frozen=True)
class Checking:
    """What a re-check recomputes with: the plan's workload, its model (and draft) profiles, the search space
    the candidates were priced in, and the cost model (verify builds it from the catalog)."""

    workload: Workload
    model: ModelProfile
    draft: ModelProfile | None
    options: CandidateOptions
    costs: CostModel


@dataclass(frozen=True)
class Recheck:
    """One pool recomputed: latency within the SLO and equal to the plan's, batch fits, requests/s per replica."""

    latency_ok: bool
    memory_ok: bool
    replica_rps: float
    note: str


def profiles(costs: CostModel, workload: Workload) -> tuple[ModelProfile, ModelProfile | None]:
    """The workload's model and its draft model (None without speculative decoding) at ``workload.dtype``."""
    draft = workload.spec_decode.draft_model if workload.spec_decode is not None else None
    return (costs.profile(workload.model, workload.dtype, workload.kv_dtype),
            costs.profile(draft, workload.dtype, workload.kv_dtype) if draft else None)


# ------------------------------------------------------------------------------------------ tasks
def node_id(class_name: str, strategy: str, task: str) -> str:
    return f"{class_name}/{strategy}/{task}"


def add_task(graph: nx.DiGraph, rc: RequestClass, strategy: str, task: str, unit: str, **work) -> str:
    """Add one task node of ``rc`` under ``strategy``, run by pool unit ``unit``, with the work one request brings."""
    name = node_id(rc.name, strategy, task)
    graph.add_node(name, **{"class": rc.name, "strategy": strategy, "task": task, "unit": unit,
                            "rate_rps": rc.rate_rps, **work})
    return name


def prompt_tokens(rc: RequestClass) -> tuple[float, float]:
    """``(new, cached)`` prompt tokens of one request: the prefix-cache hit is read, not recomputed."""
    cached = rc.input_tokens * rc.prefix_cache_hit
    return rc.input_tokens - cached, cached


def add_prefill_task(graph: nx.DiGraph, rc: RequestClass, strategy: str) -> str:
    new, cached = prompt_tokens(rc)
    return add_task(graph, rc, strategy, "prefill", "prefill", prefill_tokens=new, cached_tokens=cached, decode_tokens=0)


def add_kv_edge(graph: nx.DiGraph, source: str, target: str, kv_bytes: float) -> None:
    """The prompt's KV cache moving from the prefill pool to a decode pool, once per request, over scale-out."""
    graph.add_edge(source, target, kind="kv_cache", bytes_per_request=float(kv_bytes), transfers_per_request=1.0,
                   link="scale_out")


def edge_bytes(graph: nx.DiGraph, class_name: str, strategy: str, source: str, target: str) -> float:
    """Bytes one request moves along an edge (0 when the edge does not exist)."""
    u, v = node_id(class_name, strategy, source), node_id(class_name, strategy, target)
    return graph.edges[u, v]["bytes_per_request"] if graph.has_edge(u, v) else 0.0


# ---------------------------------------------------------------------------------------- pricing
def money(parts: list[tuple[Silicon, int]]) -> dict:
    """Devices, IT power, $/h and capex of one replica made of ``parts`` (silicon, count), and per device type its
    $/h and its ``PerDevice`` figures."""
    return {
        "devices_by_type": {s.id: n for s, n in parts},
        "price_by_type": {s.id: s.device.price_usd_per_hour for s, _ in parts},
        "power_w": sum(s.replica_power_w(n) for s, n in parts),
        "cost_usd_per_hour": sum(n * s.device.price_usd_per_hour for s, n in parts),
        "capex_usd": sum(n * s.device.price_usd for s, n in parts),
        "per_device": {s.id: PerDevice(s.power_w, s.device.price_usd_per_hour, s.device.price_usd, s.device.devices_per_node)
                       for s, _ in parts},
    }


def best(mask: np.ndarray, score: np.ndarray) -> int | None:
    """Index of the largest score where mask holds, or None."""
    if not np.any(mask):
        return None
    return int(np.argmax(np.where(mask, score, -np.inf)))


def mean_context(rc: RequestClass) -> float:
    """Mean context a decode step attends over a request's life: ``isl + osl/2`` tokens."""
    return rc.input_tokens + rc.output_tokens / 2.0


def decode_choice(rc: RequestClass, tpot, fits, batch, network_rps):
    """Best batch for a decode unit: the most usable capacity ``ρ_max · b / (TPOT · osl)``, fitting, where ``ρ_max``
    (``slot_cap``) lets step + slot wait meet the TPOT SLO.

    ``tpot`` is over the batches, or (variants × batches) to choose a variant too (the first of equals);
    returns ``(i, capacity, ρ_max, limited_by)``, or ``(variant, i, capacity, ρ_max, limited_by)`` for a 2-D ``tpot``;
    None when no batch meets the SLO.
    """
    tpot = np.asarray(tpot, dtype=float)
    (choice,) = decode_choices(rc, np.atleast_2d(tpot)[None], np.asarray(fits)[None], batch, network_rps)
    return choice if choice is None or tpot.ndim > 1 else choice[1:]


def decode_choices(rc: RequestClass, tpot, fits, batch, network_rps) -> list:
    """``decode_choice`` for a stack of layouts at once: ``tpot`` (layouts × variants × batches), ``fits``
    (layouts × batches); per layout ``(variant, i, capacity, ρ_max, limited_by)`` or None."""
    tpot = np.asarray(tpot, dtype=float)
    layouts, _, batches = tpot.shape
    fits = np.asarray(fits, dtype=bool)
    b = np.asarray(batch, dtype=float)
    capacity = np.minimum(b / (tpot * rc.output_tokens), network_rps)
    ok = fits[:, None, :] & (tpot <= ms_to_s(rc.slo.tpot_ms))
    rho = np.zeros(tpot.shape)
    rho[ok] = slot_cap(tpot[ok], np.broadcast_to(b, tpot.shape)[ok], [rc])
    ok = (ok & (rho > 0)).reshape(layouts, -1)
    flat = np.argmax(np.where(ok, (rho * capacity).reshape(layouts, -1), -np.inf), axis=1)  # the first of equals
    out = []
    for layout, (any_ok, j) in enumerate(zip(ok.any(axis=1), flat)):
        if not any_ok:
            out.append(None)
            continue
        row, i = divmod(int(j), batches)
        larger_fits = i + 1 < batches and fits[layout, i + 1]
        cap = float(capacity[layout, row, i])
        out.append((row, i, cap, float(rho[layout, row, i]),
                    "network" if cap >= network_rps else ("slo.tpot_ms" if larger_fits else "memory")))
    return out


# ----------------------------------------------------------------------------------- decode slots
def slot_queue(classes: list[RequestClass]) -> tuple:
    """The slot queue of a decode replica that may serve ``classes``: per class its name, its ``(κ, f, n)`` among them
    (``queueing.slot_holding``: the longest holding per token of its own answer), its TPOT statistic
    (``slo.percentile``; None: the mean) and its TPOT SLO (s). Candidates carry it (``extra["slot_queue"]``) for the
    plan to report the waits at its utilisation."""
    osls = [rc.output_tokens for rc in classes]
    return tuple((rc.name, slot_holding(osls, rc.output_tokens), rc.slo.percentile, ms_to_s(rc.slo.tpot_ms))
                 for rc in classes)


def slot_waits_at(step_s: float, batch: int, utilization: float, queue: tuple) -> dict[str, float]:
    """Per class of ``queue`` (``slot_queue``), the slot wait per output token (s) a decode replica of ``batch`` slots
    stepping ``step_s`` at ``utilization`` adds to its TPOT (``queueing.slot_wait_s`` at its statistic)."""
    return {name: float(slot_wait_s(step_s, batch, utilization, hold, p)) for name, hold, p, _ in queue}


def slot_waits(step_s: float, batch: int, utilization: float, classes: list[RequestClass]) -> dict[str, float]:
    """``slot_waits_at`` of the slot queue of ``classes``."""
    return slot_waits_at(step_s, batch, utilization, slot_queue(classes))


def slot_cap(step_s, batch, classes: list[RequestClass]):
    """Largest utilisation ≤ ``DECODE_UTILIZATION`` at which step + slot wait stays within each of ``classes``' own TPOT
    SLO at its statistic (``queueing.max_slot_utilization``, the least over them); 0 where none does."""
    return np.min([max_slot_utilization(step_s, slo, batch, hold, p) for _, hold, p, slo in slot_queue(classes)], axis=0)


def shared_picks(step, ok, batch, members: list[RequestClass]) -> dict[int, float]:
    """The batches of a tier's shared decode-side candidates: per member ``k`` (rows of ``step``, members × batches, s)
    the batch, of those ``ok`` for it, with its most usable capacity ``slot_cap(τ_k) · b / (τ_k · osl_k)``; each batch
    once, with the slowest own step among the members that picked it (index → seconds)."""
    b = np.asarray(batch, dtype=float)
    picks: dict[int, float] = {}
    for k, rc in enumerate(members):
        rho = np.zeros(len(b))
        rho[ok[k]] = slot_cap(step[k][ok[k]], b[ok[k]], members)
        if not (rho > 0).any():
            continue
        i = int(np.argmax(np.where(rho > 0, rho * b / (step[k] * rc.output_tokens), -np.inf)))
        picks[i] = max(picks.get(i, 0.0), float(step[k, i]))
    return dict(sorted(picks.items()))


def shared_step_bounds(step_s: float, batch: int, members: list[RequestClass]) -> list[tuple[float, float]]:
    """A shared decode-side candidate's corner ``(utilisation cap, step its mix must stay within, s)``, as a list of
    none or one: for a mix stepping at most the slowest member's own step ``step_s`` the cap lets it meet every member's
    SLO ``T_k`` with its slot wait (``slot_cap``); a member's wait is the step times a factor ``G_k(ρ)``
    (``slot_waits`` at a step of 1 s), so any mix stepping at most ``min_k T_k / (1 + G_k(cap))`` (at least
    ``step_s``) meets them all at a utilisation up to the cap. A second corner (half way from ``step_s`` to the tier,
    a lower cap) found no better plan on the examples and took SCIP past its time limit on shared-pools.yaml (389
    candidates instead of 344), so there is one. Empty where no utilisation meets the SLOs."""
    cap = float(slot_cap(step_s, batch, members)[()])
    if cap <= 0:
        return []
    per_step = slot_waits(1.0, batch, cap, members)
    return [(cap, min(ms_to_s(rc.slo.tpot_ms) / (1.0 + per_step[rc.name]) for rc in members))]


def kv_out_bytes(ctx: Pricing, rc: RequestClass, strategy: str) -> float:
    """KV bytes one request's prefill hands to the decode side of ``strategy``."""
    target = {"pd_disagg": "decode", "spec_decode": "verify", "af_disagg": "attention"}[strategy]
    return edge_bytes(ctx.graph, rc.name, strategy, "prefill", target)


def replica_shapes(ctx: Pricing | Checking, s: Silicon, weights_bytes: float) -> list[tuple[int, int]]:
    """``(tp, pp)`` shapes a replica of ``s`` holding ``weights_bytes`` may take: TP within one scale-up domain up to
    ``max_tp``, or, where no domain holds the weights, pipelines of up to the workload's ``max_pp`` stages
    (``Silicon.replica_shapes``)."""
    return s.replica_shapes(weights_bytes, ctx.options.max_tp, ctx.workload.constraints.max_pp)


def offered_shape(check: Checking, s: Silicon, pool: Pool) -> bool:
    """Whether a pool's ``tp × pp`` is a shape the candidates offer ``s`` for the model (``replica_shapes``): TP beyond
    the scale-up domain, a pipeline where one domain would hold the model, or one beyond ``max_pp`` is none the planner
    makes (nor one its cost model prices: TP collectives stop at the domain)."""
    return (pool.tp, pool.pp) in replica_shapes(check, s, check.model.weights_bytes)


def expert_groups(model: ModelProfile, s: Silicon, n: int, pp: int = 1) -> list[int]:
    """Expert-parallel group counts a replica of ``n`` devices may run: 1, and for a MoE model on GPU-like devices
    (not SRAM or dataflow pipelines) without pipeline stages every power of two from 2 to ``n`` (data-parallel
    attention, one attention replica of ``n / ep`` devices per group, the routed experts over all ``n``)."""
    if not model.moe_layers or s.sram or s.dataflow or pp > 1:
        return [1]
    return [1] + [2**i for i in range(1, 13) if 2**i <= n and n % 2**i == 0]


def whole_groups(batch, ep: int):
    """Whether a batch splits into whole requests per expert group (``b`` a multiple of ``ep``): an engine places a
    request on one data-parallel attention rank, so fewer requests than groups cannot use them all."""
    return np.asarray(batch) % ep == 0


def kv_per_device(model: ModelProfile, costs: CostModel, s: Silicon, n: int, ep: int = 1, pp: int = 1):
    """A device's share of one sequence's KV: its attention replica's (``n / ep`` devices, ``pp`` stages) share of
    the sequences that replica holds (``1 / ep`` of them)."""
    return costs.kv_share(model, s, n // ep, pp).reshape(-1) / ep


def price_prefill(ctx: Pricing, rc: RequestClass, strategy: str) -> list[Candidate]:
    """Prefill replicas: ``m`` prompts at a time; TTFT = M/D/1 wait + service + KV hand-off within the SLO; for a MoE
    model, the expert groups (``expert_groups``) with the most capacity too."""
    model, costs = ctx.model, ctx.costs
    new, cached = prompt_tokens(rc)
    kv_out = kv_out_bytes(ctx, rc, strategy)
    slo_s = ms_to_s(rc.slo.ttft_ms)
    m = np.asarray(ctx.options.prefill_batches, dtype=float)
    out = []
    for s in ctx.silicon:
        for tp, pp in replica_shapes(ctx, s, model.weights_bytes):
            n = tp * pp
            move = float(transfer_s(kv_out, n * s.nic_bytes_s, s.nic_latency_s)) if kv_out else 0.0
            network_rps = n * s.nic_bytes_s / kv_out if kv_out else np.inf
            found = None
            for ep in expert_groups(model, s, n, pp):
                weights = float(model.weights_per_device(n, ep))
                service = costs.prefill(model, s, n, new, cached, prompts=m, ep=ep, pp=pp).total_s.reshape(-1)
                fits = ((m * model.kv_bytes(rc.input_tokens) * kv_per_device(model, costs, s, n, ep, pp) <= s.kv_room_bytes(weights))
                        & (weights <= s.usable_weights_bytes) & whole_groups(m, ep))
                rho = max_utilization_at(slo_s, service, move, rc.slo.percentile)
                capacity = np.minimum(m / service, network_rps)
                i = best(fits & (rho > 0), rho * capacity)
                if i is not None and (found is None or rho[i] * capacity[i] > found[0]):
                    found = (rho[i] * capacity[i], ep, i, service, rho, capacity)
            if found is None:
                continue
            _, ep, i, service, rho, capacity = found
            ttft = wait_s(rho[i], service[i], rc.slo.percentile) + service[i] + move
            out.append(Candidate(
                class_name=rc.name, strategy=strategy, role="prefill", device=s.id, tp=tp, batch=int(m[i]),
                **money([(s, n)]), capacity_rps=float(capacity[i]), utilization_cap=float(rho[i]),
                ttft_ms=s_to_ms(float(ttft)), tpot_ms=None,
                limited_by="network" if capacity[i] >= network_rps else "slo.ttft_ms",
                extra={"service_s": float(service[i]), "transfer_s": move}, ep=ep, pp=pp,
            ))
    return out


def slowest_prefill(costs: CostModel, model: ModelProfile, s: Silicon, n: int, classes: list[RequestClass], prompts,
                    pp: int = 1):
    """The longest pass of ``prompts`` prompts of any of ``classes`` (new tokens and the cached prefix they attend
    over both count) on ``n`` devices in ``pp`` stages, per prompt count (s)."""
    return np.max([costs.prefill(model, s, n, *prompt_tokens(rc), prompts=np.asarray(prompts, dtype=float),
                                 pp=pp).total_s.reshape(-1) for rc in classes], axis=0)


def tpot_tiers(ctx: Pricing, strategy: str, task: str) -> list[list[RequestClass]]:
    """The member sets of shared decode-side replicas of ``strategy`` (the classes whose graph has ``task``): for each
    TPOT SLO T, the classes whose SLO is at least T, tightest first (two or more, each set once)."""
    classes = sorted((rc for rc in ctx.workload.classes if ctx.graph.has_node(node_id(rc.name, strategy, task))),
                     key=lambda rc: (rc.slo.tpot_ms, rc.name))
    out, seen = [], set()
    for tier in classes:
        members = [rc for rc in classes if rc.slo.tpot_ms >= tier.slo.tpot_ms]
        names = tuple(rc.name for rc in members)
        if len(members) > 1 and names not in seen:
            seen.add(names)
            out.append(members)
    return out


def refused_shape(pool: Pool, check: Checking, s: Silicon, label: str) -> Recheck | None:
    """A re-check's refusal of a pool whose ``tp × pp`` the candidates never offer ``s`` (``offered_shape``) or
    whose expert groups its devices cannot run; None when the shape is one the planner makes."""
    if not offered_shape(check, s, pool):
        return unoffered(pool)
    n = pool.tp * pool.pp
    if pool.ep not in expert_groups(check.model, s, n, pool.pp):
        return Recheck(False, False, 0.0, f"{label} on {pool.device}: {pool.ep} expert groups on {n} devices")
    return None


def price_shared_prefill(ctx: Pricing, strategy: str) -> list[Candidate]:
    """Prefill replicas shared by classes. A tier is a TTFT SLO T (and a statistic): its replicas may serve every
    class of ``strategy`` whose SLO is at least T with that statistic. Each request is counted at the tier's
    longest service S (``slowest_prefill``, m at a time) and largest KV hand-off t: a queue whose services are
    at most S waits no longer than an M/D/1 queue of S at the utilisation S's count gives (the wait grows with
    every service time), so ``wait(ρ; S) + S + t ≤ T`` holds for every class it serves. One candidate per device,
    tp and tier (the batch with the most capacity); tiers of one class are the class's own candidates."""
    model, costs = ctx.model, ctx.costs
    classes = [rc for rc in ctx.workload.classes if ctx.graph.has_node(node_id(rc.name, strategy, "prefill"))]
    m = np.asarray(ctx.options.prefill_batches, dtype=float)
    out, seen = [], set()
    for tier in sorted(classes, key=lambda rc: (rc.slo.ttft_ms, rc.name)):
        members = [rc for rc in classes if rc.slo.ttft_ms >= tier.slo.ttft_ms and rc.slo.percentile == tier.slo.percentile]
        names = tuple(sorted(rc.name for rc in members))
        if len(members) < 2 or names in seen:
            continue
        seen.add(names)
        isl = max(rc.input_tokens for rc in members)
        kv_out = max(kv_out_bytes(ctx, rc, strategy) for rc in members)
        slo_s = ms_to_s(tier.slo.ttft_ms)
        for s in ctx.silicon:
            for tp, pp in replica_shapes(ctx, s, model.weights_bytes):
                n = tp * pp
                service = slowest_prefill(costs, model, s, n, members, m, pp)
                fits = m * model.kv_bytes(isl) * costs.kv_share(model, s, n, pp).reshape(-1) <= s.kv_room_bytes(model.weights_bytes / n)
                move = float(transfer_s(kv_out, n * s.nic_bytes_s, s.nic_latency_s)) if kv_out else 0.0
                rho = max_utilization_at(slo_s, service, move, tier.slo.percentile)
                network_rps = n * s.nic_bytes_s / kv_out if kv_out else np.inf
                capacity = np.minimum(m / service, network_rps)
                i = best(fits & (rho > 0), rho * capacity)
                if i is None:
                    continue
                ttft = wait_s(rho[i], service[i], tier.slo.percentile) + service[i] + move
                out.append(Candidate(
                    class_name=tier.name, strategy=strategy, role="prefill", device=s.id, tp=tp, batch=int(m[i]),
                    **money([(s, n)]), capacity_rps=float(capacity[i]), utilization_cap=float(rho[i]),
                    ttft_ms=s_to_ms(float(ttft)), tpot_ms=None, pp=pp,
                    limited_by="network" if capacity[i] >= network_rps else "slo.ttft_ms",
                    extra={"service_s": float(service[i]), "transfer_s": move},
                    mix=tuple(ClassLoad(rc.name, float(capacity[i]), float(service[i])) for rc in members),
                ))
    return out


# --------------------------------------------------------------------------------------- re-checks
def close(recomputed: float, reported: float | None) -> bool:
    """The plan reports what the cost model recomputes (relative tolerance ``REL_TOL``)."""
    return reported is not None and abs(recomputed - reported) <= REL_TOL * max(1.0, abs(reported))


def partner_count(pool: Pool) -> int:
    """Partner replicas of ``pool`` (one per replica in plans made before partners could be shared)."""
    return pool.replicas if pool.partner_replicas is None else pool.partner_replicas


def partner_share(pool: Pool) -> int:
    """Target replicas the busiest partner replica of ``pool`` serves: ``⌈replicas / partner replicas⌉``."""
    return -(-pool.replicas // partner_count(pool)) if partner_count(pool) else 1


def within(value_s: float, slo_ms: float) -> bool:
    return value_s <= ms_to_s(slo_ms) * (1 + REL_TOL)


def recheck_prefill(pool: Pool, rc: RequestClass, check: Checking) -> Recheck:
    """A prefill pool: TTFT at its planned utilisation (wait + service + KV hand-off), memory, prompts/s per replica
    (its passes', or its NICs' for the KV it hands off, whichever is fewer)."""
    model, costs = check.model, check.costs
    silicon = costs.silicon(pool.device, check.workload.dtype)
    n, m, ep, pp = pool.tp * pool.pp, pool.batch, pool.ep, pool.pp
    if not offered_shape(check, silicon, pool):
        return unoffered(pool)
    if ep not in expert_groups(model, silicon, n, pp) or not whole_groups(m, ep):
        return Recheck(False, False, 0.0, f"prefill on {pool.device}: {ep} expert groups on {n} devices, {m} prompts")
    new, cached = prompt_tokens(rc)
    service = float(costs.prefill(model, silicon, n, new, cached, prompts=m, ep=ep, pp=pp).total_s.reshape(-1)[0])
    kv = float(model.kv_bytes(rc.input_tokens))
    move = float(transfer_s(kv, n * silicon.nic_bytes_s, silicon.nic_latency_s))
    # at the planned utilisation, as the plan reports it (a solver's 1e-7 overshoot of the cap is the demand check's)
    ttft = float(wait_s(min(pool.utilization, pool.utilization_cap), service, rc.slo.percentile)) + service + move
    share = float(kv_per_device(model, costs, silicon, n, ep, pp)[0])
    weights = float(model.weights_per_device(n, ep))
    fits = weights <= silicon.usable_weights_bytes and m * kv * share <= silicon.kv_room_bytes(weights)
    return Recheck(within(ttft, rc.slo.ttft_ms) and close(s_to_ms(ttft), pool.ttft_ms), fits,
                   min(m / service, n * silicon.nic_bytes_s / kv),
                   f"prefill on {pool.device}: recomputed TTFT {s_to_ms(ttft):.1f} ms vs plan {pool.ttft_ms} ms")


def recheck_shared_prefill(pool: Pool, check: Checking, strategy: str) -> Recheck:
    """A shared prefill pool: TTFT at its planned utilisation of the longest service among the classes it may serve,
    with the largest KV hand-off, within the tightest of their SLOs; the largest prompt's batch fitting; prompts/s per
    replica as ``recheck_prefill``'s."""
    model, costs = check.model, check.costs
    silicon = costs.silicon(pool.device, check.workload.dtype)
    members = [rc for rc in check.workload.classes if rc.name in pool.serves]
    n, m, pp = pool.tp * pool.pp, pool.batch, pool.pp
    if not offered_shape(check, silicon, pool):
        return unoffered(pool)
    service = float(slowest_prefill(costs, model, silicon, n, members, [m], pp)[0])
    kv = max(float(model.kv_bytes(rc.input_tokens)) for rc in members)
    move = float(transfer_s(kv, n * silicon.nic_bytes_s, silicon.nic_latency_s))
    percentile = members[0].slo.percentile
    ttft = float(wait_s(min(pool.utilization, pool.utilization_cap), service, percentile)) + service + move
    share = float(costs.kv_share(model, silicon, n, pp).reshape(-1)[0])
    fits = model.weights_bytes / n <= silicon.usable_weights_bytes and m * kv * share <= silicon.kv_room_bytes(model.weights_bytes / n)
    same = all(rc.slo.percentile == percentile for rc in members)
    return Recheck(same and within(ttft, min(rc.slo.ttft_ms for rc in members)) and close(s_to_ms(ttft), pool.ttft_ms), fits,
                   min(m / service, n * silicon.nic_bytes_s / kv),
                   f"shared prefill on {pool.device}: recomputed TTFT {s_to_ms(ttft):.1f} ms vs plan {pool.ttft_ms} ms")


def recheck_slots(pool: Pool, step_s: float, classes: list[RequestClass]) -> tuple[bool, str]:
    """A decode-side pool's slot queue re-checked at its step ``step_s`` (recomputed) for the ``classes`` it may serve:
    each class's wait per token at the planned utilisation (``slot_waits``) is the plan's (``Pool.slot_wait_of``; the
    largest its ``slot_wait_ms``), step + wait is within each class's TPOT SLO, and so it would be at the pool's
    utilisation cap (at most ``DECODE_UTILIZATION``)."""
    waits = slot_waits(step_s, pool.batch, pool.utilization, classes)
    at_cap = slot_waits(step_s, pool.batch, pool.utilization_cap, classes)
    ok = (close(s_to_ms(max(waits.values())), pool.slot_wait_ms)
          and all(close(s_to_ms(waits[rc.name]), pool.slot_wait_of(rc.name)) and within(step_s + waits[rc.name], rc.slo.tpot_ms)
                  and within(step_s + at_cap[rc.name], rc.slo.tpot_ms) for rc in classes)
          and pool.utilization_cap <= DECODE_UTILIZATION * (1 + REL_TOL))
    worst = max(waits, key=waits.get)
    return ok, (f"; slot wait {s_to_ms(waits[worst]):.3f} ms/token ({worst}) at utilisation {pool.utilization:.3f} vs plan "
                f"{pool.slot_wait_of(worst):.3f} ms, {s_to_ms(at_cap[worst]):.3f} at its cap {pool.utilization_cap:.3f}")


def recheck_mix(pool: Pool, check: Checking, own_step, kv_in_bytes, label: str) -> Recheck:
    """A shared decode-side pool (``pool.serves``): each class's own step τ_k alone at the pool's batch and whether
    its batch fits (``own_step(rc) -> (seconds, fits)``), the mix's step ``Σ y_k / Σ (y_k / τ_k)`` with
    ``y_k = served_k · τ_k · osl_k / b`` per replica (equal to the plan's TPOT), every class fitting, the prompt KV
    (``kv_in_bytes(rc)`` per request) within the replicas' NICs, its slot queue at that step (``recheck_slots``), and
    requests/s per replica at that mix ``Σ served_k / Σ y_k``. An idle pool re-checks at its tier class's step."""
    classes = {rc.name: rc for rc in check.workload.classes}
    s = check.costs.silicon(pool.device, check.workload.dtype)
    step, used, fits, kv = {}, {}, True, 0.0
    for name, rps in pool.serves.items():
        step[name], ok = own_step(classes[name])
        fits &= bool(ok)
        used[name] = rps * step[name] * classes[name].output_tokens / pool.batch
        kv += rps * kv_in_bytes(classes[name])
    total = sum(used.values())
    tpot = total / sum(used[k] / step[k] for k in used) if total > 0 else step[pool.class_name]
    network_ok = kv <= pool.replicas * pool.tp * pool.pp * s.nic_bytes_s * (1 + 1e-9)
    rate = sum(pool.serves.values()) / total if total > 0 else 0.0
    slots_ok, slots = recheck_slots(pool, tpot, [classes[name] for name in pool.serves])
    return Recheck(close(s_to_ms(tpot), pool.tpot_ms) and network_ok and close(total / pool.replicas, pool.utilization)
                   and slots_ok, fits, rate, f"shared {label} on {pool.device}: recomputed TPOT {s_to_ms(tpot):.2f} ms vs plan "
                   f"{pool.tpot_ms} ms, utilisation {total / pool.replicas:.3f} vs {pool.utilization:.3f}" + slots
                   + ("" if network_ok else ", KV hand-offs beyond its NICs"))


def decode_fits(model: ModelProfile, costs: CostModel, silicon: Silicon, n: int, batch: int, rc: RequestClass,
                extra_weights_per_device: float = 0.0, ep: int = 1, pp: int = 1) -> bool:
    """The weights and ``batch`` sequences' paged KV fit on ``n`` devices (in ``ep`` expert groups, ``pp`` stages)."""
    if ep not in expert_groups(model, silicon, n, pp) or not whole_groups(batch, ep):
        return False
    live_kv = float(model.kv_bytes(paged_kv_tokens(rc.input_tokens, rc.output_tokens)))
    share = float(kv_per_device(model, costs, silicon, n, ep, pp)[0])
    weights = float(model.weights_per_device(n, ep))
    room = silicon.kv_room_bytes(weights, extra_weights_per_device)
    return weights <= silicon.usable_weights_bytes and batch * live_kv * share <= room


def unoffered(pool: Pool) -> Recheck:
    """The re-check of a pool whose ``tp × pp`` shape the candidates never offer its device (``offered_shape``)."""
    return Recheck(False, False, 0.0, f"{pool.class_name}/{pool.strategy}/{pool.role} on {pool.device}: tp {pool.tp} × "
                                      f"pp {pool.pp} is not a shape the planner offers (TP within one scale-up domain; "
                                      "pipelines only where no domain holds the weights, up to constraints.max_pp stages)")
