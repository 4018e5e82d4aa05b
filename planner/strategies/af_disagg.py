"""Attention/FFN disaggregation for MoE models: attention and the KV cache on one pool, the experts on a
partner pool, activations crossing between them at every MoE layer of every step (MegaScale-Infer).

The attention:expert ratio is a decision: one expert replica serves ``r`` attention replicas (r from
``CandidateOptions.partner_shares``), running all their tokens in each MoE layer, its NICs carrying all
their activations; a candidate is one such group.
"""

from __future__ import annotations

from itertools import product

import numpy as np

from planner.perf.model import ACTIVATION_BYTES, attention_side, expert_side, paged_kv_tokens
from planner.schema import Pool, RequestClass
from planner.strategies.base import (
    Candidate,
    Checking,
    ClassLoad,
    Pricing,
    Recheck,
    add_kv_edge,
    add_prefill_task,
    add_task,
    close,
    decode_choice,
    edge_bytes,
    mean_context,
    money,
    partner_share,
    price_prefill,
    price_shared_prefill,
    recheck_mix,
    recheck_prefill,
    recheck_shared_prefill,
    recheck_slots,
    shared_picks,
    shared_step_bounds,
    slot_queue,
    tpot_tiers,
    unoffered,
    within,
)
from planner.units import ms_to_s, s_to_ms

NAME = "af_disagg"
UNITS = ("decode", "prefill")
#: expert-pool sizes tried per device: the fewest devices that hold the experts, and twice that
EXPERT_COUNTS = 2


def applies(model) -> bool:
    """Attention/FFN disaggregation needs experts to move."""
    return model.moe_layers > 0


def add_tasks(graph, rc: RequestClass, model, draft, spec) -> None:
    prefill = add_prefill_task(graph, rc, NAME)
    attention = add_task(graph, rc, NAME, "attention", "decode", prefill_tokens=0, cached_tokens=0,
                         decode_tokens=rc.output_tokens)
    ffn = add_task(graph, rc, NAME, "ffn", "decode", prefill_tokens=0, cached_tokens=0, decode_tokens=rc.output_tokens)
    activations = rc.output_tokens * model.moe_layers * model.hidden_size * ACTIVATION_BYTES
    hops = float(rc.output_tokens * model.moe_layers)
    add_kv_edge(graph, prefill, attention, model.kv_bytes(rc.input_tokens))
    for source, target in ((attention, ffn), (ffn, attention)):
        graph.add_edge(source, target, kind="activations", bytes_per_request=activations, transfers_per_request=hops,
                       link="scale_out")


def activation_link(a, na: int, f, nf: int, sharing: int = 1) -> tuple[float, float]:
    """Bandwidth and latency of one attention replica's activation link: the slower of its own NICs and its
    ``1/sharing`` share of the expert replica's."""
    return min(na * a.nic_bytes_s, nf * f.nic_bytes_s / sharing), max(a.nic_latency_s, f.nic_latency_s)


def groups(ctx: Pricing):
    """Every attention/expert group shape: ``(a, na, f, nf, r)``, ``na`` devices of ``a`` per attention replica, an
    expert replica of ``nf`` devices of ``f`` (the fewest that hold the experts, and twice that) serving ``r``."""
    attn, experts, options = attention_side(ctx.model), expert_side(ctx.model), ctx.options
    for a in ctx.silicon:
        for na in a.device_counts(attn.weights_bytes, options.max_tp):
            for f in ctx.silicon:
                for nf, r in product(f.device_counts(experts.weights_bytes, options.max_tp)[:EXPERT_COUNTS],
                                     options.partner_shares):
                    yield a, na, f, nf, r


def group_step(ctx: Pricing, rc: RequestClass, a, na: int, f, nf: int, r: int):
    """The ping-pong step (s) of class ``rc``'s sequences on one attention replica of the group, over the batches."""
    b = np.asarray(ctx.options.batches, dtype=float)
    return ctx.costs.af_decode(ctx.model, a, na, f, nf, b, mean_context(rc), *activation_link(a, na, f, nf, r),
                               sharing=r).total_s.reshape(-1)


def attention_fits(ctx: Pricing, rc: RequestClass, a, na: int):
    """Whether ``rc``'s paged KV fits beside the attention weights, over the batches."""
    model = ctx.model
    b = np.asarray(ctx.options.batches, dtype=float)
    kv = b * model.kv_bytes(paged_kv_tokens(rc.input_tokens, rc.output_tokens)) * ctx.costs.kv_share(model, a, na).reshape(-1)
    return kv <= a.kv_room_bytes(attention_side(model).weights_bytes / na)


def network_rps(ctx: Pricing, rc: RequestClass, a, na: int) -> float:
    """Requests/s of class ``rc`` whose prompt KV one attention replica's NICs take in (inf when nothing crosses)."""
    kv_in = edge_bytes(ctx.graph, rc.name, NAME, "prefill", "attention")
    return na * a.nic_bytes_s / kv_in if kv_in else float("inf")


def _candidate(class_name: str, a, na: int, f, nf: int, r: int, batch: int, queue: tuple, **fields) -> Candidate:
    """One group: ``r`` attention replicas and the expert replica they share, its slots queued as ``queue``
    (``slot_queue``)."""
    parts = [(a, r * na), (f, nf)] if a.id != f.id else [(a, r * na + nf)]
    return Candidate(class_name=class_name, strategy=NAME, role="decode", device=a.id, tp=na, batch=batch,
                     **money(parts), ttft_ms=None, partner_device=f.id, partner_tp=nf, partner_role="ffn",
                     partner_share=r, extra={"slot_queue": queue}, **fields)


def price(unit: str, ctx: Pricing, rc: RequestClass) -> list[Candidate]:
    if unit == "prefill":
        return price_prefill(ctx, rc, NAME)
    b = np.asarray(ctx.options.batches, dtype=float)
    out = []
    for a, na, f, nf, r in groups(ctx):
        step = group_step(ctx, rc, a, na, f, nf, r)
        choice = decode_choice(rc, step, attention_fits(ctx, rc, a, na), b, network_rps(ctx, rc, a, na))
        if choice is None:
            continue
        i, capacity, rho, limited = choice
        out.append(_candidate(rc.name, a, na, f, nf, r, int(b[i]), slot_queue([rc]), capacity_rps=r * capacity, utilization_cap=rho,
                              tpot_ms=s_to_ms(float(step[i])), limited_by=limited))
    return out


def price_shared(ctx: Pricing) -> list[Candidate]:
    """Attention replicas (and the expert replica of their group) shared by classes, tiered by TPOT SLO T as
    pd_disagg's decode replicas are (see ``pd_disagg.price_shared``). The attention side reads each sequence's own
    KV; the experts' work, the weights and the activations depend on the batch alone. So a mixed step is at most
    the slot-weighted mean of each class's own step at that batch, and the share, tier and network rows of
    milp/build.py hold. Per group shape and tier, the batches and slot caps of ``pd_disagg.price_shared``
    (``shared_picks``, ``shared_step_bounds``), every member's KV fitting. Shared prefill replicas too
    (``price_shared_prefill``)."""
    b = np.asarray(ctx.options.batches, dtype=float)
    out = []
    for members in tpot_tiers(ctx, NAME, "attention"):
        tier = members[0]
        for a, na, f, nf, r in groups(ctx):
            if a.kv_spill:  # its KV read at a bandwidth the resident mix sets: see pd_disagg.price_shared
                continue
            step = np.array([group_step(ctx, rc, a, na, f, nf, r) for rc in members])
            fits = np.all([attention_fits(ctx, rc, a, na) for rc in members], axis=0)
            picks = shared_picks(step, fits & (step <= ms_to_s(tier.slo.tpot_ms)), b, members)
            for i, (cap, most) in ((i, c) for i, slow in picks.items() for c in shared_step_bounds(slow, int(b[i]), members)):
                mix = tuple(ClassLoad(rc.name, float(r * b[i] / (step[k, i] * rc.output_tokens)), float(step[k, i]),
                                      r * network_rps(ctx, rc, a, na)) for k, rc in enumerate(members))
                out.append(_candidate(tier.name, a, na, f, nf, r, int(b[i]), slot_queue(members), capacity_rps=mix[0].capacity_rps,
                                      utilization_cap=cap, tpot_ms=s_to_ms(most), limited_by="slo.tpot_ms", mix=mix))
    return out + price_shared_prefill(ctx, NAME)


def step_of(pool: Pool, rc: RequestClass, check: Checking) -> tuple[float, bool]:
    """The ping-pong step (s) of ``rc``'s sequences alone in ``pool`` (each expert replica serving
    ``replicas / partner_replicas`` attention replicas), and whether the attention side's KV and both sides' weights fit."""
    model, costs = check.model, check.costs
    attn, experts = attention_side(model), expert_side(model)
    a, na = costs.silicon(pool.device, check.workload.dtype), pool.tp
    f, nf = costs.silicon(pool.partner_device, check.workload.dtype), pool.partner_tp
    b, r = pool.batch, partner_share(pool)
    step = float(costs.af_decode(model, a, na, f, nf, b, mean_context(rc), *activation_link(a, na, f, nf, r),
                                 sharing=r).total_s.reshape(-1)[0])
    kv = b * float(model.kv_bytes(paged_kv_tokens(rc.input_tokens, rc.output_tokens))) * float(costs.kv_share(model, a, na).reshape(-1)[0])
    fits = (attn.weights_bytes / na <= a.usable_weights_bytes and kv <= a.kv_room_bytes(attn.weights_bytes / na)
            and experts.weights_bytes / nf <= f.usable_weights_bytes)
    return step, bool(fits)


def recheck(pool: Pool, rc: RequestClass, check: Checking) -> Recheck:
    """An attention pool and its expert replicas: the ping-pong step, the attention side's KV, the expert side's
    weights (a shared pool: ``recheck_mix`` of every class's step)."""
    if pool.role == "prefill":
        return recheck_shared_prefill(pool, check, NAME) if pool.serves is not None else recheck_prefill(pool, rc, check)
    if pool.pp > 1:  # attention replicas are tensor parallel only
        return unoffered(pool)
    if pool.serves is not None:
        return recheck_mix(pool, check, lambda c: step_of(pool, c, check), lambda c: check.model.kv_bytes(c.input_tokens),
                           f"af_disagg (experts on {pool.partner_device})")
    step, fits = step_of(pool, rc, check)
    slots_ok, slots = recheck_slots(pool, step, [rc])
    return Recheck(within(step, rc.slo.tpot_ms) and close(s_to_ms(step), pool.tpot_ms) and slots_ok, fits,
                   pool.batch / (step * rc.output_tokens),
                   f"af_disagg on {pool.device} + experts on {pool.partner_device} (1 per {partner_share(pool)}): "
                   f"recomputed TPOT {s_to_ms(step):.2f} ms vs plan {pool.tpot_ms} ms" + slots)
