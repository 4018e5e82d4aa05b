"""Collectives against hand-computed cases (1 MB message, 4 devices, 100 GB/s, 1 µs steps)."""

import pytest

from planner.perf import comm

MB, BW, LAT = 1e6, 1e11, 1e-6


def test_ring_allreduce_hand_case():
    # 2·3/4 · 1e6/1e11 = 15 µs of bandwidth + 2·3 · 1 µs = 6 µs of latency
    assert comm.ring_allreduce_s(MB, 4, BW, LAT) == pytest.approx(21e-6)


def test_single_device_collectives_cost_nothing():
    assert comm.ring_allreduce_s(MB, 1, BW, LAT) == 0.0
    assert comm.pipeline_hops_s(1, 1000, 1, 1e9, LAT) == 0.0


def test_allreduce_in_a_node_is_the_ring_and_free_on_one_device():
    assert comm.allreduce_s(MB, 4, BW, LAT) == pytest.approx(21e-6)
    assert comm.allreduce_s(MB, 1, BW, LAT) == 0.0
    # two devices: 2·1/2 · 10 µs + 2 · 1 µs
    assert comm.allreduce_s(MB, 2, BW, LAT) == pytest.approx(12e-6)
    # eight devices, a tiny message: the latency grows with t, 2·7 · 1 µs (+ 2·7/8 · 1e3/1e11 = 0.0175 µs)
    assert comm.allreduce_s(1e3, 8, BW, LAT) == pytest.approx(14.0175e-6)


def test_tensor_parallel_comm_is_two_allreduces_per_layer():
    # 10 tokens · d=1000 · 2 bytes = 20 kB per all-reduce; 3 layers → 6 all-reduces
    one = comm.allreduce_s(20_000, 4, BW, LAT)
    assert comm.tensor_parallel_comm_s(3, 10, 1000, 4, BW, LAT) == pytest.approx(6 * one)


def test_pipeline_hops_hand_case():
    # 3 boundaries · (1 µs + 1·1000·2 B / 1e9 B/s = 2 µs) = 9 µs
    assert comm.pipeline_hops_s(1, 1000, 4, 1e9, LAT) == pytest.approx(9e-6)


def test_transfer_hand_case():
    assert comm.transfer_s(5e9, 50e9, 1e-5) == pytest.approx(0.1 + 1e-5)
