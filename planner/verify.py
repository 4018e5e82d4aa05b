"""Recompute every constraint of a Plan from the catalog and the cost model, without the MILP.

Checks: each pool meets its class's SLO (a shared pool every class's it serves), and its strategy's re-check (planner/strategies/) recomputes
its TTFT/TPOT from the cost model at the pool's actual utilisation (and finds the plan's figures), its
batch fitting in memory and its capacity per replica; each pool's devices are recounted from its
parallelism (tp × pp) × replicas (and its partner's); each class's traffic is split completely, over strategies
its task graph (rebuilt from the workload) has, and every pool unit of that graph has the capacity for what it
serves; power, inventory and cost recomputed from those device counts and catalog prices and TDPs are within the
budgets (the cost budget counts what is paid: owned devices are free) and match the plan's totals; with
``whole_nodes`` those counts are whole nodes of each type (the plan's nodes and idle devices are recounted too);
every pool has ``min_replicas_per_pool`` replicas (and partner replicas).
"""

from __future__ import annotations

from collections import defaultdict

from planner import graph as task_graph
from planner.catalog import Catalog
from planner.nodes import nodes_for
from planner.perf.model import RooflineModel
from planner.plan import device_dtypes
from planner.queueing import UTILIZATION_CAP
from planner.schema import Plan, Pool, Verification, strategy_of
from planner.strategies import strategy
from planner.strategies.base import REL_TOL, CandidateOptions, Checking, partner_count, profiles
from planner.units import WATTS_PER_KW


def verify_plan(plan: Plan, catalog: Catalog, options: CandidateOptions = CandidateOptions()) -> Verification:
    """Independent recomputation of a plan's constraints (``options``: the search space it was priced in)."""
    workload = plan.workload
    classes = {rc.name: rc for rc in workload.classes}
    costs = RooflineModel(catalog)
    checking = {d: checking_at(workload.at_dtype(d), options, costs) for d in workload.allowed_dtypes}
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
        for name in {pool.class_name, *(pool.serves or ())}:  # a shared pool meets every SLO it serves
            slo = classes[name].slo
            if pool.ttft_ms is not None:
                slo_ok &= check(pool.ttft_ms <= slo.ttft_ms * (1 + REL_TOL), pool.ttft_ms - slo.ttft_ms,
                                f"{name}/{pool.strategy}/{pool.role} on {pool.device}: TTFT {pool.ttft_ms:.1f} ms > SLO")
            if pool.tpot_ms is not None:  # what a request sees: the step and its wait for a slot, per token
                tpot = pool.tpot_ms + pool.slot_wait_of(name)
                slo_ok &= check(tpot <= slo.tpot_ms * (1 + REL_TOL), tpot - slo.tpot_ms,
                                f"{name}/{pool.strategy}/{pool.role} on {pool.device}: TPOT {pool.tpot_ms:.2f} ms + slot wait "
                                f"{pool.slot_wait_of(name):.2f} ms > SLO")
        if (pool.dtype or workload.dtype) not in checking or (pool.dtype is None) != (not workload.dtypes):
            check(False, 0.0, f"{pool.class_name}/{pool.strategy}/{pool.role} on {pool.device}: dtype {pool.dtype} is not "
                              f"one the workload allows ({', '.join(workload.allowed_dtypes)})")
            latency_ok = False
            continue
        again = strategy(pool.strategy).recheck(pool, rc, checking[pool.dtype or workload.dtype])
        stages = f"×pp{pool.pp}" if pool.pp > 1 else ""
        name = f"{pool.class_name}/{pool.strategy}/{pool.role} on {pool.device}x{pool.tp}{stages}"
        latency_ok &= check(again.latency_ok, 0.0, again.note)
        memory_ok &= check(again.memory_ok, 0.0, f"{name}: batch {pool.batch} does not fit")
        most = pool.replicas * again.replica_rps * (1 + REL_TOL)
        latency_ok &= check(pool.capacity_rps <= most, pool.capacity_rps - most,
                            f"{name}: capacity {pool.capacity_rps:.3f} req/s > {most:.3f} recomputed for "
                            f"{pool.replicas} replicas")

    split_ok = demand_ok = True
    # every pool unit the workload's task graph (rebuilt, not the plan's) gives a (class, strategy) must serve its share
    graph = task_graph.build_task_graph(workload, *profiles(costs, workload))
    served = defaultdict(float)
    for pool in plan.pools:
        for name, rps in pool.served_by_class().items():
            served[(name, pool.route, pool.role)] += rps
        cap = min(pool.utilization_cap, UTILIZATION_CAP)
        utilization = pool.served_rps / pool.capacity_rps if pool.capacity_rps > 0 else float("inf")
        demand_ok &= check(utilization <= cap + REL_TOL, utilization - cap,
                           f"{pool.class_name}/{pool.role} on {pool.device}: utilisation {utilization:.3f} above its cap {cap:.3f}")
        # the utilisation the re-checks price the queues at is the one its traffic gives
        demand_ok &= check(abs(utilization - pool.utilization) <= REL_TOL * max(1.0, utilization), utilization - pool.utilization,
                           f"{pool.class_name}/{pool.role} on {pool.device}: utilisation {pool.utilization:.3f} reported, "
                           f"{utilization:.3f} served")
    for result in plan.classes:
        if plan.goodput_scale > 0:
            total = sum(result.strategy_shares.values())
            split_ok &= check(abs(total - 1.0) < 1e-5, abs(total - 1.0), f"class {result.name}: shares sum to {total}")
            for name, share in result.strategy_shares.items():
                need = classes[result.name].rate_rps * plan.goodput_scale * share
                roles = task_graph.units(graph, result.name, strategy_of(name))
                split_ok &= check(bool(roles), share, f"class {result.name}: a share on {name}, which its task graph has no pools for")
                for role in roles:
                    got = served.get((result.name, name, role), 0.0)
                    # a share within an engine's feasibility tolerance (1e-6 of the class's rate) is none
                    slack = 1e-6 * classes[result.name].rate_rps * plan.goodput_scale
                    demand_ok &= check(got >= need * (1 - 1e-5) - slack, need - got,
                                       f"class {result.name}/{name}/{role}: serves {got:.3f} of {need:.3f} req/s")

    used, count_messages = recount_devices(plan.pools)
    for message in count_messages:
        check(False, 0.0, message)
    count_ok = not count_messages
    by_type, node_messages = recount_nodes(plan, catalog, used)
    for message in node_messages:
        check(False, 0.0, message)
    need = workload.constraints.min_replicas_per_pool
    few = [p for p in plan.pools if p.replicas < need or (p.partner_device is not None and partner_count(p) < need)]
    for p in few:
        check(False, float(need - min(p.replicas, partner_count(p))),
              f"{p.class_name}/{p.strategy}/{p.role} on {p.device}: {p.replicas} replicas"
              + (f" ({partner_count(p)} partner replicas)" if p.partner_device else "") + f" < min_replicas_per_pool {need}")
    power_kw, cost = _price(plan, catalog, by_type, device_dtypes(plan.pools, workload.dtype))
    cons = workload.constraints
    power_ok = check(power_kw <= cons.power_budget_kw * (1 + REL_TOL), power_kw - cons.power_budget_kw,
                     f"power {power_kw:.1f} kW > budget {cons.power_budget_kw} kW")
    power_ok &= check(abs(power_kw - plan.totals.power_kw) <= 1e-6 * max(1.0, power_kw), abs(power_kw - plan.totals.power_kw),
                      f"recounted power {power_kw:.3f} kW differs from the plan's {plan.totals.power_kw:.3f} kW")
    inventory_ok = all(
        check(by_type.get(d, 0) <= limit, by_type.get(d, 0) - limit, f"{d}: {by_type.get(d, 0)} devices > inventory {limit}")
        for d, limit in cons.inventory.items()
    )
    procurable = check(cons.max_device_types is None or len(by_type) <= cons.max_device_types,
                       len(by_type) - (cons.max_device_types or 0),
                       f"{len(by_type)} device types > max_device_types {cons.max_device_types}")
    paid = cost - sum(min(by_type.get(d, 0), k) * catalog.device(d).price_usd_per_hour for d, k in cons.owned.items())
    cost_ok = cons.cost_budget_usd_per_hour is None or check(
        paid <= cons.cost_budget_usd_per_hour * (1 + REL_TOL), paid - cons.cost_budget_usd_per_hour,
        f"cost paid ${paid:.2f}/h (owned devices free) > budget")
    cost_ok = check(abs(cost - plan.totals.cost_usd_per_hour) <= 1e-6 * max(1.0, cost), abs(cost - plan.totals.cost_usd_per_hour),
                    f"recounted cost ${cost:.2f}/h differs from the plan's ${plan.totals.cost_usd_per_hour:.2f}/h") and cost_ok
    count_ok &= check(dict(sorted(by_type.items())) == dict(sorted(plan.totals.devices_by_type.items()))
                      and sum(by_type.values()) == plan.totals.devices, 0.0,
                      f"recounted devices {dict(sorted(by_type.items()))} differ from the plan's totals {plan.totals.devices_by_type}")
    checks = {"slo": slo_ok, "latency_recomputed": latency_ok, "memory": memory_ok, "devices": count_ok, "split": split_ok,
              "demand": demand_ok, "power": power_ok, "inventory": inventory_ok, "cost": bool(cost_ok),
              "procurement": procurable, "whole_nodes": not node_messages, "min_replicas": not few}
    return Verification(ok=all(checks.values()), max_violation=float(worst), checks=checks, messages=tuple(messages))


def checking_at(workload, options: CandidateOptions, costs) -> Checking:
    """What a re-check of a pool at ``workload.dtype`` recomputes with."""
    return Checking(workload, *profiles(costs, workload), options, costs)


def pool_devices(pool: Pool) -> dict[str, int]:
    """Devices of a pool recounted from its shape: ``tp × pp × replicas`` of its device, plus ``partner_tp ×
    partner_replicas`` of a partner on its own devices (a draft server or an expert pool; one per replica
    when the plan gives no partner count)."""
    out = {pool.device: pool.tp * pool.pp * pool.replicas}
    if pool.partner_device is not None and pool.partner_tp is not None:
        out[pool.partner_device] = out.get(pool.partner_device, 0) + pool.partner_tp * partner_count(pool)
    return out


def recount_devices(pools: tuple[Pool, ...]) -> tuple[dict[str, int], list[str]]:
    """Devices by type over ``pools`` recounted from their shapes, and where a pool's reported counts differ."""
    by_type: dict[str, int] = defaultdict(int)
    messages = []
    for pool in pools:
        counted = pool_devices(pool)
        for device, count in counted.items():
            by_type[device] += count
        if counted != pool.devices_by_type or sum(counted.values()) != pool.devices:
            messages.append(f"{pool.class_name}/{pool.strategy}/{pool.role} on {pool.device}: reports "
                            f"{pool.devices} devices {pool.devices_by_type}, its shape makes {counted}")
    return dict(by_type), messages


def recount_nodes(plan: Plan, catalog: Catalog, used: dict[str, int]) -> tuple[dict[str, int], list[str]]:
    """The fleet bought for ``used`` devices by type (with ``whole_nodes``: whole nodes of each type's
    ``devices_per_node``, the rest of the last node idle), and where the plan's nodes, idle devices or whole-node
    totals differ from that."""
    whole = plan.workload.constraints.whole_nodes
    size = {d: catalog.device(d).devices_per_node for d in used}
    nodes = {d: nodes_for(k, size[d]) for d, k in sorted(used.items())}
    bought = {d: nodes[d] * size[d] if whole else k for d, k in sorted(used.items())}
    idle = {d: bought[d] - k for d, k in used.items() if bought[d] > k}
    t = plan.totals
    messages = []
    if (whole or t.nodes_by_type) and dict(sorted(t.nodes_by_type.items())) != nodes:
        messages.append(f"the plan's nodes {dict(sorted(t.nodes_by_type.items()))} differ from the {nodes} its pools' "
                        f"devices occupy")
    if dict(sorted(t.idle_devices_by_type.items())) != dict(sorted(idle.items())):
        messages.append(f"the plan's idle devices {t.idle_devices_by_type} differ from the {idle} its nodes leave idle")
    if whole:
        partial = {d: k for d, k in t.devices_by_type.items() if d in size and k % size[d]}
        if partial:
            messages.append(f"whole_nodes: the plan buys {partial} devices, not whole nodes of "
                            f"{ {d: size[d] for d in partial} }")
    return bought, messages


def _price(plan: Plan, catalog: Catalog, by_type: dict[str, int], dtypes: dict[str, str]) -> tuple[float, float]:
    """Facility power (kW) and $/h of ``by_type`` devices, from catalog TDPs and prices (each device type at a dtype
    a pool runs it at, ``dtypes``)."""
    power_w = cost = 0.0
    costs = RooflineModel(catalog)
    for device_id, count in by_type.items():
        d = catalog.device(device_id)
        power_w += costs.silicon(d, dtypes.get(device_id, plan.workload.dtype)).replica_power_w(count)
        cost += count * d.price_usd_per_hour
    return plan.workload.constraints.pue * power_w / WATTS_PER_KW, cost
