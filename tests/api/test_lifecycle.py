"""Work stops when nobody waits for it: a plan whose client disconnects, and everything on SIGTERM.

The solves here are real and would run for ten minutes (a market-split MILP with a 600 s limit); only the
cancel can end them, so a test that finishes shows it worked. Each waits for a condition, never a delay.
"""

from __future__ import annotations

import json
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from apitest import REPO, LiveServer, free_port
from sqlalchemy import create_engine, text

import api.runner
from api.examples import CHAT_70B
from api.main import create_app
from planner.solvers import SolveOptions, get_backend
from planner.solvers.cancel import SolveCancelled, cancellable
from tests.solvers.conftest import market_split

ENDLESS = SolveOptions(time_limit_s=600, relative_gap=0.0)


def test_a_plan_stops_when_its_client_disconnects(make_settings, monkeypatch):
    solving, outcome = threading.Event(), queue.Queue()

    def endless_plan(job, token):
        solving.set()
        try:
            with cancellable(token):
                get_backend("ortools").solve(market_split(), ENDLESS)
        except SolveCancelled as exc:
            outcome.put(exc)
            raise
        outcome.put("ran to its end")

    monkeypatch.setattr(api.runner, "run_plan", endless_plan)
    app = create_app(make_settings())
    server = LiveServer(app)
    port = int(server.start().rsplit(":", 1)[1])
    try:
        body = json.dumps(CHAT_70B).encode()
        sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        sock.sendall(b"POST /v1/plans HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        assert solving.wait(60)
        sock.close()  # the client gives up
        assert isinstance(outcome.get(timeout=120), SolveCancelled)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as http:
            assert http.get("/healthz").status_code == 200
        assert app.state.services.runner.pending == 0 and not app.state.services.solving
    finally:
        server.stop()


SERVER = """
import sys
import uvicorn
import api.runner, planner.optimize
from api.main import create_app
from api.settings import Settings
from planner.solvers import SolveOptions, get_backend
from planner.solvers.cancel import CancelToken, cancellable, current_token
from tests.solvers.conftest import market_split

def endless(*args):
    print("solving", flush=True)
    token = next((a for a in args if isinstance(a, CancelToken)), None) or current_token()  # plans get theirs passed
    with cancellable(token):
        get_backend(sys.argv[3]).solve(market_split(), SolveOptions(time_limit_s=600, relative_gap=0.0))
    print("ran to its end", flush=True)

api.runner.run_plan = planner.optimize.plan_workload = endless  # plans; the study loop's solves
settings = Settings(database_url=sys.argv[2], study_dir=sys.argv[4], plan_baseline=False)
uvicorn.run(create_app(settings), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
"""


def lines_of(stream) -> queue.Queue:
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line.strip()) for line in stream], daemon=True).start()
    return lines


@pytest.mark.parametrize("backend", ["ortools", "pulp"])
def test_sigterm_stops_running_plans_and_studies_within_seconds(tmp_path: Path, backend: str):
    port, db_url = free_port(), f"sqlite:///{tmp_path / 'db.sqlite'}"
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(port), db_url, backend, str(tmp_path / "studies")],
                              cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    printed = lines_of(server.stdout)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(600):  # until it answers
            try:
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        study = {"name": "endless", "base": CHAT_70B, "axes": [{"name": "t", "param": "slo.tpot_ms", "values": [50, 40]}]}
        posted = httpx.post(f"{url}/v1/studies", json=study)
        assert posted.status_code == 202, posted.text
        answers: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: answers.put(httpx.post(f"{url}/v1/plans", json=CHAT_70B, timeout=120)),
                         daemon=True).start()
        assert [printed.get(timeout=60), printed.get(timeout=60)] == ["solving", "solving"]  # both solves running
        server.send_signal(signal.SIGTERM)
        code = server.wait(timeout=30)  # the solves had 600 s to go
        assert code in (0, -signal.SIGTERM), server.stderr.read()
        answer = answers.get(timeout=30)
        assert answer.status_code == 503 and "shutting down" in answer.json()["detail"], answer.text
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        server.stdout.close()
        server.stderr.close()
    assert printed.empty() or printed.get() != "ran to its end"
    engine = create_engine(db_url)
    with engine.connect() as connection:
        status, error = connection.execute(text("SELECT status, error FROM studies")).one()
    engine.dispose()
    assert status == "interrupted" and "server stopped" in error
    assert not (tmp_path / "studies" / posted.json()["id"] / "rows.jsonl").exists()  # nothing half-done journaled
