"""The study loop's two seams: a row ``admit`` refuses ends the run with nothing more kept (what a REST cancel
relies on), ``in_thread`` stops where ``may_start`` or a cancelled token says; either way a rerun solves only the
scenarios the journal does not hold, and reports progress from there."""

from __future__ import annotations

from contextlib import contextmanager

import pytest

from planner.solvers.cancel import CancelToken
from planner.study import StudySpec
from planner.study_runner import JOURNAL, StudyLoop, in_thread, journal_records, run_scenarios
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
