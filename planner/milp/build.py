r"""The placement MILP, built once from the candidates and solved by any backend.

Sets: classes k, strategies s allowed for k, pool units u of (k, s) (from the task graph),
candidates c of (k, s, u), device types d.

Data: rate_k (req/s), cap_c (req/s per replica), ρ_c (utilisation cap), P_c (IT W per replica),
$_c ($/h per replica), N_{c,d} (devices of type d per replica), PUE, budgets.

Variables: n_c ∈ ℤ≥0 replicas of candidate c; z_{k,s} ≥ 0 traffic of class k through strategy s,
in units of rate_k; λ ≥ 0 the uniform goodput scale.

    (1) split        Σ_s z_{k,s} = λ                                     ∀ k
    (2) demand       Σ_{c ∈ (k,s,u)} ρ_c · cap_c · n_c ≥ rate_k · z_{k,s}   ∀ k, s, u
    (3) power        PUE · Σ_c P_c · n_c ≤ 1000 · budget_kW
    (4) inventory    Σ_c N_{c,d} · n_c ≤ inventory_d                      ∀ d with an inventory
    (5) cost         Σ_c $_c · n_c ≤ budget_$/h                           (when a cost budget is set)
    (6) scale        λ = 1 for min_cost and min_power
    (9) owned        Σ_c N_{c,d} · n_c − b_d ≤ owned_d,  b_d ≥ 0              ∀ owned type d
    (10) shared      a shared replica c (prefill, decode or aggregated for several classes) splits into x_{c,k}
                     replica-equivalents per class, within n_c, its tier's TPOT, its NICs and its prompt server
                     (add_shared); class k's demand row counts
                     ρ_c · slots_{c,k} · x_{c,k}, and those shares carry no more than k's traffic there
    (7) types        n_c ≤ U_c · y_d  ∀ c, d ∈ c;  Σ_d y_d ≤ max_device_types   (y_d ∈ {0,1}, when set)
    (8) other mix    Σ_{d∈S} (1 − y_d) + Σ_{d∉S} y_d ≥ 1  for each excluded device-type set S (alternatives),
                     with y_d ≤ Σ_{c ∋ d} n_c so that y_d = 1 means type d is used
    (10) whole nodes Σ_c N_{c,d} · n_c + w_d = s_d · m_d,  m_d ∈ ℤ≥0,  0 ≤ w_d ≤ s_d − 1   ∀ d with s_d > 1
                     (when whole_nodes; s_d devices per node, w_d the idle devices of type d's nodes). The idle
                     devices are charged like used ones: + PUE · P_d · w_d in (3) and the power objective
                     (P_d = TDP + node overhead / s_d, so a node draws s_d · TDP + overhead), + w_d in (4) and (9),
                     + $_d · w_d in (5) and the money paid for a type not owned
    (11) min replicas n_c ≥ N · u_c,  n_c ≤ U_c · u_c,  u_c ∈ {0,1}   ∀ c  (when N = min_replicas_per_pool > 1)

U_c bounds n_c: the replicas of c the power budget (and the inventory of its device types) could hold.

Owned devices are free: the money a plan pays is ``$'_c n_c + Σ_d price_d · b_d``, with ``$'_c`` the $/h of c's
devices of types not owned and b_d the devices of owned type d bought beyond the owned ones; it replaces
Σ $_c n_c in (5) and in the cost objectives.

Objectives: max λ (then a second solve: min power with λ ≥ λ*); fixed_footprint: max λ, then the least money
paid for additions at λ*; min money paid; min PUE Σ P_c n_c.

DESIGN.md's replica-equivalents y are the x of (10), for shared replicas only: every other candidate serves
exactly one (class, strategy, unit), so y = n at the optimum and the utilisation cap folds into (2). Transfer edges of the task graph
bound each candidate's capacity (its NICs carry its own KV and activations), so they enter through cap_c.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from planner.candidates import Candidate
from planner.milp.model import IlpModel, ModelBuilder
from planner.nodes import per_device_of
from planner.schema import GOODPUT_OBJECTIVES, Workload
from planner.units import WATTS_PER_KW, s_to_ms


@dataclass(frozen=True)
class BuildOptions:
    """Which objective to build, and optional overrides used by baselines and diagnoses."""

    objective: str = "max_goodput"  # max_goodput | min_cost | min_power | fixed_footprint
    min_scale: float | None = None  # λ ≥ min_scale (second stage of max_goodput and fixed_footprint)
    elastic: bool = False  # slack on power, inventory and cost rows, penalised (infeasibility diagnosis)
    #: device-type sets a solution may not use exactly (``--alternatives``: the mixes already found)
    exclude_mixes: tuple[frozenset[str], ...] = ()


ELASTIC_PENALTY = {"power": 1.0, "inventory": 1e3, "cost": 1e-3}


def build_model(workload: Workload, units: dict[tuple[str, str], list[str]], candidates: list[Candidate],
                options: BuildOptions = BuildOptions()) -> IlpModel:
    """The MILP over ``candidates`` for ``workload``; ``units`` lists the pool units of each (class, strategy)
    of the task graph, so a unit without candidates forces its strategy's traffic to zero."""
    b = ModelBuilder()
    pue = workload.constraints.pue
    paid = paid_costs(workload, candidates)
    n = b.add_block("n", [c.key for c in candidates], integer=True, objective=_replica_costs(candidates, paid, pue, options))
    pairs = sorted(units)
    z = dict(zip(pairs, b.add_block("z", [f"{k}/{s}" for k, s in pairs])))
    maximise = options.objective in GOODPUT_OBJECTIVES and options.min_scale is None and not options.elastic
    (scale,) = b.add_block("scale", ["lambda"], objective=[-1.0 if maximise else 0.0])
    add_split(b, workload, z, scale)
    add_demand(b, workload, units, candidates, n, z)
    add_power(b, workload, candidates, n, options)
    add_inventory(b, workload, candidates, n, options)
    bought = add_owned(b, workload, candidates, n, pays(options))
    add_cost(b, workload, paid, n, bought, options)
    add_scale(b, scale, options)
    add_device_types(b, workload, candidates, n, options.exclude_mixes)
    add_whole_nodes(b, workload, candidates, n, options)
    add_min_replicas(b, workload, candidates, n, options)
    return b.build()


def pays(options: BuildOptions) -> bool:
    """Whether the objective is the money paid: min_cost, and fixed_footprint's second stage."""
    return not options.elastic and (options.objective == "min_cost"
                                    or (options.objective == "fixed_footprint" and options.min_scale is not None))


def minimises_power(options: BuildOptions) -> bool:
    """Whether the objective is facility power: min_power, and max_goodput's second stage."""
    return not options.elastic and not pays(options) and (options.objective == "min_power" or options.min_scale is not None)


def _replica_costs(candidates: list[Candidate], paid: list[float], pue: float, options: BuildOptions) -> list[float]:
    if pays(options):
        return list(paid)
    if minimises_power(options):
        return [pue * c.power_w / WATTS_PER_KW for c in candidates]
    return [0.0] * len(candidates)


def paid_costs(workload: Workload, candidates: list[Candidate]) -> list[float]:
    """``$'_c``: the $/h of each candidate's devices of types the workload does not own."""
    return [c.paid_usd_per_hour(workload.constraints.owned) for c in candidates]


def add_owned(b: ModelBuilder, workload: Workload, candidates: list[Candidate], n: list[int],
              in_objective: bool) -> list[tuple[int, float]]:
    """(9) devices of each owned type beyond the owned ones, b_d (``bought``); returns (column, $/h each)."""
    out = []
    for device, count in sorted(workload.constraints.owned.items()):
        users = [(j, c) for c, j in zip(candidates, n) if device in c.devices_by_type]
        if not users:
            continue
        price = next(c.price_by_type[device] for _, c in users)
        (bought,) = b.add_block(f"bought_{device}", ["devices"], objective=[price if in_objective else 0.0])
        b.add_row(f"owned:{device}", [j for j, _ in users] + [bought],
                  [float(c.devices_by_type[device]) for _, c in users] + [-1.0], hi=float(count))
        out.append((bought, price))
    return out


def add_split(b: ModelBuilder, workload: Workload, z: dict, scale: int) -> None:
    """(1) every class's traffic is split across its strategies: Σ_s z_{k,s} = λ."""
    by_class = defaultdict(list)
    for (k, _), j in z.items():
        by_class[k].append(j)
    for rc in workload.classes:
        cols = by_class.get(rc.name, [])
        b.add_row(f"split:{rc.name}", cols + [scale], [1.0] * len(cols) + [-1.0], lo=0.0, hi=0.0)


def add_demand(b: ModelBuilder, workload: Workload, units: dict, candidates: list[Candidate], n: list[int], z: dict) -> None:
    """(2) each pool unit of each (class, strategy) has the capacity its traffic needs: its own replicas' and its
    shares of shared replicas'."""
    rate = {rc.name: rc.rate_rps for rc in workload.classes}
    shared = add_shared(b, candidates, n)
    groups = defaultdict(list, {unit: list(cols) for unit, cols in shared.items()})
    for c, j in zip(candidates, n):
        if not c.mix:
            groups[(c.class_name, c.route, c.role)].append((j, c.effective_rps))
    for (k, s, u), cols in sorted(shared.items()):  # real traffic only: no idle share may pad a mix's step
        j_z = z.get((k, s))
        if j_z is not None:
            b.add_row(f"shared:{k}/{s}/{u}", [j for j, _ in cols] + [j_z], [v for _, v in cols] + [-rate[k]], hi=0.0)
    for (k, s), j_z in z.items():
        for u in units[(k, s)]:
            cols = [j for j, _ in groups[(k, s, u)]]
            vals = [cap for _, cap in groups[(k, s, u)]]
            b.add_row(f"demand:{k}/{s}/{u}", cols + [j_z], vals + [-rate[k]], lo=0.0)


def add_shared(b: ModelBuilder, candidates: list[Candidate], n: list[int]) -> defaultdict:
    """(10) shared replicas: x_{c,k} ≥ 0 replica-equivalents of shared candidate c carrying class k, with

        share     Σ_k x_{c,k} ≤ n_c
        tier      Σ_k x_{c,k} (1 − T_c / τ_{c,k}) ≤ 0          (the mix's step within the candidate's bound T_c: its tier's TPOT less the slot wait)
        network   Σ_k x_{c,k} · slots_{c,k} / net_{c,k} ≤ n_c   (the KV hand-offs within its NICs)
        prompts   Σ_k x_{c,k} · slots_{c,k} / pr_{c,k} ≤ n_c    (an aggregated replica's chunked prefill: every
                                                               prompt at the tier's longest service S = 1 / pr)

    and ``ρ_c · slots_{c,k} · x_{c,k}`` requests/s of class k's decode unit (add_demand: within that unit's
    traffic, so no idle share pads the mix). Returns those columns by unit ((class, strategy, role) →
    [(column, req/s per unit)])."""
    groups: defaultdict = defaultdict(list)
    shared = [(c, j) for c, j in zip(candidates, n) if c.mix]
    if not shared:
        return groups
    x = iter(b.add_block("x", [f"{c.key}>{load.class_name}" for c, _ in shared for load in c.mix]))
    for c, j in shared:
        cols = [next(x) for _ in c.mix]
        for col, load in zip(cols, c.mix):
            groups[(load.class_name, c.route, c.role)].append((col, c.utilization_cap * load.capacity_rps))
        b.add_row(f"share:{c.key}", cols + [j], [1.0] * len(cols) + [-1.0], hi=0.0)
        tier = [1.0 - c.tpot_ms / s_to_ms(load.step_s) for load in c.mix] if c.role != "prefill" else [0.0]
        if max(tier) > 0:  # a shared prefill replica counts every request at its tier's longest service
            b.add_row(f"tier:{c.key}", cols, tier, hi=0.0)
        for family, limits in (("network", [load.network_rps for load in c.mix]), ("prompts", [load.prompt_rps for load in c.mix])):
            weights = [load.capacity_rps / limit for load, limit in zip(c.mix, limits)]
            if max(weights) > 1:  # below 1 the share row implies it
                b.add_row(f"{family}:{c.key}", cols + [j], weights + [-1.0], hi=0.0)
    return groups


def add_power(b: ModelBuilder, workload: Workload, candidates: list[Candidate], n: list[int], options: BuildOptions) -> None:
    """(3) facility power within the budget: PUE · Σ P_c n_c ≤ budget."""
    pue = workload.constraints.pue
    cols, vals = list(n), [pue * c.power_w / WATTS_PER_KW for c in candidates]
    if options.elastic:
        (slack,) = b.add_block("slack_power", ["kw"], objective=[ELASTIC_PENALTY["power"]])
        cols, vals = cols + [slack], vals + [-1.0]
    b.add_row("power", cols, vals, hi=workload.constraints.power_budget_kw)


def add_inventory(b: ModelBuilder, workload: Workload, candidates: list[Candidate], n: list[int], options: BuildOptions) -> None:
    """(4) devices of each type within the inventory."""
    for device, limit in sorted(workload.constraints.inventory.items()):
        cols = [j for c, j in zip(candidates, n) if c.devices_by_type.get(device)]
        vals = [float(c.devices_by_type[device]) for c in candidates if c.devices_by_type.get(device)]
        if options.elastic:
            (slack,) = b.add_block(f"slack_inventory_{device}", ["devices"], objective=[ELASTIC_PENALTY["inventory"]])
            cols, vals = cols + [slack], vals + [-1.0]
        if cols:
            b.add_row(f"inventory:{device}", cols, vals, hi=float(limit))


def add_cost(b: ModelBuilder, workload: Workload, paid: list[float], n: list[int], bought: list[tuple[int, float]],
             options: BuildOptions) -> None:
    """(5) the hourly money paid within the budget, when one is set (owned devices are free)."""
    budget = workload.constraints.cost_budget_usd_per_hour
    if budget is None:
        return
    cols, vals = list(n) + [j for j, _ in bought], list(paid) + [price for _, price in bought]
    if options.elastic:
        (slack,) = b.add_block("slack_cost", ["usd_per_hour"], objective=[ELASTIC_PENALTY["cost"]])
        cols, vals = cols + [slack], vals + [-1.0]
    b.add_row("cost", cols, vals, hi=budget)


def replica_bound(workload: Workload, c: Candidate) -> float:
    """U_c: the most replicas of ``c`` the power budget holds, and the inventory of each of its device types."""
    cons = workload.constraints
    most = np.floor(cons.power_budget_kw * WATTS_PER_KW / (cons.pue * c.power_w) * (1 + 1e-9))  # 2.9999999 is 3
    for device, count in c.devices_by_type.items():
        if device in cons.inventory:
            most = min(most, cons.inventory[device] // count)
    return float(most)


def add_device_types(b: ModelBuilder, workload: Workload, candidates: list[Candidate], n: list[int],
                     exclude: tuple[frozenset[str], ...] = ()) -> None:
    """(7) at most ``max_device_types`` device types and (8) none of the ``exclude`` mixes: y_d opens type d
    for every candidate that uses it (built only when either applies)."""
    limit = workload.constraints.max_device_types
    types = sorted({d for c in candidates for d in c.devices_by_type})
    limited = limit is not None and limit < len(types)
    if not limited and not exclude:
        return
    y = dict(zip(types, b.add_block("use_type", types, ub=1.0, integer=True)))
    for c, j in zip(candidates, n):
        for device in c.devices_by_type:
            b.add_row(f"types:{c.key}:{device}", [j, y[device]], [1.0, -replica_bound(workload, c)], hi=0.0)
    if limited:
        b.add_row("types", list(y.values()), [1.0] * len(y), hi=float(limit))
    if exclude:  # y_d only where type d is used: y_d ≤ Σ_{c ∋ d} n_c
        for device, k in y.items():
            users = [j for c, j in zip(candidates, n) if device in c.devices_by_type]
            b.add_row(f"used:{device}", [k] + users, [1.0] + [-1.0] * len(users), hi=0.0)
    for i, mix in enumerate(exclude):  # Σ_{d∈S} −y_d + Σ_{d∉S} y_d ≥ 1 − |S|
        b.add_row(f"other_mix:{i}", list(y.values()), [-1.0 if d in mix else 1.0 for d in y], lo=1.0 - len(mix & set(y)))


def add_scale(b: ModelBuilder, scale: int, options: BuildOptions) -> None:
    """(6) λ fixed to 1 (min_cost, min_power, elastic) or bounded below (second stage of a goodput objective)."""
    if options.objective not in GOODPUT_OBJECTIVES or options.elastic:
        b.set_bounds(scale, 1.0, 1.0)
    elif options.min_scale is not None:
        b.set_bounds(scale, options.min_scale, np.inf)


def add_whole_nodes(b: ModelBuilder, workload: Workload, candidates: list[Candidate], n: list[int],
                    options: BuildOptions) -> None:
    """(10) every device type bought in whole nodes (``whole_nodes``): m_d nodes hold the devices the replicas use
    and w_d idle ones, which draw power, count against inventory and the owned fleet, and are paid for."""
    cons = workload.constraints
    if not cons.whole_nodes:
        return
    per_device = per_device_of(candidates)
    types = sorted(d for d, unit in per_device.items() if unit.node_size > 1)
    if not types:
        return
    kw = {d: cons.pue * per_device[d].power_w / WATTS_PER_KW for d in types}
    paid = {d: 0.0 if d in cons.owned else per_device[d].price_usd_per_hour for d in types}
    weight = paid if pays(options) else kw if minimises_power(options) else dict.fromkeys(types, 0.0)
    nodes = b.add_block("nodes", types, integer=True)
    idle = b.add_block("idle", types, objective=[weight[d] for d in types])
    for d, m, w in zip(types, nodes, idle):
        size = per_device[d].node_size
        b.set_bounds(w, 0.0, float(size - 1))  # a whole idle node is never needed
        users = [(j, float(c.devices_by_type[d])) for c, j in zip(candidates, n) if d in c.devices_by_type]
        b.add_row(f"nodes:{d}", [j for j, _ in users] + [w, m], [v for _, v in users] + [1.0, -float(size)], lo=0.0, hi=0.0)
        b.extend_row("power", [w], [kw[d]])
        for row in (f"inventory:{d}", f"owned:{d}"):
            if b.has_row(row):
                b.extend_row(row, [w], [1.0])
        if b.has_row("cost") and paid[d]:
            b.extend_row("cost", [w], [paid[d]])


def add_min_replicas(b: ModelBuilder, workload: Workload, candidates: list[Candidate], n: list[int],
                     options: BuildOptions) -> None:
    """(11) a candidate in use has at least N = ``min_replicas_per_pool`` replicas: u_c opens it (n_c ≥ N·u_c) and
    bounds it (n_c ≤ U_c·u_c; an elastic model, which may exceed the power budget, bounds n_c by the demand instead)."""
    need = workload.constraints.min_replicas_per_pool
    if need <= 1:
        return
    used = b.add_block("pool_used", [c.key for c in candidates], ub=1.0, integer=True)
    total_rps = sum(rc.rate_rps for rc in workload.classes)
    for c, j, u in zip(candidates, n, used):
        most = max(need, np.ceil(total_rps / c.effective_rps)) if options.elastic else replica_bound(workload, c)
        b.add_row(f"min_replicas:{c.key}", [j, u], [1.0, -float(need)], lo=0.0)
        b.add_row(f"max_replicas:{c.key}", [j, u], [1.0, -float(most)], hi=0.0)


def completed_point(model: IlpModel, x: np.ndarray) -> np.ndarray:
    """``x`` with the columns its replicas decide: each candidate in use raised to the minimum replicas with its u_c
    set (11), then each type's nodes and idle devices (10) for the replicas (``m_d = ⌈used / s_d⌉``)."""
    x = np.array(x, dtype=float)
    n = model.blocks["n"]
    if "pool_used" in model.blocks:
        row = model.row_names.index(f"min_replicas:{model.var_names[n.start].split(':', 1)[1]}")
        cols, vals = model.rows_of(row)
        need = -float(vals[cols != n.start][0])
        replicas = np.round(x[n])
        in_use = replicas > 0
        x[n] = np.where(in_use, np.maximum(replicas, need), 0.0)
        x[model.blocks["pool_used"]] = in_use
    if "nodes" in model.blocks:
        nodes, idle = model.blocks["nodes"], model.blocks["idle"]
        x[nodes], x[idle] = 0.0, 0.0
        activity = model.activity(x)
        for m, w in zip(range(nodes.start, nodes.stop), range(idle.start, idle.stop)):
            size = model.var_ub[w] + 1.0
            devices = activity[model.row_names.index(f"nodes:{model.var_names[m].split(':', 1)[1]}")]
            x[m] = np.ceil(devices / size - 1e-9)
            x[w] = x[m] * size - devices
    return x
