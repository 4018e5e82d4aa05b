"""Pipeline parallelism across nodes on GPU-like devices, worked out by hand on the toy model and device.

Toy model: 2 layers, d=4, 1 KV head, 656 always-active weight bytes and dense FLOPs per token (80 of them the LM
head), 16 attention FLOPs per attended token per layer, 16 KV bytes per token. Toy device: 1 TFLOP/s, 1 TB/s,
MFU = MBU = 0.5 (KV at 0.35), GEMM half-point 64 rows, 100 GB/s scale-up with 1 µs ring steps, a 10 GB/s NIC
with 5 µs latency, 0.9 GB usable per device, a scale-up domain of 8.
"""

import numpy as np
import pytest

from planner.perf import comm
from planner.perf.profile import ModelProfile
from planner.perf.roofline import decode_step, kv_share, pipeline_fill, pipeline_shape, prefill_pass
from planner.perf.silicon import HardwareArrays, Silicon


@pytest.fixture()
def toy(toy_model, toy_device):
    return ModelProfile.of(toy_model, "bf16", "bf16"), HardwareArrays.of([Silicon.of(toy_device, "bf16")])


def _one(x) -> float:
    return float(np.ravel(x)[0])


def test_stage_hops_on_the_nic_hand_case():
    # 3 stages, 16 tokens of d = 4096 in 2 B: 2 hops of 5 µs + 131,072 B / 50 GB/s (2.62144 µs) each
    assert comm.pipeline_hops_s(16, 4096, 3, 50e9, 5e-6) == pytest.approx(2 * (5e-6 + 2.62144e-6))
    assert comm.pipeline_hops_s(16, 4096, 1, 50e9, 5e-6) == 0.0  # one stage: nothing crosses


def test_gpu_pipeline_shape_counts_whole_sequences(toy):
    model, hw = toy
    # 16 devices in 2 stages of 8; 3 sequences fill both stages, 1 sequence cannot be split
    assert [_one(x) for x in pipeline_shape(model, hw, 16, 40, pp=2, sequences=3)] == [2.0, 8.0, 2.0]
    assert [_one(x) for x in pipeline_shape(model, hw, 16, 40, pp=2, sequences=1)] == [2.0, 8.0, 1.0]
    assert [_one(x) for x in pipeline_shape(model, hw, 8, 40)] == [1.0, 8.0, 1.0]  # TP alone


def test_kv_share_splits_layers_over_the_stages(toy, toy_model, toy_device):
    model, hw = toy
    assert _one(kv_share(model, hw, 4, pp=2)) == pytest.approx(0.5)  # 1 KV head: whole under TP2, half the layers
    four_heads = ModelProfile.of(toy_model.model_copy(update={"attention_heads": 4, "kv_heads": 4}), "bf16", "bf16")
    assert _one(kv_share(four_heads, hw, 16, pp=2)) == pytest.approx(1 / 8)  # 4 heads over TP8 → 1/4, then / 2


def test_decode_step_at_pp2_hand_case(toy):
    """Batch 2 on tp 2 × pp 2 (4 devices) at context 10: two micro-batches of one sequence each cross the stages.

    Dense: 656 FLOPs / 2 devices at MFU 0.5·1/65 → 328·65 / 0.5e12 = 4.264e-8 s (reads 328 B: 6.56e-10 s).
    Attention: 2·16·20 = 640 FLOPs / 2 micro-batches / 2 devices = 160 → 3.2e-10 s; KV: a device holds half the
    layers of each sequence (160 + 16 B · 2 sequences · 1/2 = 176 B), a micro-batch reads its own sequence over both
    stages: 176 B / 0.35e12 = 5.0286e-10 s. Communication: 2 layers · 2 all-reduces of 8 B over 2 devices
    (8e-11 + 2 µs each) and one hop of 8 B over the NIC (5 µs + 8e-10 s) = 8.00032e-6 + 5.0008e-6 s.
    """
    model, hw = toy
    cost = decode_step(model, hw, 4, 2, 10, pp=2)
    assert _one(cost.compute_s) == pytest.approx(4.264e-8 + 3.2e-10)
    assert _one(cost.memory_s) == pytest.approx(6.56e-10 + 176 / 0.35e12)
    assert _one(cost.roofline_s) == pytest.approx(4.264e-8 + 176 / 0.35e12)
    assert _one(cost.communication_s) == pytest.approx(1.300112e-5)
    assert _one(cost.total_s) == pytest.approx(4.264e-8 + 5.0286e-10 + 1.300112e-5, rel=1e-5)


def test_prefill_at_pp2_hand_case(toy):
    """2 prompts of 8 tokens on tp 1 × pp 2: one prompt per micro-batch crosses both stages in turn.

    Dense: 8·(656 − 80) + 1·80 = 4,688 FLOPs at MFU 0.5·8/72 → 8.4384e-8 s (reads 656 B: 1.312e-9 s).
    Attention: 16·8·(2·4) = 1,024 FLOPs per prompt → 2.048e-9 s; KV written: 8 tokens · 16 B, half the layers
    per device, of 2 prompts, a micro-batch's one over 2 stages: 128 B / 0.35e12 = 3.657e-10 s.
    No all-reduce (TP 1); one hop of 8 tokens · 4 · 2 B = 64 B: 5 µs + 6.4e-9 s. That is one micro-batch's trip;
    the second prompt enters stage 1 as the first leaves it, so the pass ends (2 + 2 − 1) / 2 = 1.5 trips later:
    compute 1.5 · 8.6432e-8 = 1.29648e-7 s, memory 1.5 · 1.6777e-9 = 2.5166e-9 s, hops 1.5 · 5.0064e-6 =
    7.5096e-6 s, in all 1.5 · 5.092832e-6 = 7.639248e-6 s.
    """
    model, hw = toy
    cost = prefill_pass(model, hw, 2, 8, prompts=2, pp=2)
    assert _one(cost.compute_s) == pytest.approx(1.29648e-7)
    assert _one(cost.memory_s) == pytest.approx(1.5 * (1.312e-9 + 128 / 0.35e12))
    assert _one(cost.communication_s) == pytest.approx(7.5096e-6)
    assert _one(cost.total_s) == pytest.approx(7.639248e-6)


def test_pipeline_fill_by_hand():
    assert pipeline_fill(2, 2) == pytest.approx(1.5)
    assert pipeline_fill(4, 4) == pytest.approx(1.75)
    assert pipeline_fill(4, 1) == pytest.approx(1.0)  # one micro-batch: just its trip


def test_carried_tokens_set_a_pipelined_steps_pace(toy):
    """The decode hand case (batch 2 on tp 2 × pp 2 at context 10) carrying 1 more token: it rides in one of the 2
    micro-batches, which sets the pace, so it is priced as if each carried one: 2 tokens a micro-batch, each with its
    logits. Dense: 2 · 656 FLOPs / 2 devices at MFU 0.5·2/66 → 656·66 / 1e12 = 4.3296e-8 s. Attention: 4 tokens at
    context 10, 4·16·20 = 1,280 FLOPs / 2 micro-batches / 2 devices = 320 → 6.4e-10 s."""
    model, hw = toy
    cost = decode_step(model, hw, 4, 2, 10, prefill_tokens=1, pp=2)
    assert _one(cost.compute_s) == pytest.approx(4.3296e-8 + 6.4e-10)


def test_pipelines_are_offered_only_where_no_domain_holds_the_weights(toy_device):
    gpu = Silicon.of(toy_device, "bf16")  # 0.9e9 usable bytes, domain 8
    assert gpu.replica_shapes(1.0e9, max_pp=4) == [(2, 1), (4, 1), (8, 1)]  # one domain holds it: TP only
    # 1e10 B: 12 devices, more than a domain. 2 stages of 5e9 B: 6 devices → TP 8; 4 of 2.5e9 B: 3 → TP 4 and 8
    assert gpu.replica_shapes(1.0e10, max_pp=4) == [(8, 2), (4, 4), (8, 4)]
    assert gpu.replica_shapes(1.0e10, max_pp=8) == [(8, 2), (4, 4), (8, 4), (2, 8), (4, 8), (8, 8)]
    assert gpu.replica_shapes(1.0e10, max_pp=1) == []
    assert gpu.replica_shapes(1.0e10, max_devices=4, max_pp=4) == [(4, 4)]  # TP within max_tp
    sram = Silicon.of(type(toy_device).model_validate({
        **toy_device.model_dump(), "memory_tiers": [{"tier": "sram", "capacity_gb": 1.0, "bandwidth_tb_s": 1.0}],
        "weights_tier": "sram", "kv_tier": "sram"}), "bf16")
    assert sram.replica_shapes(1.0e10, max_pp=4) == []  # an SRAM pipeline is its own shape


def test_one_sequence_carrying_a_token_is_one_micro_batch(toy):
    """Batch 1 on tp 2 × pp 2 at context 10 carrying 1 token: a sequence never splits over micro-batches, so both
    tokens ride in one. Dense: 2 · 656 FLOPs / 2 devices at MFU 0.5·2/66 → 4.3296e-8 s; attention: 2 tokens at context
    10, 2·16·20 = 640 FLOPs / 1 micro-batch / 2 devices = 320 → 6.4e-10 s (split in 2 it would be 4.264e-8 + 3.2e-10)."""
    model, hw = toy
    cost = decode_step(model, hw, 4, 1, 10, prefill_tokens=1, pp=2)
    assert _one(cost.compute_s) == pytest.approx(4.3296e-8 + 6.4e-10)
