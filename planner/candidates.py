"""SLO-feasible replica configurations: the columns of the MILP.

For every (class, strategy, pool unit) the strategy's module (planner/strategies/) prices each device
[, partner device] and parallelism over all batch sizes at once, keeping the batch that gives the most
SLO-feasible capacity (throughput grows with batch while power does not, so smaller feasible batches
are dominated); candidates that another candidate beats on every count are then pruned. Capacity is in
requests per second per replica; ``utilization_cap`` is how much of it the queueing approximation
(queueing.py) allows.
"""

from __future__ import annotations

import networkx as nx
import numpy as np

from planner.catalog import Catalog
from planner.graph import strategies_of, units
from planner.perf.model import CostModel, RooflineModel, Silicon, UnsupportedDtype
from planner.schema import STRATEGIES, Workload
from planner.strategies import strategy
from planner.strategies.base import Candidate, CandidateOptions, Pricing  # noqa: F401  (the candidate types)


class StrategyError(ValueError):
    """A serving strategy the workload's model cannot use."""


def generate_candidates(workload: Workload, catalog: Catalog, graph: nx.DiGraph,
                        options: CandidateOptions = CandidateOptions(),
                        costs: CostModel | None = None) -> tuple[list[Candidate], list[str]]:
    """All non-dominated SLO-feasible candidates, and notes on devices that were skipped.

    Raises StrategyError (bad input) when the workload allows a strategy its model cannot use.
    """
    costs = costs or RooflineModel(catalog)
    model = costs.profile(workload.model, workload.dtype, workload.kv_dtype)
    unusable = [s for s in workload.strategies if not strategy(s).applies(model)]
    if unusable:
        raise StrategyError(f"strategies: {', '.join(unusable)} needs an MoE model ({workload.model} is dense); "
                            f"allowed for it: {', '.join(s for s in STRATEGIES if strategy(s).applies(model))}")
    draft = None
    if workload.spec_decode is not None:
        draft = costs.profile(workload.spec_decode.draft_model, workload.dtype, workload.kv_dtype)
    silicon, notes = _silicon(workload, catalog, costs)
    ctx = Pricing(workload, model, draft, silicon, graph, options, costs)
    candidates: list[Candidate] = []
    for rc in sorted(workload.classes, key=lambda c: c.name):
        for name in strategies_of(graph, rc.name):
            for unit in units(graph, rc.name, name):
                candidates.extend(prune_dominated(strategy(name).price(unit, ctx, rc), workload))
    return candidates, notes


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


def prune_dominated(candidates: list[Candidate], workload: Workload) -> list[Candidate]:
    """Drop a candidate when another of the same pool unit is at least as good on every count the MILP sees.

    A dominates B when A has at least B's usable capacity while using no more of every resource the
    model constrains or prices: power always; $/h when the objective is min_cost or a cost budget is
    set; devices of each type that has an inventory. Swapping each B replica for an A replica then keeps
    every constraint and never worsens the objective, so B is never needed. Exact ties keep the smaller key.
    A must also use only device types B uses, so every single-device-type fleet keeps its own best
    candidates (the homogeneous baselines are solved over subsets of this list).
    """
    if len(candidates) < 2:
        return list(candidates)
    cons = workload.constraints
    priced = workload.objective == "min_cost" or cons.cost_budget_usd_per_hour is not None
    counted = sorted(cons.inventory)
    capacity = np.array([c.effective_rps for c in candidates])
    costs = np.array([[c.power_w] + ([c.cost_usd_per_hour] if priced else [])
                      + [c.devices_by_type.get(t, 0) for t in counted] for c in candidates], dtype=float)
    keys = [c.key for c in candidates]
    all_types = sorted({t for c in candidates for t in c.devices_by_type})
    uses = np.array([[t in c.devices_by_type for t in all_types] for c in candidates])
    # Sweep in an order where every dominator comes before what it dominates (capacity down, then the
    # costs and the key up): a candidate survives iff no earlier survivor dominates it, since
    # dominance is transitive. O(n · survivors) instead of O(n²).
    order = sorted(range(len(candidates)), key=lambda i: (-capacity[i], *costs[i], keys[i]))
    rank = np.empty(len(candidates), dtype=int)
    rank[sorted(range(len(candidates)), key=keys.__getitem__)] = np.arange(len(candidates))
    kept: list[int] = []
    for i in order:
        if kept:
            k = np.asarray(kept)
            subset = np.all(~uses[k] | uses[i], axis=1)  # the survivor's types ⊆ this one's
            no_worse = subset & (capacity[k] >= capacity[i]) & np.all(costs[k] <= costs[i], axis=1)
            strictly = (capacity[k] > capacity[i]) | np.any(costs[k] < costs[i], axis=1)
            if np.any(no_worse & (strictly | (rank[k] < rank[i]))):
                continue
        kept.append(i)
    survivors = set(kept)
    return [c for i, c in enumerate(candidates) if i in survivors]
