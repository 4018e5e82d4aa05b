"""Decompose a workload into a task graph: one subgraph per request class x serving strategy.

Nodes are tasks with the work one request brings them; a node's ``unit`` names the pool that runs
it (draft and verify form one decode unit; so do attention and FFN). Edges are transfers with the
bytes and the number of transfers one request causes. The MILP reads demand per unit from the
nodes; candidate generation reads transfer sizes from the edges. Node and edge order is
deterministic (sorted), so the graph serialises identically run after run.
"""

from __future__ import annotations

import networkx as nx

from planner.perf.model import ACTIVATION_BYTES, ModelProfile, expected_tokens_per_round
from planner.schema import RequestClass, SpecDecodeSettings, Workload

#: token ids crossing between draft and verifier, bytes per token.
TOKEN_ID_BYTES = 4.0


def node_id(class_name: str, strategy: str, task: str) -> str:
    return f"{class_name}/{strategy}/{task}"


def build_task_graph(workload: Workload, model: ModelProfile, draft: ModelProfile | None) -> nx.DiGraph:
    """The task graph of every (class, strategy) the workload allows."""
    graph = nx.DiGraph(model=workload.model)
    for request_class in sorted(workload.classes, key=lambda c: c.name):
        for strategy in sorted(workload.strategies):
            if strategy == "af_disagg" and model.moe_layers == 0:
                continue  # attention/FFN disaggregation needs experts to move
            _ADD[strategy](graph, request_class, model, draft, workload.spec_decode)
    return graph


def units(graph: nx.DiGraph, class_name: str, strategy: str) -> list[str]:
    """Pool units of one (class, strategy) subgraph, sorted."""
    return sorted({d["unit"] for _, d in graph.nodes(data=True) if d["class"] == class_name and d["strategy"] == strategy})


def strategies_of(graph: nx.DiGraph, class_name: str) -> list[str]:
    return sorted({d["strategy"] for _, d in graph.nodes(data=True) if d["class"] == class_name})


def edge_bytes(graph: nx.DiGraph, class_name: str, strategy: str, source: str, target: str) -> float:
    """Bytes one request moves along an edge (0 when the edge does not exist)."""
    u, v = node_id(class_name, strategy, source), node_id(class_name, strategy, target)
    return graph.edges[u, v]["bytes_per_request"] if graph.has_edge(u, v) else 0.0


def to_json(graph: nx.DiGraph) -> dict:
    """Node-link JSON with sorted nodes and edges."""
    data = nx.node_link_data(graph, edges="links")
    data["nodes"] = sorted(data["nodes"], key=lambda n: n["id"])
    data["links"] = sorted(data["links"], key=lambda e: (e["source"], e["target"]))
    return data


def _task(graph, rc: RequestClass, strategy: str, task: str, unit: str, **work) -> str:
    name = node_id(rc.name, strategy, task)
    graph.add_node(name, **{"class": rc.name, "strategy": strategy, "task": task, "unit": unit,
                            "rate_rps": rc.rate_rps, **work})
    return name


def _prompt(rc: RequestClass) -> tuple[float, float]:
    cached = rc.input_tokens * rc.prefix_cache_hit
    return rc.input_tokens - cached, cached


def _add_aggregated(graph, rc, model, draft, spec) -> None:
    new, cached = _prompt(rc)
    _task(graph, rc, "aggregated", "aggregated", "aggregated", prefill_tokens=new, cached_tokens=cached,
          decode_tokens=rc.output_tokens)


def _add_prefill(graph, rc, strategy, model) -> str:
    new, cached = _prompt(rc)
    return _task(graph, rc, strategy, "prefill", "prefill", prefill_tokens=new, cached_tokens=cached, decode_tokens=0)


def _add_pd(graph, rc, model, draft, spec) -> None:
    prefill = _add_prefill(graph, rc, "pd_disagg", model)
    decode = _task(graph, rc, "pd_disagg", "decode", "decode", prefill_tokens=0, cached_tokens=0,
                   decode_tokens=rc.output_tokens)
    graph.add_edge(prefill, decode, kind="kv_cache", bytes_per_request=float(model.kv_bytes(rc.input_tokens)),
                   transfers_per_request=1.0, link="scale_out")


def _add_spec(graph, rc, model, draft: ModelProfile, spec: SpecDecodeSettings) -> None:
    prefill = _add_prefill(graph, rc, "spec_decode", model)
    rounds = rc.output_tokens / float(expected_tokens_per_round(spec.acceptance_rate, spec.draft_tokens))
    verify = _task(graph, rc, "spec_decode", "verify", "decode", prefill_tokens=0, cached_tokens=0,
                   decode_tokens=rc.output_tokens, rounds=rounds)
    drafter = _task(graph, rc, "spec_decode", "draft", "decode", prefill_tokens=0, cached_tokens=0,
                    decode_tokens=rounds * spec.draft_tokens, rounds=rounds)
    graph.add_edge(prefill, verify, kind="kv_cache", bytes_per_request=float(model.kv_bytes(rc.input_tokens)),
                   transfers_per_request=1.0, link="scale_out")
    graph.add_edge(prefill, drafter, kind="kv_cache", bytes_per_request=float(draft.kv_bytes(rc.input_tokens)),
                   transfers_per_request=1.0, link="scale_out")
    graph.add_edge(drafter, verify, kind="draft_tokens", bytes_per_request=rounds * spec.draft_tokens * TOKEN_ID_BYTES,
                   transfers_per_request=rounds, link="scale_out")
    graph.add_edge(verify, drafter, kind="accepted_tokens", bytes_per_request=rc.output_tokens * TOKEN_ID_BYTES,
                   transfers_per_request=rounds, link="scale_out")


def _add_af(graph, rc, model, draft, spec) -> None:
    prefill = _add_prefill(graph, rc, "af_disagg", model)
    attention = _task(graph, rc, "af_disagg", "attention", "decode", prefill_tokens=0, cached_tokens=0,
                      decode_tokens=rc.output_tokens)
    ffn = _task(graph, rc, "af_disagg", "ffn", "decode", prefill_tokens=0, cached_tokens=0,
                decode_tokens=rc.output_tokens)
    activations = rc.output_tokens * model.moe_layers * model.hidden_size * ACTIVATION_BYTES
    hops = float(rc.output_tokens * model.moe_layers)
    graph.add_edge(prefill, attention, kind="kv_cache", bytes_per_request=float(model.kv_bytes(rc.input_tokens)),
                   transfers_per_request=1.0, link="scale_out")
    graph.add_edge(attention, ffn, kind="activations", bytes_per_request=activations, transfers_per_request=hops,
                   link="scale_out")
    graph.add_edge(ffn, attention, kind="activations", bytes_per_request=activations, transfers_per_request=hops,
                   link="scale_out")


_ADD = {"aggregated": _add_aggregated, "pd_disagg": _add_pd, "spec_decode": _add_spec, "af_disagg": _add_af}
