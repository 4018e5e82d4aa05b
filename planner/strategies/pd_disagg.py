"""Prefill/decode disaggregation: prompts on a prefill pool, generation on a decode pool, the KV cache
handed over once per request on the scale-out network (DistServe, Splitwise)."""

from __future__ import annotations

import numpy as np

from planner.perf.model import paged_kv_tokens
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
    decode_choices,
    decode_fits,
    edge_bytes,
    expert_groups,
    kv_per_device,
    mean_context,
    money,
    price_prefill,
    price_shared_prefill,
    recheck_mix,
    recheck_prefill,
    recheck_shared_prefill,
    recheck_slots,
    refused_shape,
    replica_shapes,
    shared_picks,
    shared_step_bounds,
    slot_queue,
    tpot_tiers,
    whole_groups,
    within,
)
from planner.units import ms_to_s, s_to_ms

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
    live = model.kv_bytes(paged_kv_tokens(rc.input_tokens, rc.output_tokens))
    out = []
    for s in ctx.silicon:
        for tp, pp in replica_shapes(ctx, s, model.weights_bytes):
            n = tp * pp
            groups = expert_groups(model, s, n, pp)  # tensor parallelism alone, or data-parallel attention + EP
            tpot = np.stack([costs.decode(model, s, n, b, mean_context(rc), ep=ep, pp=pp).total_s.reshape(-1) for ep in groups])
            weights = [float(model.weights_per_device(n, ep)) for ep in groups]
            fits = np.stack([(b * live * kv_per_device(model, costs, s, n, ep, pp) <= s.kv_room_bytes(w)) & (w <= s.usable_weights_bytes)
                             & whole_groups(b, ep) for ep, w in zip(groups, weights)])
            choices = decode_choices(rc, tpot[:, None, :], fits, b, n * s.nic_bytes_s / kv_in if kv_in else np.inf)
            ranked = [(c[2] * c[3], -k, k) for k, c in enumerate(choices) if c is not None]  # most usable, then fewest groups
            if not ranked:
                continue
            k = max(ranked)[2]
            _, i, capacity, rho, limited = choices[k]
            out.append(Candidate(
                class_name=rc.name, strategy=NAME, role="decode", device=s.id, tp=tp, batch=int(b[i]),
                **money([(s, n)]), capacity_rps=capacity, utilization_cap=rho,
                ttft_ms=None, tpot_ms=s_to_ms(float(tpot[k, i])), limited_by=limited, ep=groups[k], pp=pp,
                extra={"slot_queue": slot_queue([rc])},
            ))
    return out


def price_shared(ctx: Pricing) -> list[Candidate]:
    """Decode replicas shared by classes. A tier is a TPOT SLO T: its replicas may serve every class whose SLO is
    at least T, so a mix whose step and slot wait stay within T meets all of theirs. For each device, tp and tier, the
    batches at which some class of the tier alone steps within T with the most usable capacity (``shared_picks``),
    every class's paged KV at that batch fitting, each with the utilisation caps and mix-step bounds that keep step +
    slot wait within every member's SLO (``shared_step_bounds``: the candidate's ``tpot_ms`` is that bound, the
    tier row's T). Mixing sequences of classes k at one batch b, the step is (at most) the slot-weighted
    mean of each class's own step τ_k(b) (a step is weights and compute at b plus each sequence's KV read), which
    makes ``x_k = λ_k τ_k osl_k / b`` replica-equivalents per class exact: milp/build.py's share, tier and network
    rows. Devices whose KV spills from SRAM are left out: they read it at a bandwidth set by the KV resident, whose
    mix differs from the one read, so the bound fails. Tiers with fewer than two classes are the classes' own candidates. Shared prefill replicas too
    (``price_shared_prefill``)."""
    model, costs = ctx.model, ctx.costs
    b = np.asarray(ctx.options.batches, dtype=float)
    out = []
    for members in tpot_tiers(ctx, NAME, "decode"):
        tier = members[0]
        bound_s = ms_to_s(tier.slo.tpot_ms)
        for s in (s for s in ctx.silicon if not s.kv_spill):
            for tp, pp in replica_shapes(ctx, s, model.weights_bytes):
                n = tp * pp
                step = np.array([costs.decode(model, s, n, b, mean_context(rc), pp=pp).total_s.reshape(-1) for rc in members])
                room = s.kv_room_bytes(model.weights_bytes / n)
                share = costs.kv_share(model, s, n, pp).reshape(-1)
                fits = np.all([b * model.kv_bytes(paged_kv_tokens(rc.input_tokens, rc.output_tokens)) * share <= room
                               for rc in members], axis=0)
                picks = shared_picks(step, fits & (step <= bound_s), b, members)
                for i, (cap, most) in ((i, c) for i, slow in picks.items() for c in shared_step_bounds(slow, int(b[i]), members)):
                    mix = tuple(ClassLoad(rc.name, float(b[i] / (step[k, i] * rc.output_tokens)), float(step[k, i]),
                                          network_rps(ctx, rc, s, n)) for k, rc in enumerate(members))
                    out.append(Candidate(
                        class_name=tier.name, strategy=NAME, role="decode", device=s.id, tp=tp, batch=int(b[i]),
                        **money([(s, n)]), capacity_rps=mix[0].capacity_rps, utilization_cap=cap,
                        ttft_ms=None, tpot_ms=s_to_ms(most), limited_by="slo.tpot_ms", mix=mix, pp=pp,
                        extra={"slot_queue": slot_queue(members)},
                    ))
    return out + price_shared_prefill(ctx, NAME)


def network_rps(ctx: Pricing, rc: RequestClass, s, n: int) -> float:
    """Requests/s of class ``rc`` whose prompt KV ``n`` devices' NICs take in (inf when nothing crosses)."""
    kv_in = edge_bytes(ctx.graph, rc.name, NAME, "prefill", "decode")
    return n * s.nic_bytes_s / kv_in if kv_in else float("inf")


def recheck(pool: Pool, rc: RequestClass, check: Checking) -> Recheck:
    if pool.serves is not None:
        return recheck_shared_prefill(pool, check, NAME) if pool.role == "prefill" else recheck_shared(pool, check)
    if pool.role == "prefill":
        return recheck_prefill(pool, rc, check)
    model, costs = check.model, check.costs
    s = costs.silicon(pool.device, check.workload.dtype)
    n, pp = pool.tp * pool.pp, pool.pp
    refused = refused_shape(pool, check, s, "decode")
    if refused:
        return refused
    tpot = float(costs.decode(model, s, n, pool.batch, mean_context(rc), ep=pool.ep, pp=pp).total_s.reshape(-1)[0])
    slots_ok, slots = recheck_slots(pool, tpot, [rc])
    return Recheck(within(tpot, rc.slo.tpot_ms) and close(s_to_ms(tpot), pool.tpot_ms) and slots_ok,
                   decode_fits(model, costs, s, n, pool.batch, rc, ep=pool.ep, pp=pp), pool.batch / (tpot * rc.output_tokens),
                   f"decode on {pool.device}: recomputed TPOT {s_to_ms(tpot):.2f} ms vs plan {pool.tpot_ms} ms" + slots)


def recheck_shared(pool: Pool, check: Checking) -> Recheck:
    """A shared decode pool: ``recheck_mix`` with each class's decode step at the pool's batch."""
    model, costs = check.model, check.costs
    s = costs.silicon(pool.device, check.workload.dtype)
    n, pp = pool.tp * pool.pp, pool.pp
    refused = refused_shape(pool, check, s, "shared decode")
    if refused:
        return refused

    def own(rc):
        return (float(costs.decode(model, s, n, pool.batch, mean_context(rc), pp=pp).total_s.reshape(-1)[0]),
                decode_fits(model, costs, s, n, pool.batch, rc, pp=pp))

    return recheck_mix(pool, check, own, lambda rc: model.kv_bytes(rc.input_tokens), "decode")
