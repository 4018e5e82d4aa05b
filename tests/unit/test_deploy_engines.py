"""The numbers a deployment writes, hand-computed: token budgets, context lengths, the stack per vendor,
the Hugging Face repositories (checked against the catalog's sources), the engine options of one pool."""

from __future__ import annotations

import json
import re

import pytest

from planner.deploy.engines import PoolSpec, max_model_len, notes, sglang_options, token_budget, trtllm_config, vllm_options
from planner.deploy.models import HF_REPOS
from planner.deploy.platforms import stack_for
from planner.schema import Pool, RequestClass


def pool(role: str, batch: int, **extra) -> Pool:
    return Pool(role=role, class_name="chat", strategy="pd_disagg" if role != "aggregated" else "aggregated",
                device="h200", tp=2, batch=batch, replicas=3, devices=6, devices_by_type={"h200": 6}, power_kw=1.0,
                cost_usd_per_hour=1.0, capex_usd=1.0, utilization=0.9, utilization_cap=0.9, capacity_rps=1.0,
                served_rps=0.9, ttft_ms=None, tpot_ms=None, limited_by="memory", **extra)


CHAT = RequestClass(name="chat", rate_rps=1, input_tokens=1500, output_tokens=300, prefix_cache_hit=0.3,
                    slo={"ttft_ms": 1000, "tpot_ms": 50})


def spec(role: str, batch: int, draft: str | None = None, k: int = 0, dtype: str = "fp8", kv: str = "fp8",
         **extra) -> PoolSpec:
    return PoolSpec(pool=pool(role, batch, **extra), request_class=CHAT, model="llama-3.3-70b", dtype=dtype,
                    kv_dtype=kv, moe=False, draft_model=draft, draft_tokens=k, vllm_device=None)


def test_token_budgets_and_context():
    assert token_budget(spec("prefill", 4)) == 6000  # 4 prompts x 1500 tokens
    assert token_budget(spec("decode", 64)) == 64  # one token per sequence
    assert token_budget(spec("decode", 64, "llama-3.2-1b", 4)) == 320  # 64 x (1 + 4 drafted)
    assert token_budget(spec("aggregated", 64)) == 2112  # 64 decode tokens + 2048 chunked-prefill budget
    assert max_model_len(spec("decode", 64)) == 1800  # 1500 + 300


@pytest.mark.parametrize("vendor, target, stack", [
    ("nvidia", "trtllm", "trtllm"), ("nvidia", "dynamo", "dynamo"), ("amd", "sglang", "sglang"),
    ("amd", "trtllm", "vllm"), ("aws", "sglang", "vllm"), ("google", "dynamo", "vllm"), ("intel", "vllm", "vllm"),
    ("cerebras", "vllm", None), ("groq", "sglang", None), ("sambanova", "trtllm", None), ("dmatrix", "dynamo", None),
])
def test_stack_per_vendor(vendor, target, stack):
    assert stack_for(vendor, target) == stack


def test_hf_repos_match_the_catalog_sources(catalog):
    assert set(HF_REPOS) == set(catalog.models)
    for model_id, repo in HF_REPOS.items():
        assert re.match(r"https://huggingface.co/([^/]+/[^/]+)/", catalog.models[model_id].source).group(1) == repo


def test_vllm_options_of_a_speculating_decode_pool():
    opts = dict(vllm_options(spec("decode", 64, "llama-3.2-1b", 4)))
    assert opts["--tensor-parallel-size"] == "2" and opts["--max-num-seqs"] == "64"
    assert opts["--max-num-batched-tokens"] == "320" and opts["--max-model-len"] == "1800"
    assert opts["--kv-cache-dtype"] == "fp8" and opts["--quantization"] == "fp8"
    assert opts["--gpu-memory-utilization"] == "0.9"
    assert json.loads(opts["--speculative-config"]) == {"model": "meta-llama/Llama-3.2-1B-Instruct",
                                                        "num_speculative_tokens": 4, "method": "draft_model"}
    assert json.loads(opts["--kv-transfer-config"]) == {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
    assert "--enable-prefix-caching" in opts and "--enable-expert-parallel" not in opts


def test_sglang_and_trtllm_options_of_a_prefill_pool():
    opts = dict(sglang_options(spec("prefill", 4)))
    assert opts["--disaggregation-mode"] == "prefill" and opts["--chunked-prefill-size"] == "6000"
    assert opts["--kv-cache-dtype"] == "fp8_e4m3" and opts["--max-running-requests"] == "4"
    config = trtllm_config(spec("prefill", 4))
    assert config["max_num_tokens"] == 6000 and config["max_batch_size"] == 4 and config["max_seq_len"] == 1800
    assert config["cache_transceiver_config"] == {"backend": "DEFAULT", "max_tokens_in_buffer": 1500}
    assert config["kv_cache_config"] == {"dtype": "fp8", "free_gpu_memory_fraction": 0.9, "enable_block_reuse": True}
    assert "cache_transceiver_config" not in trtllm_config(spec("aggregated", 64))


def test_notes_say_what_the_files_cannot():
    assert notes(spec("decode", 8), "vllm") == []
    remote = spec("decode", 8, "llama-3.2-1b", 4, partner_device="cs-3", partner_tp=1, partner_role="draft")
    assert any("draft model on 1x cs-3" in n for n in notes(remote, "vllm"))
    assert any("quantized to int4" in n for n in notes(spec("decode", 8, dtype="int4"), "sglang"))
    assert any("KV cache int8" in n for n in notes(spec("decode", 8, kv="int8"), "trtllm"))
    assert dict(vllm_options(spec("decode", 8, kv="int8")))["--kv-cache-dtype"] == "auto"


def test_a_pipeline_pool_names_its_stages_in_each_stack():
    flat, staged = spec("decode", 64), spec("decode", 64, pp=2)  # tp 2 per stage, 2 stages
    assert dict(vllm_options(flat))["--pipeline-parallel-size"] == "1"
    assert (dict(vllm_options(staged))["--tensor-parallel-size"], dict(vllm_options(staged))["--pipeline-parallel-size"]) == ("2", "2")
    assert (dict(sglang_options(staged))["--tp-size"], dict(sglang_options(staged))["--pp-size"]) == ("2", "2")
    config = trtllm_config(staged)
    assert (config["tensor_parallel_size"], config["pipeline_parallel_size"]) == (2, 2)
    assert any("spans 2 nodes (2 devices each" in n for n in notes(staged, "vllm"))
    assert not any("spans" in n for n in notes(flat, "vllm"))
