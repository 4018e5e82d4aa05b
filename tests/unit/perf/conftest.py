"""A toy mixture-of-experts model small enough to price by hand."""

import pytest

from planner.schema import ModelArch


@pytest.fixture()
def moe_model() -> ModelArch:
    """2 layers, d=4, 2 heads of 2, 1 KV head, 4 experts of FFN 2, 2 active, no dense layers.

    attention/layer 48, router/layer 16, LM head 40 → always active 2·(48 + 16) + 40 = 168;
    one expert 3·4·2 = 24; routed bytes (bf16) = 2 layers · 4 · 24 · 2 B = 384.
    """
    return ModelArch(
        id="toy-moe", name="Toy MoE", family="toy", source="hand-made", layers=2, hidden_size=4, attention_heads=2,
        kv_heads=1, head_dim=2, ffn_size=0, vocab_size=10, max_context_tokens=64,
        moe={"experts": 4, "experts_active": 2, "expert_ffn_size": 2},
        published_params_b={"total": 3.32e-7, "active": 2.64e-7},
    )


@pytest.fixture()
def spill_device():
    """An SRAM chip (1000 B at 10 TB/s) whose KV spills to 1 GB of DRAM at 1 TB/s; otherwise the toy device."""
    from planner.schema import Device

    return Device(
        id="spill", vendor="toy", name="Spill", kind="asic", peak_dense_tflops={"bf16": 1.0},
        memory_tiers=[{"tier": "sram", "capacity_gb": 1e-6, "bandwidth_tb_s": 10.0},
                      {"tier": "dram", "capacity_gb": 1.0, "bandwidth_tb_s": 1.0}],
        weights_tier="sram", kv_tier="dram",
        scale_up={"bandwidth_gb_s": 100.0, "latency_us": 1.0, "domain_size": 8},
        scale_out={"bandwidth_gb_s": 10.0, "latency_us": 5.0},
        tdp_w=500.0, devices_per_node=8, node_overhead_w=0.0, price_usd=1.0, price_usd_per_hour=1.0,
        mfu=0.5, mbu=0.5, layer_latency_us=0.0,
    )
