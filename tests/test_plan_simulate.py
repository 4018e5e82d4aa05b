"""``simulate``: a plan replayed right after solving, from the planner, the CLI, REST and studies."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from planner.cli import app
from planner.optimize import PlanOptions, plan_workload
from planner.plan import replay_line
from planner.schema import SimulatedMiss, SimulationCheck, Workload
from planner.simulate import SimulationOptions, simulate_plan
from planner.perf.model import RooflineModel
from planner.study_runner import ExecutorSpec, load_study, run_study
from tests.test_study_runner import write_study

CHAT = Path("examples/workloads/chat-70b.yaml")


@pytest.fixture(scope="module")
def chat(catalog):
    workload = Workload.model_validate(yaml.safe_load(CHAT.read_text()))
    return plan_workload(workload, catalog, PlanOptions(baseline=False, simulate=SimulationOptions(duration_s=300)))


def test_the_replay_is_the_simulators_own(catalog, chat):
    check = chat.simulation
    alone = simulate_plan(chat.model_copy(update={"simulation": None}), RooflineModel(catalog),
                          SimulationOptions(duration_s=300))
    assert check.verdict == alone.verdict and check.requests == alone.requests and check.duration_s == 300
    assert check.simulated_ttft_ms == {c.name: c.simulated_ttft_ms for c in alone.classes}
    assert check.simulated_tpot_ms["chat"] < chat.workload.classes[0].slo.tpot_ms


def test_without_the_option_there_is_no_replay(catalog):
    workload = Workload.model_validate(yaml.safe_load(CHAT.read_text()))
    assert plan_workload(workload, catalog, PlanOptions(baseline=False)).simulation is None
    assert PlanOptions.of({"simulate": True}).simulate == SimulationOptions()
    assert PlanOptions.of({"simulate": False}).simulate is None


def test_a_miss_reads_as_one_line():
    check = SimulationCheck(verdict="misses", requests=1200, duration_s=600, seed=1,
                            misses=(SimulatedMiss(class_name="chat", metric="ttft_ms", statistic="mean", simulated=1300.0,
                                                  target=1000.0, relative=0.3),),
                            simulated_ttft_ms={"chat": 1300.0}, simulated_tpot_ms={"chat": 20.0})
    assert replay_line(check) == "replay (600 s simulated, seed 1, 1,200 requests): misses: chat TTFT mean 1,300.0 vs 1,000.0 (+30%)"


def test_the_cli_prints_the_verdict():
    result = CliRunner().invoke(app, ["plan", str(CHAT), "--simulate", "--no-baseline"])
    assert result.exit_code == 0, result.output
    assert "replay (600 s simulated, seed 1, " in result.output and "requests): meets" in result.output


def test_a_study_replays_each_scenario(tmp_path):
    path = write_study(tmp_path, [50])
    study = yaml.safe_load(path.read_text())
    study["options"]["simulate"] = True
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    run_study(load_study(path), tmp_path / "out", ExecutorSpec("local", workers=1))
    table = pd.read_csv(tmp_path / "out" / "results.csv")
    assert len(table) == 3 and set(table["simulated_verdict"]) <= {"meets", "misses"}
    assert (table["simulated_worst_miss"] >= 0).all()


def test_each_miss_beyond_the_noise_reaches_the_plan_as_the_simulator_said_it(catalog, chat, monkeypatch):
    """The plan's replay carries every miss the simulator reports outside its noise, field by field."""
    from types import SimpleNamespace

    import planner.optimize

    miss = SimpleNamespace(class_name="chat", metric="ttft_ms", statistic="p90", simulated=1300.0, target=1000.0,
                           relative=0.3, within_noise=False)
    noise = SimpleNamespace(class_name="chat", metric="tpot_ms", statistic="mean", simulated=51.0, target=50.0,
                            relative=0.02, within_noise=True)
    said = SimpleNamespace(verdict="misses", requests=1200, options=SimulationOptions(duration_s=600, seed=3),
                           misses=(miss, noise), classes=(SimpleNamespace(name="chat", simulated_ttft_ms=1300.0,
                                                                          simulated_tpot_ms=40.0),))
    monkeypatch.setattr(planner.optimize, "simulate_plan", lambda *args, **kwargs: said)
    plan = planner.optimize.replayed(chat, catalog, PlanOptions(simulate=SimulationOptions(duration_s=600, seed=3)))
    assert plan.simulation == SimulationCheck(
        verdict="misses", requests=1200, duration_s=600, seed=3,
        misses=(SimulatedMiss(class_name="chat", metric="ttft_ms", statistic="p90", simulated=1300.0, target=1000.0,
                              relative=0.3),),
        simulated_ttft_ms={"chat": 1300.0}, simulated_tpot_ms={"chat": 40.0})
