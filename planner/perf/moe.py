"""Mixture-of-experts: how many experts a decode step touches."""

from __future__ import annotations

import numpy as np


def touched_experts(experts: int, experts_active: int, batch):
    """Expected distinct experts a batch of ``b`` tokens routes to, with uniform routing.

    Each expert is missed by one token with probability ``1 − k/E``, so
    ``E · (1 − (1 − k/E)^b)``: ``k`` at batch 1, approaching ``E`` as the batch grows.
    """
    b = np.asarray(batch, dtype=float)
    return experts * (1.0 - (1.0 - experts_active / experts) ** b)
