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
from planner.queueing import DECODE_UTILIZATION
from planner.schema import Pool, RequestClass
from planner.strategies.base import (
    Candidate,
    Checking,
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
    recheck_prefill,
    unoffered,
    within,
)
from planner.units import s_to_ms

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


def price(unit: str, ctx: Pricing, rc: RequestClass) -> list[Candidate]:
    if unit == "prefill":
        return price_prefill(ctx, rc, NAME)
    model, costs, options = ctx.model, ctx.costs, ctx.options
    attn, experts = attention_side(model), expert_side(model)
    b = np.asarray(options.batches, dtype=float)
    c = mean_context(rc)
    live = paged_kv_tokens(rc.input_tokens, rc.output_tokens)
    kv_in = edge_bytes(ctx.graph, rc.name, NAME, "prefill", "attention")
    out = []
    for a in ctx.silicon:
        for na in a.device_counts(attn.weights_bytes, options.max_tp):
            kv = b * model.kv_bytes(live) * costs.kv_share(model, a, na).reshape(-1)
            fits_a = kv <= a.kv_room_bytes(attn.weights_bytes / na)
            for f in ctx.silicon:
                for nf, r in product(f.device_counts(experts.weights_bytes, options.max_tp)[:EXPERT_COUNTS],
                                     options.partner_shares):
                    step = costs.af_decode(model, a, na, f, nf, b, c, *activation_link(a, na, f, nf, r), sharing=r).total_s.reshape(-1)
                    choice = decode_choice(rc, step, fits_a, b, na * a.nic_bytes_s / kv_in if kv_in else np.inf)
                    if choice is None:
                        continue
                    i, capacity, limited = choice
                    parts = [(a, r * na), (f, nf)] if a.id != f.id else [(a, r * na + nf)]
                    out.append(Candidate(
                        class_name=rc.name, strategy=NAME, role="decode", device=a.id, tp=na, batch=int(b[i]),
                        **money(parts), capacity_rps=r * capacity, utilization_cap=DECODE_UTILIZATION,
                        ttft_ms=None, tpot_ms=s_to_ms(float(step[i])), limited_by=limited,
                        partner_device=f.id, partner_tp=nf, partner_role="ffn", partner_share=r,
                    ))
    return out


def recheck(pool: Pool, rc: RequestClass, check: Checking) -> Recheck:
    """An attention pool and its expert replicas: the ping-pong step with each expert replica serving
    ``replicas / partner_replicas`` attention replicas, the attention side's KV, the expert side's weights."""
    if pool.role == "prefill":
        return recheck_prefill(pool, rc, check)
    if pool.pp > 1:  # attention replicas are tensor parallel only
        return unoffered(pool)
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
    return Recheck(within(step, rc.slo.tpot_ms) and close(s_to_ms(step), pool.tpot_ms), bool(fits),
                   b / (step * rc.output_tokens),
                   f"af_disagg on {pool.device} + experts on {pool.partner_device} (1 per {r}): recomputed TPOT "
                   f"{s_to_ms(step):.2f} ms vs plan {pool.tpot_ms} ms")
