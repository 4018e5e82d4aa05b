"""A strategy's re-check (verify) and its pricing agree on memory: where the pricing says memory limits a decode
candidate's batch, the re-check finds that batch fitting and the next batch of the grid not."""

from __future__ import annotations

import numpy as np
import pytest

from planner.candidates import CandidateOptions
from planner.graph import build_task_graph
from planner.perf.model import RooflineModel
from planner.plan import pools_of
from planner.schema import Workload
from planner.strategies import strategy
from planner.strategies.base import Pricing
from planner.verify import checking_at

OPTIONS = CandidateOptions()


def _workload(model: str, strategy_name: str, devices: list[str], input_tokens: int, **extra) -> Workload:
    return Workload.model_validate({
        "model": model, "dtype": "fp8", "kv_dtype": "fp8", "strategies": [strategy_name],
        "classes": [{"name": "chat", "rate_rps": 10, "input_tokens": input_tokens, "output_tokens": 1000,
                     "slo": {"ttft_ms": 60_000, "tpot_ms": 1000}}],
        "constraints": {"power_budget_kw": 400, "devices": devices}, **extra,
    })


CASES = {
    # long prompts, a loose TPOT: the KV cache bounds the batch
    "af_disagg": _workload("qwen3-235b-a22b", "af_disagg", ["h200", "b200"], 32_000),
    "spec_decode": _workload("llama-3.3-70b", "spec_decode", ["h200", "l4"], 32_000,
                             spec_decode={"draft_model": "llama-3.2-1b", "acceptance_rate": 0.8, "draft_tokens": 4}),
    "pd_disagg": _workload("llama-3.3-70b", "pd_disagg", ["h200", "l4"], 32_000),
}


def _memory_limited(catalog, name: str):
    workload = CASES[name]
    costs = RooflineModel(catalog)
    model = costs.profile(workload.model, workload.dtype, workload.kv_dtype)
    draft = costs.profile(workload.spec_decode.draft_model, workload.dtype, workload.kv_dtype) if workload.spec_decode else None
    ctx = Pricing(workload, model, draft, [costs.silicon(d, workload.dtype) for d in workload.constraints.devices],
                  build_task_graph(workload, model, draft), OPTIONS, costs)
    (rc,) = workload.classes
    priced = [c for c in strategy(name).price("decode", ctx, rc) if c.limited_by == "memory"]
    pools = [pools_of(workload, [c], np.array([1]), {(rc.name, c.route): 0.0})[0] for c in priced]
    return pools, rc, checking_at(workload, OPTIONS, costs)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_memory_limited_batch_fits_and_the_next_does_not(catalog, name):
    pools, rc, check = _memory_limited(catalog, name)
    assert any(p.tp > 1 for p in pools) and any(p.tp == 1 for p in pools)
    again = strategy(name).recheck
    grid = list(OPTIONS.batches)
    for pool in pools:
        assert again(pool, rc, check).memory_ok, pool
        bigger = pool.model_copy(update={"batch": grid[grid.index(pool.batch) + 1]})
        assert not again(bigger, rc, check).memory_ok, pool
