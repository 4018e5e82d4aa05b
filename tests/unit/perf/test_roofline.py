"""Roofline pass times on the toy model/device, where every term can be worked out by hand."""

import numpy as np
import pytest

from planner.perf import comm
from planner.perf.profile import HardwareArrays, ModelProfile, compute_dtype
from planner.perf.roofline import (
    chunked_prefill_tokens_per_step,
    decode_flops,
    decode_step,
    prefill_flops,
    prefill_pass,
    touched_weight_bytes,
)


@pytest.fixture()
def toy(toy_model, toy_device):
    return ModelProfile.of(toy_model, "bf16", "bf16"), HardwareArrays.of([toy_device], "bf16")


def test_decode_flops_hand_case(toy):
    model, _ = toy
    # 2·328 linear + 4·2 heads·2 dims · (2 layers · 10 tokens) = 656 + 320
    assert decode_flops(model, 1, 10) == pytest.approx(976.0)
    assert decode_flops(model, 3, 10) == pytest.approx(3 * 976.0)


def test_prefill_flops_hand_case(toy):
    model, _ = toy
    # 8 new tokens after 4 cached: 8·656 linear + 16 · 8 · (2 layers · (4 + 4)) attention
    assert prefill_flops(model, 8, 4) == pytest.approx(8 * 656 + 16 * 8 * 16)


def test_decode_step_single_device_hand_case(toy):
    model, hw = toy
    cost = decode_step(model, hw, 1, 1, 10)
    # compute: 976 FLOPs / (1e12 · 0.5); memory: 656 always-active weight bytes + KV 2 layers·2·1·2·2 B·10 tokens = 160 B
    assert cost.compute_s == pytest.approx(976 / 0.5e12)
    assert cost.memory_s == pytest.approx((656 + 160) / 0.5e12)
    assert cost.communication_s == pytest.approx(0.0)
    assert cost.total_s == pytest.approx(1952e-12)
    assert cost.bound == "compute"  # 976 FLOPs vs 816 bytes on a device whose ridge is 1 FLOP/byte


def test_decode_step_tensor_parallel_adds_allreduces(toy):
    model, hw = toy
    cost = decode_step(model, hw, 2, 1, 10)
    expected_comm = 2 * 2 * comm.allreduce_s(1 * 4 * 2, 2, 100e9, 1e-6)
    assert cost.communication_s == pytest.approx(expected_comm)
    assert cost.bound == "communication"  # tiny model: latency dominates
    # KV: 1 KV head cannot be split, so each device keeps all 160 bytes
    assert cost.memory_s == pytest.approx((656 / 2 + 160) / 0.5e12)


def test_prefill_pass_compute_bound_for_long_prompts(toy):
    model, hw = toy
    cost = prefill_pass(model, hw, 1, 4096)
    assert cost.compute_s == pytest.approx(prefill_flops(model, 4096, 0) / 0.5e12)
    assert cost.bound == "compute"


def test_touched_weights_for_dense_model_skip_the_input_embedding(toy):
    model, _ = toy
    assert touched_weight_bytes(model, 7) == pytest.approx(656.0)


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
