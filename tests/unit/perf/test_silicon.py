"""Silicon's derived capacities: device counts per replica and the bytes left for KV, by hand."""

import pytest

from planner.perf.silicon import Silicon


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
    assert spill.kv_room_bytes(1.2e9) == pytest.approx(1.8e9)  # weights overflowing the SRAM leave none
