"""Speculative decoding: a draft model proposes ``k`` tokens, the target verifies them in one step.

Tasks: prefill, then verify and draft on one decode unit (the draft on the target's own devices, or on
its own silicon with token ids crossing the network each round). Pricing: a round costs
``k·t_draft + t_verify + t_rtt`` and yields ``E[tokens per round]`` (spec.py); TPOT is their ratio.

A draft server may serve ``r`` target replicas (r from ``CandidateOptions.partner_shares``): their rounds run
in step, the server drafting all ``r·b`` sequences at once (``t_draft`` at batch ``r·b``, their draft KV in
its memory, their token ids on its NICs); a candidate is one such group.
"""

from __future__ import annotations

import numpy as np

from planner.perf.model import expected_tokens_per_round, paged_kv_tokens, transfer_s
from planner.queueing import DECODE_UTILIZATION
from planner.schema import GRAPH_DRAFT_TOKENS, Pool, RequestClass
from planner.strategies.base import (
    TOKEN_ID_BYTES,
    Candidate,
    Checking,
    Pricing,
    Recheck,
    add_kv_edge,
    add_prefill_task,
    add_task,
    close,
    decode_choices,
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

NAME = "spec_decode"
UNITS = ("decode", "prefill")


def applies(model) -> bool:
    return True


def add_tasks(graph, rc: RequestClass, model, draft, spec) -> None:
    prefill = add_prefill_task(graph, rc, NAME)
    k = spec.draft_tokens or GRAPH_DRAFT_TOKENS
    rounds = rc.output_tokens / float(expected_tokens_per_round(spec.acceptance_rate, k))
    verify = add_task(graph, rc, NAME, "verify", "decode", prefill_tokens=0, cached_tokens=0,
                      decode_tokens=rc.output_tokens, rounds=rounds)
    drafter = add_task(graph, rc, NAME, "draft", "decode", prefill_tokens=0, cached_tokens=0,
                       decode_tokens=rounds * k, rounds=rounds)
    add_kv_edge(graph, prefill, verify, model.kv_bytes(rc.input_tokens))
    add_kv_edge(graph, prefill, drafter, draft.kv_bytes(rc.input_tokens))
    graph.add_edge(drafter, verify, kind="draft_tokens", bytes_per_request=rounds * k * TOKEN_ID_BYTES,
                   transfers_per_request=rounds, link="scale_out")
    graph.add_edge(verify, drafter, kind="accepted_tokens", bytes_per_request=rc.output_tokens * TOKEN_ID_BYTES,
                   transfers_per_request=rounds, link="scale_out")


def round_trip_s(batch, k: int, target, n: int, drafter, nd: int, sharing: int = 1):
    """Token ids of a round's ``b·k`` drafts there and the verdicts back, on the slower of the target's NICs and
    its ``1/sharing`` share of the draft server's."""
    link = min(n * target.nic_bytes_s, nd * drafter.nic_bytes_s / sharing)
    return 2.0 * transfer_s(np.asarray(batch, dtype=float) * k * TOKEN_ID_BYTES, link,
                            max(target.nic_latency_s, drafter.nic_latency_s))


def round_trips(batch, ks, target, n: int, layouts) -> np.ndarray:
    """``round_trip_s`` of every layout at once (layouts × k × batch): 0 for a draft on the target's devices."""
    remote = np.array([d is not None for d, *_ in layouts])
    link = np.array([n * target.nic_bytes_s if d is None else min(n * target.nic_bytes_s, nd * d.nic_bytes_s / r)
                     for d, nd, r, *_ in layouts])[:, None, None]
    latency = np.array([target.nic_latency_s if d is None else max(target.nic_latency_s, d.nic_latency_s)
                        for d, *_ in layouts])[:, None, None]
    trips = 2.0 * transfer_s(np.asarray(batch, dtype=float)[None, None, :] * np.asarray(ks)[None, :, None] * TOKEN_ID_BYTES,
                             link, latency)
    return np.where(remote[:, None, None], trips, 0.0)


def price(unit: str, ctx: Pricing, rc: RequestClass) -> list[Candidate]:
    """Verify+draft replicas: per target, each draft layout (on the target's devices, or on the fewest devices of
    another type that hold the draft), the draft length k (given, or the best of ``DRAFT_LENGTHS``) and batch
    with the most SLO-feasible capacity."""
    if unit == "prefill":
        return price_prefill(ctx, rc, NAME)
    model, draft, costs, options = ctx.model, ctx.draft, ctx.costs, ctx.options
    spec = ctx.workload.spec_decode
    alpha = spec.acceptance_rate
    b = np.asarray(options.batches, dtype=float)
    c = mean_context(rc)
    live = paged_kv_tokens(rc.input_tokens, rc.output_tokens)
    kv_in = edge_bytes(ctx.graph, rc.name, NAME, "prefill", "verify")
    # a draft on other silicon runs on the fewest devices that hold it, serving r targets' r·b sequences;
    # its step does not depend on the target
    remote = []
    shares = np.asarray(options.partner_shares, dtype=float)[:, None]
    for d in ctx.silicon:
        counts = d.device_counts(draft.weights_bytes, options.max_tp)
        if not counts:
            continue
        nd = counts[0]
        steps = costs.decode(draft, d, nd, shares * b, c).total_s.reshape(len(shares), len(b))  # every share at once
        kv = shares * b * draft.kv_bytes(live) * costs.kv_share(draft, d, nd).reshape(-1)
        fits = kv <= d.kv_room_bytes(draft.weights_bytes / nd)
        remote.extend((d, nd, r, step, ok) for r, step, ok in zip(options.partner_shares, steps, fits))
    out = []
    bills: dict = {}

    def bill(parts):  # one group's devices, power and money, once per shape
        key = tuple((s.id, k) for s, k in parts)
        if key not in bills:
            bills[key] = money(list(parts))
        return bills[key]

    for v in ctx.silicon:
        for n in v.device_counts(model.weights_bytes, options.max_tp):
            target_kv = b * model.kv_bytes(live) * costs.kv_share(model, v, n).reshape(-1)
            network_rps = n * v.nic_bytes_s / kv_in if kv_in else np.inf
            local_step = costs.decode(draft, v, n, b, c).total_s.reshape(-1)  # draft on the target's own devices
            local_kv = b * draft.kv_bytes(live) * costs.kv_share(draft, v, n).reshape(-1)
            layouts = [(None, n, 1, local_step, target_kv + local_kv <= v.kv_room_bytes(model.weights_bytes / n, draft.weights_bytes / n))]
            target_fits = target_kv <= v.kv_room_bytes(model.weights_bytes / n)
            layouts += [(d, nd, r, step, target_fits & draft_fits) for d, nd, r, step, draft_fits in remote if d.id != v.id]
            ks = np.asarray(spec.draft_lengths)
            per_round = [float(costs.expected_tokens_per_round(alpha, int(k))) for k in ks]
            verify = costs.decode(model, v, n, b[None, :], c, prefill_tokens=b[None, :] * ks[:, None]).total_s.reshape(len(ks), len(b))
            # every layout and draft length at once: layouts × k × batch
            steps = np.stack([step for _, _, _, step, _ in layouts])[:, None, :]
            rtt = round_trips(b, ks, v, n, layouts)
            tpot = costs.spec_tpot_s(steps, verify[None], ks[None, :, None], alpha, rtt)
            choices = decode_choices(rc, tpot, np.stack([fits for *_, fits in layouts]), b, network_rps)
            for (d, nd, r, step, _), choice, rows, trips in zip(layouts, choices, tpot, rtt):
                if choice is None:
                    continue
                row, i, capacity, limited = choice
                k = int(ks[row])
                round_s = costs.spec_round_s(step[i], k, verify[row, i], trips[row, i])
                out.append(Candidate(
                    class_name=rc.name, strategy=NAME, role="decode", device=v.id, tp=n, batch=int(b[i]),
                    **bill(((v, n),) if d is None else ((v, r * n), (d, nd))), capacity_rps=r * capacity,
                    utilization_cap=DECODE_UTILIZATION, ttft_ms=None, tpot_ms=s_to_ms(float(rows[row, i])),
                    limited_by=limited, partner_device=None if d is None else d.id, partner_tp=None if d is None else nd,
                    partner_role=None if d is None else "draft", partner_share=r,
                    extra={"draft_tokens": k, "tokens_per_round": per_round[row], "round_ms": s_to_ms(float(round_s))},
                ))
    return out


def recheck(pool: Pool, rc: RequestClass, check: Checking) -> Recheck:
    """A verify+draft pool: the round's TPOT from both models' steps, memory of target (and local draft) KV."""
    if pool.role == "prefill":
        return recheck_prefill(pool, rc, check)
    if pool.pp > 1:  # verify+draft replicas are tensor parallel only
        return unoffered(pool)
    model, draft, costs = check.model, check.draft, check.costs
    spec = check.workload.spec_decode
    k, alpha = pool.draft_tokens or spec.draft_tokens, spec.acceptance_rate
    if k is None:
        return Recheck(False, False, 0.0, f"spec_decode on {pool.device}: the pool names no draft length")
    v = costs.silicon(pool.device, check.workload.dtype)
    n, b, c = pool.tp, pool.batch, mean_context(rc)
    live = paged_kv_tokens(rc.input_tokens, rc.output_tokens)
    verify = float(costs.decode(model, v, n, b, c, prefill_tokens=b * k).total_s.reshape(-1)[0])
    target_kv = b * float(model.kv_bytes(live)) * float(costs.kv_share(model, v, n).reshape(-1)[0])
    weights_fit = model.weights_bytes / n <= v.usable_weights_bytes
    if pool.partner_device is None:  # draft on the target's devices
        step = float(costs.decode(draft, v, n, b, c).total_s.reshape(-1)[0])
        draft_kv = b * float(draft.kv_bytes(live)) * float(costs.kv_share(draft, v, n).reshape(-1)[0])
        fits = weights_fit and target_kv + draft_kv <= v.kv_room_bytes(model.weights_bytes / n, draft.weights_bytes / n)
        rtt = 0.0
    else:  # a draft server shared by r targets drafts their r·b sequences at once
        d, nd, r = costs.silicon(pool.partner_device, check.workload.dtype), pool.partner_tp, partner_share(pool)
        step = float(costs.decode(draft, d, nd, r * b, c).total_s.reshape(-1)[0])
        draft_kv = r * b * float(draft.kv_bytes(live)) * float(costs.kv_share(draft, d, nd).reshape(-1)[0])
        fits = (weights_fit and target_kv <= v.kv_room_bytes(model.weights_bytes / n)
                and draft.weights_bytes / nd <= d.usable_weights_bytes
                and draft_kv <= d.kv_room_bytes(draft.weights_bytes / nd))
        rtt = float(round_trip_s(b, k, v, n, d, nd, r))
    tpot = float(costs.spec_tpot_s(step, verify, k, alpha, rtt))
    return Recheck(within(tpot, rc.slo.tpot_ms) and close(s_to_ms(tpot), pool.tpot_ms), bool(fits),
                   b / (tpot * rc.output_tokens),
                   f"spec_decode on {pool.device} (draft {pool.partner_device or 'local'}): recomputed TPOT "
                   f"{s_to_ms(tpot):.2f} ms vs plan {pool.tpot_ms} ms")
