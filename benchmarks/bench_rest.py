"""REST latency benchmark: requests per second and p50/p99 latency of POST /v1/plans and POST /v1/estimate.

Run: python benchmarks/bench_rest.py [--requests 1000] [--plan-requests 1000] [--concurrency 8] [--workers 2]
                                    [--executor thread|process] [--study-bomb]

Starts ``siliconmix serve`` on a free loopback port with a fresh SQLite file, sends a bounded load from
``concurrency`` clients (loopback only; it stops by itself), and prints one line per endpoint. Plans are the
chat-70b example (examples/workloads/chat-70b.yaml) with the service's defaults (homogeneous baseline on).
``--study-bomb`` instead POSTs a ~1 KB study of six 10-value axes (10^6 scenarios) and reports the answer, its
time, the server's peak RSS meanwhile, and how long the server takes to stop on SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from api.examples import CHAT_70B  # noqa: E402

ESTIMATE = {"model": "llama-3.3-70b", "device": "h100-sxm", "tp": 8, "batch": 32, "isl": 2048, "osl": 256}
DEADLINE_S = 1800  # the whole run stops after this, whatever is left


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(port: int, db: Path, workers: int, executor: str) -> subprocess.Popen:
    env = {**os.environ, "SILICONMIX_PLAN_WORKERS": str(workers), "SILICONMIX_PLAN_EXECUTOR": executor,
           "SILICONMIX_PLAN_QUEUE_LIMIT": "1000"}
    process = subprocess.Popen([sys.executable, "-m", "planner", "serve", "--port", str(port), "--db", f"sqlite:///{db}",
                                "--no-access-log", "--log-level", "warning"], cwd=REPO, env=env)
    for _ in range(600):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                return process
        except httpx.TransportError:
            pass
        if process.poll() is not None:
            raise SystemExit(f"server exited with {process.returncode}")
        time.sleep(0.1)
    process.kill()
    raise SystemExit("server did not become ready")


async def load(base_url: str, path: str, body: dict, requests: int, concurrency: int, expect: int) -> dict:
    """``requests`` POSTs from ``concurrency`` clients; latency of each, wall time of all; /healthz meanwhile."""
    latencies: list[float] = []
    health: list[float] = []
    finished = asyncio.Event()
    failures: dict[int, int] = {}
    remaining = iter(range(requests))
    stop_at = time.monotonic() + DEADLINE_S

    async def client(http: httpx.AsyncClient) -> None:
        for _ in remaining:
            if time.monotonic() > stop_at:
                return
            start = time.perf_counter()
            response = await http.post(path, json=body)
            latencies.append(time.perf_counter() - start)
            if response.status_code != expect:
                failures[response.status_code] = failures.get(response.status_code, 0) + 1

    async def probe() -> None:  # its own connection, ten times a second
        async with httpx.AsyncClient(base_url=base_url, timeout=60) as http:
            while not finished.is_set():
                start = time.perf_counter()
                await http.get("/healthz")
                health.append(time.perf_counter() - start)
                await asyncio.sleep(0.1)

    async def clients(http: httpx.AsyncClient) -> None:
        await asyncio.gather(*(client(http) for _ in range(concurrency)))
        finished.set()

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base_url, timeout=300, limits=limits) as http:
        for _ in range(min(concurrency, 4)):  # warm-up, not counted
            await http.post(path, json=body)
        start = time.perf_counter()
        await asyncio.gather(clients(http), probe())
        wall = time.perf_counter() - start
    return {"path": path, "requests": len(latencies), "failures": failures, "rps": len(latencies) / wall,
            "wall_s": wall, **{f"{k}_ms": v for k, v in percentiles(latencies).items()},
            **{f"healthz_{k}_ms": v for k, v in percentiles(health).items()}}


def rss_mb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) // 1024 for line in status if line.startswith("VmRSS"))


def study_bomb(base_url: str, server: subprocess.Popen, wait_s: float = 30) -> None:
    """POST 10^6 scenarios in ~1 KB; print the answer, its time and the server's peak RSS, then time a SIGTERM."""
    params = ["slo.ttft_ms", "slo.tpot_ms", "rate_rps", "input_tokens", "output_tokens", "power_budget_kw"]
    axes = [{"name": f"a{i}", "param": p, "values": [10 * (j + 1) for j in range(10)]} for i, p in enumerate(params)]
    body = {"name": "bomb", "base": CHAT_70B, "axes": axes}
    peak, done = [rss_mb(server.pid)], threading.Event()
    start_rss = peak[0]

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], rss_mb(server.pid))
            time.sleep(0.05)

    threading.Thread(target=sample, daemon=True).start()
    start = time.perf_counter()
    try:
        response = httpx.post(f"{base_url}/v1/studies", json=body, timeout=wait_s)
        answer = f"{response.status_code} {response.json().get('detail', '')[:80]}"
    except httpx.TimeoutException:
        answer = f"no answer within {wait_s:g} s"
    elapsed = time.perf_counter() - start
    done.set()
    stop = time.perf_counter()
    server.send_signal(signal.SIGTERM)
    try:
        server.wait(timeout=30)
        stopped = f"stopped {time.perf_counter() - stop:.1f} s after SIGTERM"
    except subprocess.TimeoutExpired:
        server.kill()
        stopped = "still running 30 s after SIGTERM (killed)"
    print(f"POST /v1/studies, {len(json.dumps(body))} bytes, 10^6 scenarios: {answer} in {elapsed:.2f} s; "
          f"server RSS {start_rss} -> peak {peak[0]} MB; {stopped}")


def percentiles(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds) or [float("nan")]
    return {"p50": 1e3 * statistics.median(ordered), "p99": 1e3 * ordered[max(0, int(0.99 * len(ordered)) - 1)],
            "max": 1e3 * ordered[-1]}


def report(result: dict, concurrency: int) -> None:
    print(f"POST {result['path']:<12} {result['requests']:>5} requests, {concurrency} concurrent: "
          f"{result['rps']:8.1f} req/s  p50 {result['p50_ms']:8.1f} ms  p99 {result['p99_ms']:8.1f} ms  "
          f"max {result['max_ms']:8.1f} ms  ({result['wall_s']:.1f} s; non-2xx: {result['failures'] or 'none'}); "
          f"/healthz meanwhile p50 {result['healthz_p50_ms']:.1f} ms, p99 {result['healthz_p99_ms']:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000, help="POST /v1/estimate requests")
    parser.add_argument("--plan-requests", type=int, default=1000, help="POST /v1/plans requests")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2, help="SILICONMIX_PLAN_WORKERS of the server")
    parser.add_argument("--executor", choices=("thread", "process"), default="thread",
                        help="SILICONMIX_PLAN_EXECUTOR of the server")
    parser.add_argument("--study-bomb", action="store_true", help="only the 10^6-scenario study POST and a SIGTERM")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="siliconmix-bench-") as tmp:
        port = free_port()
        server = start_server(port, Path(tmp) / "bench.db", args.workers, args.executor)
        base_url = f"http://127.0.0.1:{port}"
        if args.study_bomb:
            study_bomb(base_url, server)
            return
        try:
            print(f"server: siliconmix serve on {base_url}, {args.workers} plan workers ({args.executor} pool), SQLite WAL; "
                  f"client: httpx, {os.cpu_count()} cores shared with the server")
            report(asyncio.run(load(base_url, "/v1/estimate", ESTIMATE, args.requests, args.concurrency, 200)),
                   args.concurrency)
            report(asyncio.run(load(base_url, "/v1/plans", CHAT_70B, args.plan_requests, args.concurrency, 201)),
                   args.concurrency)
        finally:
            server.send_signal(signal.SIGINT)
            server.wait(timeout=60)


if __name__ == "__main__":
    main()
