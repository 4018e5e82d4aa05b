"""The cost model's structural terms against hand-computed cases: efficiencies, MoE traffic and expert
parallelism, KV spill from SRAM, dataflow exchange, the SRAM pipeline, silicon in base units, bands."""

import dataclasses
import math

import numpy as np
import pytest

from planner.perf import comm
from planner.perf.efficiency import gemm_efficiency, kernel_times, width_efficiency
from planner.perf.model import RooflineModel
from planner.perf.profile import ModelProfile, default_kv_dtype
from planner.perf.roofline import decode_step, expert_imbalance, kv_bandwidth, moe_shuffle_bytes, prefill_pass
from planner.perf.silicon import HardwareArrays, Silicon
from planner.schema import Band


def test_gemm_efficiency_is_tile_quantisation():
    # a 64-row tile half-point: 1 row costs like 65 rows at full efficiency, 64 rows reach half the peak
    assert gemm_efficiency(64, 0.8, 64) == pytest.approx(0.4)
    assert gemm_efficiency(1, 0.8, 64) == pytest.approx(0.8 / 65)
    assert gemm_efficiency(4096, 0.8, 64) == pytest.approx(0.8 * 4096 / 4160)
    assert gemm_efficiency(0, 0.8, 64) == 0.0


def test_width_efficiency_hand_cases():
    # a 70B layer (d = 8,192) at TP8 leaves 1,024 per device: 1024 / (1024 + 512) = 2/3; unsplit 8192/8704
    assert width_efficiency(1024, 512) == pytest.approx(2 / 3)
    assert width_efficiency(8192, 512) == pytest.approx(0.941176, rel=1e-6)
    assert width_efficiency(1024, 0.0) == 1.0


def test_thin_tensor_parallel_slices_slow_the_dense_gemms(toy_model, toy_device):
    model = ModelProfile.of(toy_model, "bf16", "bf16")
    hw = HardwareArrays.of([Silicon.of(toy_device.model_copy(update={"gemm_half_width": 4.0}), "bf16")])
    one = decode_step(model, hw, 1, 1, 10)
    # d = 4 on one device: 4 / (4 + 4) = 0.5 of the dense MFU 0.5·1/65 → 656·65/0.5e12 / 0.5 = 1.7056e-7 s;
    # attention 320 FLOPs at 0.5 → 6.4e-10 s
    assert one.compute_s == pytest.approx(1.7056e-7 + 6.4e-10)
    two = decode_step(model, hw, 2, 1, 10)
    # TP2: d/p = 2 → 2 / (2 + 4) = 1/3; half the dense FLOPs (328) at 0.5·1/65 · 1/3; attention 160 FLOPs
    assert two.compute_s == pytest.approx(328 * 65 * 3 / 0.5e12 + 160 / 0.5e12)
    # weight-stationary SRAM machines pad no tile: no width penalty
    sram = type(toy_device).model_validate({**toy_device.model_dump(), "gemm_half_width": 4.0,
                                            "memory_tiers": [{"tier": "sram", "capacity_gb": 1.0, "bandwidth_tb_s": 1.0}],
                                            "weights_tier": "sram", "kv_tier": "sram"})
    assert Silicon.of(sram, "bf16").gemm_half_width == 0.0


def test_kernel_times_hand_case_and_zero_work():
    compute, memory = kernel_times(2e12, 1e15, 0.5, 3e9, 3e12, 0.75)
    assert compute == pytest.approx(4e-3)  # 2e12 / (1e15 · 0.5)
    assert memory == pytest.approx(1.333333e-3)  # 3e9 / (3e12 · 0.75)
    assert kernel_times(0.0, 1e15, 0.0, 0.0, 3e12, 0.0) == (0.0, 0.0)
    # less than a byte or a FLOP is still work: half a byte at 1 B/s · 0.5 takes a second
    assert kernel_times(0.5, 1.0, 0.5, 0.5, 1.0, 0.5) == pytest.approx((1.0, 1.0))


def test_default_kv_dtype_is_fp8_beside_four_bit_weights():
    assert default_kv_dtype("fp4") == "fp8"
    assert default_kv_dtype("int4") == "fp8"
    assert default_kv_dtype("fp8") == "fp8"
    assert default_kv_dtype("bf16") == "bf16"


def test_expert_imbalance_hand_cases():
    # 4 groups, 8 tokens each: 1 + sqrt(2 · ln 4 / 8) = 1 + sqrt(0.34657) = 1.58870
    assert expert_imbalance(8, 4) == pytest.approx(1.0 + math.sqrt(2 * math.log(4) / 8))
    assert expert_imbalance(8, 4) == pytest.approx(1.58870, rel=1e-4)
    assert expert_imbalance(1e6, 8) == pytest.approx(1.0, abs=0.01)  # large loads even out
    assert expert_imbalance(5, 1) == 1.0  # one group holds every expert


def test_all_to_all_hand_case():
    # 2 MoE layers, 100 tokens per group, k=2, d=1000, 4 groups: message 100·2·1000·2 B · 3/4 = 300 kB
    # per call: 10 µs + 300e3 / 100e9 = 13 µs; 2 calls per layer · 2 layers → 52 µs
    assert comm.expert_all_to_all_s(2, 100, 2, 1000, 4, 100e9, 10e-6) == pytest.approx(52e-6)
    # 2 groups: half the message leaves, 200 kB: 10 µs + 2 µs per call → 48 µs
    assert comm.expert_all_to_all_s(2, 100, 2, 1000, 2, 100e9, 10e-6) == pytest.approx(48e-6)
    assert comm.expert_all_to_all_s(2, 100, 2, 1000, 1, 100e9, 10e-6) == 0.0
    assert comm.expert_all_to_all_s(2, np.asarray([100.0, 200.0]), 2, 1000, 1, 100e9, 10e-6).tolist() == [0.0, 0.0]


def test_dataflow_exchange_hand_case():
    # 3 layers · (2 µs + 10 tokens · 1000 · 2 B / 1e10 B/s = 2 µs) = 12 µs; nothing on one socket
    assert comm.dataflow_exchange_s(3, 10, 1000, 4, 1e10, 2e-6) == pytest.approx(12e-6)
    assert comm.dataflow_exchange_s(3, 10, 1000, 1, 1e10, 2e-6) == 0.0


def test_allreduce_call_floor_adds_once_per_call():
    base = comm.allreduce_s(1e6, 4, 1e11, 1e-6)
    assert comm.allreduce_s(1e6, 4, 1e11, 1e-6, call_latency_s=5e-6) == pytest.approx(base + 5e-6)


def test_moe_shuffle_bytes_hand_case(moe_model):
    model = ModelProfile.of(moe_model, "bf16", "bf16")
    # 10 tokens · 2 MoE layers · (3·2 + 2) · d=4 · 2 B = 1,280 B
    assert moe_shuffle_bytes(model, 10) == pytest.approx(1280.0)


def test_moe_activation_copies_stream_at_the_familys_peak_mbu(moe_model, toy_device):
    """fp4 weights read at half the MBU (0.25); the experts' activation copies at the plain 0.5."""
    model = ModelProfile.of(moe_model, "fp4")
    silicon = Silicon.of(toy_device, "fp4")
    assert (silicon.mbu, silicon.activation_mbu) == (0.25, 0.5)
    cost = decode_step(model, HardwareArrays.of([silicon]), 1, 8, 10)
    # dense: 168 params · 0.5 B = 84 B; experts: 2 layers · 3.984375 touched · 24 params · 0.5 B = 95.625 B, both
    # at 0.25 TB/s; shuffle: 8 tokens · 2 layers · (3·2 + 2) · 4 · 2 B = 1024 B at 0.5 TB/s; fp8 KV (8 B per
    # token): 8 sequences · 10 tokens read + 8 written = 704 B at 0.35 TB/s
    assert cost.memory_s == pytest.approx((84 + 95.625) / 0.25e12 + 1024 / 0.5e12 + 704 / 0.35e12)


def test_weights_per_device_under_expert_parallelism(moe_model):
    model = ModelProfile.of(moe_model, "bf16", "bf16")
    assert model.routed_bytes == pytest.approx(384.0)
    total = model.weights_bytes
    assert model.weights_per_device(4) == pytest.approx(total / 4)
    # ep 4 over 4 devices: dense part whole on each (one attention replica per device), experts in quarters
    assert model.weights_per_device(4, ep=4) == pytest.approx((total - 384.0) + 384.0 / 4)


def test_expert_parallel_step_pays_all_to_all_and_splits_kv(moe_model, toy_device):
    model = ModelProfile.of(moe_model, "bf16", "bf16")
    hw = HardwareArrays.of([Silicon.of(toy_device, "bf16")])
    tp = decode_step(model, hw, 4, 8, 10)
    ep = decode_step(model, hw, 4, 8, 10, ep=4)
    # a4a: 2 layers · 2 calls · (0 floor + (8/4 tokens · 2 · 4 · 2 B · 3/4) / 100 GB/s), no TP all-reduce
    assert ep.communication_s == pytest.approx(4 * (2 * 2 * 4 * 2 * 0.75) / 100e9)
    assert tp.communication_s > ep.communication_s  # TP4 pays 2 all-reduces per layer with 1 µs steps
    # compute: each of the 4 ranks runs 2 of the 8 tokens' dense GEMMs (2 · 336 FLOPs at 0.5·2/66) and a quarter of
    # the experts' 8 · 192 FLOPs, times the busiest group's load 1 + sqrt(2 ln 4 / (8·2/4)), at 0.5·r/(r + 64)
    # with r = 16 / 3.984375 rows per touched expert (4·(1 − 0.5^8) touched); attention 8 · 320 / 4 at 0.5
    rows = 16 / 3.984375
    experts = 8 * 192 / 4 * (1 + math.sqrt(2 * math.log(4) / 4)) / (0.5e12 * rows / (rows + 64))
    assert ep.compute_s == pytest.approx(672 * 33 / 0.5e12 + experts + 640 / 0.5e12)
    # memory: 336 dense bytes; a quarter of the 3.984375 touched experts' 48 B in each of 2 layers plus the
    # shuffle of 2 tokens (2 · 2 · 8 · 4 · 2 B = 256 B); the KV of a quarter of the 8 sequences (160 B read,
    # 16 B written each) at 0.35 TB/s
    assert ep.memory_s == pytest.approx((336 + 2 * 3.984375 * 48 / 4 + 256) / 0.5e12 + 8 * 176 / 4 / 0.35e12)


def test_dataflow_machine_exchanges_activations_instead_of_all_reducing(toy_model, toy_device):
    model = ModelProfile.of(toy_model, "bf16", "bf16")
    hw = HardwareArrays.of([Silicon.of(toy_device.model_copy(update={"kind": "dataflow"}), "bf16")])
    # 2 layers · (1 µs + 1 token · 4 · 2 B / 100 GB/s), no all-reduce
    assert decode_step(model, hw, 2, 1, 10).communication_s == pytest.approx(2 * (1e-6 + 8e-11))


def test_kv_spill_blends_sram_and_dram_bandwidth(toy_model, spill_device):
    corsair_like = spill_device
    model = ModelProfile.of(toy_model, "bf16", "bf16")
    silicon = Silicon.of(corsair_like, "bf16")
    hw = HardwareArrays.of([silicon])
    # usable SRAM 0.9 · 1000 B = 900 B; weights 736 B on one chip leave 164 B for KV
    room = 900.0 - model.weights_bytes
    assert room == pytest.approx(164.0)
    # 328 B of resident KV: half in SRAM (10 TB/s), half in DRAM (1 TB/s): 1 / (0.5/1e13 + 0.5/1e12)
    assert float(kv_bandwidth(model, hw, 1, 328.0).reshape(-1)[0]) == pytest.approx(1.0 / (0.5 / 1e13 + 0.5 / 1e12))
    # all of it fits: SRAM bandwidth
    assert float(kv_bandwidth(model, hw, 1, 100.0).reshape(-1)[0]) == pytest.approx(1e13)
    # weights overflowing the SRAM (a tenth of it per chip here) leave all the KV in DRAM
    tiny = HardwareArrays.of([Silicon.of(corsair_like.model_copy(update={"memory_tiers": [
        corsair_like.memory_tiers[0].model_copy(update={"capacity_gb": 1e-7}), corsair_like.memory_tiers[1]]}), "bf16")])
    assert float(kv_bandwidth(model, tiny, 1, 100.0).reshape(-1)[0]) == pytest.approx(1e12)
    # capacity: the DRAM tier plus the SRAM beside the weights
    assert silicon.kv_room_bytes(model.weights_bytes) - 0.9e9 == pytest.approx(164.0)


def test_silicon_converts_once_to_base_units(catalog):
    h100 = catalog.device("h100-sxm")
    s = Silicon.of(h100, "fp8")
    assert s.compute_dtype == "fp8"
    assert s.flops_s == pytest.approx(h100.peak_dense_tflops["fp8"] * 1e12)
    assert s.weights_bw_bytes_s == pytest.approx(3.35e12)
    assert s.usable_weights_bytes == pytest.approx(0.9 * 80e9)
    assert s.nic_bytes_s == pytest.approx(h100.scale_out.bandwidth_gb_s * 1e9)
    assert s.power_w == pytest.approx(h100.tdp_w + h100.node_overhead_w / h100.devices_per_node)
    assert s.replica_power_w(8) == pytest.approx(8 * s.power_w)
    assert s.mfu == pytest.approx(h100.mfu * h100.fp8_compute_scale)  # fp8 GEMMs: the family's fp8 scale of bf16's
    assert s.expert_mfu == pytest.approx(s.mfu * h100.grouped_gemm_efficiency)
    assert s.kv_mbu == pytest.approx(h100.mbu * h100.attention_read_efficiency)
    assert s.collective_bytes_s == pytest.approx(450e9 * h100.collective_efficiency)


def test_band_widening_in_log_space():
    band = Band(low=0.8, high=1.25).widened(2.0)
    assert band.low == pytest.approx(0.64)
    assert band.high == pytest.approx(1.5625)


def test_cost_carries_breakdown_source_and_band(catalog):
    costs = RooflineModel(catalog)
    model = costs.profile("llama-3.1-8b", "fp8")
    cost = costs.decode(model, costs.silicon("h100-sxm", "fp8"), 1, 1, 1000)
    parts = cost.parts
    assert cost.total_s == pytest.approx(parts.roofline_s + parts.communication_s + parts.overhead_s)
    assert np.all(cost.low_s < cost.total_s) and np.all(cost.total_s < cost.high_s)
    assert "fitted" in cost.source[0]
    uncalibrated = costs.decode(model, costs.silicon("tpu-v7", "fp8"), 1, 1, 1000)
    assert costs.confidence("mi355x").level == "estimated"
    assert uncalibrated.band_high.reshape(-1)[0] > 1.0


def test_expert_imbalance_below_one_token_per_group():
    # half a token per group: 1 + sqrt(2 ln 4 / 0.5) = 3.35485
    assert expert_imbalance(0.5, 4) == pytest.approx(1.0 + math.sqrt(2 * math.log(4) / 0.5))


def test_expert_parallel_within_tensor_parallel_by_hand(moe_model, toy_device):
    """TP4 with EP2: 2 attention replicas of 2 devices, each with 4 of the 8 tokens; experts split in two."""
    model = ModelProfile.of(moe_model, "bf16", "bf16")
    cost = decode_step(model, HardwareArrays.of([Silicon.of(toy_device, "bf16")]), 4, 8, 10, ep=2)
    # communication: 4 all-reduces over 2 devices of 4 tokens · 4 · 2 B = 32 B (32/2 B / 100 GB/s + 2 · 1 µs), and
    # 4 all-to-all calls of 4 tokens · 2 experts · 4 · 2 B · 1/2 = 32 B / 100 GB/s
    assert cost.communication_s == pytest.approx(4 * (3.2e-10 + 2e-6) + 4 * 3.2e-10)
    # memory: 336/2 dense bytes; half of 3.984375 touched experts' 48 B in 2 layers over 2 devices, plus the
    # shuffle of 4 tokens (4 · 2 · 8 · 4 · 2 B); KV of half the sequences: (8 · 160 + 8 · 16) / 2 at 0.35 TB/s
    assert cost.memory_s == pytest.approx((168 + 2 * 3.984375 * 48 / 2 / 2 + 512) / 0.5e12 + 704 / 0.35e12)
    # compute: dense 4 · 336 / 2 FLOPs at 0.5·4/68; experts 8 · 192 / 2 · (1 + sqrt(2 ln 2 / 8)) / 2 at
    # 0.5·r/(r + 64), r = 16/3.984375; attention 2560 / 2 / 2
    rows = 16 / 3.984375
    experts = 8 * 192 / 2 * (1 + math.sqrt(2 * math.log(2) / 8)) / 2 / (0.5e12 * rows / (rows + 64))
    assert cost.compute_s == pytest.approx(672 * 17 / 0.5e12 + experts + 640 / 0.5e12)


def test_kv_bandwidth_on_two_spill_chips_and_on_a_plain_second_tier(toy_model, spill_device, toy_device):
    model = ModelProfile.of(toy_model, "bf16", "bf16")
    two = HardwareArrays.of([Silicon.of(spill_device, "bf16")])
    # two chips hold 368 B of weights each, leaving 532 B: half of 1064 B resident KV in SRAM
    assert float(np.ravel(kv_bandwidth(model, two, 2, 1064.0))[0]) == pytest.approx(1.0 / (0.5 / 1e13 + 0.5 / 1e12))
    split = Silicon.of(type(toy_device).model_validate({
        **toy_device.model_dump(), "kv_tier": "dram",
        "memory_tiers": [{"tier": "hbm", "capacity_gb": 1.0, "bandwidth_tb_s": 1.0},
                         {"tier": "dram", "capacity_gb": 2.0, "bandwidth_tb_s": 0.1}]}), "bf16")
    # a GPU whose KV lives in a second tier reads it at that tier's speed
    assert float(np.ravel(kv_bandwidth(model, HardwareArrays.of([split]), 1, 100.0))[0]) == pytest.approx(1e11)


def test_expert_parallel_kv_share_in_decode_and_prefill(moe_model, toy_device):
    """Four KV heads, TP4 with EP2: a device holds half the heads of half the sequences' KV (a quarter).
    The KV's own time is the pass's memory time less that of the same model with no KV."""
    four_heads = ModelProfile.of(moe_model.model_copy(update={"attention_heads": 4, "kv_heads": 4}), "bf16", "bf16")
    no_kv = dataclasses.replace(four_heads, kv_bytes_per_token_layer=0.0)
    hw = HardwareArrays.of([Silicon.of(toy_device, "bf16")])
    # decode, 2 sequences at context 10: (2 · 640 B read + 2 · 64 B written) / 4 at 0.35 TB/s
    kv = decode_step(four_heads, hw, 4, 2, 10, ep=2).memory_s - decode_step(no_kv, hw, 4, 2, 10, ep=2).memory_s
    assert kv == pytest.approx(352 / 0.35e12)
    # prefill of 8 tokens after 4 cached: (4 · 64 B read + 8 · 64 B written) / 4
    pre, bare = prefill_pass(four_heads, hw, 4, 8, 4, ep=2), prefill_pass(no_kv, hw, 4, 8, 4, ep=2)
    assert pre.memory_s - bare.memory_s == pytest.approx(192 / 0.35e12)
    # and its collectives are the EP ones: 4 all-reduces of 4 tokens over 2 devices, 4 all-to-all calls
    assert pre.communication_s == pytest.approx(4 * (3.2e-10 + 2e-6) + 4 * 3.2e-10)
