"""Aggregated serving: one pool runs both phases, each decode step carrying a chunk of new prompts.

Task: one node (prefill + decode work) on unit ``aggregated``. Pricing: in steady state a step over ``b``
sequences carries ``b · isl·(1−hit)/osl`` prefill tokens on average (the mean TPOT and the throughput); a new
prompt's chunks ride on ``⌈new / chunk⌉`` steps (its service time, queued M/D/1 for TTFT, after the wait for a free
slot of the replica's ``b``: ``queueing.admitted_ttft_s``). A percentile SLO
sees the steps that carry a chunk: ``tail_tpot_s``. A MoE replica may run ``ep`` expert groups (data-parallel
attention, ``expert_groups``): each attention rank holds ``b / ep`` sequences and its own scheduler's chunk
budget, so a rank carries ``q / ep`` prefill tokens a step on average and at most one budget. With
``shared_pools`` a replica may serve several classes (``price_shared``, re-checked by ``recheck_shared``).
"""

from __future__ import annotations

import math

import numpy as np

from planner.perf.model import chunked_prefill_tokens_per_step, paged_kv_tokens
from planner.queueing import admitted_ttft_s, max_admitted_utilization
from planner.schema import Pool, RequestClass
from planner.strategies.base import (
    REL_TOL,
    Candidate,
    Checking,
    ClassLoad,
    Pricing,
    Recheck,
    add_task,
    best,
    close,
    expert_groups,
    kv_per_device,
    mean_context,
    money,
    node_id,
    prompt_tokens,
    refused_shape,
    replica_shapes,
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


def mean_step_s(chunk_step_s, plain_step_s, mean_prefill_tokens, carried_tokens):
    """The mean step when a share ``f = q / C`` of the steps carries ``C`` prefill tokens and the rest none (s):
    ``f·τ(C) + (1 − f)·τ(0)``. A step is a roofline (the larger of its memory and compute times), convex in the tokens
    it carries, so this is at least the step carrying the mean ``q``: whole prompts ride on few steps (a 900-token
    prompt on one step in five at ``q`` = 180), and pricing the mean instead ran an L4 replica's steps 21 % slower in
    the replay than planned (66.9 against 55.2 ms)."""
    f = np.divide(mean_prefill_tokens, carried_tokens, out=np.zeros(np.shape(carried_tokens)), where=np.asarray(carried_tokens) > 0)
    return f * chunk_step_s + (1.0 - f) * plain_step_s


def carrying_tokens(chunk_budget, new_tokens, mean_prefill_tokens):
    """Prefill tokens a step that carries prefill holds: a whole prompt's chunk, or several prompts packed up
    to the mean a step must carry, within the budget: ``min(budget, max(new, q))``."""
    return np.minimum(chunk_budget, np.maximum(new_tokens, mean_prefill_tokens))


def steps(costs, model, s, n, batch, rc: RequestClass, chunk_budget: int, ep: int = 1, pp: int = 1):
    """``(mean step, TPOT at the SLO's statistic, prompt service time, prefill tokens per step and rank)`` of an
    aggregated replica of ``n`` devices in ``ep`` expert groups (or ``pp`` pipeline stages) at ``batch`` (arrays over the batches, seconds): the
    mean step carries ``q`` prefill tokens (``q / ep`` on each rank); a prompt's chunks ride on ``⌈new / chunk⌉``
    steps of its rank, each priced with every rank carrying a chunk (the ranks meet at every MoE layer, so the
    busiest sets the pace: an upper bound); the tail step is ``tail_tpot_s``'s, its carrying step likewise."""
    new, cached = prompt_tokens(rc)
    b = np.asarray(batch, dtype=float)
    c = mean_context(rc)
    prompt = cached + new / 2.0  # the context a carried prompt token attends over, on average
    chunk = float(min(chunk_budget, new))
    q = chunked_prefill_tokens_per_step(b, rc.input_tokens, rc.output_tokens, rc.prefix_cache_hit)

    held = carrying_tokens(chunk_budget, new, q / ep)
    # one pass over the three steps (carrying a step's share, none, one chunk): the rows of the stacked prefill tokens
    tokens = ep * np.stack(np.broadcast_arrays(held, 0.0, chunk))
    carrying, plain, chunked = costs.decode(model, s, n, b, c, prefill_tokens=tokens, ep=ep, prefill_context_tokens=prompt,
                                            pp=pp).total_s.reshape(3, -1)
    step = mean_step_s(carrying, plain, q / ep, held)
    service = math.ceil(new / chunk) * chunked
    tpot = step
    if rc.slo.percentile:
        tpot = tail_tpot_s(step, carrying, plain, q / ep / held, rc.slo.percentile)
    return step, tpot, service, q / ep


def ttft_s(utilization, service_s, step_s, batch, rc: RequestClass):
    """TTFT of a class's own aggregated replica at ``utilization`` (s): the wait for a free slot
    (``admission_wait_s``, each request holding one ``osl`` steps), the prompt's queue and its chunked service ``S``."""
    return admitted_ttft_s(utilization, utilization, service_s, step_s, batch, rc.output_tokens, rc.slo.percentile)


def layout_fits(model, costs, s, n: int, ep: int, batch, rc: RequestClass, rank_tokens, chunk_budget: int, pp: int = 1):
    """The weights (in ``ep`` expert groups), ``batch`` sequences' paged KV in whole requests per group (split over
    ``pp`` stages), and each rank's mean prefill tokens within its chunk budget (arrays over the batches)."""
    b = np.asarray(batch, dtype=float)
    weights = float(model.weights_per_device(n, ep))
    live = model.kv_bytes(paged_kv_tokens(rc.input_tokens, rc.output_tokens))
    return ((b * live * kv_per_device(model, costs, s, n, ep, pp) <= s.kv_room_bytes(weights)) & (weights <= s.usable_weights_bytes)
            & whole_groups(b, ep) & (rank_tokens <= chunk_budget))


def best_layout(ctx: Pricing, rc: RequestClass, s, n: int, pp: int = 1):
    """The expert groups and batch of an ``n``-device replica (in ``pp`` stages) with the most usable capacity
    ``ρ · b / (τ · osl)`` (the fewest groups of equals), TPOT within the SLO, TTFT's queues (a free slot, then the
    prompt's own, ``max_admitted_utilization``) within its: ``(ep, i, figures)`` or None."""
    model, costs, options = ctx.model, ctx.costs, ctx.options
    b = np.asarray(options.batches, dtype=float)
    found = None
    for ep in expert_groups(model, s, n, pp):
        step, tpot, service, rank_tokens = steps(costs, model, s, n, b, rc, options.chunk_tokens, ep, pp)
        rho = max_admitted_utilization(ms_to_s(rc.slo.ttft_ms), service, step, b, rc.output_tokens, rc.slo.percentile)
        fits = layout_fits(model, costs, s, n, ep, b, rc, rank_tokens, options.chunk_tokens, pp)
        capacity = b / (step * rc.output_tokens)
        i = best(fits & (tpot <= ms_to_s(rc.slo.tpot_ms)) & (rho > 0), rho * capacity)
        if i is not None and (found is None or rho[i] * capacity[i] > found[0]):
            found = (rho[i] * capacity[i], ep, i, (step, tpot, service, rho, fits, capacity))
    return None if found is None else found[1:]


def price(unit: str, ctx: Pricing, rc: RequestClass) -> list[Candidate]:
    b = np.asarray(ctx.options.batches, dtype=float)
    out = []
    for s in ctx.silicon:
        for tp, pp in replica_shapes(ctx, s, ctx.model.weights_bytes):
            n = tp * pp
            layout = best_layout(ctx, rc, s, n, pp)
            if layout is None:
                continue
            ep, i, (step, tpot, service, rho, fits, capacity) = layout
            ttft = ttft_s(rho[i], service[i], step[i], b[i], rc)
            if i + 1 < len(b) and fits[i + 1]:
                limited = "slo.tpot_ms" if tpot[i + 1] > ms_to_s(rc.slo.tpot_ms) else "slo.ttft_ms"
            else:
                limited = "memory"
            out.append(Candidate(
                class_name=rc.name, strategy=NAME, role="aggregated", device=s.id, tp=tp, pp=pp, batch=int(b[i]),
                **money([(s, n)]), capacity_rps=float(capacity[i]), utilization_cap=float(rho[i]),
                ttft_ms=s_to_ms(float(ttft)), tpot_ms=s_to_ms(float(tpot[i])),
                limited_by=limited, ep=ep,
                extra={"service_s": float(service[i]), "transfer_s": 0.0, "step_s": float(step[i]), "held_steps": rc.output_tokens},
            ))
    return out


def shared_steps(costs, model, s, n, batch, members: list[RequestClass], chunk_budget: int, ep: int = 1, pp: int = 1):
    """``(τ̂ per member × batch, S, Q / ep)`` of an aggregated replica of ``n`` devices in ``ep`` expert groups (or ``pp``
    stages) shared
    by ``members`` at ``batch`` (seconds, seconds, tokens per rank): ``Q = max_k b·new_k/osl_k``, the most prefill
    tokens a step of any mix carries; ``τ̂_k`` the mean step over ``b`` of class k's sequences carrying ``Q`` tokens
    (``mean_step_s``: a share of the steps carrying the largest prompt's chunk) that attend over the members' longest
    prompt context ``max_k (cached_k + new_k/2)``; ``S = max_k ⌈new_k / chunk_k⌉ ·
    step(b at the longest mean context, chunk_k tokens of class k's prompt on every rank)``, the longest prompt
    service (as ``steps`` prices one class). Members alike: each class's own figures."""
    b = np.asarray(batch, dtype=float)
    q = np.max([chunked_prefill_tokens_per_step(b, rc.input_tokens, rc.output_tokens, rc.prefix_cache_hit)
                for rc in members], axis=0)
    context = max(cached + new / 2.0 for new, cached in map(prompt_tokens, members))
    held = carrying_tokens(chunk_budget, max(prompt_tokens(rc)[0] for rc in members), q / ep)

    tokens = ep * np.stack(np.broadcast_arrays(held, 0.0))  # one pass per member: a step carrying its share, and none

    def mean_step(rc):
        carrying, plain = costs.decode(model, s, n, b, mean_context(rc), prefill_tokens=tokens, ep=ep, pp=pp,
                                       prefill_context_tokens=context).total_s.reshape(2, -1)
        return mean_step_s(carrying, plain, q / ep, held)

    tau = np.array([mean_step(rc) for rc in members])
    longest = max(mean_context(rc) for rc in members)
    service = np.max([math.ceil(new / min(chunk_budget, new)) * costs.decode(
        model, s, n, b, longest, prefill_tokens=ep * float(min(chunk_budget, new)), ep=ep, pp=pp,
        prefill_context_tokens=cached + new / 2.0).total_s.reshape(-1) for new, cached in map(prompt_tokens, members)], axis=0)
    return tau, service, q / ep


def shared_tiers(classes: list[RequestClass]) -> list[list[RequestClass]]:
    """The member sets of shared aggregated replicas: for every TPOT SLO T and TTFT SLO F the classes state, the
    classes whose SLOs are at least both (two or more, each set once), the tightest TPOT's class first."""
    out, seen = [], set()
    for tpot in sorted({rc.slo.tpot_ms for rc in classes}):
        for ttft in sorted({rc.slo.ttft_ms for rc in classes}):
            members = sorted((rc for rc in classes if rc.slo.tpot_ms >= tpot and rc.slo.ttft_ms >= ttft),
                             key=lambda rc: (rc.slo.tpot_ms, rc.slo.ttft_ms, rc.name))
            names = frozenset(rc.name for rc in members)
            if len(members) > 1 and names not in seen:
                seen.add(names)
                out.append(members)
    return out


def price_shared(ctx: Pricing) -> list[Candidate]:
    """Aggregated replicas shared by classes whose SLOs are means (a tail TPOT depends on which steps carry chunks,
    not linear in the mix; such classes keep their own replicas). A tier (``shared_tiers``) has the tightest TPOT T
    and TTFT F of its members. Per device, tp and tier, one candidate per member: the batch with the most usable
    capacity ``ρ · min(b / (τ̂_k osl_k), 1 / S)`` at which that class alone steps within T (``shared_steps``), every
    member's paged KV fitting and ``Q`` within the chunk budget.

    Why the MILP's linear rows are safe. A mix holds class k on a share w_k of the b slots, so a step carries
    ``Σ w_k b new_k/osl_k ≤ Q`` prefill tokens, each attending over at most the longest prompt context. A step grows
    with the tokens it carries and the context they attend over; with those fixed (Q at the longest context), every
    term of the step is a maximum or sum of parts linear in each sequence's KV read and attention FLOPs, so the
    mix's step is at most ``Σ w_k τ̂_k`` (Jensen; devices whose KV spills from SRAM to another tier read it at a
    bandwidth that depends on the mix, so they are left out). Little's law gives ``w_k ∝ λ_k osl_k``, so with
    ``x_k = λ_k τ̂_k osl_k / b`` replica-equivalents the step is within T when ``Σ x_k (1 − T/τ̂_k) ≤ 0`` and the
    slots suffice when ``Σ x_k ≤ n``: milp/build.py's tier and share rows. TTFT: a prompt's chunks ride on steps
    whose sequences are at most the longest mean context, so its service, priced as a class's own replica prices
    it (one chunk a step at batch b), is at most S; the prompts row ``Σ λ_k S ≤ ρ n`` keeps the M/D/1 server's
    utilisation within ρ, whose wait with S (it grows with the service time) plus S is at most F. Members alike
    give each class's own figures."""
    model, costs, options = ctx.model, ctx.costs, ctx.options
    classes = [rc for rc in ctx.workload.classes
               if ctx.graph.has_node(node_id(rc.name, NAME, "aggregated")) and rc.slo.percentile is None]
    out = []
    for members in shared_tiers(classes):
        for s in (s for s in ctx.silicon if not s.kv_spill):
            for tp, pp in replica_shapes(ctx, s, model.weights_bytes):
                out.extend(shared_at(ctx, members, s, tp, pp))
    return out


def shared_at(ctx: Pricing, members: list[RequestClass], s, tp: int, pp: int = 1) -> list[Candidate]:
    """``price_shared``'s candidates of one tier on ``tp × pp`` devices of ``s``: per member, the expert groups and batch
    with the most usable capacity for it (the fewest groups of equals)."""
    model, costs, options = ctx.model, ctx.costs, ctx.options
    b, n = np.asarray(options.batches, dtype=float), tp * pp
    tier, ttft_slo_ms = members[0], min(rc.slo.ttft_ms for rc in members)
    osl = np.array([[rc.output_tokens] for rc in members], dtype=float)
    held = max(rc.output_tokens for rc in members)
    found: dict[int, tuple] = {}
    for ep in expert_groups(model, s, n, pp):
        tau, service, q = shared_steps(costs, model, s, n, b, members, options.chunk_tokens, ep, pp)
        fits = np.all([layout_fits(model, costs, s, n, ep, b, rc, q, options.chunk_tokens, pp) for rc in members], axis=0)
        # slots: held at most the longest answer's steps of the slowest member's step (slot_holding's bound)
        rho = max_admitted_utilization(ms_to_s(ttft_slo_ms), service, tau.max(axis=0), b, held, None)
        slots = b / (tau * osl)
        usable = rho * np.minimum(slots, 1.0 / service)
        for k in range(len(members)):
            i = best(fits & (tau[k] <= ms_to_s(tier.slo.tpot_ms)) & (rho > 0), usable[k])
            if i is not None and (k not in found or usable[k, i] > found[k][0]):
                found[k] = (usable[k, i], ep, i, tau, service, rho, slots)
    out = []
    for ep, i, tau, service, rho, slots in sorted({v[1:3]: v[1:] for v in found.values()}.values(), key=lambda v: v[:2]):
        mix = tuple(ClassLoad(rc.name, float(slots[k, i]), float(tau[k, i]), prompt_rps=float(1.0 / service[i]))
                    for k, rc in enumerate(members))
        out.append(Candidate(
            class_name=tier.name, strategy=NAME, role="aggregated", device=s.id, tp=tp, pp=pp, batch=int(b[i]),
            **money([(s, n)]), capacity_rps=mix[0].capacity_rps, utilization_cap=float(rho[i]),
            ttft_ms=s_to_ms(float(admitted_ttft_s(rho[i], rho[i], service[i], tau[:, i].max(), b[i], held))),
            tpot_ms=tier.slo.tpot_ms, limited_by="slo.tpot_ms", mix=mix, ep=ep,
            extra={"service_s": float(service[i]), "transfer_s": 0.0, "step_s": float(tau[:, i].max()), "held_steps": held},
        ))
    return out


def recheck(pool: Pool, rc: RequestClass, check: Checking) -> Recheck:
    """TPOT of the steady-state step, TTFT of the chunked prompt at the pool's utilisation, memory, req/s per replica
    (at the pool's expert groups); a shared pool: ``recheck_shared``."""
    if pool.serves is not None:
        return recheck_shared(pool, check)
    model, costs = check.model, check.costs
    s = costs.silicon(pool.device, check.workload.dtype)
    n, b, ep, pp = pool.tp * pool.pp, pool.batch, pool.ep, pool.pp
    refused = refused_shape(pool, check, s, "aggregated")
    if refused:
        return refused
    step, tpot, service, q = (float(x[0]) for x in steps(costs, model, s, n, [b], rc, check.options.chunk_tokens, ep, pp))
    ttft = float(ttft_s(min(pool.utilization, pool.utilization_cap), service, step, b, rc))
    latency_ok = (within(tpot, rc.slo.tpot_ms) and close(s_to_ms(tpot), pool.tpot_ms)
                  and within(ttft, rc.slo.ttft_ms) and close(s_to_ms(ttft), pool.ttft_ms))
    fits = bool(layout_fits(model, costs, s, n, ep, [b], rc, q, check.options.chunk_tokens, pp)[0])
    return Recheck(latency_ok, fits, b / (step * rc.output_tokens),
                   f"aggregated on {pool.device}: recomputed TPOT {s_to_ms(tpot):.2f} ms / TTFT {s_to_ms(ttft):.1f} ms "
                   f"vs plan {pool.tpot_ms} / {pool.ttft_ms} ms")


def recheck_shared(pool: Pool, check: Checking) -> Recheck:
    """A shared aggregated pool, from the classes it may serve (``serves``), at its expert groups: each class's step
    τ̂_k and the tier's prompt service S (``shared_steps``); the mix's step ``Σ y_k / Σ (y_k / τ̂_k)`` with ``y_k = served_k · τ̂_k ·
    osl_k / b`` (equal to the plan's TPOT) and its utilisation ``Σ y_k / replicas`` (the plan's); TTFT at the prompt
    server's utilisation ``Σ served_k · S / replicas`` (within its cap, the tightest TTFT SLO, and the plan's);
    every class's batch fitting with the tier's prefill tokens per step; requests/s per replica ``Σ served / Σ y``."""
    model, costs = check.model, check.costs
    s = costs.silicon(pool.device, check.workload.dtype)
    n, pp = pool.tp * pool.pp, pool.pp
    refused = refused_shape(pool, check, s, "shared aggregated")
    if refused:
        return refused
    members = sorted((rc for rc in check.workload.classes if rc.name in pool.serves), key=lambda rc: rc.name != pool.class_name)
    tau, service, q = (x[..., 0] for x in shared_steps(costs, model, s, n, [pool.batch], members,
                                                       check.options.chunk_tokens, pool.ep, pp))
    used = [pool.serves[rc.name] * float(t) * rc.output_tokens / pool.batch for rc, t in zip(members, tau)]
    total = sum(used)
    tpot = total / sum(y / float(t) for y, t in zip(used, tau)) if total > 0 else float(tau[0])  # idle: its tier's step
    served = sum(pool.serves.values())
    prompts = served * float(service) / pool.replicas
    slots = min(total / pool.replicas, pool.utilization_cap)
    ttft = float(admitted_ttft_s(min(prompts, pool.utilization_cap), slots, float(service), float(tau.max()), pool.batch,
                                 max(rc.output_tokens for rc in members)))
    latency_ok = (close(s_to_ms(tpot), pool.tpot_ms) and close(total / pool.replicas, pool.utilization)
                  and prompts <= pool.utilization_cap * (1 + REL_TOL) and within(ttft, min(rc.slo.ttft_ms for rc in members))
                  and close(s_to_ms(ttft), pool.ttft_ms) and all(rc.slo.percentile is None for rc in members))
    fits = all(layout_fits(model, costs, s, n, pool.ep, [pool.batch], rc, q, check.options.chunk_tokens, pp)[0]
               for rc in members)
    return Recheck(latency_ok, bool(fits), served / total if total > 0 else 0.0,
                   f"shared aggregated on {pool.device}: recomputed TPOT {s_to_ms(tpot):.2f} ms / TTFT {s_to_ms(ttft):.1f} ms "
                   f"vs plan {pool.tpot_ms} / {pool.ttft_ms} ms, utilisation {total / pool.replicas:.3f} vs "
                   f"{pool.utilization:.3f}, prompt server {prompts:.3f} (cap {pool.utilization_cap:.3f})")
