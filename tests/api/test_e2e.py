"""End to end against ``siliconmix serve`` processes: post, fetch, list; restart; 20 concurrent plans."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx

from api.examples import CHAT_70B, UNREACHABLE_SLO

SOLVED = ("optimal", "feasible")  # a fleet was found (feasible: stopped within the requested gap)


def test_post_fetch_and_list_a_plan_on_a_real_server(serve_process, db_url):
    service = serve_process(db_url)
    with httpx.Client(base_url=service.base_url, timeout=60) as http:
        posted = http.post("/v1/plans", json=CHAT_70B)
        assert posted.status_code == 201, posted.text
        record = posted.json()
        assert posted.headers["location"] == f"/v1/plans/{record['id']}"
        assert record["status"] == record["plan"]["status"] in SOLVED
        assert record["plan"]["goodput_scale"] > 1 and record["plan"]["totals"]["power_kw"] <= 500 + 1e-6
        assert record["plan"]["baseline"] is None  # SILICONMIX_PLAN_BASELINE=false in the process
        fetched = http.get(posted.headers["location"])
        assert fetched.status_code == 200 and fetched.content == posted.content
        listed = http.get("/v1/plans").json()
        assert listed["total"] == 1 and listed["items"][0]["id"] == record["id"]
        assert listed["items"][0]["href"] == posted.headers["location"]
        assert http.get("/docs").status_code == 200
    assert service.stop() == 0
    log = service.log()
    assert "runs OPEN" in log and "Traceback" not in log


def test_plans_survive_a_restart_byte_for_byte(serve_process, db_url):
    first = serve_process(db_url)
    with httpx.Client(base_url=first.base_url, timeout=60) as http:
        posted = [http.post("/v1/plans", json=body) for body in (CHAT_70B, UNREACHABLE_SLO)]
        assert [p.status_code for p in posted] == [201, 201], [p.text for p in posted]
        listing = http.get("/v1/plans").content
        graph = http.get(f"{posted[0].headers['location']}/graph").content
    assert first.stop() == 0

    second = serve_process(db_url)
    with httpx.Client(base_url=second.base_url, timeout=60) as http:
        for p in posted:
            again = http.get(p.headers["location"])
            assert again.status_code == 200
            assert again.content == p.content  # the same bytes as the POST answered
        assert http.get("/v1/plans").content == listing
        assert http.get(f"{posted[0].headers['location']}/graph").content == graph
        newest, oldest = http.get("/v1/plans").json()["items"]
        assert newest["status"] == "infeasible" and oldest["status"] in SOLVED


def test_twenty_concurrent_plans_succeed_while_probes_answer(serve_process, db_url):
    """The event loop answers while plans solve: /readyz replies that name plans running or waiting (so they
    were answered during the solves, whatever the machine's speed), and every probe is a 200."""
    service = serve_process(db_url, env={"SILICONMIX_PLAN_WORKERS": "2"})
    probes: list[tuple[int, int]] = []  # (status, plans running or waiting when answered)
    done = threading.Event()

    def probe() -> None:
        with httpx.Client(base_url=service.base_url, timeout=30) as http:
            while not done.is_set():
                ready = http.get("/readyz")
                pending = int(ready.json()["checks"]["planner"]["detail"].split(", ")[2].split("/")[0])
                probes.append((ready.status_code, pending))
                assert http.get("/healthz").status_code == 200

    def post(i: int) -> httpx.Response:
        body = json.loads(json.dumps(CHAT_70B))
        body["classes"][0]["name"] = f"chat-{i}"  # twenty workloads, each solved (~0.3-1 s)
        with httpx.Client(base_url=service.base_url, timeout=120) as http:
            return http.post("/v1/plans", json=body)

    with ThreadPoolExecutor(20) as pool:
        futures = [pool.submit(post, i) for i in range(20)]
        prober = threading.Thread(target=probe)
        prober.start()
        try:
            responses = [f.result() for f in futures]
        finally:
            done.set()
            prober.join()
    assert [r.status_code for r in responses] == [201] * 20, [r.text for r in responses if r.status_code != 201]
    ids = {r.json()["id"] for r in responses}
    assert len(ids) == 20
    with httpx.Client(base_url=service.base_url) as http:
        assert http.get("/v1/plans", params={"limit": 100}).json()["total"] == 20
    assert all(status == 200 for status, _ in probes)
    assert any(pending > 0 for _, pending in probes), probes  # answered while plans were in the pool
