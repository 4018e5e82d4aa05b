"""The study runner end to end on tiny studies: local and Dask executors agree, a killed study resumes without
redoing finished scenarios, outputs are complete and the report is self-contained, bad files exit 2."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from planner.cli import app
from planner.study import RESULT_COLUMNS
from planner.study_runner import ExecutorSpec, journal_records, load_study, read_results, run_study

ROOT = Path(__file__).resolve().parent.parent
WORKLOAD = {
    "model": "llama-3.3-70b", "dtype": "fp8", "kv_dtype": "fp8",
    "classes": [{"name": "chat", "rate_rps": 100, "input_tokens": 1500, "output_tokens": 300,
                 "slo": {"ttft_ms": 1000, "tpot_ms": 50}}],
    "strategies": ["pd_disagg"],
    "constraints": {"power_budget_kw": 200, "devices": ["h100-sxm", "mi300x"]},
}


def write_study(folder: Path, tpots: list[float], name: str = "tiny") -> Path:
    """A study of 3 fleets (each device alone, both) x the given TPOT SLOs; 5 ms is out of reach."""
    (folder / "chat.yaml").write_text(yaml.safe_dump(WORKLOAD))
    study = {
        "name": name, "base": "chat.yaml",
        "axes": [{"name": "fleet", "each": "base", "values": {"both": {"devices": ["h100-sxm", "mi300x"]}}},
                 {"name": "tpot_ms", "param": "slo.tpot_ms", "values": tpots}],
        "pareto": [{"x": "output_tokens_per_s_per_user", "y": "tokens_per_s_per_mw", "by": "fleet"}],
        "compare": {"axis": "fleet"},
        "options": {"baseline": False, "time_limit_s": 20},
    }
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("local")
    spec = load_study(write_study(folder, [50, 20, 5]))
    summary = run_study(spec, folder / "out", ExecutorSpec("local", workers=2, max_tasks_per_child=3))
    return spec, folder / "out", summary


def test_local_run_writes_every_output(local_run):
    spec, out, summary = local_run
    assert (summary.total, summary.skipped, summary.computed) == (9, 0, 9)
    # workers are recycled every 3 scenarios (and replaced: the pool does not hang, gh-115634)
    assert len({r["worker_pid"] for r in journal_records(out)}) >= 3
    for name in ("results.csv", "results.parquet", "pareto.csv", "comparison.csv", "pareto.png", "fleets.png",
                 "report.html", "study.yaml", "rows.jsonl"):
        assert (out / name).stat().st_size > 0, name
    table = pd.read_csv(out / "results.csv")
    assert list(table.columns) == ["scenario", "hash", "axis.fleet", "axis.tpot_ms", *RESULT_COLUMNS]
    assert len(table) == 9 and table["hash"].is_unique
    # an unreachable SLO is a row with its reason, not a stopped study
    infeasible = table[table["axis.tpot_ms"] == 5]
    assert set(infeasible["status"]) == {"infeasible"} and infeasible["reason"].str.contains("tpot_ms").all()
    assert (table[table["status"] == "optimal"]["goodput_scale"] > 0).all()
    # the spec as run reloads to the same study
    assert load_study(out / "study.yaml") == spec


def test_report_is_self_contained(local_run):
    _, out, _ = local_run
    html = (out / "report.html").read_text()
    assert html.count('src="data:image/png;base64,') == 2
    assert "http://" not in html and "https://" not in html and "<script" not in html
    assert "fleet=both, tpot_ms=50" in html


def test_dask_local_cluster_gives_the_identical_table(local_run, tmp_path):
    _, out, _ = local_run
    spec = load_study(write_study(tmp_path, [50, 20, 5]))
    run_study(spec, tmp_path / "out", ExecutorSpec("dask", workers=2))
    local = read_results(out).drop(columns="solve_time_s")
    dask = read_results(tmp_path / "out").drop(columns="solve_time_s")
    pd.testing.assert_frame_equal(local, dask)


def test_killed_study_resumes_without_redoing_finished_scenarios(tmp_path):
    study = write_study(tmp_path, [60, 50, 40, 30, 25, 20, 15], name="killme")  # 21 scenarios
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "planner", "study", str(study), "-o", str(out), "--workers", "1", "--json"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while len(journal_records(out)) < 3 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the whole session: the CLI and its pool workers
        proc.wait()
    before = {r["run_key"]: r["finished_at"] for r in journal_records(out)}
    assert 3 <= len(before) < 21, "the study should have been killed half way"
    assert not (out / "results.csv").exists()

    summary = run_study(load_study(study), out, ExecutorSpec("local", workers=2))
    assert (summary.skipped, summary.computed) == (len(before), 21 - len(before))
    after = journal_records(out)
    assert len(after) == 21 and len({r["run_key"] for r in after}) == 21
    assert {r["run_key"]: r["finished_at"] for r in after[: len(before)]} == before  # untouched, not recomputed
    assert len(read_results(out)) == 21

    again = run_study(load_study(study), out, ExecutorSpec("local", workers=1))
    assert (again.skipped, again.computed) == (21, 0) and len(journal_records(out)) == 21


def test_cli_runs_a_study_and_prints_json(tmp_path):
    study = write_study(tmp_path, [50])
    result = CliRunner().invoke(app, ["study", str(study), "-o", str(tmp_path / "out"), "--workers", "1", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["scenarios"] == 3 and summary["computed"] == 3
    assert {p["series"] for p in summary["frontiers"]["tokens_per_s_per_mw-vs-output_tokens_per_s_per_user"]} == {
        "h100-sxm", "mi300x", "both"}


@pytest.mark.parametrize(("edit", "message"), [
    (lambda s: s.pop("name"), "name: Field required"),
    (lambda s: s["axes"][1].update(values=[-5]), "classes.0.slo.tpot_ms"),
    (lambda s: s["axes"][0].update(each=["h100-sxm", "h900"]), "constraints.devices: unknown device 'h900'"),
    (lambda s: s.update(base="missing.yaml"), "missing.yaml: cannot read"),
    (lambda s: s["pareto"][0].update(x="speed"), "pareto.0.x"),
])
def test_bad_study_file_exits_2_with_one_line_naming_the_field(tmp_path, edit, message):
    path = write_study(tmp_path, [50])
    raw = yaml.safe_load(path.read_text())
    edit(raw)
    path.write_text(yaml.safe_dump(raw))
    result = CliRunner().invoke(app, ["study", str(path), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", ["pareto-interactivity.yaml", "homogeneous-vs-heterogeneous.yaml"])
def test_example_studies_load_and_expand(name, catalog):
    from planner.study import expand

    spec = load_study(ROOT / "examples" / "studies" / name)
    scenarios = expand(spec, catalog)
    assert len(scenarios) >= 30 and len({s.hash for s in scenarios}) == len(scenarios)
