"""scenario_count: the number of scenarios from the axes' lengths, before anything is expanded."""

from __future__ import annotations

import pytest

from planner.study import StudySpec, expand, scenario_count

BASE = {
    "model": "llama-3.3-70b",
    "classes": [{"name": "chat", "rate_rps": 100, "input_tokens": 1500, "output_tokens": 300,
                 "slo": {"ttft_ms": 1000, "tpot_ms": 50}}],
    "constraints": {"power_budget_kw": 200, "devices": ["h100-sxm", "b200", "mi300x"]},
}


def spec(axes: list, **kw) -> StudySpec:
    return StudySpec.model_validate({"name": "t", "base": BASE, "axes": axes, **kw})


def axis(name: str, n: int, param: str = "slo.tpot_ms") -> dict:
    return {"name": name, "param": param, "values": [20 + i for i in range(n)]}


@pytest.mark.parametrize("axes, combine, expected", [
    ([axis("a", 3), axis("b", 4, "slo.ttft_ms")], "grid", 12),            # 3 x 4
    ([axis("a", 3), {"zip": [axis("b", 2, "slo.ttft_ms"), axis("c", 2, "rate_rps")]}], "grid", 6),  # 3 x 2
    ([axis("a", 5), axis("b", 5, "slo.ttft_ms")], "zip", 5),               # advanced together
    ([{"name": "fleet", "each": "base", "values": {"both": {"devices": ["h100-sxm", "b200"]}}}], "grid", 4),  # 3 + 1
    ([{"name": "fleet", "param": "devices", "each": ["h100-sxm"], "values": [["b200", "mi300x"]]}], "grid", 2),
])
def test_count_matches_the_expansion(axes, combine, expected):
    study = spec(axes, combine=combine)
    assert scenario_count(study) == expected == len(expand(study))


def test_a_million_scenarios_are_counted_without_building_one():
    axes = [axis(f"a{i}", 10, p) for i, p in enumerate(
        ["slo.tpot_ms", "slo.ttft_ms", "rate_rps", "input_tokens", "output_tokens", "power_budget_kw"])]
    assert scenario_count(spec(axes)) == 10 ** 6  # 10^6: six 10-value axes


def test_mismatched_zip_counts_its_longest_member():
    study = spec([{"zip": [axis("a", 2), axis("b", 7, "slo.ttft_ms")]}])
    assert scenario_count(study) == 7
