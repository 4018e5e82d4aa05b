"""Speculative decoding: a draft model proposes ``k`` tokens, the target verifies them in one step.

Tasks: prefill, then verify and draft on one decode unit (the draft on the target's own devices, or on
its own silicon with token ids crossing the network each round). Pricing: a round costs
``k·t_draft + t_verify + t_rtt`` and yields ``E[tokens per round]`` (spec.py); TPOT is their ratio.

A draft server may serve ``r`` target replicas (r from ``CandidateOptions.partner_shares``): their rounds run
in step, the server drafting all ``r·b`` sequences at once (``t_draft`` at batch ``r·b``, their draft KV in
its memory, their token ids on its NICs); a candidate is one such group.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.perf.model import expected_tokens_per_round, paged_kv_tokens, transfer_s
from planner.schema import GRAPH_DRAFT_TOKENS, Pool, RequestClass
from planner.strategies.base import (
    TOKEN_ID_BYTES,
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
    shared_step_bounds,
    slot_cap,
    slot_queue,
    tpot_tiers,
    unoffered,
    within,
)
from planner.units import ms_to_s, s_to_ms

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


def round_trip_s(batch, k: int, target, n: int, drafter, nd: int, sharing: int):
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


def draft_servers(ctx: Pricing, rc: RequestClass) -> list:
    """Draft servers on other silicon: per device, the fewest devices that hold the draft, serving ``r`` targets'
    ``r·b`` sequences for each ``r`` of ``partner_shares``: ``(device, nd, r, step over batches, KV fits)``. Their
    step does not depend on the target."""
    draft, costs, options = ctx.draft, ctx.costs, ctx.options
    b = np.asarray(options.batches, dtype=float)
    live = paged_kv_tokens(rc.input_tokens, rc.output_tokens)
    shares = np.asarray(options.partner_shares, dtype=float)[:, None]
    out = []
    for d in ctx.silicon:
        counts = d.device_counts(draft.weights_bytes, options.max_tp)
        if not counts:
            continue
        nd = counts[0]
        steps = costs.decode(draft, d, nd, shares * b, mean_context(rc)).total_s.reshape(len(shares), len(b))
        kv = shares * b * draft.kv_bytes(live) * costs.kv_share(draft, d, nd).reshape(-1)
        fits = kv <= d.kv_room_bytes(draft.weights_bytes / nd)
        out.extend((d, nd, r, step, ok) for r, step, ok in zip(options.partner_shares, steps, fits))
    return out


@dataclass(frozen=True)
class Rounds:
    """One class's speculative rounds on ``n`` target devices of ``v``: per draft layout ``(drafter or None for
    the target's own devices, nd, r, draft step, fits)``, per draft length ``k`` and batch, the verify step
    (k × batch), the round trip and TPOT (layouts × k × batch), seconds."""

    layouts: list
    ks: np.ndarray
    per_round: list[float]
    verify: np.ndarray
    rtt: np.ndarray
    tpot: np.ndarray


def rounds(ctx: Pricing, rc: RequestClass, v, n: int, remote: list) -> Rounds:
    """``Rounds`` of class ``rc`` on ``n`` devices of ``v``, with its draft local or on one of ``remote``
    (``draft_servers``; a server of the target's own type is left out)."""
    model, draft, costs, spec = ctx.model, ctx.draft, ctx.costs, ctx.workload.spec_decode
    b = np.asarray(ctx.options.batches, dtype=float)
    c = mean_context(rc)
    live = paged_kv_tokens(rc.input_tokens, rc.output_tokens)
    target_kv = b * model.kv_bytes(live) * costs.kv_share(model, v, n).reshape(-1)
    local_step = costs.decode(draft, v, n, b, c).total_s.reshape(-1)  # draft on the target's own devices
    local_kv = b * draft.kv_bytes(live) * costs.kv_share(draft, v, n).reshape(-1)
    layouts = [(None, n, 1, local_step, target_kv + local_kv <= v.kv_room_bytes(model.weights_bytes / n, draft.weights_bytes / n))]
    target_fits = target_kv <= v.kv_room_bytes(model.weights_bytes / n)
    layouts += [(d, nd, r, step, target_fits & draft_fits) for d, nd, r, step, draft_fits in remote if d.id != v.id]
    ks = np.asarray(spec.draft_lengths)
    per_round = [float(costs.expected_tokens_per_round(spec.acceptance_rate, int(k))) for k in ks]
    verify = costs.decode(model, v, n, b[None, :], c, prefill_tokens=b[None, :] * ks[:, None]).total_s.reshape(len(ks), len(b))
    steps = np.stack([step for _, _, _, step, _ in layouts])[:, None, :]
    rtt = round_trips(b, ks, v, n, layouts)
    return Rounds(layouts, ks, per_round, verify, rtt, costs.spec_tpot_s(steps, verify[None], ks[None, :, None], spec.acceptance_rate, rtt))


def price(unit: str, ctx: Pricing, rc: RequestClass) -> list[Candidate]:
    """Verify+draft replicas: per target, each draft layout (on the target's devices, or on the fewest devices of
    another type that hold the draft), the draft length k (given, or the best of ``DRAFT_LENGTHS``) and batch
    with the most SLO-feasible capacity."""
    if unit == "prefill":
        return price_prefill(ctx, rc, NAME)
    model, costs, options = ctx.model, ctx.costs, ctx.options
    b = np.asarray(options.batches, dtype=float)
    remote = draft_servers(ctx, rc)
    out = []
    bills: dict = {}
    queue = slot_queue([rc])
    for v in ctx.silicon:
        for n in v.device_counts(model.weights_bytes, options.max_tp):
            g = rounds(ctx, rc, v, n, remote)
            network = network_rps(ctx, rc, v, n)
            choices = decode_choices(rc, g.tpot, np.stack([fits for *_, fits in g.layouts]), b, network)
            for layout, choice, rows, trips in zip(g.layouts, choices, g.tpot, g.rtt):
                if choice is None:
                    continue
                row, i, capacity, rho, limited = choice
                out.append(_candidate(rc.name, v, n, int(b[i]), layout, int(g.ks[row]), g.per_round[row],
                                      costs.spec_round_s(layout[3][i], int(g.ks[row]), g.verify[row, i], trips[row, i]),
                                      bills, queue, capacity_rps=layout[2] * capacity, utilization_cap=rho,
                                      tpot_ms=s_to_ms(float(rows[row, i])), limited_by=limited))
    return out


def _candidate(class_name: str, v, n: int, batch: int, layout, k: int, per_round: float, round_s, bills: dict,
               queue: tuple, **fields) -> Candidate:
    """A verify+draft candidate: one group of ``r`` targets and their draft server (or one target drafting itself),
    its slots queued as ``queue`` (``slot_queue``)."""
    d, nd, r, *_ = layout
    parts = ((v, n),) if d is None else ((v, r * n), (d, nd))
    key = tuple((s.id, m) for s, m in parts)
    if key not in bills:  # one group's devices, power and money, once per shape
        bills[key] = money(list(parts))
    return Candidate(
        class_name=class_name, strategy=NAME, role="decode", device=v.id, tp=n, batch=batch, **bills[key],
        ttft_ms=None, partner_device=None if d is None else d.id,
        partner_tp=None if d is None else nd, partner_role=None if d is None else "draft", partner_share=r,
        extra={"draft_tokens": k, "tokens_per_round": per_round, "round_ms": s_to_ms(float(round_s)), "slot_queue": queue},
        **fields)


def price_shared(ctx: Pricing) -> list[Candidate]:
    """Verify+draft replicas shared by classes, tiered by TPOT SLO T as pd_disagg's decode replicas are (see
    ``pd_disagg.price_shared``). A round over a mixed batch reads each sequence's own KV, target's and draft's; the
    weights, the ``b·k`` verified tokens' compute and the token-id round trip are the batch's. So a mixed round is at
    most the slot-weighted mean of each class's own round at that batch, and with one acceptance rate TPOT (round /
    E[tokens per round]) is too: the share, tier and network rows of milp/build.py hold as they do for decode.
    Per target device, tp, tier and member: the draft layout, k and batch with that member's most usable capacity
    (its slot cap, ``slot_cap``, times its capacity), its TPOT within T and every member's KV fitting; of the layouts,
    the one with the most per $/h and the one with the most per watt (a layout and draft length per shared pool, not
    all of them: the MILP chooses among these), each with the caps and mix-step bounds of ``shared_step_bounds``. Targets and draft servers whose KV spills from SRAM are left out, as pd_disagg's are. Shared prefill replicas too (``price_shared_prefill``)."""
    model, options = ctx.model, ctx.options
    tiers = tpot_tiers(ctx, NAME, "verify")
    remote = {rc.name: [server for server in draft_servers(ctx, rc) if not server[0].kv_spill]
              for rc in {rc.name: rc for members in tiers for rc in members}.values()}
    b = np.asarray(options.batches, dtype=float)
    out, bills = {}, {}
    for members in tiers:
        tier, queue = members[0], slot_queue(members)
        for v in (v for v in ctx.silicon if not v.kv_spill):
            for n in v.device_counts(model.weights_bytes, options.max_tp):
                grid = [rounds(ctx, rc, v, n, remote[rc.name]) for rc in members]
                fits = np.all([np.stack([ok for *_, ok in g.layouts]) for g in grid], axis=0)  # layouts × batch
                shares = np.array([r for _, _, r, *_ in grid[0].layouts], dtype=float)[:, None, None]
                for m, rc in enumerate(members):
                    tpot = grid[m].tpot
                    ok = fits[:, None, :] & (tpot <= ms_to_s(tier.slo.tpot_ms))
                    rho = np.zeros(tpot.shape)
                    rho[ok] = slot_cap(tpot[ok], np.broadcast_to(b, tpot.shape)[ok], members)
                    usable = rho * shares * b / (tpot * rc.output_tokens)
                    picks = _picks(np.where(rho > 0, usable, -np.inf), grid[0].layouts, v, n)
                    for pick, (cap, most) in ((p, c) for p in picks for c in shared_step_bounds(float(tpot[p]), int(b[p[2]]), members)):
                        layout_index, row, i = pick
                        layout = grid[0].layouts[layout_index]
                        mix = tuple(ClassLoad(o.name, float(shares[layout_index, 0, 0] * b[i] / (g.tpot[pick] * o.output_tokens)),
                                              float(g.tpot[pick]), shares[layout_index, 0, 0] * network_rps(ctx, o, v, n)) for o, g in zip(members, grid))
                        c = _candidate(tier.name, v, n, int(b[i]), layout, int(grid[m].ks[row]), grid[m].per_round[row],
                                       round_s_of(ctx, grid[m], layout_index, row, i), bills, queue,
                                       capacity_rps=mix[0].capacity_rps, utilization_cap=cap, tpot_ms=s_to_ms(most),
                                       limited_by="slo.tpot_ms", mix=mix)
                        out.setdefault(c.key, c)
    return list(out.values()) + price_shared_prefill(ctx, NAME)


def _picks(capacity: np.ndarray, layouts: list, v, n: int) -> set[tuple[int, int, int]]:
    """Of ``capacity`` (layouts × k × batch, −inf where not allowed): per layout its best (k, batch); of those, the
    layout with the most capacity per $/h and the one with the most per watt."""
    best = []
    for j, layout in enumerate(layouts):
        flat = int(np.argmax(capacity[j]))
        row, i = divmod(flat, capacity.shape[2])
        if np.isfinite(capacity[j, row, i]):
            d, nd, r, *_ = layout
            bill = money([(v, n)] if d is None else [(v, r * n), (d, nd)])
            best.append((capacity[j, row, i], bill["cost_usd_per_hour"], bill["power_w"], (j, row, i)))
    if not best:
        return set()
    return {max(best, key=lambda t: t[0] / t[1])[3], max(best, key=lambda t: t[0] / t[2])[3]}  # prices, TDPs > 0


def round_s_of(ctx: Pricing, g: Rounds, layout: int, row: int, i: int) -> float:
    """The round time (s) of layout ``layout``, draft length ``ks[row]`` and batch index ``i`` of ``g``."""
    return float(ctx.costs.spec_round_s(g.layouts[layout][3][i], int(g.ks[row]), g.verify[row, i], g.rtt[layout, row, i]))


def network_rps(ctx: Pricing, rc: RequestClass, v, n: int) -> float:
    """Requests/s of class ``rc`` whose prompt KV ``n`` target devices' NICs take in (inf when nothing crosses)."""
    kv_in = edge_bytes(ctx.graph, rc.name, NAME, "prefill", "verify")
    return n * v.nic_bytes_s / kv_in if kv_in else float("inf")


def recheck(pool: Pool, rc: RequestClass, check: Checking) -> Recheck:
    """A verify+draft pool: the round's TPOT from both models' steps, memory of target (and local draft) KV."""
    if pool.role == "prefill":
        return recheck_shared_prefill(pool, check, NAME) if pool.serves is not None else recheck_prefill(pool, rc, check)
    if pool.pp > 1:  # verify+draft replicas are tensor parallel only
        return unoffered(pool)
    if pool.serves is not None:
        return recheck_shared(pool, check)
    k = pool.draft_tokens or check.workload.spec_decode.draft_tokens
    if k is None:
        return Recheck(False, False, 0.0, f"spec_decode on {pool.device}: the pool names no draft length")
    tpot, fits = round_of(pool, rc, check, k)
    slots_ok, slots = recheck_slots(pool, tpot, [rc])
    return Recheck(within(tpot, rc.slo.tpot_ms) and close(s_to_ms(tpot), pool.tpot_ms) and slots_ok, fits,
                   pool.batch / (tpot * rc.output_tokens),
                   f"spec_decode on {pool.device} (draft {pool.partner_device or 'local'}): recomputed TPOT "
                   f"{s_to_ms(tpot):.2f} ms vs plan {pool.tpot_ms} ms" + slots)


def round_of(pool: Pool, rc: RequestClass, check: Checking, k: int) -> tuple[float, bool]:
    """TPOT (s) of class ``rc``'s sequences alone in ``pool``'s rounds of ``k`` drafts, and whether their target
    and draft KV fit at the pool's batch."""
    model, draft, costs = check.model, check.draft, check.costs
    alpha = check.workload.spec_decode.acceptance_rate
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
    return float(costs.spec_tpot_s(step, verify, k, alpha, rtt)), bool(fits)


def recheck_shared(pool: Pool, check: Checking) -> Recheck:
    """A shared verify+draft pool: ``recheck_mix`` with each class's TPOT at the pool's batch and draft length."""
    if pool.draft_tokens is None:
        return Recheck(False, False, 0.0, f"shared spec_decode on {pool.device}: the pool names no draft length")
    return recheck_mix(pool, check, lambda rc: round_of(pool, rc, check, pool.draft_tokens),
                       lambda rc: check.model.kv_bytes(rc.input_tokens), f"spec_decode (draft {pool.partner_device or 'local'})")
