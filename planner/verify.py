"""Recompute every constraint of a Plan from the catalog and the cost model, without the MILP.

Checks: each pool meets its class's SLO (and, for plain pools, the TTFT/TPOT recomputed from the
cost model at the pool's actual utilisation); each pool's batch fits in memory; each class's traffic
is split completely and every pool unit has the capacity for what it serves; power, inventory and
cost recomputed from catalog prices and TDPs are within the budgets and match the plan's totals.
"""

from __future__ import annotations

from collections import defaultdict

from planner.catalog import Catalog
from planner.perf.model import CostModel, ModelProfile, RooflineModel, chunked_prefill_tokens_per_step, paged_kv_tokens, transfer_s
from planner.queueing import UTILIZATION_CAP, md1_wait_s
from planner.schema import Plan, Pool, RequestClass, Verification
from planner.units import WATTS_PER_KW, ms_to_s, s_to_ms

REL_TOL = 1e-6


def verify_plan(plan: Plan, catalog: Catalog) -> Verification:
    """Independent recomputation of a plan's constraints."""
    workload = plan.workload
    classes = {rc.name: rc for rc in workload.classes}
    costs = RooflineModel(catalog)
    model = costs.profile(workload.model, workload.dtype, workload.kv_dtype)
    messages: list[str] = []
    worst = 0.0

    def check(ok: bool, excess: float, message: str) -> bool:
        nonlocal worst
        if not ok:
            messages.append(message)
            worst = max(worst, excess)
        return ok

    slo_ok = memory_ok = latency_ok = True
    for pool in plan.pools:
        rc = classes[pool.class_name]
        if pool.ttft_ms is not None:
            slo_ok &= check(pool.ttft_ms <= rc.slo.ttft_ms * (1 + REL_TOL), pool.ttft_ms - rc.slo.ttft_ms,
                            f"{pool.class_name}/{pool.strategy}/{pool.role} on {pool.device}: TTFT {pool.ttft_ms:.1f} ms > SLO")
        if pool.tpot_ms is not None:
            slo_ok &= check(pool.tpot_ms <= rc.slo.tpot_ms * (1 + REL_TOL), pool.tpot_ms - rc.slo.tpot_ms,
                            f"{pool.class_name}/{pool.strategy}/{pool.role} on {pool.device}: TPOT {pool.tpot_ms:.2f} ms > SLO")
        if pool.partner_device is None and (pool.role == "prefill" or pool.strategy in ("aggregated", "pd_disagg")):
            ok_latency, ok_memory, replica_rps, note = _recompute(pool, rc, model, costs, workload.dtype)
            latency_ok &= check(ok_latency, 0.0, note or f"{pool.device}: recomputed latency misses the SLO")
            memory_ok &= check(ok_memory, 0.0, f"{pool.class_name}/{pool.role} on {pool.device}x{pool.tp}: batch {pool.batch} does not fit")
            most = pool.replicas * replica_rps * (1 + REL_TOL)
            latency_ok &= check(pool.capacity_rps <= most, pool.capacity_rps - most,
                                f"{pool.class_name}/{pool.role} on {pool.device}: capacity {pool.capacity_rps:.3f} req/s "
                                f"> {most:.3f} recomputed for {pool.replicas} replicas")

    split_ok = demand_ok = True
    # every pool unit the task graph gives a (class, strategy) must serve that strategy's share
    units = defaultdict(set)
    for node in plan.graph.get("nodes", []):
        units[(node["class"], node["strategy"])].add(node["unit"])
    served = defaultdict(float)
    for pool in plan.pools:
        served[(pool.class_name, pool.strategy, pool.role)] += pool.served_rps
        cap = min(pool.utilization_cap, UTILIZATION_CAP)
        utilization = pool.served_rps / pool.capacity_rps if pool.capacity_rps > 0 else float("inf")
        demand_ok &= check(utilization <= cap + REL_TOL, utilization - cap,
                           f"{pool.class_name}/{pool.role} on {pool.device}: utilisation {utilization:.3f} above its cap {cap:.3f}")
    for result in plan.classes:
        if plan.goodput_scale > 0:
            total = sum(result.strategy_shares.values())
            split_ok &= check(abs(total - 1.0) < 1e-5, abs(total - 1.0), f"class {result.name}: shares sum to {total}")
            for strategy, share in result.strategy_shares.items():
                need = classes[result.name].rate_rps * plan.goodput_scale * share
                for role in units.get((result.name, strategy), ()):
                    got = served.get((result.name, strategy, role), 0.0)
                    demand_ok &= check(got >= need * (1 - 1e-5), need - got,
                                       f"class {result.name}/{strategy}/{role}: serves {got:.3f} of {need:.3f} req/s")

    power_kw, cost, by_type = _recount(plan, catalog)
    cons = workload.constraints
    power_ok = check(power_kw <= cons.power_budget_kw * (1 + REL_TOL), power_kw - cons.power_budget_kw,
                     f"power {power_kw:.1f} kW > budget {cons.power_budget_kw} kW")
    power_ok &= check(abs(power_kw - plan.totals.power_kw) <= 1e-6 * max(1.0, power_kw), abs(power_kw - plan.totals.power_kw),
                      f"recounted power {power_kw:.3f} kW differs from the plan's {plan.totals.power_kw:.3f} kW")
    inventory_ok = all(
        check(by_type.get(d, 0) <= limit, by_type.get(d, 0) - limit, f"{d}: {by_type.get(d, 0)} devices > inventory {limit}")
        for d, limit in cons.inventory.items()
    )
    cost_ok = cons.cost_budget_usd_per_hour is None or check(
        cost <= cons.cost_budget_usd_per_hour * (1 + REL_TOL), cost - cons.cost_budget_usd_per_hour,
        f"cost ${cost:.2f}/h > budget")
    checks = {"slo": slo_ok, "latency_recomputed": latency_ok, "memory": memory_ok, "split": split_ok,
              "demand": demand_ok, "power": power_ok, "inventory": inventory_ok, "cost": bool(cost_ok)}
    return Verification(ok=all(checks.values()), max_violation=float(worst), checks=checks, messages=tuple(messages))


def _recount(plan: Plan, catalog: Catalog) -> tuple[float, float, dict[str, int]]:
    """Facility power (kW), $/h and devices by type, from catalog TDPs and prices."""
    by_type: dict[str, int] = defaultdict(int)
    for pool in plan.pools:
        for device, count in pool.devices_by_type.items():
            by_type[device] += count
    power_w = cost = 0.0
    costs = RooflineModel(catalog)
    for device_id, count in by_type.items():
        d = catalog.device(device_id)
        power_w += costs.silicon(d, plan.workload.dtype).replica_power_w(count)
        cost += count * d.price_usd_per_hour
    return plan.workload.constraints.pue * power_w / WATTS_PER_KW, cost, dict(by_type)


def _recompute(pool: Pool, rc: RequestClass, model: ModelProfile, costs: CostModel, dtype: str) -> tuple[bool, bool, float, str]:
    """Latency at the pool's actual utilisation, memory fit and requests/s per replica of a single-device-type pool."""
    silicon = costs.silicon(pool.device, dtype)
    n, b = pool.tp, pool.batch
    context = rc.input_tokens + rc.output_tokens / 2
    new = rc.input_tokens * (1 - rc.prefix_cache_hit)
    room = silicon.kv_room_bytes(model.weights_bytes / n)
    share = float(costs.kv_share(model, silicon, n).reshape(-1)[0])
    weights_fit = model.weights_bytes / n <= silicon.usable_weights_bytes
    if pool.role == "prefill":
        service = float(costs.prefill(model, silicon, n, new, rc.input_tokens - new, prompts=b).total_s.reshape(-1)[0])
        kv = float(model.kv_bytes(rc.input_tokens))
        move = float(transfer_s(kv, n * silicon.nic_bytes_s, silicon.nic_latency_s))
        ttft = float(md1_wait_s(pool.utilization, service)) + service + move
        fits = weights_fit and b * kv * share <= room
        return (ttft <= ms_to_s(rc.slo.ttft_ms) * (1 + REL_TOL), fits, b / service,
                f"prefill on {pool.device}: recomputed TTFT {s_to_ms(ttft):.1f} ms")
    live_kv = float(model.kv_bytes(paged_kv_tokens(rc.input_tokens, rc.output_tokens)))
    fits = weights_fit and b * live_kv * share <= room
    q = float(chunked_prefill_tokens_per_step(b, rc.input_tokens, rc.output_tokens, rc.prefix_cache_hit)) if pool.role == "aggregated" else 0.0
    tpot = float(costs.decode(model, silicon, n, b, context, prefill_tokens=q).total_s.reshape(-1)[0])
    ok = tpot <= ms_to_s(rc.slo.tpot_ms) * (1 + REL_TOL) and abs(s_to_ms(tpot) - pool.tpot_ms) <= 1e-6 * max(1.0, pool.tpot_ms)
    return ok, fits, b / (tpot * rc.output_tokens), f"{pool.role} on {pool.device}: recomputed TPOT {s_to_ms(tpot):.2f} ms vs plan {pool.tpot_ms:.2f} ms"
