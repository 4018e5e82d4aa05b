"""Which serving stacks run on which vendor's silicon, and how Kubernetes asks for the devices."""

from __future__ import annotations

from dataclasses import dataclass

TARGETS = ("vllm", "sglang", "trtllm", "dynamo")

NO_PUBLIC_STACK = "no public self-hosted stack: capacity to be bought as a service"


@dataclass(frozen=True)
class Platform:
    """A vendor's accelerators as the stacks see them.

    ``resource``: the device plugin's extended-resource name; ``targets``: the stacks of ``TARGETS`` with
    a public build for it; ``vllm_device``: vLLM's ``--device`` value where a platform plugin needs it;
    ``images``: container image per stack (the projects' published images: pin a tag you have tested)."""

    resource: str
    targets: tuple[str, ...]
    vllm_device: str | None
    images: dict[str, str]
    stack_note: str


PLATFORMS: dict[str, Platform] = {
    "nvidia": Platform("nvidia.com/gpu", TARGETS, None, {
        "vllm": "vllm/vllm-openai:latest", "sglang": "lmsysorg/sglang:latest",
        "trtllm": "nvcr.io/nvidia/tensorrt-llm/release:1.0.0",
        "dynamo": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.7.1"},
        "CUDA builds of every stack"),
    "amd": Platform("amd.com/gpu", ("vllm", "sglang"), None, {
        "vllm": "rocm/vllm:latest", "sglang": "lmsysorg/sglang:latest-rocm"},
        "ROCm builds of vLLM and SGLang; TensorRT-LLM and Dynamo are NVIDIA-only"),
    "aws": Platform("aws.amazon.com/neuron", ("vllm",), "neuron", {
        "vllm": "public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:latest"},
        "vLLM's Neuron backend (AWS Neuron SDK, vllm-neuron plugin)"),
    "google": Platform("google.com/tpu", ("vllm",), "tpu", {"vllm": "vllm/vllm-tpu:latest"},
                       "vLLM's TPU backend (tpu-inference)"),
    "intel": Platform("habana.ai/gaudi", ("vllm",), "hpu", {"vllm": "vllm/vllm-gaudi:latest"},
                      "vLLM's Gaudi backend (vllm-gaudi plugin, HPU)"),
}
#: vendors whose silicon is sold as a hosted service only (catalogs/hardware/<vendor>.yaml)
SERVICE_ONLY = ("cerebras", "groq", "sambanova", "dmatrix")


def stack_for(vendor: str, target: str) -> str | None:
    """The stack a pool on ``vendor`` silicon is written for: ``target`` where it runs there, else vLLM
    where vLLM runs there, else None (no public self-hosted stack)."""
    platform = PLATFORMS.get(vendor)
    if platform is None:
        return None
    if target in platform.targets:
        return target
    return "vllm" if "vllm" in platform.targets else None
