"""Speculative decoding round arithmetic (Leviathan et al., 2023)."""

from __future__ import annotations

import numpy as np


def expected_tokens_per_round(acceptance_rate, draft_tokens):
    """Tokens one draft-then-verify round emits: ``(1 − α^(k+1)) / (1 − α)``.

    With k drafted tokens each accepted with probability α, the verifier always adds one token.
    """
    a = np.asarray(acceptance_rate, dtype=float)
    return (1.0 - a ** (np.asarray(draft_tokens, dtype=float) + 1.0)) / (1.0 - a)


def spec_round_s(draft_step_s, draft_tokens, verify_step_s, round_trip_s):
    """One round: ``k`` draft steps, one verify pass over ``k+1`` tokens, plus link round trips.

    ``k · t_draft + t_verify + t_rtt`` (``t_rtt`` is zero when draft and target share silicon).
    """
    return np.asarray(draft_tokens, dtype=float) * draft_step_s + verify_step_s + round_trip_s


def spec_tpot_s(round_s, acceptance_rate, draft_tokens):
    """Time per output token under speculation: ``round / E[tokens per round]``."""
    return round_s / expected_tokens_per_round(acceptance_rate, draft_tokens)
