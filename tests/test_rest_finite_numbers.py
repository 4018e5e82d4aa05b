"""REST side of the schema's and planner's input checks: a number that is infinite, NaN or over its limit, and
af_disagg on a dense model, answer 422 naming what was wrong.

(The schema is shared by the CLI and the service; this checks the service's answer to the same inputs.)
"""

from __future__ import annotations

import json
import os

import pytest

from api.settings import Settings
from tests.api.apitest import assert_problem, serve

WORKLOAD = {
    "model": "llama-3.3-70b", "dtype": "fp8", "kv_dtype": "fp8",
    "classes": [{"name": "chat", "rate_rps": 10, "input_tokens": 1000, "output_tokens": 200,
                 "slo": {"ttft_ms": 1000, "tpot_ms": 50}}],
    "strategies": ["aggregated"],
    "constraints": {"power_budget_kw": 100, "devices": ["h100-sxm"]},
}


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    saved = {n: os.environ.pop(n) for n in list(os.environ) if n.startswith("SILICONMIX_")}
    settings = Settings(database_url=f"sqlite:///{tmp_path_factory.mktemp('db') / 'siliconmix.db'}",
                        plan_baseline=False)
    try:
        with serve(settings) as http:
            yield http
    finally:
        os.environ.update(saved)


def body_with(path: str, literal: str) -> bytes:
    """The workload as JSON text with the number at ``path`` replaced by ``literal`` (1e309, Infinity, ...)."""
    text = json.dumps(WORKLOAD)
    keys = path.split(".")
    marker = "__number__"
    doc = json.loads(text)
    node = doc
    for key in keys[:-1]:
        node = node[int(key)] if key.isdigit() else node[key]
    node[keys[-1]] = marker
    return json.dumps(doc).replace(f'"{marker}"', literal).encode()


@pytest.mark.parametrize("literal", ["1e309", "Infinity", "-Infinity", "NaN", "1e308"])
@pytest.mark.parametrize("path", ["classes.0.rate_rps", "classes.0.slo.tpot_ms", "constraints.power_budget_kw"])
def test_infinite_nan_or_huge_numbers_get_422_naming_the_field(client, path, literal):
    response = client.post("/v1/plans", content=body_with(path, literal), headers={"content-type": "application/json"})
    body = assert_problem(response, 422)
    assert path in {e["field"] for e in body["errors"]}, body


def test_af_disagg_on_a_dense_model_gets_422_not_an_slo_diagnosis(client):
    body = {**WORKLOAD, "strategies": ["aggregated", "af_disagg"]}
    response = client.post("/v1/plans", json=body)
    problem = assert_problem(response, 422)
    assert "af_disagg needs an MoE model (llama-3.3-70b is dense)" in problem["detail"]
