"""Aggregated serving: one pool runs both phases, each decode step carrying a chunk of new prompts.

Task: one node (prefill + decode work) on unit ``aggregated``. Pricing: in steady state a step over ``b``
sequences carries ``b · isl·(1−hit)/osl`` prefill tokens on average (the mean TPOT and the throughput); a new
prompt's chunks ride on ``⌈new / chunk⌉`` steps (its service time, queued M/D/1 for TTFT). A percentile SLO
sees the steps that carry a chunk: ``tail_tpot_s``. A MoE replica may run ``ep`` expert groups (data-parallel
attention, ``expert_groups``): each attention rank holds ``b / ep`` sequences and its own scheduler's chunk
budget, so a rank carries ``q / ep`` prefill tokens a step on average and at most one budget.
"""

from __future__ import annotations

import math

import numpy as np

from planner.perf.model import chunked_prefill_tokens_per_step, paged_kv_tokens
from planner.queueing import max_utilization_at, wait_s
from planner.schema import Pool, RequestClass
from planner.strategies.base import (
    Candidate,
    Checking,
    Pricing,
    Recheck,
    add_task,
    best,
    close,
    expert_groups,
    kv_per_device,
    mean_context,
    money,
    prompt_tokens,
    whole_groups,
    within,
)
from planner.units import ms_to_s, s_to_ms

NAME = "aggregated"
UNITS = ("aggregated",)


def applies(model) -> bool:
    return True


def add_tasks(graph, rc: RequestClass, model, draft, spec) -> None:
    new, cached = prompt_tokens(rc)
    add_task(graph, rc, NAME, "aggregated", "aggregated", prefill_tokens=new, cached_tokens=cached,
             decode_tokens=rc.output_tokens)


def tail_tpot_s(mean_step_s, chunk_step_s, plain_step_s, chunk_fraction, percentile):
    """TPOT at the SLO's statistic: the mean step, or for percentile ``p`` the step a ``p``-th percentile token
    waits for. A share ``f = q / C`` of the steps carries ``C`` prefill tokens (``q`` the mean prefill tokens
    per step, ``C`` what a carrying step holds: ``carrying_tokens``), the rest none: the ``p``-th percentile is
    the carrying step (never below the mean step, whose ``q`` it holds at least) when ``f > 1 − p/100``, else the
    plain decode step (a median may sit below the mean) (seconds)."""
    mean = np.asarray(mean_step_s, dtype=float)
    if percentile is None:
        return mean
    carrying = np.asarray(chunk_fraction, dtype=float) > 1.0 - percentile / 100.0
    return np.where(carrying, np.maximum(chunk_step_s, mean), plain_step_s)


def carrying_tokens(chunk_budget, new_tokens, mean_prefill_tokens):
    """Prefill tokens a step that carries prefill holds: a whole prompt's chunk, or several prompts packed up
    to the mean a step must carry, within the budget: ``min(budget, max(new, q))``."""
    return np.minimum(chunk_budget, np.maximum(new_tokens, mean_prefill_tokens))


def steps(costs, model, s, n, batch, rc: RequestClass, chunk_budget: int, ep: int = 1):
    """``(mean step, TPOT at the SLO's statistic, prompt service time, prefill tokens per step and rank)`` of an
    aggregated replica of ``n`` devices in ``ep`` expert groups at ``batch`` (arrays over the batches, seconds): the
    mean step carries ``q`` prefill tokens (``q / ep`` on each rank); a prompt's chunks ride on ``⌈new / chunk⌉``
    steps of its rank, each priced with every rank carrying a chunk (the ranks meet at every MoE layer, so the
    busiest sets the pace: an upper bound); the tail step is ``tail_tpot_s``'s, its carrying step likewise."""
    new, cached = prompt_tokens(rc)
    b = np.asarray(batch, dtype=float)
    c = mean_context(rc)
    prompt = cached + new / 2.0  # the context a carried prompt token attends over, on average
    chunk = float(min(chunk_budget, new))
    q = chunked_prefill_tokens_per_step(b, rc.input_tokens, rc.output_tokens, rc.prefix_cache_hit)

    def step_with(tokens_per_rank):
        return costs.decode(model, s, n, b, c, prefill_tokens=ep * np.asarray(tokens_per_rank, dtype=float), ep=ep,
                            prefill_context_tokens=prompt).total_s.reshape(-1)

    step = step_with(q / ep)
    service = math.ceil(new / chunk) * step_with(chunk)
    tpot = step
    if rc.slo.percentile:
        held = carrying_tokens(chunk_budget, new, q / ep)
        plain = costs.decode(model, s, n, b, c, ep=ep).total_s.reshape(-1)
        tpot = tail_tpot_s(step, step_with(held), plain, q / ep / held, rc.slo.percentile)
    return step, tpot, service, q / ep


def layout_fits(model, costs, s, n: int, ep: int, batch, rc: RequestClass, rank_tokens, chunk_budget: int):
    """The weights (in ``ep`` expert groups), ``batch`` sequences' paged KV in whole requests per group, and each
    rank's mean prefill tokens within its chunk budget (arrays over the batches)."""
    b = np.asarray(batch, dtype=float)
    weights = float(model.weights_per_device(n, ep))
    live = model.kv_bytes(paged_kv_tokens(rc.input_tokens, rc.output_tokens))
    return ((b * live * kv_per_device(model, costs, s, n, ep) <= s.kv_room_bytes(weights)) & (weights <= s.usable_weights_bytes)
            & whole_groups(b, ep) & (rank_tokens <= chunk_budget))


def best_layout(ctx: Pricing, rc: RequestClass, s, n: int):
    """The expert groups and batch of an ``n``-device replica with the most usable capacity ``ρ · b / (τ · osl)``
    (the fewest groups of equals), TPOT within the SLO, TTFT's queue within its: ``(ep, i, figures)`` or None."""
    model, costs, options = ctx.model, ctx.costs, ctx.options
    b = np.asarray(options.batches, dtype=float)
    found = None
    for ep in expert_groups(model, s, n):
        step, tpot, service, rank_tokens = steps(costs, model, s, n, b, rc, options.chunk_tokens, ep)
        rho = max_utilization_at(ms_to_s(rc.slo.ttft_ms), service, 0.0, rc.slo.percentile)
        fits = layout_fits(model, costs, s, n, ep, b, rc, rank_tokens, options.chunk_tokens)
        capacity = b / (step * rc.output_tokens)
        i = best(fits & (tpot <= ms_to_s(rc.slo.tpot_ms)) & (rho > 0), rho * capacity)
        if i is not None and (found is None or rho[i] * capacity[i] > found[0]):
            found = (rho[i] * capacity[i], ep, i, (step, tpot, service, rho, fits, capacity))
    return None if found is None else found[1:]


def price(unit: str, ctx: Pricing, rc: RequestClass) -> list[Candidate]:
    b = np.asarray(ctx.options.batches, dtype=float)
    out = []
    for s in ctx.silicon:
        for n in s.device_counts(ctx.model.weights_bytes, ctx.options.max_tp):
            layout = best_layout(ctx, rc, s, n)
            if layout is None:
                continue
            ep, i, (step, tpot, service, rho, fits, capacity) = layout
            ttft = wait_s(rho[i], service[i], rc.slo.percentile) + service[i]
            if i + 1 < len(b) and fits[i + 1]:
                limited = "slo.tpot_ms" if tpot[i + 1] > ms_to_s(rc.slo.tpot_ms) else "slo.ttft_ms"
            else:
                limited = "memory"
            out.append(Candidate(
                class_name=rc.name, strategy=NAME, role="aggregated", device=s.id, tp=n, batch=int(b[i]),
                **money([(s, n)]), capacity_rps=float(capacity[i]), utilization_cap=float(rho[i]),
                ttft_ms=s_to_ms(float(ttft)), tpot_ms=s_to_ms(float(tpot[i])),
                limited_by=limited, extra={"service_s": float(service[i]), "transfer_s": 0.0}, ep=ep,
            ))
    return out


def recheck(pool: Pool, rc: RequestClass, check: Checking) -> Recheck:
    """TPOT of the steady-state step, TTFT of the chunked prompt at the pool's utilisation, memory, req/s per replica
    (at the pool's expert groups)."""
    model, costs = check.model, check.costs
    s = costs.silicon(pool.device, check.workload.dtype)
    n, b, ep = pool.tp, pool.batch, pool.ep
    if ep not in expert_groups(model, s, n):
        return Recheck(False, False, 0.0, f"aggregated on {pool.device}: {ep} expert groups on {n} devices")
    step, tpot, service, q = (float(x[0]) for x in steps(costs, model, s, n, [b], rc, check.options.chunk_tokens, ep))
    ttft = float(wait_s(min(pool.utilization, pool.utilization_cap), service, rc.slo.percentile)) + service
    latency_ok = (within(tpot, rc.slo.tpot_ms) and close(s_to_ms(tpot), pool.tpot_ms)
                  and within(ttft, rc.slo.ttft_ms) and close(s_to_ms(ttft), pool.ttft_ms))
    fits = bool(layout_fits(model, costs, s, n, ep, [b], rc, q, check.options.chunk_tokens)[0])
    return Recheck(latency_ok, fits, b / (step * rc.output_tokens),
                   f"aggregated on {pool.device}: recomputed TPOT {s_to_ms(tpot):.2f} ms / TTFT {s_to_ms(ttft):.1f} ms "
                   f"vs plan {pool.tpot_ms} / {pool.ttft_ms} ms")
