"""YAML request bodies (``application/yaml``, ``text/yaml``) on POST /v1/plans and /v1/studies: parsed with the bounded
loader, validated as the JSON body would be; the loader's limits and bad YAML are 422; other media types stay 415."""

from __future__ import annotations

import copy

import pytest
import yaml
from apitest import assert_problem, serve

from api.examples import CHAT_70B

WORKLOAD = copy.deepcopy(CHAT_70B)
WORKLOAD["constraints"]["devices"] = ["h100-sxm"]


def post(http, path: str, text: str, media: str = "application/yaml", **kwargs):
    return http.post(path, content=text.encode(), headers={"Content-Type": media}, **kwargs)


@pytest.mark.parametrize("media", ["application/yaml", "text/yaml", "application/yaml; charset=utf-8"])
def test_a_yaml_workload_is_planned_as_its_json(client, media):
    response = post(client, "/v1/plans", yaml.safe_dump(WORKLOAD, sort_keys=False), media)
    assert response.status_code == 201, response.text
    as_json = client.post("/v1/plans", json=WORKLOAD).json()
    assert response.json()["plan"]["goodput_scale"] == as_json["plan"]["goodput_scale"]
    assert response.json()["plan"]["workload"] == as_json["plan"]["workload"]


def test_the_example_workload_file_is_accepted_as_it_is(client):
    from apitest import REPO

    response = post(client, "/v1/plans", (REPO / "examples/workloads/chat-70b.yaml").read_text(), params={"async": "true"})
    assert response.status_code == 202, response.text


def test_a_yaml_study_is_accepted(make_settings, tmp_path):
    spec = {"name": "yaml-study", "base": WORKLOAD, "axes": [{"name": "tpot_ms", "param": "slo.tpot_ms", "values": [50]}],
            "options": {"time_limit_s": 5, "baseline": False}}
    with serve(make_settings(study_dir=tmp_path / "studies")) as http:
        response = post(http, "/v1/studies", yaml.safe_dump(spec), "text/yaml")
        assert response.status_code == 202, response.text
        assert response.json()["name"] == "yaml-study"


def test_yaml_fields_are_validated_strictly_and_named(client):
    bad = copy.deepcopy(WORKLOAD)
    bad["classes"][0]["rate_rps"] = "lots"
    bad["classes"][0]["slo"]["ttft_ms"] = -1
    assert_problem(post(client, "/v1/plans", yaml.safe_dump(bad)), 422,
                   fields=["classes.0.rate_rps", "classes.0.slo.ttft_ms"])


@pytest.mark.parametrize("text, says", [
    ("model: [unclosed", "not valid YAML/JSON at line"),
    ("a: 1\na: 2\n", "not valid YAML/JSON"),  # duplicate keys refused
    ("a: " + "[" * 40 + "]" * 40, "nested deeper than 32 levels"),
    ("a: &a [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n" + "".join(f"b{i}: &b{i} [*{'a' if i == 0 else f'b{i-1}'}, "
                                                          f"*{'a' if i == 0 else f'b{i-1}'}]\n" for i in range(14)),
     "aliases expand to more than"),
    ("rate: .nan\n", "NaN or infinity"),
])
def test_bad_yaml_and_the_loader_limits_are_422_naming_the_body(client, text, says):
    body = assert_problem(post(client, "/v1/plans", text), 422, fields=[""], kind="validation-error")
    assert says in body["detail"], body["detail"]
    assert body["errors"][0]["type"] == "yaml_invalid"


def test_yaml_that_is_not_utf8_is_422(client):
    response = client.post("/v1/plans", content=b"model: \xff\xfe", headers={"Content-Type": "application/yaml"})
    body = assert_problem(response, 422, fields=[""])
    assert "not UTF-8" in body["detail"]


@pytest.mark.parametrize("path", ["/v1/plans", "/v1/studies"])
def test_other_media_types_are_still_415(client, path):
    body = assert_problem(post(client, path, yaml.safe_dump(WORKLOAD), "text/plain"), 415, kind="unsupported-media-type")
    assert "application/yaml" in body["detail"] and "text/plain" in body["detail"]


def test_yaml_is_only_for_plans_and_studies(client):
    body = assert_problem(post(client, "/v1/estimate", "model: llama-3.3-70b\n"), 415)
    assert "or YAML" not in body["detail"]  # estimate takes JSON only
