"""/v1/catalog and /v1/estimate answer what the library answers, filtered as asked."""

from __future__ import annotations

import pytest

from planner.estimate import estimate
from planner.schema import EstimateRequest


def test_hardware_is_the_whole_catalog(client, catalog):
    devices = client.get("/v1/catalog/hardware").json()
    assert [d["id"] for d in devices] == list(catalog.devices)
    assert devices[0] == catalog.devices[devices[0]["id"]].model_dump(mode="json")
    assert all(d["provenance"] for d in devices)  # every number keeps its source


@pytest.mark.parametrize(("params", "expected"), [
    ({"vendor": "nvidia"}, lambda d: d.vendor == "nvidia"),
    ({"kind": "wafer"}, lambda d: d.kind == "wafer"),
    ({"vendor": "amd", "kind": "gpu"}, lambda d: d.vendor == "amd" and d.kind == "gpu"),
    ({"vendor": "nobody"}, lambda d: False),
])
def test_hardware_filters(client, catalog, params, expected):
    got = [d["id"] for d in client.get("/v1/catalog/hardware", params=params).json()]
    assert got == [d.id for d in catalog.devices.values() if expected(d)]
    if params.get("vendor") == "nvidia":
        assert "h100-sxm" in got and "mi300x" not in got


@pytest.mark.parametrize(("params", "expected"), [
    ({"family": "llama"}, lambda m: m.family == "llama"),
    ({"moe": True}, lambda m: m.moe is not None),
    ({"moe": False, "attention": "gqa"}, lambda m: m.moe is None and m.attention == "gqa"),
    ({"attention": "mla"}, lambda m: m.attention == "mla"),
])
def test_model_filters(client, catalog, params, expected):
    got = [m["id"] for m in client.get("/v1/catalog/models", params=params).json()]
    want = [m.id for m in catalog.models.values() if expected(m)]
    assert got == want and want


def test_one_device_and_one_model(client, catalog):
    assert client.get("/v1/catalog/hardware/cs-3").json() == catalog.device("cs-3").model_dump(mode="json")
    assert client.get("/v1/catalog/models/deepseek-v3").json() == catalog.model("deepseek-v3").model_dump(mode="json")


def test_estimate_is_the_cost_models_answer(client, catalog):
    body = {"model": "llama-3.3-70b", "device": "h100-sxm", "tp": 8, "batch": 32, "isl": 4096, "osl": 512}
    response = client.post("/v1/estimate", json=body)
    assert response.status_code == 200
    got, want = response.json(), estimate(EstimateRequest(**body), catalog).model_dump(mode="json")
    assert got.pop("created_at") and want.pop("created_at")  # each says when it was made; the rest is the same
    assert got == want
    assert response.json()["fits"] is True and response.json()["bound"] in ("compute", "memory", "communication")


def test_estimate_that_does_not_fit_can_still_be_priced(client):
    body = {"model": "llama-3.3-70b", "device": "h100-sxm", "tp": 1}
    assert client.post("/v1/estimate", json=body).status_code == 422
    priced = client.post("/v1/estimate", json=body, params={"require_fit": False})
    assert priced.status_code == 200 and priced.json()["fits"] is False
