"""Every option name the deployment files use, per stack, with the documentation page it comes from.

The generators only emit names listed here (``tests/unit/deploy`` checks every emitted flag and YAML key
against these tables), so a misspelt flag fails a test rather than a launch.
"""

from __future__ import annotations

VLLM_ARGS = "https://docs.vllm.ai/en/v0.8.5/serving/engine_args.html"
VLLM_SPEC = "https://docs.vllm.ai/en/latest/features/speculative_decoding/draft_model/"
VLLM_NIXL = "https://docs.vllm.ai/en/stable/features/nixl_connector_usage.html"
VLLM_DISAGG = "https://docs.vllm.ai/en/latest/features/disagg_prefill/"
VLLM_BENCH = "https://docs.vllm.ai/en/latest/cli/bench/serve/"
VLLM_EP = "https://www.mintlify.com/vllm-project/vllm/configuration/engine-args"
VLLM_DP = "https://docs.vllm.ai/en/latest/serving/data_parallel_deployment/"
SGLANG_ARGS = "https://www.mintlify.com/sgl-project/sglang/backend/server-arguments"
SGLANG_DISAGG = "https://docs.sglang.io/docs/advanced_features/pd_disaggregation"
SGLANG_SPEC = "https://docs.sglang.io/docs/advanced_features/speculative_decoding"
TRTLLM_SERVE = "https://nvidia.github.io/TensorRT-LLM/1.0.0/commands/trtllm-serve/run-benchmark-with-trtllm-serve.html"
TRTLLM_LLM_API = "https://nvidia.github.io/TensorRT-LLM/llm-api/reference.html"
TRTLLM_SPEC = "https://nvidia.github.io/TensorRT-LLM/features/speculative-decoding.html"
TRTLLM_DISAGG = "https://docs.nvidia.com/dynamo/latest/components/backends/trtllm/kv-cache-tranfer.html"
DYNAMO_DGD = "https://docs.nvidia.com/dynamo/v-0-7-0/additional-resources/advanced-kubernetes/api-reference.md"
DYNAMO_VLLM = "https://docs.nvidia.com/dynamo/archive/0.4.0/components/backends/vllm/deploy/README.html"
DYNAMO_MULTINODE = "https://docs.nvidia.com/dynamo/latest/kubernetes/deployment/multinode-deployment.html"
K8S_DEVICE_PLUGINS = "https://kubernetes.io/docs/tasks/manage-gpus/scheduling-gpus/"

#: ``vllm serve MODEL <flag> ...`` (also what ``python3 -m dynamo.vllm`` passes through to the engine)
VLLM_FLAGS: dict[str, str] = {
    "--host": VLLM_ARGS, "--port": VLLM_ARGS, "--served-model-name": VLLM_ARGS,
    "--tensor-parallel-size": VLLM_ARGS, "--pipeline-parallel-size": VLLM_ARGS,
    "--max-num-seqs": VLLM_ARGS, "--max-num-batched-tokens": VLLM_ARGS, "--max-model-len": VLLM_ARGS,
    "--kv-cache-dtype": VLLM_ARGS, "--gpu-memory-utilization": VLLM_ARGS, "--quantization": VLLM_ARGS,
    "--enable-prefix-caching": VLLM_ARGS, "--device": VLLM_ARGS,
    "--enable-expert-parallel": VLLM_EP, "--data-parallel-size": VLLM_DP,
    "--speculative-config": VLLM_SPEC, "--kv-transfer-config": VLLM_NIXL,
}
#: keys of vLLM's ``--speculative-config`` JSON
VLLM_SPEC_KEYS: dict[str, str] = {"model": VLLM_SPEC, "num_speculative_tokens": VLLM_SPEC, "method": VLLM_SPEC}
#: keys of vLLM's ``--kv-transfer-config`` JSON
VLLM_KV_TRANSFER_KEYS: dict[str, str] = {"kv_connector": VLLM_NIXL, "kv_role": VLLM_NIXL}
VLLM_KV_CONNECTORS: dict[str, str] = {"NixlConnector": VLLM_NIXL, "LMCacheConnectorV1": VLLM_DISAGG}
#: ``vllm bench serve`` flags the load-test README uses
VLLM_BENCH_FLAGS: dict[str, str] = {
    f: VLLM_BENCH for f in ("--backend", "--base-url", "--model", "--dataset-name", "--random-input-len",
                            "--random-output-len", "--request-rate", "--num-prompts", "--percentile-metrics",
                            "--metric-percentiles")
}

#: ``python3 -m sglang.launch_server <flag> ...`` (and ``python3 -m dynamo.sglang``)
SGLANG_FLAGS: dict[str, str] = {
    "--model-path": SGLANG_ARGS, "--host": SGLANG_ARGS, "--port": SGLANG_ARGS, "--served-model-name": SGLANG_ARGS,
    "--tp-size": SGLANG_ARGS, "--pp-size": SGLANG_ARGS, "--ep-size": SGLANG_ARGS,
    "--enable-dp-attention": SGLANG_ARGS, "--dp-size": SGLANG_ARGS,
    "--max-running-requests": SGLANG_ARGS, "--chunked-prefill-size": SGLANG_ARGS, "--context-length": SGLANG_ARGS,
    "--kv-cache-dtype": SGLANG_ARGS, "--mem-fraction-static": SGLANG_ARGS, "--quantization": SGLANG_ARGS,
    "--disaggregation-mode": SGLANG_DISAGG, "--disaggregation-transfer-backend": SGLANG_DISAGG,
    "--speculative-algorithm": SGLANG_SPEC, "--speculative-draft-model-path": SGLANG_SPEC,
    "--speculative-num-steps": SGLANG_SPEC, "--speculative-eagle-topk": SGLANG_SPEC,
    "--speculative-num-draft-tokens": SGLANG_SPEC,
}

#: ``trtllm-serve MODEL <flag> ...``
TRTLLM_FLAGS: dict[str, str] = {"--host": TRTLLM_SERVE, "--port": TRTLLM_SERVE, "--backend": TRTLLM_SERVE,
                                "--extra_llm_api_options": TRTLLM_SERVE}
#: keys of the LLM API options YAML (nested keys as ``parent.child``)
TRTLLM_KEYS: dict[str, str] = {
    "tensor_parallel_size": TRTLLM_LLM_API, "pipeline_parallel_size": TRTLLM_LLM_API,
    "moe_expert_parallel_size": TRTLLM_LLM_API, "enable_attention_dp": TRTLLM_LLM_API, "max_batch_size": TRTLLM_LLM_API, "max_num_tokens": TRTLLM_LLM_API,
    "max_seq_len": TRTLLM_LLM_API, "enable_chunked_prefill": TRTLLM_LLM_API,
    "kv_cache_config": TRTLLM_LLM_API, "kv_cache_config.dtype": TRTLLM_LLM_API,
    "kv_cache_config.free_gpu_memory_fraction": TRTLLM_LLM_API, "kv_cache_config.enable_block_reuse": TRTLLM_LLM_API,
    "speculative_config": TRTLLM_SPEC, "speculative_config.decoding_type": TRTLLM_SPEC,
    "speculative_config.max_draft_len": TRTLLM_SPEC, "speculative_config.speculative_model": TRTLLM_SPEC,
    "disable_overlap_scheduler": TRTLLM_SPEC,
    "cache_transceiver_config": TRTLLM_DISAGG, "cache_transceiver_config.backend": TRTLLM_DISAGG,
    "cache_transceiver_config.max_tokens_in_buffer": TRTLLM_DISAGG,
}

#: fields of a DynamoGraphDeployment (nvidia.com/v1alpha1) the manifests use, as dotted paths below a service
DYNAMO_SERVICE_KEYS: dict[str, str] = {
    k: DYNAMO_DGD for k in ("componentType", "subComponentType", "replicas", "resources", "resources.limits",
                            "resources.limits.gpu", "extraPodSpec", "extraPodSpec.mainContainer",
                            "extraPodSpec.mainContainer.image", "extraPodSpec.mainContainer.command",
                            "extraPodSpec.mainContainer.args", "envFromSecret", "dynamoNamespace")
} | {"multinode": DYNAMO_MULTINODE, "multinode.nodeCount": DYNAMO_MULTINODE}  # a replica over several nodes
#: Dynamo worker flags beyond the engine's own
DYNAMO_FLAGS: dict[str, str] = {"--model": DYNAMO_VLLM, "--is-prefill-worker": DYNAMO_VLLM}

#: Kubernetes extended-resource names of the accelerator device plugins
ACCELERATOR_RESOURCES: dict[str, str] = {
    "nvidia.com/gpu": K8S_DEVICE_PLUGINS, "amd.com/gpu": K8S_DEVICE_PLUGINS,
    "aws.amazon.com/neuron": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/containers/kubernetes-getting-started.html",
    "google.com/tpu": "https://cloud.google.com/kubernetes-engine/docs/how-to/tpus",
    "habana.ai/gaudi": "https://docs.habana.ai/en/latest/Orchestration/Gaudi_Kubernetes/Device_Plugin_for_Kubernetes.html",
}

#: every flag table by stack, for the tests and the output README
FLAG_TABLES: dict[str, dict[str, str]] = {"vllm": VLLM_FLAGS, "sglang": SGLANG_FLAGS, "trtllm": TRTLLM_FLAGS,
                                          "dynamo": {**VLLM_FLAGS, **DYNAMO_FLAGS}}
