"""Aggregated serving: one pool runs both phases, each decode step carrying a chunk of new prompts.

Task: one node (prefill + decode work) on unit ``aggregated``. Pricing: in steady state a step over ``b``
sequences carries ``b · isl·(1−hit)/osl`` prefill tokens on average (the mean TPOT and the throughput); a new
prompt's chunks ride on ``⌈new / chunk⌉`` steps (its service time, queued M/D/1 for TTFT). A percentile SLO
sees the steps that carry a chunk: ``tail_tpot_s``.
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
    decode_fits,
    mean_context,
    money,
    offered_shape,
    prompt_tokens,
    replica_shapes,
    unoffered,
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


def steps(costs, model, s, n, batch, rc: RequestClass, chunk_budget: int, pp: int = 1):
    """``(mean step, TPOT at the SLO's statistic, prompt service time, prefill tokens per step)`` of an aggregated
    replica of ``n`` devices in ``pp`` stages at ``batch`` (arrays over the batches, seconds): the mean step carries
    ``q`` prefill tokens, a prompt's chunks ride on ``⌈new / chunk⌉`` steps, the tail step is ``tail_tpot_s``'s."""
    new, cached = prompt_tokens(rc)
    b = np.asarray(batch, dtype=float)
    c = mean_context(rc)
    prompt = cached + new / 2.0  # the context a carried prompt token attends over, on average
    chunk = float(min(chunk_budget, new))
    q = chunked_prefill_tokens_per_step(b, rc.input_tokens, rc.output_tokens, rc.prefix_cache_hit)
    step = costs.decode(model, s, n, b, c, prefill_tokens=q, prefill_context_tokens=prompt, pp=pp).total_s.reshape(-1)
    service = math.ceil(new / chunk) * costs.decode(model, s, n, b, c, prefill_tokens=chunk,
                                                    prefill_context_tokens=prompt, pp=pp).total_s.reshape(-1)
    tpot = step
    if rc.slo.percentile:
        held = carrying_tokens(chunk_budget, new, q)
        loaded = costs.decode(model, s, n, b, c, prefill_tokens=held, prefill_context_tokens=prompt, pp=pp).total_s.reshape(-1)
        plain = costs.decode(model, s, n, b, c, pp=pp).total_s.reshape(-1)
        tpot = tail_tpot_s(step, loaded, plain, q / held, rc.slo.percentile)
    return step, tpot, service, q


def price(unit: str, ctx: Pricing, rc: RequestClass) -> list[Candidate]:
    model, costs, options = ctx.model, ctx.costs, ctx.options
    b = np.asarray(options.batches, dtype=float)
    out = []
    for s in ctx.silicon:
        for tp, pp in replica_shapes(ctx, s, model.weights_bytes):
            n = tp * pp
            step, tpot, service, q = steps(costs, model, s, n, b, rc, options.chunk_tokens, pp)
            rho = max_utilization_at(ms_to_s(rc.slo.ttft_ms), service, 0.0, rc.slo.percentile)
            per_seq = model.kv_bytes(paged_kv_tokens(rc.input_tokens, rc.output_tokens)) * costs.kv_share(model, s, n, pp).reshape(-1)
            fits = (b * per_seq <= s.kv_room_bytes(model.weights_bytes / n)) & (q <= options.chunk_tokens)
            capacity = b / (step * rc.output_tokens)
            ok = fits & (tpot <= ms_to_s(rc.slo.tpot_ms)) & (rho > 0)
            i = best(ok, rho * capacity)
            if i is None:
                continue
            ttft = wait_s(rho[i], service[i], rc.slo.percentile) + service[i]
            if i + 1 < len(b) and fits[i + 1]:
                limited = "slo.tpot_ms" if tpot[i + 1] > ms_to_s(rc.slo.tpot_ms) else "slo.ttft_ms"
            else:
                limited = "memory"
            out.append(Candidate(
                class_name=rc.name, strategy=NAME, role="aggregated", device=s.id, tp=tp, pp=pp, batch=int(b[i]),
                **money([(s, n)]), capacity_rps=float(capacity[i]), utilization_cap=float(rho[i]),
                ttft_ms=s_to_ms(float(ttft)), tpot_ms=s_to_ms(float(tpot[i])),
                limited_by=limited, extra={"service_s": float(service[i]), "transfer_s": 0.0},
            ))
    return out


def recheck(pool: Pool, rc: RequestClass, check: Checking) -> Recheck:
    """TPOT of the steady-state step, TTFT of the chunked prompt at the pool's utilisation, memory, req/s per replica."""
    model, costs = check.model, check.costs
    s = costs.silicon(pool.device, check.workload.dtype)
    n, b, pp = pool.tp * pool.pp, pool.batch, pool.pp
    if not offered_shape(check, s, pool):
        return unoffered(pool)
    step, tpot, service, q = (float(x[0]) for x in steps(costs, model, s, n, [b], rc, check.options.chunk_tokens, pp))
    ttft = float(wait_s(min(pool.utilization, pool.utilization_cap), service, rc.slo.percentile)) + service
    latency_ok = (within(tpot, rc.slo.tpot_ms) and close(s_to_ms(tpot), pool.tpot_ms)
                  and within(ttft, rc.slo.ttft_ms) and close(s_to_ms(ttft), pool.ttft_ms))
    fits = decode_fits(model, costs, s, n, b, rc, pp=pp) and q <= check.options.chunk_tokens
    return Recheck(latency_ok, fits, b / (step * rc.output_tokens),
                   f"aggregated on {pool.device}: recomputed TPOT {s_to_ms(tpot):.2f} ms / TTFT {s_to_ms(ttft):.1f} ms "
                   f"vs plan {pool.tpot_ms} / {pool.ttft_ms} ms")
