"""Shared fixtures: the real catalog, and a toy model and device small enough to price by hand."""

from __future__ import annotations

import pytest

from planner.catalog import load_catalog
from planner.schema import Device, ModelArch


@pytest.fixture(scope="session")
def catalog():
    return load_catalog()


@pytest.fixture()
def toy_model() -> ModelArch:
    """2 layers, d=4, 2 heads of dim 2, 1 KV head, FFN 8, vocab 10.

    attention/layer = 4·2·2·2 + 2·4·1·2 = 48; FFN/layer = 3·4·8 = 96; LM head = 40; embedding = 40.
    always-active = 2·(48+96) + 40 = 328; total = 368.
    """
    return ModelArch(
        id="toy", name="Toy", family="toy", source="hand-made for tests", layers=2, hidden_size=4,
        attention_heads=2, kv_heads=1, head_dim=2, ffn_size=8, vocab_size=10, max_context_tokens=64,
        published_params_b={"total": 3.68e-7, "active": 3.28e-7},
    )


@pytest.fixture()
def toy_device() -> Device:
    """1 TFLOP/s bf16, 1 TB/s HBM of 1 GB, 100 GB/s links with 1 µs steps, MFU = MBU = 0.5, no layer floor."""
    return Device(
        id="toy-gpu", vendor="toy", name="Toy GPU", kind="gpu", peak_dense_tflops={"bf16": 1.0},
        memory_tiers=[{"tier": "hbm", "capacity_gb": 1.0, "bandwidth_tb_s": 1.0}],
        weights_tier="hbm", kv_tier="hbm",
        scale_up={"bandwidth_gb_s": 100.0, "latency_us": 1.0, "domain_size": 8},
        scale_out={"bandwidth_gb_s": 10.0, "latency_us": 5.0},
        tdp_w=500.0, devices_per_node=8, node_overhead_w=800.0, price_usd=10_000.0, price_usd_per_hour=2.0,
        mfu=0.5, mbu=0.5, layer_latency_us=0.0,
    )
