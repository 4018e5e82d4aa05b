"""The study loop's seams: a row ``admit`` refuses ends the run with nothing more kept (what a REST cancel relies
on); ``in_thread`` stops where ``may_start`` or a cancelled token says; ``through`` solves again on a fresh pool
what a worker crash interrupted, and a scenario that keeps killing its worker is a row of that run only. A rerun
solves only the scenarios the journal does not hold, and reports progress from there."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

import pytest

from planner.solvers.cancel import CancelToken
from planner.study import StudySpec
from planner.executors import ExecutorSpec
from planner.study_runner import JOURNAL, StudyLoop, in_thread, journal_records, run_scenarios, solve_scenario, through
from tests.test_study_runner import WORKLOAD


@pytest.fixture()
def spec() -> StudySpec:
    """H100s only, three TPOT targets: three quick scenarios."""
    base = {**WORKLOAD, "constraints": {**WORKLOAD["constraints"], "devices": ["h100-sxm"]}}
    return StudySpec.model_validate({"name": "loop", "base": base, "options": {"baseline": False, "time_limit_s": 20},
                                     "axes": [{"name": "tpot_ms", "param": "slo.tpot_ms", "values": [50, 40, 30]}]})


def admitting(rows: int):
    """An ``admit`` that lets ``rows`` rows in, then refuses; it counts how often it was asked."""
    asked = []

    @contextmanager
    def admit():
        asked.append(len(asked))
        yield len(asked) <= rows

    return admit, asked


def test_a_refused_row_is_not_kept_and_a_rerun_solves_only_the_rest(spec, catalog, tmp_path):
    admit, asked = admitting(1)
    progress = []
    loop = StudyLoop(in_thread(catalog, CancelToken()), admit, on_progress=lambda done, total: progress.append((done, total)))
    assert run_scenarios(spec, tmp_path, catalog, loop) is None
    assert len(asked) == 2 and progress == [(0, 3), (1, 3)]  # the second row was refused: the run ended there
    assert [r["scenario"] for r in journal_records(tmp_path)] == ["tpot_ms=50"]
    assert not (tmp_path / "results.csv").exists()

    progress.clear()
    finished = []
    loop = StudyLoop(in_thread(catalog, CancelToken()), on_progress=lambda done, total: progress.append((done, total)),
                     on_complete=lambda summary: finished.append((tmp_path / "results.csv").exists()))
    summary = run_scenarios(spec, tmp_path, catalog, loop)
    assert (summary.total, summary.skipped, summary.computed) == (3, 1, 2)
    assert progress == [(1, 3), (2, 3), (3, 3)] and finished == [True]  # on_complete follows the outputs
    assert [r["scenario"] for r in journal_records(tmp_path)] == ["tpot_ms=50", "tpot_ms=40", "tpot_ms=30"]


def test_outputs_refused_by_admit_are_not_written(spec, catalog, tmp_path):
    admit, asked = admitting(3)  # every row, not the outputs
    completed = []
    loop = StudyLoop(in_thread(catalog, CancelToken()), admit, on_complete=completed.append)
    assert run_scenarios(spec, tmp_path, catalog, loop) is None
    assert len(asked) == 4 and len(journal_records(tmp_path)) == 3
    assert not (tmp_path / "results.csv").exists() and completed == []


def test_in_thread_starts_no_scenario_may_start_refuses(spec, catalog, tmp_path):
    asked = []

    def may_start(index: int) -> bool:
        asked.append(index)
        return index < 1

    assert run_scenarios(spec, tmp_path, catalog, StudyLoop(in_thread(catalog, CancelToken(), may_start))) is None
    assert asked == [0, 1] and [r["scenario"] for r in journal_records(tmp_path)] == ["tpot_ms=50"]


def test_a_cancelled_token_leaves_no_row(spec, catalog, tmp_path):
    token = CancelToken()
    token.cancel()
    assert run_scenarios(spec, tmp_path, catalog, StudyLoop(in_thread(catalog, token))) is None
    assert (tmp_path / "study.yaml").exists() and not (tmp_path / JOURNAL).exists()


CRASHES = "SILICONMIX_TEST_CRASH_DIR"  # where crash_once leaves its marker (the workers inherit the environment)


def crash_once(task: dict) -> dict:
    """A worker task that kills its worker process the first time any scenario is solved, then solves as usual."""
    marker = Path(os.environ[CRASHES]) / "crashed"
    if not marker.exists():
        marker.touch()
        os._exit(1)
    return solve_scenario(task)


def crash_always(task: dict) -> dict:
    os._exit(1)


def test_scenarios_a_worker_crash_interrupted_are_solved_again_on_a_fresh_pool(spec, catalog, tmp_path, monkeypatch):
    monkeypatch.setenv(CRASHES, str(tmp_path))
    summary = run_scenarios(spec, tmp_path / "out", catalog, StudyLoop(through(ExecutorSpec("local", workers=1), crash_once)))
    assert (tmp_path / "crashed").exists()  # the first pool broke
    assert summary.failed == 0 and len(journal_records(tmp_path / "out")) == 3


def test_a_scenario_whose_worker_always_dies_is_a_row_of_this_run_only(catalog, tmp_path):
    spec = StudySpec.model_validate({"name": "crash", "base": WORKLOAD, "options": {"baseline": False},
                                     "axes": [{"name": "tpot_ms", "param": "slo.tpot_ms", "values": [50]}]})
    summary = run_scenarios(spec, tmp_path, catalog, StudyLoop(through(ExecutorSpec("local", workers=1), crash_always)))
    assert [(r["status"], r["reason"]) for r in summary.rows] == [
        ("error", "the worker process died while solving this scenario; rerun to retry")]
    assert journal_records(tmp_path) == [] and (tmp_path / "results.csv").exists()  # not journaled: the next run retries it
