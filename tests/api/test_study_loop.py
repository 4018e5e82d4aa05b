"""The CLI's study runner and the service's study jobs share one study loop: the same study run by ``run_study``
on a local process pool and by POST /v1/studies leaves byte-identical tables and the same journal rows, timing
columns aside. Two copies of the loop that drifted apart (a column, a rounding, an order) fail here."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from apitest import serve, wait_for

from planner.study import StudySpec
from planner.study_runner import ExecutorSpec, journal_records, run_study
from tests.test_study_runner import WORKLOAD

#: columns that say when or where a row was solved, not what it found
TIMING = ("finished_at", "solve_time_s", "worker_pid")


def spec() -> StudySpec:
    """Each device alone and both, x a reachable and an unreachable TPOT, one price override: 6 scenarios."""
    return StudySpec.model_validate({
        "name": "two-paths", "base": WORKLOAD,
        "axes": [{"name": "fleet", "each": "base", "values": {"both": {"devices": ["h100-sxm", "mi300x"]},
                                                              "cheap-h100": {"prices": {"h100-sxm": 1.0}}}},
                 {"name": "tpot_ms", "param": "slo.tpot_ms", "values": [50, 5]}],
        "compare": {"axis": "fleet"},
        "options": {"baseline": False, "time_limit_s": 20},
    })


def without_timing(path: Path) -> list[list[str]]:
    """The CSV's cells as written, the timing columns left out."""
    rows = list(csv.reader(io.StringIO(path.read_text())))
    keep = [i for i, name in enumerate(rows[0]) if name not in TIMING]
    return [[row[i] for i in keep] for row in rows]


def journal_rows(folder: Path) -> dict[str, str]:
    """Each journal record as JSON text (NaN stays NaN) by run key, the timing fields left out."""
    return {r["run_key"]: json.dumps({k: v for k, v in r.items() if k not in TIMING}, sort_keys=True)
            for r in journal_records(folder)}


def test_the_cli_runner_and_a_rest_study_write_the_same_rows_and_tables(make_settings, tmp_path):
    study = spec()
    cli = tmp_path / "cli"
    summary = run_study(study, cli, ExecutorSpec("local", workers=1))
    assert summary.computed == 8 and {r["status"] for r in summary.rows} >= {"optimal", "infeasible"}
    with serve(make_settings(study_dir=tmp_path / "studies")) as http:
        posted = http.post("/v1/studies", json=study.model_dump(mode="json"))
        assert posted.status_code == 202, posted.text
        record = wait_for(http, posted.headers["location"], lambda r: r["status"] not in ("queued", "running"))
    assert record["status"] == "succeeded", record
    rest = tmp_path / "studies" / posted.json()["id"]

    assert journal_rows(rest) == journal_rows(cli) and len(journal_rows(cli)) == 8  # same run keys: either resumes the other
    assert without_timing(rest / "results.csv") == without_timing(cli / "results.csv")
    for name in ("pareto.csv", "comparison.csv"):
        assert (rest / name).read_bytes() == (cli / name).read_bytes(), name
