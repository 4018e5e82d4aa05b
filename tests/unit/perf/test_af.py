"""Attention/FFN disaggregation (af.py) on the toy MoE model, every number worked out by hand.

Toy MoE (bf16): always-active 168 params = 336 B, 4 experts of 24 params (48 B) in each of 2 MoE layers
(routed 384 B), untied embedding 40 params: weights 800 B. Per token: 2·264 = 528 linear FLOPs, of which
the 2 routed experts of each layer take 2·2·2·24 = 192. Toy device: 1 TFLOP/s, 1 TB/s, MFU = MBU = 0.5,
KV read at 0.35, GEMM half-point 64 rows, no fixed overheads.
"""

import pytest

from planner.perf.af import af_decode_step, attention_side, expert_side
from planner.perf.profile import ModelProfile
from planner.perf.silicon import HardwareArrays, Silicon


def _hw(device, **update):
    return HardwareArrays.of([Silicon.of(device.model_copy(update=update), "bf16")])


@pytest.fixture()
def moe(moe_model):
    return ModelProfile.of(moe_model, "bf16", "bf16")


def test_attention_side_drops_the_experts(moe):
    side = attention_side(moe)
    assert side.weights_bytes == pytest.approx(800.0 - 384.0)
    assert side.always_active_bytes == pytest.approx(336.0)
    assert side.linear_flops_per_token == pytest.approx(528.0 - 192.0)
    assert (side.routed_flops_per_token, side.expert_flops_per_token) == (0.0, 0.0)
    assert (side.moe_layers, side.experts, side.experts_active) == (0, 0, 0)
    assert side.layers == 2 and side.kv_bytes_per_token_layer == pytest.approx(8.0)  # attention and KV stay


def test_attention_side_also_drops_shared_experts(moe_model):
    shared = moe_model.model_copy(update={"moe": moe_model.moe.model_copy(update={"shared_experts": 1})})
    side = attention_side(ModelProfile.of(shared, "bf16", "bf16"))
    # one shared expert per MoE layer: 2 · 24 params = 96 B more always-active weights (432 B of 896 B);
    # linear FLOPs 2·(216 + 96) = 624, of which the experts (2 routed + 1 shared per layer) take 2·2·3·24 = 288
    assert side.weights_bytes == pytest.approx(896.0 - 384.0 - 96.0)
    assert side.always_active_bytes == pytest.approx(432.0 - 96.0)
    assert side.linear_flops_per_token == pytest.approx(624.0 - 288.0)
    experts = expert_side(ModelProfile.of(shared, "bf16", "bf16"))
    assert experts.weights_bytes == pytest.approx(384.0 + 96.0)  # routed and shared experts
    assert experts.always_active_bytes == pytest.approx(96.0)


def test_expert_side_has_only_the_moe_layers(moe_model):
    with_dense = moe_model.model_copy(update={"layers": 3, "ffn_size": 8, "moe": moe_model.moe.model_copy(
        update={"dense_layers": 1})})
    assert expert_side(ModelProfile.of(with_dense, "bf16", "bf16")).layers == 2


def test_expert_side_keeps_only_the_experts(moe):
    side = expert_side(moe)
    assert side.layers == 2  # the MoE layers
    assert side.weights_bytes == pytest.approx(384.0)
    assert side.always_active_bytes == 0.0
    assert side.linear_flops_per_token == pytest.approx(192.0)
    assert side.routed_flops_per_token == pytest.approx(192.0)
    assert side.attention_flops_per_context_token_decode == 0.0
    assert side.attention_flops_per_context_token_prefill == 0.0
    assert side.kv_bytes_per_token_layer == 0.0
    assert (side.moe_layers, side.experts, side.experts_active) == (2, 4, 2)


def test_af_step_is_the_slower_side_plus_the_unhidden_transfers(moe, toy_device):
    hw = _hw(toy_device)
    step, attention, experts = af_decode_step(moe, hw, 1, hw, 1, 1, 10, 100e9, 1e-6)
    # attention side: 336 dense FLOPs at 0.5·1/65 → 4.368e-8 s; attention 16 · 20 = 320 FLOPs → 6.4e-10 s
    assert attention.total_s == pytest.approx(4.368e-8 + 6.4e-10)
    # expert side: 2 experts touched (rows 1), 192 FLOPs at 0.5/65 → 2.496e-8 s; reads 2·2·48 B + shuffle 128 B
    assert experts.compute_s == pytest.approx(2.496e-8)
    assert experts.memory_s == pytest.approx(320 / 0.5e12)
    # transfers: 2 MoE layers · 2 · (1 µs + 1·4·2 B / 100 GB/s) / 2 micro-batches = 2.00016e-6 s
    assert step == pytest.approx(4.432e-8 + 2.00016e-6)


def test_af_step_waits_for_a_slow_expert_pool(moe, toy_device):
    attention_hw, expert_hw = _hw(toy_device), _hw(toy_device, step_overhead_us=10.0)
    step, _, experts = af_decode_step(moe, attention_hw, 1, expert_hw, 1, 4, 10, 100e9, 1e-6, micro_batches=4)
    # batch 4: experts 10 µs + their kernels; transfers 2 · 2 · (1 µs + 4·4·2 B / 100 GB/s) / 4 = 1.00032e-6 s
    assert experts.overhead_s == pytest.approx(10e-6)
    assert step == pytest.approx(float(experts.total_s.reshape(-1)[0]) + 1.00032e-6)
    assert step > 11e-6


def test_a_shared_expert_replica_runs_every_attention_replicas_tokens(moe, toy_device):
    hw = _hw(toy_device)
    _, _, alone = af_decode_step(moe, hw, 1, hw, 1, 1, 10, 100e9, 1e-6)
    step, attention, shared = af_decode_step(moe, hw, 1, hw, 1, 1, 10, 100e9, 1e-6, sharing=4)
    # 4 attention replicas of 1 sequence: 4 tokens · 2 active = 8 rows over E[experts touched] = 4·(1 − (1/2)^4)
    # = 3.75, i.e. 2.1333 rows per expert GEMM: 4 · 192 = 768 FLOPs at 0.5 · 2.1333/66.1333 of 1 TFLOP/s
    # = 4.7616e-8 s (alone: 192 FLOPs at 0.5 · 1/65 = 2.496e-8 s)
    assert alone.compute_s == pytest.approx(2.496e-8)
    assert shared.compute_s == pytest.approx(4.7616e-8)
    # the attention side is its own replica's: unchanged; the link term is the caller's per-replica share
    assert attention.total_s == pytest.approx(4.368e-8 + 6.4e-10)
    assert step == pytest.approx(max(attention.total_s.item(), shared.total_s.item()) + 2.00016e-6)
