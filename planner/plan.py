"""Decode a SolveResult into a Plan: pools, totals, per-class predictions, what binds."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from planner.candidates import Candidate
from planner.strategies.base import partner_count, slot_waits_at
from planner.milp.model import IlpModel
from planner.schema import (
    GOODPUT_OBJECTIVES,
    Baseline,
    ClassResult,
    DeviceConfidence,
    Diagnosis,
    Plan,
    PlanStatus,
    Pool,
    SolverInfo,
    Totals,
    Workload,
)
from planner.solvers.base import SolveResult, Termination, check_outcome
from planner.perf.model import EXTRAPOLATION_WIDENING
from planner.queueing import admitted_ttft_s, wait_s
from planner.units import WATTS_PER_KW, s_to_ms

def plan_status(result: SolveResult) -> PlanStatus:
    """One solve's outcome, one to one: optimal (the engine proved the incumbent within the requested relative
    gap, 1e-4 by default as in Gurobi and SCIP, and reported the bound that proves it; the plan reports the gap),
    feasible (an incumbent short of that, or one no reported bound proves; a stage the node limit ended before any
    incumbent leaves the plan of an earlier solve unproven), time_limit, infeasible. An engine failure or an
    unbounded model is no status: SolverFailed."""
    check_outcome(result)
    if result.termination is Termination.OPTIMAL:
        return "optimal" if result.gap is not None else "feasible"
    return {
        Termination.FEASIBLE: "feasible",
        Termination.NODE_LIMIT: "feasible",
        Termination.TIME_LIMIT: "time_limit",
        Termination.INFEASIBLE: "infeasible",
    }[result.termination]  # type: ignore[return-value]


def replica_counts(model: IlpModel, result: SolveResult) -> np.ndarray:
    """Integer replicas per candidate from a solution vector."""
    return np.round(result.x[model.blocks["n"]]).astype(int)


def scale_of(model: IlpModel, result: SolveResult) -> float:
    return float(result.x[model.blocks["scale"]][0])


def traffic_split(model: IlpModel, result: SolveResult) -> dict[tuple[str, str], float]:
    """z_{k,s} by (class, strategy)."""
    block = model.blocks["z"]
    names = model.var_names[block]
    return {tuple(name.split(":", 1)[1].split("/", 1)): float(v) for name, v in zip(names, result.x[block])}


def shared_loads(model: IlpModel, result: SolveResult) -> dict[tuple[str, str], float]:
    """x_{c,k}: replica-equivalents of each shared candidate (key) carrying each class."""
    if "x" not in model.blocks:
        return {}
    block = model.blocks["x"]
    return {tuple(name.split(":", 1)[1].rsplit(">", 1)): float(v) for name, v in zip(model.var_names[block], result.x[block])}


def pools_of(workload: Workload, candidates: list[Candidate], counts: np.ndarray, split: dict,
             loads: dict[tuple[str, str], float] | None = None) -> list[Pool]:
    """One pool per candidate with replicas, with the traffic it serves and its utilisation (a candidate with a
    shared partner counts its target replicas, ``partner_share`` per MILP replica, and its partner replicas).
    A shared replica carries what the MILP gave it (``loads``, x_{c,k}); each unit's own replicas the rest of
    its traffic, in proportion to their usable capacity, so no pool exceeds its cap."""
    slo_percentile = {rc.name: rc.slo.percentile for rc in workload.classes}
    rate = {rc.name: rc.rate_rps for rc in workload.classes}
    loads = loads or {}
    on_shared: dict[tuple[str, str, str], float] = defaultdict(float)
    for c in candidates:
        for load in c.mix:
            on_shared[(load.class_name, c.route, c.role)] += c.utilization_cap * load.capacity_rps * loads.get((c.key, load.class_name), 0.0)
    pue = workload.constraints.pue
    pools = []
    for c, n in zip(candidates, counts):
        if n <= 0:
            continue
        if c.mix:
            pools.append(shared_pool(c, int(n), loads, pue, slo_percentile[c.class_name]))
            continue
        unit = (c.class_name, c.route, c.role)
        served = max(0.0, rate[c.class_name] * split.get((c.class_name, c.route), 0.0) - on_shared[unit])
        siblings = [(d, m) for d, m in zip(candidates, counts) if m > 0 and not d.mix and (d.class_name, d.route, d.role) == unit]
        unit_capacity = sum(m * d.effective_rps for d, m in siblings)
        share = n * c.effective_rps / unit_capacity if unit_capacity else 0.0
        utilization = served * share / (n * c.capacity_rps) if c.capacity_rps else 0.0
        pools.append(Pool(
            role=c.role, class_name=c.class_name, strategy=c.strategy, device=c.device, tp=c.tp, batch=c.batch,
            replicas=int(n * c.partner_share), devices=int(n * c.devices),
            devices_by_type={k: int(n * v) for k, v in c.devices_by_type.items()},
            power_kw=n * pue * c.power_w / WATTS_PER_KW,
            cost_usd_per_hour=n * c.cost_usd_per_hour,
            capex_usd=n * c.capex_usd,
            utilization=utilization,
            utilization_cap=c.utilization_cap,
            capacity_rps=n * c.capacity_rps,
            served_rps=served * share,
            ttft_ms=_ttft_at(c, utilization, slo_percentile[c.class_name]), tpot_ms=c.tpot_ms,
            **_slot_waits_ms(c, c.tpot_ms, utilization), partner_device=c.partner_device, partner_tp=c.partner_tp, partner_role=c.partner_role,
            partner_replicas=int(n) if c.partner_device else None, draft_tokens=c.extra.get("draft_tokens"),
            limited_by=c.limited_by, dtype=c.dtype, ep=c.ep, pp=c.pp,
        ))
    return pools


def shared_pool(c: Candidate, n: int, loads: dict[tuple[str, str], float], pue: float, percentile: float | None) -> Pool:
    """A shared pool: each class's requests/s ``ρ · cap_k · x_k`` (every class it may serve is listed, at 0 when
    it carries none); its replica-equivalents ``y_k = served_k / cap_k``; the pool's capacity at that mix
    ``n · Σ served_k / Σ y_k`` req/s, so its utilisation is ``Σ y_k / n``. Decode: the mix's step
    ``τ = Σ y_k / Σ (y_k / τ_k)`` (full batches: at most that). Prefill: TTFT at that utilisation, of the
    tier's longest service (the candidate's). Aggregated: that step, and TTFT at its prompt server's utilisation
    ``Σ served_k · S / n`` (every prompt at the tier's longest service S). A group with a shared partner counts
    ``partner_share`` target replicas per MILP replica, as ``pools_of`` does."""
    serves = {load.class_name: c.utilization_cap * load.capacity_rps * loads.get((c.key, load.class_name), 0.0)
              for load in c.mix}
    used = {load.class_name: serves[load.class_name] / load.capacity_rps for load in c.mix}
    total = sum(used.values())
    step = total / sum(used[load.class_name] / load.step_s for load in c.mix) if total > 0 else c.mix[0].step_s
    served = sum(serves.values())
    capacity = n * served / total if total > 0 else n * c.capacity_rps
    return Pool(
        role=c.role, class_name=c.class_name, strategy=c.strategy, device=c.device, tp=c.tp, batch=c.batch,
        replicas=n * c.partner_share, devices=n * c.devices, devices_by_type={k: n * v for k, v in c.devices_by_type.items()},
        power_kw=n * pue * c.power_w / WATTS_PER_KW, cost_usd_per_hour=n * c.cost_usd_per_hour, capex_usd=n * c.capex_usd,
        utilization=total / n, utilization_cap=c.utilization_cap, capacity_rps=capacity, served_rps=served,
        ttft_ms=_ttft_at(c, served * c.extra["service_s"] / n if c.role == "aggregated" else total / n, percentile, total / n),
        tpot_ms=s_to_ms(step) if c.role != "prefill" else None, **_slot_waits_ms(c, s_to_ms(step), total / n),
        limited_by=c.limited_by, serves=serves, dtype=c.dtype, ep=c.ep, pp=c.pp,
        partner_device=c.partner_device, partner_tp=c.partner_tp, partner_role=c.partner_role,
        partner_replicas=n if c.partner_device else None, draft_tokens=c.extra.get("draft_tokens"),
    )


def banded(pools: list[Pool], confidence: list[DeviceConfidence], costs) -> list[Pool]:
    """``pools`` with the ranges their TTFT and TPOT could take: each figure times its device family's band
    (``CostModel.band``), widened by ``EXTRAPOLATION_WIDENING`` where the device's confidence is extrapolated."""
    widen = {c.device: EXTRAPOLATION_WIDENING if c.level == "extrapolated" else 1.0 for c in confidence}

    def span(value: float | None, device: str, metric: str) -> tuple[float, float] | None:
        if value is None:
            return None
        band = costs.band(device, metric).widened(widen.get(device, 1.0))
        return value * band.low, value * band.high

    return [p.model_copy(update={"ttft_ms_range": span(p.ttft_ms, p.device, "ttft"),
                                 "tpot_ms_range": span(p.tpot_ms, p.device, "tpot")}) for p in pools]


def _ttft_at(c: Candidate, utilization: float, percentile: float | None, slots: float | None = None) -> float | None:
    """Predicted TTFT (the SLO's statistic: mean or percentile) at the pool's planned utilisation (the
    candidate's is at its cap, i.e. the SLO): queue wait, service and transfer; an aggregated replica waits for a
    free slot first (``queueing.admitted_ttft_s``), at its slots' occupancy ``slots`` (default: ``utilization``)."""
    if c.ttft_ms is None or "service_s" not in c.extra:
        return c.ttft_ms
    service, rho = c.extra["service_s"], min(utilization, c.utilization_cap)
    if "held_steps" in c.extra:
        occupied = rho if slots is None else min(slots, c.utilization_cap)
        return s_to_ms(float(admitted_ttft_s(rho, occupied, service, c.extra["step_s"], c.batch, c.extra["held_steps"],
                                             percentile)) + c.extra["transfer_s"])
    return s_to_ms(float(wait_s(rho, service, percentile)) + service + c.extra["transfer_s"])


def _slot_waits_ms(c: Candidate, step_ms: float | None, utilization: float) -> dict:
    """A decode-side pool's slot waits per output token (ms) at its planned utilisation, stepping ``step_ms``
    (``strategies.base.slot_waits_at`` of the candidate's slot queue): ``slot_wait_ms``, the largest, and for a shared
    pool ``slot_waits_ms``, each class's; none for pools without a slot queue."""
    if "slot_queue" not in c.extra or step_ms is None:
        return {}
    waits = slot_waits_at(step_ms, c.batch, utilization, c.extra["slot_queue"])
    return {"slot_wait_ms": max(waits.values()), **({"slot_waits_ms": waits} if c.mix else {})}


def classes_text(pool: Pool) -> str:
    """The classes a pool serves in words: its class, or ``shared: chat 61%, rag 39%`` (shares of its requests/s)."""
    if pool.serves is None:
        return pool.class_name
    total = sum(pool.serves.values()) or 1.0
    return "shared: " + ", ".join(f"{k} {v / total:.0%}" for k, v in sorted(pool.serves.items()) if v > 0)


def shape_text(pool: Pool) -> str:
    """A pool's parallelism in words: ``8``, ``8 ep2`` (expert groups), ``tp8×pp2`` (pipeline stages)."""
    if pool.pp > 1:
        return f"tp{pool.tp}×pp{pool.pp}"
    return str(pool.tp) + (f" ep{pool.ep}" if pool.ep > 1 else "")


def partner_text(pool: Pool) -> str:
    """A pool's partner in words: ``ffn mi355x x4, 1 per 8 replicas`` ('' without one)."""
    if not pool.partner_device:
        return ""
    return f"{pool.partner_role} {pool.partner_device} x{pool.partner_tp}, {partner_count(pool)} per {pool.replicas} replicas"


def replay_line(check) -> str:
    """A plan's replay in one line: the verdict, and each miss by how much."""
    head = f"replay ({check.duration_s:,.0f} s simulated, seed {check.seed}, {check.requests:,} requests): {check.verdict}"
    misses = [f"{m.class_name} {m.metric.removesuffix('_ms').upper()} {m.statistic} {m.simulated:,.1f} vs {m.target:,.1f}"
              + (f" (+{m.relative:.0%})" if m.relative is not None else "") for m in check.misses]
    return head + (": " + "; ".join(misses) if misses else "")


def shortfall_warning(plan: Plan) -> str | None:
    """One line for a plan that serves only part of its demand (None when it serves all of it, or none)."""
    if plan.meets_demand or plan.status == "infeasible":
        return None
    binding = ", ".join(plan.binding_constraints) or "the budgets"
    return (f"serves only {plan.goodput_scale:.1%} of the demand (goodput scale {plan.goodput_scale:.3f}): "
            f"{binding} bind; the rest of the traffic is not served")


#: catalog inputs of a device that a plan's figures rest on (power, price, compute, memory, links), as key prefixes
PLAN_INPUTS = ("tdp_w", "price_usd", "price_usd_per_hour", "peak_dense_tflops", "memory_tiers", "node.overhead_w",
               "scale_up", "scale_out")


def _is_plan_input(key: str) -> bool:
    return any(key == p or key.startswith((p + ".", p + "[")) for p in PLAN_INPUTS)


def confidence_of(workload: Workload, pools: list[Pool], costs) -> list[DeviceConfidence]:
    """Per device type in ``pools``: the cost model's confidence at the largest replica (tp × pp devices, as the
    calibration records count them), prompt and batch it runs, and which of its plan inputs (``PLAN_INPUTS``) the
    catalog marks as estimates."""
    isl = max(rc.input_tokens for rc in workload.classes)
    out = []
    for device_id in sorted({d for p in pools for d in p.devices_by_type}):
        mine = [p for p in pools if p.device == device_id] or [p for p in pools if device_id in p.devices_by_type]
        verdict = costs.confidence(device_id, weights_dtype=mine[0].dtype or workload.dtype, tp=max(p.tp * p.pp for p in mine), isl=isl,
                                   batch=max(p.batch for p in mine))
        provenance = costs.catalog.device(device_id).provenance
        estimated = sorted(k for k, p in provenance.items() if p.estimate and _is_plan_input(k))
        out.append(DeviceConfidence(device=device_id, level=verdict.level, reasons=verdict.reasons,
                                    estimated_inputs=tuple(estimated)))
    return out


def footprint_lines(plan: Plan) -> list[str]:
    """What the plan adds to the owned fleet and what the addition buys (none without an owned fleet)."""
    f = plan.footprint
    if f is None:
        return []
    owned = ", ".join(f"{k} {d} ({f.owned_used[d]} used)" for d, k in f.owned.items())
    added = ", ".join(f"{k} {d}" for d, k in f.added.items()) or "nothing"
    lines = [f"owned fleet: {owned}; adds {added}: ${f.added_cost_usd_per_hour:+,.2f}/h, "
             f"capex ${f.added_capex_usd:+,.0f}, {f.added_power_kw:+,.1f} kW"]
    alone = f.owned_only
    if alone.status == "infeasible":
        lines.append("the owned fleet alone cannot serve this workload under its constraints")
    else:
        unit = "goodput" if plan.objective in GOODPUT_OBJECTIVES else plan.objective.removeprefix("min_")
        ratio = f": {f.gain:.3f}x {unit}" if f.gain is not None else ""
        lines.append(f"the owned fleet alone: goodput scale {alone.goodput_scale:.3f}, {alone.power_kw:,.1f} kW, "
                     f"${alone.cost_usd_per_hour:,.2f}/h; with the additions {plan.goodput_scale:.3f}{ratio}")
    return lines


def interactivity_lines(plan: Plan) -> list[str]:
    """The tightest TPOT the plan serves its rates at, against the best single device and the reference."""
    i = plan.interactivity
    if i is None:
        return []
    if i.tpot_factor is None:
        return ["no fleet within the budgets serves the full rate even at the stated TPOT SLOs"]
    per_class = ", ".join(f"{k} {ms:.3g} ms ({i.output_tokens_per_s_per_user[k]:,.0f} tok/s/user)" for k, ms in i.tpot_ms.items())
    lines = [f"tightest TPOT at the full rate: {i.tpot_factor:.3f}x the SLO: {per_class}"]
    for name, device, factor in (("best single device", i.best_homogeneous, i.best_homogeneous_factor),
                                 ("reference", i.reference, i.reference_factor)):
        if device is not None:
            lines.append(f"{name} {device}: " + (f"{factor:.3f}x the SLO; the plan is {factor / i.tpot_factor:.2f}x as interactive"
                                                 if factor is not None else "cannot serve the rates even at the stated SLO"))
    return lines


def gain_lines(plan: Plan) -> list[str]:
    """What the plan adds to an owned fleet, the reference fleet, and what the plan buys over each single-device
    fleet, in the objective and in money."""
    lines = footprint_lines(plan) + interactivity_lines(plan)
    ref = plan.reference
    if ref is not None:
        lines.append(f"reference fleet {ref.device}: cannot serve this workload under its constraints" if ref.status == "infeasible"
                     else f"reference fleet {ref.device}: {ref.devices} devices at goodput scale {ref.goodput_scale:.3f} "
                          f"({ref.power_kw:,.1f} kW, ${ref.cost_usd_per_hour:,.2f}/h, capex ${ref.capex_usd:,.0f})")
    if plan.gains is None:
        return lines
    unit = {"max_goodput": "goodput", "fixed_footprint": "goodput", "min_cost": "cost", "min_power": "power",
            "max_interactivity": "power"}[plan.objective]
    for g in plan.gains.against:
        ratio = f"{g.objective_ratio:.3f}x {unit}" if g.objective_ratio is not None else "-"
        per_m = (f"; $/M tokens {g.usd_per_million_tokens:.3g} vs {g.fleet_usd_per_million_tokens:.3g}"
                 if g.usd_per_million_tokens is not None and g.fleet_usd_per_million_tokens is not None else "")
        lines.append(f"vs {g.versus.replace('_', ' ')} ({g.device}): {ratio}; ${g.cost_change_usd_per_hour:+,.2f}/h; "
                     f"capex ${g.capex_change_usd:+,.0f}{per_m}")
    if plan.gains.best_device is not None and plan.gains.mixing is not None:
        lines.append(f"split: best device {plan.gains.best_device:.3f}x, mixing devices {plan.gains.mixing:.3f}x")
    return lines


def device_dtypes(pools, default: str) -> dict[str, str]:
    """A weights dtype each device type of ``pools`` runs at (its pools', else ``default``): what its silicon is priced at."""
    return {d: p.dtype or default for p in pools for d in p.devices_by_type}


def totals_of(pools: list[Pool], pue: float) -> Totals:
    by_type: dict[str, int] = defaultdict(int)
    for p in pools:
        for device, count in p.devices_by_type.items():
            by_type[device] += count
    power = sum(p.power_kw for p in pools)
    return Totals(
        devices=sum(by_type.values()), devices_by_type=dict(sorted(by_type.items())), power_kw=power,
        it_power_kw=power / pue, cost_usd_per_hour=sum(p.cost_usd_per_hour for p in pools),
        capex_usd=sum(p.capex_usd for p in pools),
    )


def classes_of(workload: Workload, pools: list[Pool], split: dict, scale: float) -> list[ClassResult]:
    """Per class: served rate, strategy shares and served-weighted TTFT / TPOT."""
    out = []
    for rc in workload.classes:
        shares = {s: (z / scale if scale > 0 else 0.0) for (k, s), z in sorted(split.items()) if k == rc.name and z > 1e-9}
        mine = [(p, p.served_by_class().get(rc.name, 0.0)) for p in pools]
        mine = [(p, v) for p, v in mine if v > 0]
        ttft = _weighted([(p.ttft_ms, v) for p, v in mine if p.ttft_ms is not None])
        tpot = _weighted([(p.tpot_ms + p.slot_wait_of(rc.name), v) for p, v in mine if p.tpot_ms is not None])
        out.append(ClassResult(
            name=rc.name, rate_rps=rc.rate_rps, rate_rps_served=rc.rate_rps * scale, strategy_shares=shares,
            ttft_ms=ttft, tpot_ms=tpot, output_tokens_per_s_per_user=(1000.0 / tpot) if tpot else None,
            ttft_ms_range=_weighted_range([(p.ttft_ms_range, v) for p, v in mine]),
            tpot_ms_range=_weighted_range([(_plus(p.tpot_ms_range, p.slot_wait_of(rc.name)), v) for p, v in mine]),
        ))
    return out


def _plus(span: tuple[float, float] | None, wait_ms: float) -> tuple[float, float] | None:
    """A pool's TPOT range with its slot wait added to both ends (the wait scales with the step, but is the plan's
    queueing figure, not the cost model's band)."""
    return None if span is None else (span[0] + wait_ms, span[1] + wait_ms)


def _weighted_range(pairs: list[tuple[tuple[float, float] | None, float]]) -> tuple[float, float] | None:
    """Served-weighted low and high of the ranges given (None without one)."""
    pairs = [(r, w) for r, w in pairs if r is not None]
    low, high = _weighted([(r[0], w) for r, w in pairs]), _weighted([(r[1], w) for r, w in pairs])
    return None if low is None else (low, high)


def _weighted(pairs: list[tuple[float, float]]) -> float | None:
    total = sum(w for _, w in pairs)
    return sum(v * w for v, w in pairs) / total if total > 0 else None


def binding_constraints(workload: Workload, candidates: list[Candidate], pools: list[Pool], totals: Totals) -> list[str]:
    """Limits that stop the plan from growing: a budget with no room for one more replica, SLO-limited pools."""
    pue = workload.constraints.pue
    cons = workload.constraints
    binding = []
    # growing the plan means adding a replica to every pool unit in use: power binds when the
    # headroom cannot buy the smallest replica of the hungriest unit in use
    used = {(p.class_name, p.route, p.role) for p in pools}
    smallest = {}
    for c in candidates:
        unit = (c.class_name, c.route, c.role)
        if unit in used:
            smallest[unit] = min(smallest.get(unit, float("inf")), pue * c.power_w / WATTS_PER_KW)
    if smallest and cons.power_budget_kw - totals.power_kw < max(smallest.values()) - 1e-9:
        binding.append("power")
    for device, limit in sorted(cons.inventory.items()):
        smallest = min((c.devices_by_type[device] for c in candidates if device in c.devices_by_type), default=None)
        if smallest is not None and limit - totals.devices_by_type.get(device, 0) < smallest:
            binding.append(f"inventory:{device}")
    if cons.cost_budget_usd_per_hour is not None:  # the budget counts what is paid: owned devices are free
        prices = {d: price for c in candidates for d, price in c.price_by_type.items()}
        paid = totals.cost_usd_per_hour - sum(min(totals.devices_by_type.get(d, 0), k) * prices.get(d, 0.0)
                                              for d, k in cons.owned.items())
        smallest_cost = min((c.paid_usd_per_hour(cons.owned) for c in candidates), default=0.0)
        if cons.cost_budget_usd_per_hour - paid < smallest_cost - 1e-9:
            binding.append("cost")
    for p in pools:
        if p.limited_by.startswith("slo"):
            name = f"{p.limited_by}:{p.class_name}"
            if name not in binding:
                binding.append(name)
    return binding


def solver_info(result: SolveResult, total_time_s: float, gap: float | None) -> SolverInfo:
    return SolverInfo(backend=result.backend, engine=result.engine, time_s=total_time_s, gap=gap,
                      engine_version=result.engine_version)


def empty_totals() -> Totals:
    return Totals(devices=0, devices_by_type={}, power_kw=0.0, it_power_kw=0.0, cost_usd_per_hour=0.0, capex_usd=0.0)


def infeasible_plan(workload: Workload, graph: dict, info: SolverInfo, diagnosis: Diagnosis,
                    baseline: Baseline | None = None) -> Plan:
    return Plan(
        status="infeasible", objective=workload.objective, model=workload.model, goodput_scale=0.0, solver=info,
        pools=(), totals=empty_totals(),
        classes=tuple(ClassResult(name=rc.name, rate_rps=rc.rate_rps, rate_rps_served=0.0, strategy_shares={},
                                  ttft_ms=None, tpot_ms=None, output_tokens_per_s_per_user=None)
                      for rc in workload.classes),
        binding_constraints=(), baseline=baseline, gain=None, graph=graph, diagnosis=diagnosis, workload=workload,
    )
