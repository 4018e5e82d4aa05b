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
