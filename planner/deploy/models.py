"""Hugging Face repository of each catalog model, the checkpoint the serving stacks load.

Source of every row: the ``source`` field of ``catalogs/models/<id>.yaml``, the model's config.json on
huggingface.co (``https://huggingface.co/<repo>/blob/main/config.json``); a test checks they agree.
"""

from __future__ import annotations

HF_REPOS: dict[str, str] = {
    "deepseek-v3": "deepseek-ai/DeepSeek-V3",
    "gpt-oss-120b": "openai/gpt-oss-120b",
    "gpt-oss-20b": "openai/gpt-oss-20b",
    "kimi-k2": "moonshotai/Kimi-K2-Instruct",
    "llama-2-13b": "meta-llama/Llama-2-13b-chat-hf",
    "llama-2-70b": "meta-llama/Llama-2-70b-chat-hf",
    "llama-2-7b": "meta-llama/Llama-2-7b-chat-hf",
    "llama-3.1-405b": "meta-llama/Llama-3.1-405B-Instruct",
    "llama-3.1-8b": "meta-llama/Llama-3.1-8B-Instruct",
    "llama-3.2-1b": "meta-llama/Llama-3.2-1B-Instruct",
    "llama-3.2-3b": "meta-llama/Llama-3.2-3B-Instruct",
    "llama-3.3-70b": "meta-llama/Llama-3.3-70B-Instruct",
    "mixtral-8x7b": "mistralai/Mixtral-8x7B-Instruct-v0.1",
    "qwen3-0.6b": "Qwen/Qwen3-0.6B",
    "qwen3-235b-a22b": "Qwen/Qwen3-235B-A22B",
    "qwen3-30b-a3b": "Qwen/Qwen3-30B-A3B",
    "qwen3-32b": "Qwen/Qwen3-32B",
}


def hf_repo(model_id: str) -> str:
    """The repository of a catalog model; a model not listed keeps its catalog id (a local path then)."""
    return HF_REPOS.get(model_id, model_id)
