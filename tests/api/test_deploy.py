"""``GET /v1/plans/{id}/deploy?target=``: the zip lists the same files with the same bytes as ``siliconmix
deploy`` writes for the stored plan; an unknown target is 422, an unknown plan 404, an infeasible one 409."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from apitest import assert_problem
from typer.testing import CliRunner

from api.examples import UNREACHABLE_SLO
from planner.cli import app
from planner.deploy import TARGETS
from tests.deploy_trees import pd_disagg_workload, unknown_options


@pytest.fixture()
def planned(client) -> dict:
    response = client.post("/v1/plans", json=pd_disagg_workload(), params={"time_limit_s": 10})
    assert response.status_code == 201, response.text
    return response.json()


def test_zip_equals_the_cli_tree(client, planned, tmp_path):
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(planned["plan"]))
    for target in TARGETS:
        response = client.get(f"/v1/plans/{planned['id']}/deploy", params={"target": target})
        assert response.status_code == 200, response.text
        name = f"deploy-{planned['id']}-{target}"
        assert response.headers["content-type"] == "application/zip"
        assert response.headers["content-disposition"] == f'attachment; filename="{name}.zip"'
        archive = zipfile.ZipFile(io.BytesIO(response.content))
        listed = {info.filename.removeprefix(name + "/"): archive.read(info).decode() for info in archive.infolist()}
        assert all(info.filename.startswith(name + "/") for info in archive.infolist())
        out = tmp_path / target
        result = CliRunner().invoke(app, ["deploy", str(plan_file), "--target", target, "-o", str(out)])
        assert result.exit_code == 0, result.output
        written = {str(p.relative_to(out)): p.read_text() for p in out.rglob("*") if p.is_file()}
        assert sorted(listed) == sorted(written) and listed == written
        assert {"README.md", "loadtest.py"} <= set(listed) and any(p.endswith("launch.sh") for p in listed)
        assert unknown_options(listed) == []
        modes = {i.filename.rsplit("/", 1)[1]: i.external_attr >> 16 for i in archive.infolist()}
        assert modes["loadtest.py"] == 0o755 and modes["README.md"] == 0o644


def test_deploy_problems(client, planned):
    assert_problem(client.get(f"/v1/plans/{planned['id']}/deploy", params={"target": "kserve"}), 422,
                   fields=["target"])
    assert_problem(client.get(f"/v1/plans/{planned['id']}/deploy"), 422, fields=["target"])
    assert_problem(client.get("/v1/plans/no-such-plan/deploy", params={"target": "vllm"}), 404)
    infeasible = client.post("/v1/plans", json=UNREACHABLE_SLO).json()
    body = assert_problem(client.get(f"/v1/plans/{infeasible['id']}/deploy", params={"target": "vllm"}), 409)
    assert "nothing to deploy" in body["detail"]
