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
    assert payload["siliconmix_version"] and payload.pop("created_at") and json.loads(again.stdout).pop("created_at")
    assert payload == {k: v for k, v in json.loads(again.stdout).items() if k != "created_at"}
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


def test_a_trace_file_and_a_diurnal_curve_give_a_timeline(plan_file, tmp_path):
    trace = tmp_path / "load.csv"
    trace.write_text("start_s,multiplier\n0,1\n20,2\n40,1\n")
    proc = run(str(plan_file), "--duration-s", "60", "--trace", str(trace), "--json")
    assert proc.returncode in (0, 1), proc.stderr
    payload = json.loads(proc.stdout)
    assert [step["multiplier"] for step in payload["options"]["load"]] == [1.0, 2.0, 1.0]
    loads = [p["load"] for p in payload["classes"][0]["timeline"]]
    assert loads[:6] == [1.0] * 6 and loads[7:13] == [2.0] * 6  # 3 s stretches: [21, 39) s at x2
    table = run(str(plan_file), "--duration-s", "60", "--diurnal", "0.3")
    assert table.returncode in (0, 1), table.stderr
    assert "Over time, by arrival" in table.stdout and ("keeps up throughout" in table.stdout or "falls behind from" in table.stdout)


@pytest.mark.parametrize("text, message", [
    ("time,load\n0,1\n", "the first row must be the header start_s,multiplier"),
    ("start_s,multiplier\n0,one\n", "row 2: want two numbers"),
    ("start_s,multiplier\n5,1\n", "row 2: the first step must start at 0 s (got 5)"),
    ("start_s,multiplier\n0,1\n9,1\n9,2\n", "row 4: start_s 9 must be after the previous row's 9"),
    ("start_s,multiplier\n0,-1\n", "load step 1: multiplier"),
])
def test_a_bad_trace_exits_2_naming_the_row(plan_file, tmp_path, text, message):
    trace = tmp_path / "load.csv"
    trace.write_text(text)
    proc = run(str(plan_file), "--trace", str(trace))
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
