"""A PuLP/HiGHS plan and an OR-Tools/HiGHS plan in one server, in either order, through TestClient and a real
uvicorn, as plans and as studies: the server never segfaults (the two HiGHS copies never share a process).

Each server is a fresh interpreter, so the outcome does not depend on what the test process imported first.
"""

from __future__ import annotations

import copy
import subprocess
import sys
import time

import httpx
import pytest
from apitest import REPO

from api.examples import CHAT_70B

PULP, ORTOOLS = {"solver": "pulp", "engine": "highs"}, {"solver": "ortools", "engine": "highs"}
ORDERS = {"pulp-then-ortools": (PULP, ORTOOLS), "ortools-then-pulp": (ORTOOLS, PULP)}


def small_workload() -> dict:
    body = copy.deepcopy(CHAT_70B)
    body["constraints"]["devices"] = ["h100-sxm"]
    return body


TEST_CLIENT = """
import json, sys, tempfile
from fastapi.testclient import TestClient
from api.main import create_app
from api.settings import Settings

folder = tempfile.mkdtemp()
app = create_app(Settings(database_url=f"sqlite:///{folder}/db.sqlite", plan_baseline=False, study_dir=folder))
workload = json.loads(sys.argv[1])
with TestClient(app) as http:
    for params in json.loads(sys.argv[2]):
        response = http.post("/v1/plans", json=workload, params=params)
        print(response.status_code, response.json()["plan"]["solver"]["backend"], flush=True)
"""


@pytest.mark.parametrize("order", ORDERS)
def test_both_highs_copies_through_test_client(order):
    import json

    done = subprocess.run([sys.executable, "-c", TEST_CLIENT, json.dumps(small_workload()), json.dumps(ORDERS[order])],
                          cwd=REPO, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.split("\n")[:2] == [f"201 {p['solver']}" for p in ORDERS[order]]


def study(params: dict) -> dict:
    return {"name": f"iso-{params['solver']}", "base": small_workload(),
            "axes": [{"name": "tpot_ms", "param": "slo.tpot_ms", "values": [50, 30]}],
            "options": {**params, "time_limit_s": 5, "baseline": False}}


def finished(http: httpx.Client, location: str) -> dict:
    for _ in range(600):  # a condition, polled; 2 tiny scenarios take about a second
        record = http.get(location).json()
        if record["status"] not in ("queued", "running"):
            return record
        time.sleep(0.1)
    raise AssertionError(f"{location} did not finish: {record}")


@pytest.mark.parametrize("order", ORDERS)
def test_both_highs_copies_in_a_real_server_as_plans_and_studies(order, serve_process, tmp_path):
    service = serve_process(f"sqlite:///{tmp_path / 'iso.db'}", env={"SILICONMIX_STUDY_DIR": str(tmp_path / "studies")})
    with httpx.Client(base_url=service.base_url, timeout=120) as http:
        for params in ORDERS[order]:
            posted = http.post("/v1/plans", json=small_workload(), params=params)
            assert posted.status_code == 201, posted.text
        for params in ORDERS[order]:
            posted = http.post("/v1/studies", json=study(params))
            assert posted.status_code == 202, posted.text
            record = finished(http, posted.headers["location"])
            assert record["status"] == "succeeded", record
            rows = http.get(f"{posted.headers['location']}/results").json()["rows"]
            assert [r["status"] for r in rows] == ["optimal", "optimal"], rows
    assert service.process.poll() is None, service.log()  # still serving: no SIGSEGV
    assert service.stop() == 0
