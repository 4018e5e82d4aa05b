"""The talk's claims (../shared/seed), each run as a product case: ``check_claims`` returns, per claim, the talk's
figure, the product's for the same case, the inputs it rests on, a verdict and why (``Claim``). Pure: the example
workloads come in as ``ClaimWorkloads`` (the command line reads them from examples/workloads/, ``EXAMPLES``)."""

from __future__ import annotations

from dataclasses import dataclass

from planner.catalog import Catalog
from planner.claims import cost_model, plans
from planner.claims.plans import EXAMPLES
from planner.claims.record import Claim, ClaimInputs
from planner.claims.talk import TALK
from planner.perf.model import RooflineModel
from planner.schema import Workload

__all__ = ["EXAMPLES", "TALK", "Claim", "ClaimInputs", "ClaimWorkloads", "check_claims"]


@dataclass(frozen=True)
class ClaimWorkloads:
    """The example workloads the fleet-level claims plan."""

    same_footprint: Workload
    same_power: Workload
    sram_draft: Workload
    af_disagg: Workload


def check_claims(catalog: Catalog, workloads: ClaimWorkloads) -> tuple[Claim, ...]:
    """Every claim of the talk, in the talk's order of topics: memory, parallelism, hardware, fleets."""
    costs = RooflineModel(catalog)
    return (
        cost_model.kv_per_token(costs),
        cost_model.kv_at_128k(costs),
        cost_model.paged_kv(costs),
        cost_model.chunked_prefill(costs),
        cost_model.tp4_speedup(costs),
        cost_model.bandwidth(costs),
        cost_model.decode_speed(costs),
        plans.same_footprint(catalog, costs, workloads.same_footprint),
        plans.same_power(catalog, workloads.same_power),
        plans.sram_draft(catalog, workloads.sram_draft),
        plans.af_disagg(catalog, workloads.af_disagg),
    )
