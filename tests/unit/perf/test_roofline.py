"""Pass times on the toy model/device, every term worked out by hand.

Toy model: 2 layers, d=4, 2 heads of dim 2, 1 KV head, FFN 8 → 656 always-active weight bytes (bf16),
656 linear FLOPs per token, 16 attention FLOPs per attended token per layer, 16 KV bytes per token.
Toy device: 1 TFLOP/s, 1 TB/s, MFU = MBU = 0.5 (so KV reads at 0.5 · 0.7 = 0.35), GEMM half-point
64 rows (bf16), 100 GB/s links with 1 µs steps, no fixed overheads.
"""

import numpy as np
import pytest

from planner.perf.profile import ModelProfile
from planner.perf.roofline import (
    carried_attention_flops,
    chunked_prefill_tokens_per_step,
    decode_step,
    dense_gemm_flops,
    fixed_overhead_s,
    pipeline_shape,
    prefill_attention_flops,
    prefill_pass,
)
from planner.perf.silicon import HardwareArrays, Silicon, compute_dtype


def _hw(device, **update):
    return HardwareArrays.of([Silicon.of(device.model_copy(update=update), "bf16")])


def _sram(device):
    """The toy device with its 1 GB at 1 TB/s as SRAM: weights and KV on chip, layers pipelined."""
    return type(device).model_validate({
        **device.model_dump(), "memory_tiers": [{"tier": "sram", "capacity_gb": 1.0, "bandwidth_tb_s": 1.0}],
        "weights_tier": "sram", "kv_tier": "sram"})


@pytest.fixture()
def toy(toy_model, toy_device):
    return ModelProfile.of(toy_model, "bf16", "bf16"), _hw(toy_device)


def test_prefill_attention_flops_hand_case(toy):
    model, _ = toy
    # 8 new tokens after 4 cached: 16 FLOPs · 8 tokens · (2 layers · (4 + 8/2)) attended
    assert prefill_attention_flops(model, 8, 4) == pytest.approx(16 * 8 * 16)
    assert prefill_attention_flops(model, 8) == pytest.approx(16 * 8 * 8)


def test_decode_step_batch_one_hand_case(toy):
    model, hw = toy
    cost = decode_step(model, hw, 1, 1, 10)
    # dense GEMMs: 656 FLOPs at MFU 0.5·1/(1+64) → 656·65/0.5e12 = 8.528e-8 s; reads 656 B / 0.5e12 = 1.312e-9 s
    # attention: 320 FLOPs / 0.5e12 = 6.4e-10 s; KV 160 B read + 16 B written / 0.35e12 = 5.0286e-10 s
    assert cost.compute_s == pytest.approx(8.528e-8 + 6.4e-10)
    assert cost.memory_s == pytest.approx(1.312e-9 + 176 / 0.35e12)
    assert cost.roofline_s == pytest.approx(8.528e-8 + 6.4e-10)
    assert cost.communication_s == pytest.approx(0.0)
    assert cost.overhead_s == pytest.approx(0.0)
    assert cost.total_s == pytest.approx(8.592e-8)
    assert cost.bound == "compute"  # a 4-wide toy: one row costs a whole 64-row tile


def test_decode_step_batch_64_hand_case(toy):
    model, hw = toy
    cost = decode_step(model, hw, 1, 64, 10)
    # dense: 64·656 = 41,984 FLOPs at MFU 0.5·64/128 = 0.25 → 1.67936e-7 s (reads 1.312e-9 s)
    # attention: 64·320 = 20,480 FLOPs / 0.5e12 = 4.096e-8 s; KV 64·176 = 11,264 B / 0.35e12 = 3.2183e-8 s
    assert cost.roofline_s == pytest.approx(1.67936e-7 + 4.096e-8)


def test_decode_step_tensor_parallel_adds_allreduces(toy):
    model, hw = toy
    cost = decode_step(model, hw, 2, 1, 10)
    # 2 layers · 2 all-reduces of 1 token · d=4 · 2 B = 8 B over 2 devices: 8/2 B / 100 GB/s + 2 steps · 1 µs each
    assert cost.communication_s == pytest.approx(4 * (8e-11 + 2e-6))
    assert cost.bound == "communication"
    # weights split in two (328 B per device); the single KV head is not split: 160 + 16 B per device
    assert cost.memory_s == pytest.approx(328 / 0.5e12 + 176 / 0.35e12)
    # compute split in two as well: 328 dense FLOPs at 0.5·1/65, 160 attention FLOPs at 0.5
    assert cost.compute_s == pytest.approx(328 * 65 / 0.5e12 + 160 / 0.5e12)


def test_collective_call_floor_is_paid_per_allreduce(toy_model, toy_device):
    model = ModelProfile.of(toy_model, "bf16", "bf16")
    plain = decode_step(model, _hw(toy_device), 2, 1, 10)
    floored = decode_step(model, _hw(toy_device, collective_latency_us=10.0), 2, 1, 10)
    # 4 all-reduce calls · 10 µs
    assert floored.communication_s - plain.communication_s == pytest.approx(40e-6)
    # and nothing on one device
    assert decode_step(model, _hw(toy_device, collective_latency_us=10.0), 1, 1, 10).communication_s == 0.0


def test_fixed_overhead_hand_case(toy_model, toy_device):
    model = ModelProfile.of(toy_model, "bf16", "bf16")
    hw = _hw(toy_device, layer_latency_us=5.0, step_overhead_us=100.0, moe_layer_latency_us=50.0)
    # 2 dense layers · 5 µs + 0 MoE layers · 50 µs + 100 µs per pass
    assert fixed_overhead_s(model, hw) == pytest.approx(110e-6)
    assert decode_step(model, hw, 1, 1, 10).overhead_s == pytest.approx(110e-6)


def test_fixed_overhead_adds_each_sequences_host_work(toy_model, toy_device):
    model = ModelProfile.of(toy_model, "bf16", "bf16")
    hw = _hw(toy_device, layer_latency_us=5.0, step_overhead_us=100.0, sequence_overhead_us=2.0)
    # 2 layers · 5 µs + 100 µs + 8 sequences · 2 µs = 126 µs
    assert fixed_overhead_s(model, hw, 8) == pytest.approx(126e-6)
    assert decode_step(model, hw, 1, 8, 10).overhead_s == pytest.approx(126e-6)
    # a prefill of 3 prompts: 110 + 3 · 2 µs; a step that schedules no request (an expert replica): 110 µs
    assert prefill_pass(model, hw, 1, 16, prompts=3).overhead_s == pytest.approx(116e-6)
    assert decode_step(model, hw, 1, 8, 10, requests=0.0).overhead_s == pytest.approx(110e-6)


def test_prefill_pass_hand_case(toy):
    model, hw = toy
    cost = prefill_pass(model, hw, 1, 4096)
    # dense: 4096·576 FLOPs + the LM head's 80 on the last token only = 2,359,376 at MFU 0.5·4096/4160
    # → 2,359,376 · 4160/4096 / 0.5e12 = 4.792483e-6 s
    # attention: 16 · 4096 · (2 layers · 2048) = 268,435,456 FLOPs / 0.5e12 = 5.36870912e-4 s
    assert cost.compute_s == pytest.approx(4.792483e-6 + 5.36870912e-4)
    assert cost.bound == "compute"


def test_prefill_pass_after_a_cached_prefix_reads_its_kv(toy):
    model, hw = toy
    cost = prefill_pass(model, hw, 1, 8, cached_tokens=4)
    # dense: 8·576 + 80 (LM head, last token) = 4688 FLOPs at MFU 0.5·8/72 → 4688·9/0.5e12 = 8.4384e-8 s;
    # reads 656 B / 0.5e12 = 1.312e-9 s
    # attention: 16 · 8 · (2 layers · (4 + 8/2)) = 2048 FLOPs / 0.5e12 = 4.096e-9 s
    # KV: the prefix's 4 tokens read (64 B) and the 8 new ones written (128 B), at 0.35 TB/s
    assert cost.compute_s == pytest.approx(8.4384e-8 + 4.096e-9)
    assert cost.memory_s == pytest.approx(1.312e-9 + 192 / 0.35e12)
    assert cost.roofline_s == pytest.approx(8.4384e-8 + 4.096e-9)  # both groups compute bound


def test_prefill_on_an_sram_pipeline_splits_kv_by_layer(toy_model, toy_device):
    """Two chips, two stages: the 8 prompt tokens go through as two micro-batches of 4."""
    model = ModelProfile.of(toy_model, "bf16", "bf16")
    hw = _hw(_sram(toy_device))
    cost = prefill_pass(model, hw, 2, 8, cached_tokens=4)
    # dense: 4·576 FLOPs + half the prompt's one LM-head row (40) = 2344 at MFU 0.5 (no tile to pad) = 4.688e-9 s;
    # reads 656 B = 1.312e-9 s
    # attention: 2048 / 2 micro-batches = 1024 FLOPs = 2.048e-9 s
    # KV per chip: half of (64 B read + 128 B written), times 2 stages / 2 micro-batches = 96 B
    assert cost.compute_s == pytest.approx(4.688e-9 + 2.048e-9)
    assert cost.memory_s == pytest.approx(1.312e-9 + 96 / 0.35e12)
    # one hop: 1 µs + 4 tokens · 4 · 2 B / 100 GB/s
    assert cost.communication_s == pytest.approx(1e-6 + 3.2e-10)


def test_static_batch_prefill_costs_the_prompts_together(toy):
    model, hw = toy
    one = prefill_pass(model, hw, 1, 512).total_s
    eight = prefill_pass(model, hw, 1, 512, prompts=8).total_s
    assert 7.0 * one < eight < 8.5 * one  # compute bound: close to eight times one prompt


def test_sram_pipeline_runs_its_stages_in_turn_at_batch_one(toy_model, toy_device):
    """Two chips, two layers: two stages. Batch 1 crosses them in turn; batch 2 fills both."""
    model = ModelProfile.of(toy_model, "bf16", "bf16")
    hw = _hw(_sram(toy_device))
    assert [float(x.reshape(-1)[0]) for x in pipeline_shape(model, hw, 2, 1)] == [2.0, 1.0, 1.0]
    one = decode_step(model, hw, 2, 1, 10)
    # memory: all 656 weight bytes are read per token, stage after stage (not 656/2 in parallel)
    assert one.memory_s == pytest.approx(656 / 0.5e12 + 176 / 0.35e12)
    # one hop between the chips: 1 µs + 1 token · 4 · 2 B / 100 GB/s
    assert one.communication_s == pytest.approx(1e-6 + 8e-11)
    two = decode_step(model, hw, 2, 2, 10)
    assert two.total_s == pytest.approx(one.total_s)  # two micro-batches in flight, one per stage


def test_chunked_prefill_tokens_per_step():
    # 32 sequences, 2000-token prompts half cached, 500 output tokens: 32·1000/500 = 64 tokens per step
    assert chunked_prefill_tokens_per_step(32, 2000, 500, 0.5) == pytest.approx(64.0)


def test_chunked_prefill_inflates_the_decode_step(toy):
    model, hw = toy
    plain = decode_step(model, hw, 1, 16, 1000)
    mixed = decode_step(model, hw, 1, 16, 1000, prefill_tokens=256)
    assert np.all(mixed.total_s > plain.total_s)


def test_compute_dtype_falls_back_to_a_wider_format(catalog):
    a100 = catalog.device("a100-80gb")
    assert compute_dtype(a100, "fp8") == "bf16"
    assert compute_dtype(catalog.device("h100-sxm"), "fp8") == "fp8"


def test_chunked_prefill_defaults_to_no_prefix_cache():
    assert chunked_prefill_tokens_per_step(32, 2000, 500) == pytest.approx(128.0)


def test_decode_step_carrying_verification_tokens_attends_over_the_batchs_context(toy):
    model, hw = toy
    cost = decode_step(model, hw, 1, 1, 10, prefill_tokens=4)
    # 5 rows of dense GEMMs, all sampling: 5·656 FLOPs at 0.5·5/69; attention 320 (decode) + 16 · 4 · (2 · 10) = 1600
    assert cost.compute_s == pytest.approx(656 * 69 / 0.5e12 + 1600 / 0.5e12)
    # KV: 160 B read; (1 + 4) · 16 B written
    assert cost.memory_s == pytest.approx(656 / 0.5e12 + 240 / 0.35e12)


def test_decode_step_carrying_a_prompt_chunk_attends_over_its_own_prompt(toy):
    model, hw = toy
    # a fresh 4-token prompt: its tokens attend over 2 tokens on average, whatever the batch's context of 10
    cost = decode_step(model, hw, 1, 1, 10, prefill_tokens=4, prefill_context_tokens=2.0)
    # dense: 5·576 + 1 sampling row · 80 = 2960 FLOPs at 0.5·5/69 → 2960·69/5 / 0.5e12 = 8.1696e-8 s
    # attention: 320 (decode) + 16 · 4 · (2 · 2) = 576 FLOPs / 0.5e12 = 1.152e-9 s
    assert cost.compute_s == pytest.approx(8.1696e-8 + 1.152e-9)
    assert cost.memory_s == pytest.approx(656 / 0.5e12 + 240 / 0.35e12)  # the KV traffic is the same


def test_carried_attention_flops_hand_case(toy):
    model, _ = toy
    # 3 tokens attending over 7 each: 16 FLOPs · 3 · (2 layers · 7)
    assert carried_attention_flops(model, 3, 7) == pytest.approx(672.0)


def test_dense_gemm_flops_run_the_lm_head_on_sampling_rows_only(toy):
    model, _ = toy
    # toy: 656 dense FLOPs per token, of which the LM head 2 · 10 · 4 = 80; 10 tokens, 2 sampling
    assert model.lm_head_flops_per_token == pytest.approx(80.0)
    assert dense_gemm_flops(model, 10, 2) == pytest.approx(10 * 576 + 2 * 80)
    assert dense_gemm_flops(model, 10, 10) == pytest.approx(6560.0)


def test_fixed_overhead_counts_moe_layers(moe_model, toy_device):
    model = ModelProfile.of(moe_model, "bf16", "bf16")
    hw = _hw(toy_device, layer_latency_us=5.0, step_overhead_us=100.0, moe_layer_latency_us=50.0)
    # 2 layers · 5 µs + 2 MoE layers · 50 µs + 100 µs
    assert fixed_overhead_s(model, hw) == pytest.approx(210e-6)


def test_decode_on_a_spill_chip_reads_kv_from_sram_while_it_fits(toy_model, spill_device):
    model = ModelProfile.of(toy_model, "bf16", "bf16")
    cost = decode_step(model, HardwareArrays.of([Silicon.of(spill_device, "bf16")]), 1, 1, 10)
    # 164 B of SRAM beside the 736 B of weights hold the 160 B of KV read: both at 10 TB/s
    assert cost.memory_s == pytest.approx(656 / 0.5e13 + 176 / 0.35e13)
