"""Task graph structure and the candidate generator's rules."""

from __future__ import annotations

import pytest

from planner import graph as task_graph
from planner.candidates import CandidateOptions, generate_candidates, prune_dominated
from planner.perf.model import Silicon
from planner.perf.profile import ModelProfile
from planner.schema import Workload
from tests.solvers.conftest import candidate


def _workload(strategies, model="llama-3.3-70b", **extra) -> Workload:
    return Workload.model_validate({
        "model": model, "dtype": "fp8", "kv_dtype": "fp8",
        "classes": [{"name": "chat", "rate_rps": 10, "input_tokens": 2000, "output_tokens": 500,
                     "prefix_cache_hit": 0.25, "slo": {"ttft_ms": 2000, "tpot_ms": 40}}],
        "strategies": strategies,
        "constraints": {"power_budget_kw": 500, "devices": ["h200", "cs-3", "b200"]},
        **extra,
    })


SPEC = {"spec_decode": {"draft_model": "llama-3.2-1b", "acceptance_rate": 0.8, "draft_tokens": 4}}


def _graph(catalog, workload):
    model = ModelProfile.of(catalog.model(workload.model), workload.dtype, workload.kv_dtype)
    draft = ModelProfile.of(catalog.model("llama-3.2-1b"), workload.dtype, workload.kv_dtype) if workload.spec_decode else None
    return task_graph.build_task_graph(workload, model, draft), model


def test_graph_nodes_and_edges_per_strategy(catalog):
    workload = _workload(["aggregated", "pd_disagg", "spec_decode"], **SPEC)
    graph, model = _graph(catalog, workload)
    assert task_graph.units(graph, "chat", "aggregated") == ["aggregated"]
    assert task_graph.units(graph, "chat", "pd_disagg") == ["decode", "prefill"]
    assert task_graph.units(graph, "chat", "spec_decode") == ["decode", "prefill"]  # draft + verify form one unit
    prefill = graph.nodes["chat/pd_disagg/prefill"]
    assert prefill["prefill_tokens"] == pytest.approx(1500) and prefill["cached_tokens"] == pytest.approx(500)
    kv = task_graph.edge_bytes(graph, "chat", "pd_disagg", "prefill", "decode")
    assert kv == pytest.approx(2000 * 80 * 2 * 8 * 128 * 1)  # fp8 KV of the whole prompt
    rounds = graph.nodes["chat/spec_decode/verify"]["rounds"]
    assert rounds == pytest.approx(500 / ((1 - 0.8**5) / 0.2))
    assert graph.has_edge("chat/spec_decode/draft", "chat/spec_decode/verify")



def test_the_network_export_carries_each_decode_pools_kv_hand_off(catalog):
    """2 req/s through a pd_disagg decode pool: 2 × 327.68 MB of fp8 KV (2,000 prompt tokens) from its prefill pool,
    0.65536 GB/s (the network sheet reads the graph's KV edges by their kind)."""
    from planner.export.network import Transfer, transfers
    from planner.schema import Plan, Pool

    graph, _ = _graph(catalog, _workload(["pd_disagg"]))
    pool = Pool.model_construct(role="decode", class_name="chat", strategy="pd_disagg", served_rps=2.0, partner_role=None)
    (kv,) = transfers(Plan.model_construct(graph=task_graph.to_json(graph), pools=(pool,)))
    assert kv == Transfer("chat", "pd_disagg", "kv_cache", 2.0, 2000 * 80 * 2 * 8 * 128 * 1)
    assert kv.gb_s == pytest.approx(0.65536)

def test_af_graph_only_for_moe(catalog):
    dense, _ = _graph(catalog, _workload(["af_disagg"]))
    assert dense.number_of_nodes() == 0
    moe, model = _graph(catalog, _workload(["af_disagg"], model="qwen3-235b-a22b"))
    edge = moe.edges["chat/af_disagg/attention", "chat/af_disagg/ffn"]
    assert edge["transfers_per_request"] == pytest.approx(500 * model.moe_layers)
    assert edge["bytes_per_request"] == pytest.approx(500 * model.moe_layers * model.hidden_size * 2)


def test_graph_json_is_deterministic(catalog):
    workload = _workload(["pd_disagg", "aggregated"])
    a = task_graph.to_json(_graph(catalog, workload)[0])
    b = task_graph.to_json(_graph(catalog, workload)[0])
    assert a == b and [n["id"] for n in a["nodes"]] == sorted(n["id"] for n in a["nodes"])


def test_device_counts(catalog):
    def device_counts(device_id, weights_bytes):
        return Silicon.of(catalog.device(device_id), "bf16").device_counts(weights_bytes)

    assert device_counts("h100-sxm", 141e9) == [2, 4, 8]  # 70.5 GB per device ≤ 90 % of 80 GB
    assert device_counts("h200", 70e9) == [1, 2, 4, 8]
    assert device_counts("cs-3", 141e9) == [4, 8, 12, 16, 24, 32]  # 44 GB SRAM, 90 % usable → 4 wafers, 1x-8x, ≤ 32


def test_candidates_meet_slos_and_pick_the_best_batch(catalog):
    workload = _workload(["aggregated", "pd_disagg"])
    graph, _ = _graph(catalog, workload)
    cands, notes = generate_candidates(workload, catalog, graph, CandidateOptions())
    assert cands and not notes
    for c in cands:
        if c.tpot_ms is not None:
            assert c.tpot_ms <= 40 + 1e-9
        if c.ttft_ms is not None:
            assert c.ttft_ms <= 2000 + 1e-6
        assert 0 < c.utilization_cap <= 0.95 and c.capacity_rps > 0


def test_dominated_candidates_are_pruned():
    workload = _workload(["pd_disagg"])
    strong = candidate("chat", "decode", "x", 10.0, 1000.0)
    weak = candidate("chat", "decode", "x", 5.0, 1000.0)
    other_type = candidate("chat", "decode", "y", 5.0, 900.0)
    kept = prune_dominated([strong, weak, other_type], workload)
    assert strong in kept and other_type in kept and weak not in kept


def test_each_decode_task_brings_the_work_of_one_request(catalog):
    # chat: 2000 prompt tokens (25% cached), 500 output tokens; spec_decode drafts k = 4 at acceptance 0.8
    spec, _ = _graph(catalog, _workload(["spec_decode"], **SPEC))
    rounds = 500 / ((1 - 0.8**5) / 0.2)  # 500 tokens at 1 + 0.8 + … + 0.8⁴ per round
    verify, draft = spec.nodes["chat/spec_decode/verify"], spec.nodes["chat/spec_decode/draft"]
    assert (verify["prefill_tokens"], verify["cached_tokens"], verify["decode_tokens"]) == (0, 0, 500)
    assert draft["decode_tokens"] == pytest.approx(4 * rounds) and draft["rounds"] == pytest.approx(rounds)
    accepted = spec.edges["chat/spec_decode/verify", "chat/spec_decode/draft"]
    drafts = spec.edges["chat/spec_decode/draft", "chat/spec_decode/verify"]
    assert accepted["kind"] == "accepted_tokens" and accepted["bytes_per_request"] == 500 * 4.0  # a 4-byte id per token
    assert drafts["bytes_per_request"] == pytest.approx(4 * rounds * 4.0) and drafts["transfers_per_request"] == pytest.approx(rounds)
    moe, _ = _graph(catalog, _workload(["af_disagg"], model="qwen3-235b-a22b"))
    for task in ("attention", "ffn"):
        node = moe.nodes[f"chat/af_disagg/{task}"]
        assert (node["prefill_tokens"], node["cached_tokens"], node["decode_tokens"], node["unit"]) == (0, 0, 500, "decode")
