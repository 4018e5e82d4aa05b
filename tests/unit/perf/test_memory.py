"""Parameter counts, weight and KV bytes, memory fit: hand-computed and published cases."""

import pytest

from planner.perf import memory
from planner.perf.profile import ModelProfile


def test_toy_parameter_counts(toy_model):
    assert memory.attention_params_per_layer(toy_model) == 48
    assert memory.always_active_params(toy_model) == 328
    assert memory.total_params(toy_model) == 368
    assert memory.active_params(toy_model) == 328


def test_weight_bytes_per_dtype():
    assert memory.weight_bytes(70e9, "bf16") == 140e9
    assert memory.weight_bytes(70e9, "fp8") == 70e9
    assert memory.weight_bytes(70e9, "fp4") == 35e9


def test_llama_70b_kv_bytes_match_the_talk(catalog):
    arch = catalog.model("llama-3.3-70b")
    per_token = memory.kv_bytes_per_token(arch, "bf16")
    assert per_token == 327_680  # 2 · 80 layers · 8 KV heads · 128 · 2 bytes
    assert 3000 * per_token == pytest.approx(1e9, rel=0.02)  # "1 GB per ~3,000 tokens"
    at_128k = ModelProfile.of(arch, "bf16", "bf16").kv_bytes(131_072)
    assert 42e9 <= at_128k <= 43.5e9  # "42 GB at 128k context"


def test_mla_kv_is_latent_rank_plus_rope(catalog):
    arch = catalog.model("deepseek-v3")
    assert memory.kv_bytes_per_token_per_layer(arch, "bf16") == (512 + 64) * 2
    assert memory.kv_bytes_per_token(arch, "fp8") == 61 * 576


def test_sliding_window_caps_kv(catalog):
    arch = catalog.model("gpt-oss-120b")
    profile = ModelProfile.of(arch, "fp4", "bf16")
    per_layer = 2 * arch.kv_heads * arch.head_dim * 2
    full = arch.layers - arch.sliding_window_layers
    expected = per_layer * (full * 10_000 + arch.sliding_window_layers * arch.sliding_window_tokens)
    assert profile.kv_bytes(10_000) == pytest.approx(expected)


@pytest.mark.parametrize("model_id", ["llama-3.1-8b", "llama-3.3-70b", "llama-3.1-405b", "llama-3.2-1b",
                                      "llama-3.2-3b", "mixtral-8x7b", "qwen3-235b-a22b", "deepseek-v3", "gpt-oss-120b"])
def test_parameter_counts_match_published(catalog, model_id):
    arch = catalog.model(model_id)
    assert memory.total_params(arch) / 1e9 == pytest.approx(arch.published_params_b.total, rel=0.03)
    # published active counts differ on whether the LM head counts (gpt-oss excludes it)
    assert memory.active_params(arch) / 1e9 == pytest.approx(arch.published_params_b.active, rel=0.12)


def test_paged_vs_contiguous_tokens():
    # isl 1000 + osl 500/2 = 1250 live tokens on average → 79 pages of 16 = 1264
    assert memory.paged_kv_tokens(1000, 500) == 1264
    assert memory.contiguous_kv_tokens(4096) == 4096


def test_max_concurrent_requests_hand_case():
    # 72 GB usable − 35 GB weights = 37 GB free; 1.5 GB per request → 24 requests
    assert memory.max_concurrent_requests(72e9, 35e9, 1.5e9) == 24
    assert memory.max_concurrent_requests(30e9, 35e9, 1.5e9) == 0
