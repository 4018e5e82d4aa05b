"""SLO-feasible replica configurations: the columns of the MILP.

For every (class, strategy, pool unit) the strategy's module (planner/strategies/) prices each device
[, partner device] and parallelism over all batch sizes at once, keeping the batch that gives the most
SLO-feasible capacity (throughput grows with batch while power does not, so smaller feasible batches
are dominated); candidates that another candidate beats on every count are then pruned. Capacity is in
requests per second per replica; ``utilization_cap`` is how much of it the queueing approximation
(queueing.py) allows.
"""

from __future__ import annotations

from dataclasses import replace

import networkx as nx
import numpy as np

from planner.catalog import Catalog
from planner.graph import build_task_graph, strategies_of, units
from planner.perf.model import CostModel, RooflineModel, Silicon, UnsupportedDtype
from planner.schema import STRATEGIES, Workload
from planner.strategies import strategy
from planner.strategies.base import Candidate, CandidateOptions, Pricing, profiles  # noqa: F401  (the candidate types)


#: candidates compared at once against all others when pruning (bounds the comparison arrays' memory)
PRUNE_BLOCK = 128


class StrategyError(ValueError):
    """A serving strategy the workload's model cannot use."""


def generate_candidates(workload: Workload, catalog: Catalog, graph: nx.DiGraph,
                        options: CandidateOptions = CandidateOptions(),
                        costs: CostModel | None = None) -> tuple[list[Candidate], list[str]]:
    """All non-dominated SLO-feasible candidates, and notes on devices that were skipped. With several allowed
    weights dtypes (``Workload.dtypes``) each is priced apart, its candidates marked with it.

    Raises StrategyError (bad input) when the workload allows a strategy its model cannot use.
    """
    costs = costs or RooflineModel(catalog)
    candidates: list[Candidate] = []
    notes: list[str] = []
    for dtype in workload.allowed_dtypes:
        view = workload.at_dtype(dtype)
        model, draft = profiles(costs, view)
        unusable = [s for s in view.strategies if not strategy(s).applies(model)]
        if unusable:
            raise StrategyError(f"strategies: {', '.join(unusable)} needs an MoE model ({view.model} is dense); "
                                f"allowed for it: {', '.join(s for s in STRATEGIES if strategy(s).applies(model))}")
        silicon, skipped = _silicon(view, catalog, costs)
        notes.extend(skipped)
        at = graph if dtype == workload.dtype else build_task_graph(view, model, draft)  # KV sizes follow the dtype
        priced = _priced(view, Pricing(view, model, draft, silicon, at, options, costs))
        candidates.extend(priced if not workload.dtypes else [replace(c, dtype=dtype) for c in priced])
    return candidates, notes


def _priced(workload: Workload, ctx: Pricing) -> list[Candidate]:
    """The candidates of every (class, strategy, pool unit) of ``ctx``'s graph, and shared ones when allowed."""
    out: list[Candidate] = []
    for rc in sorted(workload.classes, key=lambda c: c.name):
        for name in strategies_of(ctx.graph, rc.name):
            for unit in units(ctx.graph, rc.name, name):
                out.extend(prune_dominated(strategy(name).price(unit, ctx, rc), workload))
    if workload.shared_pools:  # the strategies whose pools may serve several classes
        for name in workload.strategies:
            if hasattr(strategy(name), "price_shared"):
                out.extend(strategy(name).price_shared(ctx))
    return out


def _silicon(workload: Workload, catalog: Catalog, costs: CostModel) -> tuple[list[Silicon], list[str]]:
    allowed = workload.constraints.devices or tuple(catalog.devices)
    out, notes = [], []
    for device_id in allowed:
        if workload.constraints.inventory.get(device_id, 1) == 0:
            notes.append(f"{device_id}: inventory 0")
            continue
        try:
            out.append(costs.silicon(device_id, workload.dtype))
        except UnsupportedDtype as exc:
            notes.append(str(exc))
    return out, notes


def prune_dominated(candidates: list[Candidate], workload: Workload, across_types: bool = False) -> list[Candidate]:
    """Drop a candidate when whole copies of another of the same pool unit do at least as well on every count
    the MILP sees.

    A dominates B when ``q = ⌈cap_B / cap_A⌉`` replicas of A have at least B's usable capacity while using no
    more of every resource the model constrains or prices: power always; the $/h paid (owned devices free) when
    the objective is min_cost or fixed_footprint or a cost budget is set; devices of each type that has an
    inventory or is owned (beyond the owned count they are paid for), of every type with ``whole_nodes`` (a fleet's
    nodes follow its device counts, not its power, once a replica mixes types). Swapping each B replica for q A
    replicas then keeps every constraint and never worsens the objective, so B is never needed (q = 1 is the
    usual dominance; q > 1 prunes a big group, e.g. many targets sharing one draft server, that small ones
    beat). A must also use only device types B uses, so every single-device-type fleet keeps its own best
    candidates (the homogeneous baselines are solved over subsets of this list), unless ``across_types`` (a solve
    that no such subset follows: decompose.py's class MILPs). Exact ties keep the smaller
    key. The relation is transitive (q's multiply) and has no cycles, so every pruned candidate has a kept
    dominator, and a candidate is pruned exactly when any other dominates it.
    """
    if len(candidates) < 2:
        return list(candidates)
    if len(candidates) > PRUNE_BLOCK:  # exact in two levels: within each target shape, then across them
        groups: dict[tuple[str, int, int], list[Candidate]] = {}
        for c in candidates:
            groups.setdefault((c.device, c.tp, c.pp), []).append(c)
        if len(groups) > 1:
            candidates = [c for group in groups.values() for c in _undominated(group, workload, across_types)]
    return _undominated(candidates, workload, across_types)


def _undominated(candidates: list[Candidate], workload: Workload, across_types: bool = False) -> list[Candidate]:
    """The candidates no other one of the list dominates (``prune_dominated``'s relation)."""
    cons = workload.constraints
    priced = workload.objective in ("min_cost", "fixed_footprint") or cons.cost_budget_usd_per_hour is not None
    counted = sorted(set(cons.inventory) | set(cons.owned)  # owned devices: free up to the owned count
                     | ({t for c in candidates for t in c.devices_by_type} if cons.whole_nodes else set()))
    capacity = np.array([c.effective_rps for c in candidates])
    costs = np.array([[c.power_w] + ([c.paid_usd_per_hour(cons.owned)] if priced else [])
                      + [c.devices_by_type.get(t, 0) for t in counted] for c in candidates], dtype=float)
    keys = [c.key for c in candidates]
    rank = np.empty(len(candidates), dtype=int)
    rank[sorted(range(len(candidates)), key=keys.__getitem__)] = np.arange(len(candidates))
    uses = None if across_types else _type_bits(candidates)
    dominated = np.zeros(len(candidates), dtype=bool)
    for start in range(0, len(candidates), PRUNE_BLOCK):  # B (rows) against every A (columns)
        rows = np.arange(start, min(start + PRUNE_BLOCK, len(candidates)))
        q = np.ceil(capacity[rows, None] / capacity[None, :] * (1 - 1e-12))
        scaled = q[:, :, None] * costs[None, :, :]
        no_worse = np.all(scaled <= costs[rows, None, :], axis=2)
        if not across_types:
            no_worse &= np.all((uses[None, :, :] & ~uses[rows, None, :]) == 0, axis=2)  # A's types ⊆ B's
        strictly = (q * capacity[None, :] > capacity[rows, None] * (1 + 1e-12)) | np.any(scaled < costs[rows, None, :], axis=2)
        beats = no_worse & (strictly | (rank[None, :] < rank[rows, None]))
        beats[np.arange(len(rows)), rows] = False
        dominated[rows] = beats.any(axis=1)
    return [c for c, out in zip(candidates, dominated) if not out]


def _type_bits(candidates: list[Candidate]) -> np.ndarray:
    """The device types each candidate uses, as bit sets (rows of 64-bit words)."""
    types = {t: i for i, t in enumerate(sorted({t for c in candidates for t in c.devices_by_type}))}
    bits = np.zeros((len(candidates), max(1, -(-len(types) // 64))), dtype=np.uint64)
    for row, c in enumerate(candidates):
        for t in c.devices_by_type:
            bits[row, types[t] // 64] |= np.uint64(1) << np.uint64(types[t] % 64)
    return bits
