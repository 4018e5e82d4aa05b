"""Limits are checked before work is done: scenario counts from the axes, 413 for bytes, 422 for counts."""

from __future__ import annotations

import copy

import api.routes.studies
from api.examples import CHAT_70B
from apitest import assert_problem, serve

PARAMS = ["slo.tpot_ms", "slo.ttft_ms", "rate_rps", "input_tokens", "output_tokens", "power_budget_kw"]


def million_scenarios() -> dict:
    """Six 10-value axes: 10^6 scenarios in about 1 KB."""
    axes = [{"name": f"a{i}", "param": p, "values": [10 * (j + 1) for j in range(10)]} for i, p in enumerate(PARAMS)]
    return {"name": "bomb", "base": copy.deepcopy(CHAT_70B), "axes": axes}


def test_a_million_scenario_study_is_refused_before_one_is_built(make_settings, tmp_path, monkeypatch):
    def must_not_expand(*_args, **_kwargs):
        raise AssertionError("expand() ran on a study over the scenario limit")

    monkeypatch.setattr(api.routes.studies, "expand", must_not_expand)
    with serve(make_settings(study_dir=tmp_path / "studies")) as http:
        response = http.post("/v1/studies", json=million_scenarios())
        body = assert_problem(response, 422, fields=["axes"], kind="validation-error")
        assert body["errors"][0]["type"] == "too_many"
        assert "1000000 scenarios; at most 500" in body["detail"]
        assert not (tmp_path / "studies").exists()
