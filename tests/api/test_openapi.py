"""The OpenAPI document is complete, and the service keeps to it (schemathesis, bounded examples, keys on).

schemathesis runs against a live uvicorn server with SILICONMIX_API_KEYS set, every request carrying a key:
every operation, its documented examples first (the study example is accepted: 202), then generated cases,
each checked for no 5xx and for a status, content type, headers and body the document allows. ``POST
/v1/plans`` solves a MILP per accepted workload, so it gets fewer examples, on a server whose limits keep
each solve short (at most 2 request classes, 1 s solver time limit (2 s at most), no baseline, at most 4
scenarios per study). ``positive_data_acceptance`` is not checked: a workload can match the schema and still
name a model or device the catalog lacks, which is a 422 by design.

A bigger campaign: ``SILICONMIX_SCHEMATHESIS_EXAMPLES=1000 pytest tests/api/test_openapi.py`` (examples per
operation; POST /v1/plans gets two fifths of it).
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter, defaultdict

import pytest
import schemathesis
from apitest import LiveServer
from hypothesis import HealthCheck, settings
from schemathesis.checks import positive_data_acceptance

from api.errors import PROBLEM_MEDIA_TYPE
from api.main import create_app
from api.settings import Settings
from planner.progress import STAGES

KEY = "schemathesis-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
EXAMPLES = int(os.environ.get("SILICONMIX_SCHEMATHESIS_EXAMPLES", "25"))

OPERATIONS = {
    ("post", "/v1/plans"): "create_plan",
    ("get", "/v1/plans"): "list_plans",
    ("get", "/v1/plans/{plan_id}"): "get_plan",
    ("delete", "/v1/plans/{plan_id}"): "cancel_plan",
    ("get", "/v1/plans/{plan_id}/graph"): "get_plan_graph",
    ("post", "/v1/estimate"): "create_estimate",
    ("get", "/v1/catalog/hardware"): "list_hardware",
    ("get", "/v1/catalog/hardware/{device_id}"): "get_hardware",
    ("get", "/v1/catalog/models"): "list_models",
    ("get", "/v1/catalog/models/{model_id}"): "get_model",
    ("get", "/healthz"): "healthz",
    ("get", "/readyz"): "readyz",
    ("post", "/v1/studies"): "create_study",
    ("get", "/v1/studies"): "list_studies",
    ("get", "/v1/studies/{study_id}"): "get_study",
    ("delete", "/v1/studies/{study_id}"): "cancel_study",
    ("get", "/v1/studies/{study_id}/results"): "get_study_results",
    ("get", "/v1/plans/{plan_id}/export"): "export_plan",
    ("get", "/v1/plans/{plan_id}/deploy"): "deploy_plan",
    ("get", "/v1/studies/{study_id}/export"): "export_study",
    ("post", "/v1/plans/{plan_id}/simulate"): "simulate_plan",
    ("get", "/v1/plans/{plan_id}/simulations/{sim_id}"): "get_simulation",
    ("delete", "/v1/plans/{plan_id}/simulations/{sim_id}"): "cancel_simulation",
}


DB_DIR = tempfile.TemporaryDirectory(prefix="siliconmix-openapi-")
# built at import (schemathesis parametrizes at collection); served, with its lifespan, by the fixture below
APP = create_app(Settings(database_url=f"sqlite:///{DB_DIR.name}/siliconmix.db", api_keys=[KEY], plan_baseline=False,
                          default_time_limit_s=1, max_time_limit_s=2, max_classes=2, max_devices=8,
                          study_max_scenarios=4, study_dir=f"{DB_DIR.name}/studies"))


@pytest.fixture(scope="module")
def live_url():
    server = LiveServer(APP)
    url = server.start()
    yield url
    server.stop()


@pytest.fixture(scope="module")
def document(live_url):
    import httpx

    return httpx.get(f"{live_url}/openapi.json").json()


def test_every_operation_has_an_id_tag_summary_and_documented_errors(document):
    found = {(method, path): op for path, ops in document["paths"].items() for method, op in ops.items()}
    assert {k: op["operationId"] for k, op in found.items()} == OPERATIONS
    for (method, path), op in found.items():
        assert op["tags"] and op["summary"] and op.get("description"), (method, path)
        for status, response in op["responses"].items():
            if status.startswith(("4", "5")) and path.startswith("/v1"):
                assert list(response["content"]) == [PROBLEM_MEDIA_TYPE], (method, path, status)
                assert response["content"][PROBLEM_MEDIA_TYPE]["schema"] == {"$ref": "#/components/schemas/Problem"}
        if path.startswith("/v1"):
            assert {"422", "503"} <= set(op["responses"]), (method, path)
    assert "HTTPValidationError" not in document["components"]["schemas"]
    assert set(document["components"]["schemas"]["Problem"]["properties"]) == {
        "type", "title", "status", "detail", "instance", "errors"}


def test_request_bodies_have_examples(document):
    for path in ("/v1/plans", "/v1/estimate", "/v1/studies"):
        examples = document["paths"][path]["post"]["requestBody"]["content"]["application/json"]["examples"]
        assert len(examples) >= (1 if path == "/v1/studies" else 2) and all(e["value"] and e["summary"] for e in examples.values())
    record = document["components"]["schemas"]["PlanRecord"]
    assert {"id", "created_at", "status", "plan"} <= set(record["required"])
    for media in ("application/yaml", "text/yaml"):  # YAML bodies, the same schema
        for path, model in (("/v1/plans", "Workload"), ("/v1/studies", "StudySpec")):
            content = document["paths"][path]["post"]["requestBody"]["content"]
            assert content[media]["schema"] == {"$ref": f"#/components/schemas/{model}"}
    plans = document["paths"]["/v1/plans"]["post"]["responses"]
    assert set(plans["202"]["content"]["application/json"]["examples"]) == {"queued", "running", "cancelled", "failed"}
    assert plans["202"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/PlanJobRecord"}
    assert document["paths"]["/v1/plans/{plan_id}"]["delete"]["responses"]["200"]["content"]["application/json"]["examples"]
    job = document["components"]["schemas"]["PlanJobRecord"]["properties"]
    assert job["state"]["enum"] == ["queued", "running", "done", "cancelled", "failed"]
    stages = document["components"]["schemas"]["PlanJobProgress"]["properties"]["stage"]["enum"]
    assert tuple(stages) == STAGES  # the planner's stages, as documented
    pool = document["components"]["schemas"]["Pool"]
    assert "class" in pool["properties"] and "class_name" not in pool["properties"]  # as serialised


def test_documented_examples_are_answered(live_url, document):
    import httpx

    for path in ("/v1/plans", "/v1/estimate", "/v1/studies"):
        examples = document["paths"][path]["post"]["requestBody"]["content"]["application/json"]["examples"]
        for name, example in examples.items():
            response = httpx.post(f"{live_url}{path}", json=example["value"], headers=AUTH, timeout=60)
            assert response.status_code in (200, 201, 202), (path, name, response.text)


# schemathesis.pytest.from_fixture (lazy loading) fails under pytest 9.2 (it sets node._nodeid): load eagerly
schema = schemathesis.openapi.from_dict(APP.openapi())
BOUNDED = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None,
                   derandomize=True)


#: statuses answered per operation, over the whole campaign (the last test reads them)
ANSWERED: dict[tuple[str, str], Counter] = defaultdict(Counter)


def call(case, live_url) -> None:
    response = case.call(base_url=live_url, headers=AUTH, timeout=60)
    ANSWERED[(case.method.lower(), case.path)][response.status_code] += 1
    case.validate_response(response, excluded_checks=[positive_data_acceptance])


@schema.exclude(method="POST", path="/v1/plans").parametrize()
@BOUNDED
def test_api_keeps_to_its_schema(case, live_url):
    call(case, live_url)


@schema.include(method="POST", path="/v1/plans").parametrize()
@settings(BOUNDED, max_examples=max(1, EXAMPLES * 2 // 5))
def test_plans_keep_to_their_schema(case, live_url):
    call(case, live_url)


def test_the_campaign_covered_every_operation_without_a_5xx():
    """Runs after the two above (file order): every operation got cases, the study example was accepted."""
    assert set(OPERATIONS) <= set(ANSWERED), set(OPERATIONS) - set(ANSWERED)  # (and undocumented methods: 405)
    statuses: Counter = Counter()
    for counts in ANSWERED.values():
        statuses.update(counts)
    assert not [code for code in statuses if code >= 500], dict(ANSWERED)
    assert ANSWERED[("post", "/v1/studies")][202] >= 1 and ANSWERED[("post", "/v1/plans")][201] >= 1
    documented = sum(sum(ANSWERED[op].values()) for op in OPERATIONS)
    print(f"schemathesis: {len(OPERATIONS)} operations, {documented} cases on them, {sum(statuses.values())} requests "
          f"in all; statuses {dict(sorted(statuses.items()))}")
