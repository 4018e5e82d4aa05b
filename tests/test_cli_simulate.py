"""``siliconmix simulate`` as a user runs it (real subprocesses): JSON, table, PNG, verdict exit codes, bad input."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from planner.files import write_json
from planner.optimize import plan_workload
from planner.schema import Workload

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "workloads"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "planner", "simulate", *args], capture_output=True, text=True,
                          timeout=120)


@pytest.fixture(scope="module")
def plan_file(catalog, tmp_path_factory) -> Path:
    workload = Workload.model_validate(yaml.safe_load((EXAMPLES / "chat-70b.yaml").read_text()))
    path = tmp_path_factory.mktemp("sim") / "plan.json"
    write_json(path, plan_workload(workload, catalog).model_dump(mode="json"))
    return path


def test_json_is_deterministic_and_carries_the_verdict(plan_file):
    first = run(str(plan_file), "--duration-s", "60", "--seed", "4", "--json")
    again = run(str(plan_file), "--duration-s", "60", "--seed", "4", "--json")
    assert first.returncode in (0, 1), first.stderr
    payload = json.loads(first.stdout)
    assert payload == json.loads(again.stdout)
    assert first.returncode == (0 if payload["verdict"] == "meets" else 1)
    assert [c["name"] for c in payload["classes"]] == ["chat"]
    chat = payload["classes"][0]
    assert chat["ttft"]["p50_ms"] <= chat["ttft"]["p90_ms"] <= chat["ttft"]["p99_ms"]
    assert payload["options"] == {**payload["options"], "duration_s": 60.0, "seed": 4, "arrivals": "poisson"}
    assert all(p["simulated_replicas"] == min(p["replicas"], 4) for p in payload["pools"])


def test_table_and_png_for_people(plan_file, tmp_path):
    png = tmp_path / "latency.png"
    proc = run(str(plan_file), "--duration-s", "60", "--arrivals", "gamma", "--cv", "2", "--png", str(png))
    assert proc.returncode in (0, 1), proc.stderr
    assert "Classes: simulated against the plan" in proc.stdout and "verdict:" in proc.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_missed_slo_exits_1_naming_class_metric_and_excess(plan_file, tmp_path):
    raw = json.loads(plan_file.read_text())
    raw["workload"]["classes"][0]["slo"]["ttft_ms"] = 10.0  # far below any prefill's service time
    tight = tmp_path / "tight.json"
    tight.write_text(json.dumps(raw))
    proc = run(str(tight), "--duration-s", "30")
    assert proc.returncode == 1, proc.stderr
    assert "verdict: misses chat ttft_ms at mean" in proc.stdout


@pytest.mark.parametrize("args, field", [
    (("--duration-s", "-5"), "--duration-s: Input should be greater than 0"),
    (("--duration-s", "1e9"), "--duration-s: Input should be less than or equal to 86400"),
    (("--cv", "0"), "--cv:"),
    (("--replicas", "-1"), "--replicas: must be 0 (every replica) or a positive count"),
])
def test_bad_options_exit_2_with_one_line(plan_file, args, field):
    proc = run(str(plan_file), *args)
    assert proc.returncode == 2
    assert field in proc.stderr and len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_a_file_that_is_not_a_plan_exits_2(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": 1}')
    proc = run(str(bad))
    assert proc.returncode == 2 and "not a siliconmix plan" in proc.stderr
    missing = run(str(tmp_path / "missing.json"))
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1
