"""The study runner under abuse: kill -9 of the study leaves no worker (or resource tracker) behind, and a
journal whose last line was torn by a kill drops that line and solves its scenario again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from planner.study_runner import JOURNAL, ExecutorSpec, Journal, journal_records, load_study, run_study
from tests.test_study_runner import write_study

ROOT = Path(__file__).resolve().parent.parent
PARENT = """
import sys, time
from planner.executors import ExecutorSpec, open_executor
from tests.test_study_runner_hardening import hold
with open_executor(ExecutorSpec("local", workers=2)) as pool:
    for i in range(2):
        pool.submit(hold, f"{sys.argv[1]}/running-{i}")
    time.sleep(600)
"""


def hold(marker: str) -> None:
    """A worker task that says it is running (creates ``marker``), then keeps its worker busy for 10 minutes."""
    Path(marker).touch()
    time.sleep(600)


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (from /proc)."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pid: int) -> bool:
    """Running (a zombie nobody reaped yet counts as dead)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_until(condition, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the process tree from /proc")
def test_kill_9_of_the_study_process_takes_its_workers_and_resource_tracker_down(tmp_path):
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    proc = subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path)], cwd=ROOT, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": path})
    children: set[int] = set()
    try:
        assert wait_until(lambda: all((tmp_path / f"running-{i}").exists() for i in range(2)), 120), \
            "the workers never started their tasks"
        children = descendants(proc.pid)
        assert len(children) >= 2, children  # two busy workers (and multiprocessing's resource tracker)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert wait_until(lambda: not any(alive(pid) for pid in children), 30), \
            f"survived their parent: {sorted(pid for pid in children if alive(pid))}"
    finally:
        for pid in [proc.pid, *children]:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        proc.wait()


def test_a_torn_last_line_is_dropped_and_the_next_record_is_a_line_of_its_own(tmp_path):
    journal = Journal(tmp_path / JOURNAL)
    journal.append({"run_key": "a", "status": "optimal"})
    journal.append({"run_key": "b", "status": "optimal"})
    path = tmp_path / JOURNAL
    path.write_bytes(path.read_bytes()[:-12])  # killed while writing b
    assert set(journal.load()) == {"a"}
    journal.append({"run_key": "c", "status": "infeasible"})
    lines = path.read_text().splitlines()
    assert [json.loads(line)["run_key"] for line in lines] == ["a", "c"]
    assert set(journal.load()) == {"a", "c"}


def test_a_study_resumed_over_a_torn_journal_solves_the_torn_scenario_again(tmp_path):
    study = load_study(write_study(tmp_path, [50]))
    out = tmp_path / "out"
    run_study(study, out, ExecutorSpec("local", workers=1))
    records = journal_records(out)
    assert len(records) == 3
    path = out / JOURNAL
    path.write_bytes(path.read_bytes()[:-40])
    summary = run_study(study, out, ExecutorSpec("local", workers=1))
    assert (summary.skipped, summary.computed) == (2, 1)
    after = journal_records(out)
    assert [r["run_key"] for r in after[:2]] == [r["run_key"] for r in records[:2]]
    assert after[2]["run_key"] == records[2]["run_key"] and len(after) == 3
