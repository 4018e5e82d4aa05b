"""The whole-grid evaluation (grid.py) on the toy model/device: memory fit and axes worked out by hand.

Toy model (bf16): 736 weight bytes, 16 KV bytes per token (one KV head, replicated under TP).
Toy device: 1 GB HBM (0.9e9 usable), scale-up domain 8, 500 W + 800 W / 8 per node = 600 W per device.
"""

import numpy as np
import pytest

from planner.perf.grid import GridSpec, evaluate_grid
from planner.perf.profile import ModelProfile
from planner.perf.roofline import decode_step, prefill_pass
from planner.perf.silicon import HardwareArrays, Silicon


def _hw(device, **update):
    return HardwareArrays.of([Silicon.of(type(device).model_validate({**device.model_dump(), **update}), "bf16")])


@pytest.fixture()
def toy(toy_model, toy_device):
    return ModelProfile.of(toy_model, "bf16", "bf16"), _hw(toy_device)


def test_grid_axes_memory_and_power_by_hand(toy):
    model, hw = toy
    grid = evaluate_grid(model, hw, GridSpec(tp=(1, 2, 16), batch=(1, 4), input_tokens=(16, 48), output_tokens=32))
    assert grid.tpot_s.shape == (1, 3, 2, 2)
    assert grid.batch.shape == (1, 1, 2, 1)
    assert grid.devices.shape == grid.weights_bytes_per_device.shape == (1, 3, 1, 1)
    assert grid.devices.reshape(-1).tolist() == [1.0, 2.0, 16.0]
    assert grid.weights_bytes_per_device.reshape(-1) == pytest.approx([736.0, 368.0, 46.0])
    # paged KV: 16 + 32/2 = 32 tokens (2 pages) and 48 + 16 = 64 tokens (4 pages) at 16 B
    assert grid.kv_bytes_per_request_per_device[0, 0, 0] == pytest.approx([512.0, 1024.0])
    # (0.9e9 − 736) / 512 = 1,757,811.06 requests at the short prompt
    assert grid.max_batch_in_memory[0, 0, 0, 0] == 1_757_811
    assert grid.weights_fit.all()
    assert grid.within_domain.reshape(-1).tolist() == [True, True, False]  # 16 devices exceed the domain of 8
    assert grid.fits[0, :, :, 0].tolist() == [[True, True], [True, True], [False, False]]
    assert grid.power_w.reshape(-1) == pytest.approx([600.0, 1200.0, 9600.0])


def test_each_prompt_length_is_priced_on_its_own(toy):
    model, hw = toy
    grid = evaluate_grid(model, hw, GridSpec(tp=(1,), batch=(2,), input_tokens=(16, 48), output_tokens=32))
    n, b = np.ones((1, 1, 1, 1)), np.full((1, 1, 1, 1), 2.0)
    for i, isl in enumerate((16, 48)):
        assert grid.tpot_s[0, 0, 0, i] == pytest.approx(decode_step(model, hw.expand(4), n, b, isl + 16.0).total_s)
        assert grid.ttft_s[0, 0, 0, i] == pytest.approx(prefill_pass(model, hw.expand(4), n, isl).total_s)
    assert grid.output_tokens_per_s == pytest.approx(2.0 / grid.serving.total_s)


def test_weights_that_do_not_fit_leave_no_batch(toy_model, toy_device):
    model = ModelProfile.of(toy_model, "bf16", "bf16")
    small = _hw(toy_device, memory_tiers=[{"tier": "hbm", "capacity_gb": 5e-7, "bandwidth_tb_s": 1.0}])
    grid = evaluate_grid(model, small, GridSpec(tp=(1, 2), batch=(1,), input_tokens=(16,), output_tokens=32))
    # 450 usable bytes: 736 B on one device do not fit; 368 B on two do, with room for no 512 B request
    assert grid.weights_fit.reshape(-1).tolist() == [False, True]
    assert grid.max_batch_in_memory.reshape(-1).tolist() == [0.0, 0.0]
    assert not grid.fits.any()


def test_weights_that_exactly_fill_the_usable_memory_fit(toy_model, toy_device):
    model = ModelProfile.of(toy_model, "bf16", "bf16")
    exact = _hw(toy_device, memory_tiers=[{"tier": "hbm", "capacity_gb": 736 / 0.9 / 1e9, "bandwidth_tb_s": 1.0}])
    assert float(exact.usable_weights_bytes[0]) == 736.0
    grid = evaluate_grid(model, exact, GridSpec(tp=(1,), batch=(1,), input_tokens=(16,), output_tokens=32))
    assert grid.weights_fit.reshape(-1).tolist() == [True]


def test_exactly_one_request_beside_the_weights(toy_model, toy_device):
    model = ModelProfile.of(toy_model, "bf16", "bf16")
    # 736 B of weights + one 512 B request (32 tokens · 16 B) fill the 1248 usable bytes exactly
    hw = _hw(toy_device, memory_tiers=[{"tier": "hbm", "capacity_gb": 1248 / 0.9 / 1e9, "bandwidth_tb_s": 1.0}])
    assert float(hw.usable_weights_bytes[0]) == 1248.0
    grid = evaluate_grid(model, hw, GridSpec(tp=(1,), batch=(1,), input_tokens=(16,), output_tokens=32))
    assert grid.max_batch_in_memory.reshape(-1).tolist() == [1.0]
    assert grid.fits.reshape(-1).tolist() == [True]


def test_kv_spilling_from_sram_adds_the_sram_beside_the_weights(toy_model, spill_device):
    model = ModelProfile.of(toy_model, "bf16", "bf16")
    small = _hw(spill_device, memory_tiers=[{"tier": "sram", "capacity_gb": 1e-6, "bandwidth_tb_s": 10.0},
                                            {"tier": "dram", "capacity_gb": 1e-6, "bandwidth_tb_s": 1.0}])
    grid = evaluate_grid(model, small, GridSpec(tp=(1,), batch=(1,), input_tokens=(16,), output_tokens=32))
    # 900 B of DRAM plus 900 − 736 = 164 B of SRAM: two 512 B requests (DRAM alone holds one)
    assert grid.max_batch_in_memory.reshape(-1).tolist() == [2.0]


def test_contiguous_kv_reserves_the_longest_context(toy):
    model, hw = toy
    grid = evaluate_grid(model, hw, GridSpec(tp=(1,), batch=(1,), input_tokens=(16, 48), output_tokens=32,
                                             paged_kv=False))
    # every request reserves the longest prompt plus the output: 48 + 32 = 80 tokens · 16 B
    assert grid.kv_bytes_per_request_per_device.reshape(-1) == pytest.approx([1280.0, 1280.0])
    reserved = evaluate_grid(model, hw, GridSpec(tp=(1,), batch=(1,), input_tokens=(16,), output_tokens=32,
                                                 paged_kv=False, reserved_context_tokens=100))
    assert reserved.kv_bytes_per_request_per_device.reshape(-1) == pytest.approx([1600.0])


def test_expert_parallel_grid_prices_every_pass_with_ep(moe_model, toy_device):
    model = ModelProfile.of(moe_model, "bf16", "bf16")
    hw = _hw(toy_device)
    spec = GridSpec(tp=(4,), batch=(8,), input_tokens=(16,), output_tokens=32, ep=4)
    grid = evaluate_grid(model, hw, spec)
    n, b = np.full((1, 1, 1, 1), 4.0), np.full((1, 1, 1, 1), 8.0)
    assert grid.tpot_s == pytest.approx(decode_step(model, hw.expand(4), n, b, 32.0, ep=4).total_s)
    assert grid.ttft_s == pytest.approx(prefill_pass(model, hw.expand(4), n, 16.0, ep=4).total_s)
    steady = evaluate_grid(model, hw, GridSpec(tp=(4,), batch=(8,), input_tokens=(16,), output_tokens=32, ep=4,
                                               steady_state=True))
    # 16/32 prompt tokens per request per step: 7 others' 3.5 in a request's step, all 8 · 0.5 in the replica's
    # (each prompt token attends over its own prompt's first 16/2 tokens on average)
    assert steady.tpot_s == pytest.approx(decode_step(model, hw.expand(4), n, b, 32.0, 3.5, ep=4,
                                                      prefill_context_tokens=8.0).total_s)
    assert steady.serving.total_s == pytest.approx(decode_step(model, hw.expand(4), n, b, 32.0, 4.0, ep=4,
                                                               prefill_context_tokens=8.0).total_s)
    # per device: the dense 416 B whole, a quarter of the 384 routed bytes; KV of 2 of the 8 sequences each
    assert grid.weights_bytes_per_device.reshape(-1) == pytest.approx([416.0 + 96.0])
    assert grid.kv_bytes_per_request_per_device.reshape(-1) == pytest.approx([512.0 / 4])


def test_a_static_batch_carries_no_per_request_host_work(toy_model, toy_device):
    model = ModelProfile.of(toy_model, "bf16", "bf16")
    hw = _hw(toy_device.model_copy(update={"sequence_overhead_us": 2.0}))
    static = evaluate_grid(model, hw, GridSpec(tp=(1,), batch=(8,), input_tokens=(64,), output_tokens=32,
                                               static_batch_prefill=True))
    assert static.decode.overhead_s.reshape(-1)[0] == 0.0 and static.prefill.overhead_s.reshape(-1)[0] == 0.0
    # served in steady state (estimate's regime), a step and the batch's prefill pay 8 sequences · 2 µs
    steady = evaluate_grid(model, hw, GridSpec(tp=(1,), batch=(8,), input_tokens=(64,), output_tokens=32,
                                               static_batch_prefill=True, steady_state=True))
    assert steady.decode.overhead_s.reshape(-1)[0] == pytest.approx(16e-6)
    assert steady.prefill.overhead_s.reshape(-1)[0] == pytest.approx(16e-6)


def test_static_batch_prefill_prices_the_batchs_prompts_together(toy):
    model, hw = toy
    grid = evaluate_grid(model, hw, GridSpec(tp=(1,), batch=(1, 8), input_tokens=(64,), output_tokens=32,
                                             static_batch_prefill=True))
    n = np.ones((1, 1, 1, 1))
    eight = prefill_pass(model, hw.expand(4), n, 64.0, prompts=8.0).total_s
    assert grid.ttft_s[0, 0, 1, 0] == pytest.approx(float(np.ravel(eight)[0]))
    one = evaluate_grid(model, hw, GridSpec(tp=(1,), batch=(8,), input_tokens=(64,), output_tokens=32))
    assert one.ttft_s.reshape(-1)[0] < grid.ttft_s[0, 0, 1, 0]


def test_steady_state_steps_carry_the_other_requests_prompts(toy):
    model, hw = toy
    grid = evaluate_grid(model, hw, GridSpec(tp=(1,), batch=(4,), input_tokens=(64,), output_tokens=16,
                                             steady_state=True))
    n, b = np.ones((1, 1, 1, 1)), np.full((1, 1, 1, 1), 4.0)
    # each request brings 64/16 = 4 prompt tokens per step: the 3 others' 12 in a request's step, all 16 in the
    # replica's throughput step
    # (the prompt tokens attend over their own 64-token prompts: 32 tokens on average)
    decode = decode_step(model, hw.expand(4), n, b, 72.0, prefill_tokens=12.0, prefill_context_tokens=32.0)
    serving = decode_step(model, hw.expand(4), n, b, 72.0, prefill_tokens=16.0, prefill_context_tokens=32.0)
    assert grid.tpot_s == pytest.approx(decode.total_s)
    assert grid.serving.total_s == pytest.approx(serving.total_s)


def test_expert_parallel_kv_share_splits_heads_over_the_attention_replica(moe_model, toy_device):
    four_heads = moe_model.model_copy(update={"attention_heads": 4, "kv_heads": 4})
    model = ModelProfile.of(four_heads, "bf16", "bf16")
    grid = evaluate_grid(model, _hw(toy_device), GridSpec(tp=(4,), batch=(1,), input_tokens=(16,), output_tokens=32,
                                                          ep=2))
    # 32 held tokens · 2 layers · (2·4 heads·2 dims·2 B = 32 B) = 2048 B; each device: half the heads of its
    # replica of 2 devices, and the KV of half the sequences (2 replicas) → 2048 / 2 / 2
    assert grid.kv_bytes_per_request_per_device.reshape(-1) == pytest.approx([512.0])
