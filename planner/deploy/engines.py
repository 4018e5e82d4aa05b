"""Engine options of one pool for one stack: the numbers of the plan in the names each stack documents.

Sizes:
- ``max_model_len`` = input + output tokens of the pool's class (the longest request it serves);
- token budget per step (vLLM ``max-num-batched-tokens``, SGLang ``chunked-prefill-size``, TRT-LLM
  ``max_num_tokens``): prefill pools ``batch · input tokens`` (the plan's prompts prefilled together);
  decode pools ``batch · (1 + k)`` (one token per sequence, plus k drafted ones when speculating);
  aggregated pools ``batch + ep · chunk`` (decode tokens plus the planner's chunked-prefill budget of each of
  the ``ep`` attention ranks). That is the replica's; SGLang takes it whole (with DP attention it gives each
  rank ``1 / dp-size`` of ``--chunked-prefill-size`` and ``--max-running-requests``), vLLM per data-parallel
  engine (``1 / ep`` of it, as ``--max-num-seqs``);
- memory fraction: the planner's usable fraction of device memory (planner.perf.memory);
- parallelism: ``tp`` devices per pipeline stage and ``pp`` stages (vLLM ``--tensor-parallel-size`` /
  ``--pipeline-parallel-size``, SGLang ``--tp-size`` / ``--pp-size``, TensorRT-LLM ``tensor_parallel_size`` /
  ``pipeline_parallel_size``; their documentation pages in sources.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from planner.candidates import CandidateOptions
from planner.deploy.models import hf_repo
from planner.perf.model import USABLE_MEMORY_FRACTION, default_kv_dtype
from planner.schema import Plan, Pool, RequestClass

PORT = 8000
CHUNK_TOKENS = CandidateOptions().chunk_tokens
#: KV-cache dtype names per stack (None: the stack has no such KV format)
KV_DTYPES = {
    "vllm": {"bf16": "auto", "fp16": "auto", "fp8": "fp8"},
    "sglang": {"bf16": "auto", "fp16": "auto", "fp8": "fp8_e4m3"},
    "trtllm": {"bf16": "auto", "fp16": "auto", "fp8": "fp8"},
}
#: weights that vLLM and SGLang quantize on load (``--quantization fp8``); 4-bit and int8 weights need a
#: checkpoint quantized beforehand
ONLINE_QUANTIZATION = {"fp8": "fp8"}


@dataclass(frozen=True)
class PoolSpec:
    """What a pool's engine needs to know: the pool, its class, the plan's model settings."""

    pool: Pool
    request_class: RequestClass
    model: str
    dtype: str
    kv_dtype: str
    moe: bool
    draft_model: str | None
    draft_tokens: int
    vllm_device: str | None


def envelope(classes: list[RequestClass]) -> RequestClass:
    """One class whose prompts and answers are as long as the longest of ``classes`` (a shared pool's engine must take
    every request any of them sends), the first class otherwise."""
    first = classes[0]
    if len(classes) == 1:
        return first
    return first.model_copy(update={"input_tokens": max(c.input_tokens for c in classes),
                                    "output_tokens": max(c.output_tokens for c in classes),
                                    "prefix_cache_hit": max(c.prefix_cache_hit for c in classes)})


def pool_spec(plan: Plan, pool: Pool, moe: bool, vllm_device: str | None) -> PoolSpec:
    workload = plan.workload
    rc = envelope([c for c in workload.classes if c.name == pool.class_name or c.name in (pool.serves or {})])
    spec = workload.spec_decode if pool.strategy == "spec_decode" and pool.role == "decode" else None
    dtype = pool.dtype or workload.dtype
    return PoolSpec(pool=pool, request_class=rc, model=workload.model, dtype=dtype,
                    kv_dtype=workload.kv_dtype or default_kv_dtype(dtype), moe=moe,
                    draft_model=spec.draft_model if spec else None,
                    draft_tokens=(pool.draft_tokens or spec.draft_tokens or 0) if spec else 0,
                    vllm_device=vllm_device)


def max_model_len(s: PoolSpec) -> int:
    """Longest request of the class: input + output tokens."""
    return s.request_class.input_tokens + s.request_class.output_tokens


def token_budget(s: PoolSpec) -> int:
    """Tokens per engine step (see the module docstring)."""
    if s.pool.role == "prefill":
        return s.pool.batch * s.request_class.input_tokens
    if s.pool.role == "decode":
        return s.pool.batch * (1 + s.draft_tokens)
    return s.pool.batch + s.pool.ep * CHUNK_TOKENS


def disaggregated(s: PoolSpec) -> bool:
    return s.pool.role in ("prefill", "decode")


def notes(s: PoolSpec, stack: str) -> list[str]:
    """What the files cannot express, said plainly."""
    out = []
    if s.dtype not in ("bf16", "fp16") and s.dtype not in ONLINE_QUANTIZATION:
        out.append(f"weights {s.dtype}: load a checkpoint quantized to {s.dtype} beforehand (replace the model id)")
    if stack == "trtllm" and s.dtype == "fp8":
        out.append("weights fp8: TensorRT-LLM loads an FP8 checkpoint (e.g. quantized with NVIDIA ModelOpt)")
    if s.kv_dtype not in KV_DTYPES.get(stack if stack in KV_DTYPES else "vllm", {}):
        out.append(f"KV cache {s.kv_dtype}: no such KV format in {stack}; written as 16-bit (auto), "
                   "so fewer sequences fit than the plan assumed")
    p = s.pool
    if p.partner_role == "draft":
        out.append(f"the plan puts the draft model on {p.partner_tp}x {p.partner_device}; no public stack runs a "
                   "draft on other silicon, so the draft runs on the target's devices here and TPOT will differ")
    if stack == "trtllm" and 1 < p.ep < p.tp:
        out.append(f"{p.ep} attention replicas of {p.tp // p.ep} GPUs: TensorRT-LLM's attention data parallelism "
                   "takes every rank or none, so attention runs tensor-parallel here and fewer sequences fit")
    if p.pp > 1:
        out.append(f"a replica spans {p.pp} nodes ({p.tp} devices each, one pipeline stage a node): start launch.sh "
                   "as one multi-node engine (vLLM on a Ray cluster of those nodes; SGLang with --nnodes, --node-rank "
                   "and --dist-init-addr on each; TensorRT-LLM under mpirun across them). No k8s.yaml: a Deployment "
                   "cannot place one replica on several nodes (use a LeaderWorkerSet)")
    if p.partner_role == "ffn":
        out.append(f"attention/FFN disaggregation (experts on {p.partner_tp}x {p.partner_device}) has no public "
                   "stack option; written as one expert-parallel engine on the attention devices")
    return out


def vllm_options(s: PoolSpec) -> list[tuple[str, str | None]]:
    """``vllm serve MODEL`` flags (also the engine arguments of Dynamo's vLLM workers)."""
    p = s.pool
    opts: list[tuple[str, str | None]] = [
        ("--served-model-name", hf_repo(s.model)),
        # data-parallel attention: ep engines of tp/ep GPUs, each with its share of the batch; experts over all tp
        ("--tensor-parallel-size", str(p.tp // p.ep)), ("--pipeline-parallel-size", str(p.pp)),
        ("--max-num-seqs", str(p.batch // p.ep)), ("--max-num-batched-tokens", str(token_budget(s) // p.ep)),
        ("--max-model-len", str(max_model_len(s))),
        ("--kv-cache-dtype", KV_DTYPES["vllm"].get(s.kv_dtype, "auto")),
        ("--gpu-memory-utilization", f"{USABLE_MEMORY_FRACTION:g}"),
    ]
    if s.dtype in ONLINE_QUANTIZATION:
        opts.append(("--quantization", ONLINE_QUANTIZATION[s.dtype]))
    if s.request_class.prefix_cache_hit > 0:
        opts.append(("--enable-prefix-caching", None))
    if s.moe:
        opts.append(("--enable-expert-parallel", None))
    if p.ep > 1:
        opts.append(("--data-parallel-size", str(p.ep)))
    if s.vllm_device:
        opts.append(("--device", s.vllm_device))
    if s.draft_model:
        opts.append(("--speculative-config", json.dumps(
            {"model": hf_repo(s.draft_model), "num_speculative_tokens": s.draft_tokens, "method": "draft_model"})))
    if disaggregated(s):
        opts.append(("--kv-transfer-config", json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})))
    return opts


def sglang_options(s: PoolSpec) -> list[tuple[str, str | None]]:
    """``python3 -m sglang.launch_server`` flags."""
    p = s.pool
    opts: list[tuple[str, str | None]] = [
        ("--model-path", hf_repo(s.model)), ("--served-model-name", hf_repo(s.model)),
        ("--tp-size", str(p.tp)), ("--pp-size", str(p.pp)),
        ("--max-running-requests", str(p.batch)), ("--chunked-prefill-size", str(token_budget(s))),
        ("--context-length", str(max_model_len(s))),
        ("--kv-cache-dtype", KV_DTYPES["sglang"].get(s.kv_dtype, "auto")),
        ("--mem-fraction-static", f"{USABLE_MEMORY_FRACTION:g}"),
    ]
    if s.dtype in ONLINE_QUANTIZATION:
        opts.append(("--quantization", ONLINE_QUANTIZATION[s.dtype]))
    if s.moe:
        opts.append(("--ep-size", str(p.tp)))
    if p.ep > 1:
        opts += [("--enable-dp-attention", None), ("--dp-size", str(p.ep))]
    if s.draft_model:
        opts += [("--speculative-algorithm", "STANDALONE"), ("--speculative-draft-model-path", hf_repo(s.draft_model)),
                 ("--speculative-num-steps", str(s.draft_tokens)), ("--speculative-eagle-topk", "1"),
                 ("--speculative-num-draft-tokens", str(s.draft_tokens + 1))]
    if disaggregated(s):
        opts += [("--disaggregation-mode", p.role), ("--disaggregation-transfer-backend", "nixl")]
    return opts


def trtllm_config(s: PoolSpec) -> dict:
    """The LLM API options YAML that ``trtllm-serve --extra_llm_api_options`` reads."""
    p = s.pool
    config: dict = {
        "tensor_parallel_size": p.tp, "pipeline_parallel_size": p.pp,
        "max_batch_size": p.batch, "max_num_tokens": token_budget(s), "max_seq_len": max_model_len(s),
        "enable_chunked_prefill": p.role == "aggregated",
        "kv_cache_config": {"dtype": KV_DTYPES["trtllm"].get(s.kv_dtype, "auto"),
                            "free_gpu_memory_fraction": USABLE_MEMORY_FRACTION,
                            "enable_block_reuse": s.request_class.prefix_cache_hit > 0},
    }
    if s.moe:
        config["moe_expert_parallel_size"] = p.tp
    if p.ep == p.tp > 1:
        config["enable_attention_dp"] = True
    if s.draft_model:
        config["speculative_config"] = {"decoding_type": "DraftTarget", "max_draft_len": s.draft_tokens,
                                        "speculative_model": hf_repo(s.draft_model)}
        config["disable_overlap_scheduler"] = True
    if disaggregated(s):
        config["cache_transceiver_config"] = {"backend": "DEFAULT",
                                              "max_tokens_in_buffer": s.request_class.input_tokens}
    return config
