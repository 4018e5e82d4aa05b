"""Prefill/decode disaggregation: prompts on a prefill pool, generation on a decode pool, the KV cache
handed over once per request on the scale-out network (DistServe, Splitwise)."""

from __future__ import annotations

import numpy as np

from planner.perf.model import paged_kv_tokens
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
    decode_fits,
    edge_bytes,
    mean_context,
    money,
    price_prefill,
    recheck_prefill,
    within,
)
from planner.units import s_to_ms

NAME = "pd_disagg"
UNITS = ("decode", "prefill")


def applies(model) -> bool:
    return True


def add_tasks(graph, rc: RequestClass, model, draft, spec) -> None:
    prefill = add_prefill_task(graph, rc, NAME)
    decode = add_task(graph, rc, NAME, "decode", "decode", prefill_tokens=0, cached_tokens=0,
                      decode_tokens=rc.output_tokens)
    add_kv_edge(graph, prefill, decode, model.kv_bytes(rc.input_tokens))


def price(unit: str, ctx: Pricing, rc: RequestClass) -> list[Candidate]:
    if unit == "prefill":
        return price_prefill(ctx, rc, NAME)
    model, costs = ctx.model, ctx.costs
    kv_in = edge_bytes(ctx.graph, rc.name, NAME, "prefill", "decode")
    b = np.asarray(ctx.options.batches, dtype=float)
    out = []
    for s in ctx.silicon:
        for n in s.device_counts(model.weights_bytes, ctx.options.max_tp):
            tpot = costs.decode(model, s, n, b, mean_context(rc)).total_s.reshape(-1)
            per_seq = model.kv_bytes(paged_kv_tokens(rc.input_tokens, rc.output_tokens)) * costs.kv_share(model, s, n).reshape(-1)
            fits = b * per_seq <= s.kv_room_bytes(model.weights_bytes / n)
            choice = decode_choice(rc, tpot, fits, b, n * s.nic_bytes_s / kv_in if kv_in else np.inf)
            if choice is None:
                continue
            i, capacity, limited = choice
            out.append(Candidate(
                class_name=rc.name, strategy=NAME, role="decode", device=s.id, tp=n, batch=int(b[i]),
                **money([(s, n)]), capacity_rps=capacity, utilization_cap=DECODE_UTILIZATION,
                ttft_ms=None, tpot_ms=s_to_ms(float(tpot[i])), limited_by=limited,
            ))
    return out


def recheck(pool: Pool, rc: RequestClass, check: Checking) -> Recheck:
    if pool.role == "prefill":
        return recheck_prefill(pool, rc, check)
    model, costs = check.model, check.costs
    s = costs.silicon(pool.device, check.workload.dtype)
    tpot = float(costs.decode(model, s, pool.tp, pool.batch, mean_context(rc)).total_s.reshape(-1)[0])
    return Recheck(within(tpot, rc.slo.tpot_ms) and close(s_to_ms(tpot), pool.tpot_ms),
                   decode_fits(model, costs, s, pool.tp, pool.batch, rc), pool.batch / (tpot * rc.output_tokens),
                   f"decode on {pool.device}: recomputed TPOT {s_to_ms(tpot):.2f} ms vs plan {pool.tpot_ms} ms")
