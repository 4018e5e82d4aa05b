"""MoE touched experts and speculative-decoding round math against hand-computed cases."""

import pytest

from planner.perf.moe import touched_experts
from planner.perf.spec import expected_tokens_per_round, spec_round_s, spec_tpot_s


def test_touched_experts_hand_cases():
    assert touched_experts(8, 2, 1) == pytest.approx(2.0)
    assert touched_experts(8, 2, 2) == pytest.approx(8 * (1 - 0.75**2))  # 3.5
    assert touched_experts(256, 8, 10_000) == pytest.approx(256.0)


def test_expected_tokens_per_round_hand_case():
    # α = 0.8, k = 4: (1 − 0.8^5) / 0.2 = 3.3616
    assert expected_tokens_per_round(0.8, 4) == pytest.approx(3.3616)
    # a perfect-ish drafter approaches k+1; a useless one gives the verifier's single token
    assert expected_tokens_per_round(0.999999, 4) == pytest.approx(5.0, rel=1e-4)
    assert expected_tokens_per_round(1e-9, 4) == pytest.approx(1.0, rel=1e-6)


def test_spec_round_and_tpot():
    # 4 draft steps of 1 ms, verify 20 ms, 2 ms round trip → 26 ms per round; /3.3616 tokens
    round_s = spec_round_s(1e-3, 4, 20e-3, 2e-3)
    assert round_s == pytest.approx(26e-3)
    assert spec_tpot_s(round_s, 0.8, 4) == pytest.approx(26e-3 / 3.3616)
