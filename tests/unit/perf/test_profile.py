"""A model flattened into the cost model's scalars, and the parameter counts behind them, by hand.

The toy MLA MoE model: 3 layers (1 dense), d=4, 2 heads, MLA with q rank 3, KV rank 2, nope 3, rope 1,
v 2; 4 experts of FFN 2 (2 active, 1 shared), dense FFN 8, vocab 10, tied embeddings.
Attention per layer: Q 4·3 + 3·2·(3+1) = 36, KV 4·(2+1) + 2·2·(3+2) = 32, O 2·2·4 = 16 → 84.
Always active: 3·84 + 1·3·4·8 (dense FFN) + 40 (LM head) + 2 MoE layers·(24 shared + 4·4 router) = 468;
routed 2·4·24 = 192 → total 660 (embedding tied); active 468 + 2·2·24 = 564.
"""

import dataclasses

import numpy as np
import pytest

from planner.perf import memory
from planner.perf.profile import ModelProfile
from planner.perf.roofline import kv_share, pipeline_shape
from planner.perf.silicon import HardwareArrays, Silicon
from planner.schema import ModelArch


@pytest.fixture()
def mla_moe() -> ModelArch:
    return ModelArch(
        id="toy-mla", name="Toy MLA", family="toy", source="hand-made", layers=3, hidden_size=4, attention_heads=2,
        kv_heads=2, head_dim=2, ffn_size=8, vocab_size=10, tie_embeddings=True, max_context_tokens=64,
        attention="mla", mla={"q_lora_rank": 3, "kv_lora_rank": 2, "qk_nope_head_dim": 3, "qk_rope_head_dim": 1,
                              "v_head_dim": 2},
        moe={"experts": 4, "experts_active": 2, "expert_ffn_size": 2, "shared_experts": 1, "dense_layers": 1},
        published_params_b={"total": 6.6e-7, "active": 5.64e-7},
    )


def test_mla_moe_parameter_counts(mla_moe):
    assert memory.attention_params_per_layer(mla_moe) == 84
    no_q_rank = mla_moe.model_copy(update={"mla": mla_moe.mla.model_copy(update={"q_lora_rank": 0})})
    assert memory.attention_params_per_layer(no_q_rank) == 32 + 32 + 16  # Q straight from d: 4·2·(3+1)
    assert memory.moe_layers(mla_moe) == 2
    assert memory.expert_params(mla_moe) == 24
    assert memory.always_active_params(mla_moe) == 468
    assert memory.total_params(mla_moe) == 660
    assert memory.active_params(mla_moe) == 564
    untied = mla_moe.model_copy(update={"tie_embeddings": False})
    assert memory.total_params(untied) == 700


def test_dense_model_has_no_experts(toy_model):
    assert (memory.moe_layers(toy_model), memory.expert_params(toy_model)) == (0, 0.0)


def test_mla_moe_profile_in_fp8(mla_moe):
    p = ModelProfile.of(mla_moe, "fp8")  # KV defaults to the weights' fp8: 1 byte
    assert (p.layers, p.hidden_size) == (3, 4)
    assert (p.weights_bytes, p.always_active_bytes, p.expert_bytes) == (660.0, 468.0, 24.0)
    assert (p.moe_layers, p.experts, p.experts_active) == (2, 4, 2)
    assert p.linear_flops_per_token == 1128.0
    # absorbed decode on the latent: 2·2·(2·2 + 1) = 20; expanded prefill: 2·2·(3 + 1 + 2) = 24
    assert p.attention_flops_per_context_token_decode == 20.0
    assert p.attention_flops_per_context_token_prefill == 24.0
    assert (p.full_attention_layers, p.window_layers, p.window_tokens) == (3, 0, 0)
    assert p.kv_bytes_per_token_layer == 3.0  # (KV rank 2 + rope 1) · 1 B
    assert (p.kv_heads, p.mla) == (2, True)
    assert p.shared_expert_bytes == 48.0
    assert p.expert_flops_per_token == 288.0  # 2 · 2 MoE layers · (2 routed + 1 shared) · 24
    assert p.routed_flops_per_token == 192.0
    assert p.dense_flops_per_token == 936.0
    assert p.routed_bytes == 192.0
    assert ModelProfile.of(mla_moe, "fp4").kv_bytes_per_token_layer == 3.0  # fp8 KV beside fp4 weights
    assert ModelProfile.of(mla_moe, "bf16", "fp8").weights_bytes == 1320.0


def test_dense_profile_fields(toy_model):
    p = ModelProfile.of(toy_model, "bf16")
    assert (p.weights_bytes, p.always_active_bytes, p.expert_bytes, p.shared_expert_bytes) == (736.0, 656.0, 0.0, 0.0)
    assert (p.moe_layers, p.experts, p.experts_active) == (0, 0, 0)
    assert (p.expert_flops_per_token, p.routed_flops_per_token) == (0.0, 0.0)
    assert p.attention_flops_per_context_token_decode == p.attention_flops_per_context_token_prefill == 16.0
    assert (p.kv_heads, p.mla) == (1, False)


def test_sliding_window_layers_attend_and_store_at_most_the_window(toy_model):
    p = dataclasses.replace(ModelProfile.of(toy_model, "bf16"), full_attention_layers=1, window_layers=1,
                            window_tokens=4)
    assert p.attended_tokens(10) == 14.0  # 1 layer · 10 + 1 layer · min(10, 4)
    assert p.attended_tokens(3) == 6.0
    assert p.kv_bytes(10) == pytest.approx(8.0 * 14)


def test_weights_per_device_under_expert_parallelism_by_hand(mla_moe):
    p = ModelProfile.of(mla_moe, "fp8")
    assert p.weights_per_device(4) == pytest.approx(165.0)
    # ep 2 over 4 devices: the 468 dense bytes over the 2 of a replica, the 192 routed over all 4
    assert p.weights_per_device(4, ep=2) == pytest.approx(468.0 / 2 + 192.0 / 4)


def _hw(device, **update):
    return HardwareArrays.of([Silicon.of(type(device).model_validate({**device.model_dump(), **update}), "bf16")])


def test_kv_share_replicates_mla_and_splits_gqa_heads(toy_model, mla_moe, toy_device):
    gpu = _hw(toy_device)
    assert kv_share(ModelProfile.of(mla_moe, "fp8"), gpu, 4) == pytest.approx(1.0)  # MLA latent on every rank
    four_heads = ModelProfile.of(toy_model.model_copy(update={"attention_heads": 4, "kv_heads": 4}), "bf16")
    assert kv_share(four_heads, gpu, np.asarray([2.0, 8.0])) == pytest.approx([0.5, 0.25])  # at most 4 ways
    sram = _hw(toy_device, memory_tiers=[{"tier": "sram", "capacity_gb": 1.0, "bandwidth_tb_s": 1.0}],
               weights_tier="sram", kv_tier="sram")
    assert kv_share(ModelProfile.of(mla_moe, "fp8"), sram, 4) == pytest.approx(0.25)  # layer-split on a pipeline


def test_pipeline_shape_caps_stages_at_the_layers(toy_model, toy_device):
    model = ModelProfile.of(toy_model, "bf16")
    sram = _hw(toy_device, memory_tiers=[{"tier": "sram", "capacity_gb": 1.0, "bandwidth_tb_s": 1.0}],
               weights_tier="sram", kv_tier="sram")
    # 4 chips, 2 layers: 2 stages of 2 chips, 3 tokens fill both stages
    assert [float(np.ravel(x)[0]) for x in pipeline_shape(model, sram, 4, 3)] == [2.0, 2.0, 2.0]
    assert [float(np.ravel(x)[0]) for x in pipeline_shape(model, sram, 4, 0)] == [2.0, 2.0, 1.0]
    assert [float(np.ravel(x)[0]) for x in pipeline_shape(model, _hw(toy_device), 4, 3)] == [1.0, 4.0, 1.0]
