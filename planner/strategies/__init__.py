"""Serving strategies, one module each (aggregated, pd_disagg, spec_decode, af_disagg), and their registry.

Each module has ``NAME``, ``UNITS`` (its pool units), ``applies(model)``, ``add_tasks`` (task graph),
``price(unit, Pricing, class)`` (candidates) and ``recheck(pool, class, Checking)`` (verify); one whose pools may
serve several classes also has ``price_shared(Pricing)`` (``Workload.shared_pools``).
"""

from __future__ import annotations

from types import ModuleType

from planner.strategies import af_disagg, aggregated, pd_disagg, spec_decode

REGISTRY: dict[str, ModuleType] = {m.NAME: m for m in (aggregated, pd_disagg, spec_decode, af_disagg)}


def strategy(name: str) -> ModuleType:
    """The module of serving strategy ``name``."""
    return REGISTRY[name]
