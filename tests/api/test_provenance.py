"""REST outputs (estimate, plan, study) carry the same stamp as the CLI's; tp is checked against the heads (422)."""

from __future__ import annotations

import copy
import datetime as dt
import time

from apitest import assert_problem, serve

from api.examples import CHAT_70B
from planner import __version__


def test_estimate_and_plan_are_stamped(client, catalog):
    body = {"model": "llama-3.3-70b", "device": "h100-sxm", "tp": 8}
    estimate = client.post("/v1/estimate", json=body).json()
    plan = client.post("/v1/plans", json=CHAT_70B, params={"time_limit_s": 6, "solver": "pulp"}).json()["plan"]
    for out in (estimate, plan):
        assert out["siliconmix_version"] == __version__
        assert out["catalog_fingerprint"] == catalog.fingerprint and len(catalog.fingerprint) == 16
        assert dt.datetime.fromisoformat(out["created_at"]).utcoffset() == dt.timedelta(0)
    assert estimate["options"]["tp"] == 8 and estimate["options"]["ep"] == 1
    assert plan["options"] == {"solver": "pulp", "engine": None, "time_limit_s": 6.0, "relative_gap": 1e-4,
                               "baseline": False, "node_limit": None}


def test_tp_the_heads_do_not_split_over_is_422(client):
    response = client.post("/v1/estimate", json={"model": "llama-3.3-70b", "device": "h100-sxm", "tp": 3})
    body = assert_problem(response, 422, fields=["tp"], kind="validation-error")
    assert "64 attention heads" in body["detail"] and "allowed tp: 1, 2, 4, 8, 16, 32, 64" in body["detail"]


def test_a_study_says_what_solved_its_rows(make_settings, tmp_path, catalog):
    base = copy.deepcopy(CHAT_70B)
    base["constraints"]["devices"] = ["h100-sxm"]
    spec = {"name": "stamped", "base": base, "axes": [{"name": "tpot_ms", "param": "slo.tpot_ms", "values": [50]}],
            "options": {"time_limit_s": 5, "baseline": False}}
    with serve(make_settings(study_dir=tmp_path / "studies")) as http:
        location = http.post("/v1/studies", json=spec).headers["location"]
        deadline = time.monotonic() + 120
        while (record := http.get(location).json())["status"] in ("queued", "running") and time.monotonic() < deadline:
            time.sleep(0.05)
    assert record["status"] == "succeeded", record
    assert record["siliconmix_version"] == __version__ and record["catalog_fingerprint"] == catalog.fingerprint
    assert record["options"] == {"solver": "ortools", "engine": None, "time_limit_s": 5.0, "relative_gap": 1e-4,
                                 "node_limit": None, "baseline": False, "simulate": False}
