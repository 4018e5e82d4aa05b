"""``--alternatives N``: the best plans whose device-type mix differs from every plan found before."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from planner.cli import app
from planner.optimize import PlanOptions, plan_workload
from planner.schema import Workload


def chat(**extra) -> Workload:
    return Workload.model_validate({
        "model": "llama-3.1-8b", "dtype": "fp8",
        "classes": [{"name": "chat", "rate_rps": 20, "input_tokens": 1000, "output_tokens": 200,
                     "slo": {"ttft_ms": 1000, "tpot_ms": 50}}],
        "constraints": {"power_budget_kw": 300, "devices": ["h200", "mi300x", "trn2"]}, **extra,
    })


@pytest.fixture(scope="module")
def plan(catalog):
    return plan_workload(chat(), catalog, PlanOptions(alternatives=3))


def test_each_alternative_uses_a_mix_no_earlier_plan_used_and_is_no_better(plan):
    mixes = [frozenset(plan.totals.devices_by_type)] + [frozenset(a.devices_by_type) for a in plan.alternatives]
    assert len(plan.alternatives) == 3 and len(set(mixes)) == len(mixes)
    for a in plan.alternatives:
        assert a.goodput_scale <= plan.goodput_scale * (1 + 1e-4)  # the best plan is the best (within its gap)
        assert a.shortfall == pytest.approx(max(0.0, 1 - a.goodput_scale / plan.goodput_scale), abs=1e-12)
    scales = [a.goodput_scale for a in plan.alternatives]
    assert scales == sorted(scales, reverse=True)  # each is the best of what is left, so they come best first


def test_the_cli_lists_them(tmp_path):
    path = tmp_path / "w.json"
    path.write_text(chat().model_dump_json())
    out = CliRunner().invoke(app, ["plan", str(path), "--alternatives", "2", "--no-baseline"])
    assert out.exit_code == 0, out.output
    assert "alternative 1:" in out.output and "alternative 2:" in out.output and "short of the best" in out.output
