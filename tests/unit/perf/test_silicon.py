"""Silicon's derived capacities: device counts per replica and the bytes left for KV, by hand."""

import pytest

from planner.perf.silicon import HardwareArrays, Silicon, UnsupportedDtype, compute_dtype


def _silicon(device, **update):
    return Silicon.of(type(device).model_validate({**device.model_dump(), **update}), "bf16")


def test_gpu_device_counts_are_powers_of_two_from_the_least_that_fits(toy_device):
    gpu = _silicon(toy_device)  # 0.9e9 usable bytes, domain 8
    assert gpu.device_counts(1.0) == [1, 2, 4, 8]
    assert gpu.device_counts(2.0e9) == [4, 8]  # 2e9 / 0.9e9 → at least 3 devices: 4 and 8
    assert gpu.device_counts(0.9e9) == [1, 2, 4, 8]
    assert gpu.device_counts(1.0, max_devices=2) == [1, 2]
    assert gpu.device_counts(1.0e10) == []  # 12 devices needed, domain of 8
    big = _silicon(toy_device, scale_up={"bandwidth_gb_s": 100.0, "latency_us": 1.0, "domain_size": 64})
    assert big.device_counts(5.0e9) == [8, 16, 32, 64]


def test_sram_device_counts_are_the_least_and_its_double(toy_device):
    sram = _silicon(toy_device, memory_tiers=[{"tier": "sram", "capacity_gb": 1.0, "bandwidth_tb_s": 1.0}],
                    weights_tier="sram", kv_tier="sram",
                    scale_up={"bandwidth_gb_s": 100.0, "latency_us": 1.0, "domain_size": 8})
    assert sram.device_counts(2.0e9) == [3, 6]
    assert sram.device_counts(4.0e9) == [5]  # 5 chips; their double, 10, leaves the domain of 8
    assert sram.device_counts(3.0e9) == [4, 8]
    assert sram.device_counts(1.0e10) == []


def test_kv_room_on_a_shared_tier_is_what_the_weights_leave(toy_device):
    gpu = _silicon(toy_device)
    assert gpu.kv_room_bytes(400_000_000) == pytest.approx(500_000_000, abs=1e-3)
    assert gpu.kv_room_bytes(400_000_000, 100_000_000) == pytest.approx(400_000_000, abs=1e-3)  # a draft's weights too  # a draft model's weights beside the target's


def test_kv_room_on_a_separate_tier_ignores_the_weights(toy_device):
    split = _silicon(toy_device, memory_tiers=[{"tier": "hbm", "capacity_gb": 1.0, "bandwidth_tb_s": 1.0},
                                               {"tier": "dram", "capacity_gb": 2.0, "bandwidth_tb_s": 0.1}],
                     kv_tier="dram")
    assert split.kv_room_bytes(0.5e9) == pytest.approx(1.8e9)


def test_kv_room_where_kv_spills_from_sram_adds_the_sram_beside_the_weights(toy_device):
    spill = _silicon(toy_device, kind="asic",
                     memory_tiers=[{"tier": "sram", "capacity_gb": 1.0, "bandwidth_tb_s": 10.0},
                                   {"tier": "dram", "capacity_gb": 2.0, "bandwidth_tb_s": 1.0}],
                     weights_tier="sram", kv_tier="dram")
    assert spill.kv_spill
    # 1.8e9 of DRAM plus 0.9e9 − 0.6e9 (weights) − 0.1e9 (a draft) of SRAM
    assert spill.kv_room_bytes(0.6e9, 0.1e9) - 1.8e9 == pytest.approx(0.2e9)
    assert spill.kv_room_bytes(1.2e9) - 1.8e9 == pytest.approx(0.0, abs=1e-3)  # weights overflowing SRAM leave none


def test_every_silicon_number_of_a_device_by_hand(toy_device):
    d = type(toy_device).model_validate({
        **toy_device.model_dump(), "peak_dense_tflops": {"bf16": 1.0, "fp8": 2.0, "fp4": 4.0},
        "memory_tiers": [{"tier": "hbm", "capacity_gb": 1.0, "bandwidth_tb_s": 1.0},
                         {"tier": "dram", "capacity_gb": 4.0, "bandwidth_tb_s": 0.2}],
        "kv_tier": "dram", "layer_latency_us": 3.0, "moe_layer_latency_us": 30.0, "step_overhead_us": 200.0,
        "collective_latency_us": 7.0, "collective_efficiency": 0.8, "grouped_gemm_efficiency": 0.6,
        "attention_read_efficiency": 0.7, "fp8_compute_scale": 0.9, "fp4_compute_scale": 0.4})
    s = Silicon.of(d, "fp8")
    assert (s.weights_dtype, s.compute_dtype) == ("fp8", "fp8")
    assert s.flops_s == pytest.approx(2e12)
    assert (s.weights_bw_bytes_s, s.kv_bw_bytes_s) == pytest.approx((1e12, 0.2e12))
    assert (s.usable_weights_bytes, s.usable_kv_bytes) == pytest.approx((0.9e9, 3.6e9))
    assert (s.shared_tier, s.sram, s.kv_spill, s.dataflow) == (False, False, False, False)
    assert (s.link_bytes_s, s.link_latency_s, s.domain_size) == pytest.approx((100e9, 1e-6, 8))
    assert (s.nic_bytes_s, s.nic_latency_s) == pytest.approx((10e9, 5e-6))
    assert s.power_w == pytest.approx(600.0)  # 500 W + 800 W / 8
    assert s.mfu == pytest.approx(0.45)  # 0.5 · fp8 scale 0.9
    assert s.mbu == pytest.approx(0.5)
    assert s.expert_mfu == pytest.approx(0.27)  # 0.45 · 0.6
    assert s.kv_mbu == pytest.approx(0.35)
    assert s.gemm_half_tokens == 64.0
    assert (s.layer_latency_s, s.moe_layer_latency_s, s.step_overhead_s) == pytest.approx((3e-6, 30e-6, 200e-6))
    assert s.collective_latency_s == pytest.approx(7e-6)
    assert s.collective_bytes_s == pytest.approx(80e9)
    fp4 = Silicon.of(d, "fp4")
    assert (fp4.compute_dtype, fp4.flops_s, fp4.gemm_half_tokens) == ("fp4", pytest.approx(4e12), 128.0)
    assert (fp4.mfu, fp4.mbu) == pytest.approx((0.2, 0.25))  # fp4 compute scale 0.4; 4-bit reads at half
    int4 = Silicon.of(d, "int4")  # int4 weights run fp4 matmuls here and read at half the bandwidth
    assert (int4.compute_dtype, int4.mbu) == ("fp4", pytest.approx(0.25))
    bf16 = Silicon.of(d, "bf16")
    assert (bf16.flops_s, bf16.mfu, bf16.mbu, bf16.expert_mfu) == pytest.approx((1e12, 0.5, 0.5, 0.3))
    int8 = Silicon.of(type(d).model_validate({**d.model_dump(), "peak_dense_tflops": {"bf16": 1.0, "int8": 2.0}}),
                      "int8")
    assert (int8.compute_dtype, int8.mfu) == ("int8", pytest.approx(0.45))  # int8 takes the fp8 scale


def test_sram_and_dataflow_flags(toy_device):
    sram = _silicon(toy_device, memory_tiers=[{"tier": "sram", "capacity_gb": 1.0, "bandwidth_tb_s": 1.0}],
                    weights_tier="sram", kv_tier="sram")
    assert (sram.sram, sram.kv_spill, sram.dataflow, sram.shared_tier, sram.gemm_half_tokens) == (
        True, False, False, True, 0.0)
    dataflow = _silicon(toy_device, kind="dataflow")
    assert (dataflow.sram, dataflow.dataflow) == (False, True)


def test_hardware_arrays_stack_and_expand(toy_device):
    a = _silicon(toy_device)
    b = _silicon(toy_device, id="toy-2", tdp_w=1000.0)
    hw = HardwareArrays.of([a, b])
    assert hw.ids == ("toy-gpu", "toy-2")
    assert hw.power_w.tolist() == [600.0, 1100.0]
    assert hw.expand(3).power_w.shape == (2, 1, 1)
    assert hw.expand(3).ids == hw.ids
    with pytest.raises(AttributeError, match="no_such_field"):
        hw.no_such_field
    assert "device" not in hw.arrays and "compute_dtype" not in hw.arrays


def test_a_device_without_a_format_for_the_weights_says_which_it_has(toy_device):
    fp8_only = type(toy_device).model_validate({**toy_device.model_dump(), "peak_dense_tflops": {"fp8": 2.0}})
    with pytest.raises(UnsupportedDtype) as err:
        compute_dtype(fp8_only, "bf16")
    assert str(err.value) == "toy-gpu lists no compute format for bf16 weights (it has ['fp8'])"
