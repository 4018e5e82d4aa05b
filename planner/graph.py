"""Decompose a workload into a task graph: one subgraph per request class x serving strategy.

Nodes are tasks with the work one request brings them; a node's ``unit`` names the pool that runs
it (draft and verify form one decode unit; so do attention and FFN). Edges are transfers with the
bytes and the number of transfers one request causes. Each strategy module adds its own subgraph
(planner/strategies/). The MILP reads demand per unit from the nodes; candidate generation reads
transfer sizes from the edges. Node and edge order is deterministic (sorted), so the graph
serialises identically run after run.
"""

from __future__ import annotations

import networkx as nx

from planner.perf.model import ModelProfile
from planner.schema import Workload
from planner.strategies import strategy
from planner.strategies.base import edge_bytes  # noqa: F401  (a graph query, re-exported)


def build_task_graph(workload: Workload, model: ModelProfile, draft: ModelProfile | None) -> nx.DiGraph:
    """The task graph of every (class, strategy) the workload allows and its model can use."""
    graph = nx.DiGraph(model=workload.model)
    for request_class in sorted(workload.classes, key=lambda c: c.name):
        for name in sorted(workload.strategies):
            module = strategy(name)
            if module.applies(model):
                module.add_tasks(graph, request_class, model, draft, workload.spec_decode)
    return graph


def units(graph: nx.DiGraph, class_name: str, strategy: str) -> list[str]:
    """Pool units of one (class, strategy) subgraph, sorted."""
    return sorted({d["unit"] for _, d in graph.nodes(data=True) if d["class"] == class_name and d["strategy"] == strategy})


def strategies_of(graph: nx.DiGraph, class_name: str) -> list[str]:
    return sorted({d["strategy"] for _, d in graph.nodes(data=True) if d["class"] == class_name})


def to_json(graph: nx.DiGraph) -> dict:
    """Node-link JSON with sorted nodes and edges."""
    data = nx.node_link_data(graph, edges="links")
    data["nodes"] = sorted(data["nodes"], key=lambda n: n["id"])
    data["links"] = sorted(data["links"], key=lambda e: (e["source"], e["target"]))
    return data
