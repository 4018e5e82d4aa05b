"""Property tests: whatever workload or study file a user writes, the CLI answers with exit 0, 1 or 2, and a
failure is one line on stderr, never a traceback.

Generated files are mostly well-formed, with numbers, ids, keys and lengths pushed out of range now and then
and the text sometimes cut short. Each solve gets a tiny time limit, so a case's time is bounded by the
solver limits, not by the machine. The seed is fixed (derandomize) and nothing is stored between runs.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from planner.catalog import load_catalog
from planner.cli import app
from planner.schema import STRATEGIES

CATALOG = load_catalog()
MODELS = sorted(CATALOG.models)
DEVICES = ["h100-sxm", "mi300x", "b200", "cs-3", "groq-lpu", "tpu-v6e"]
SOLVER_LIMIT_S = "0.3"  # per MILP solve: bounds every case's solving time
CASES = settings(max_examples=100, derandomize=True, database=None, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

# what a mutation puts in place of a value
SPECIAL = st.sampled_from([math.inf, -math.inf, math.nan, 1e308, 1e-300, 0, -1, 10**30, "12", "", None, True, [], {},
                           "[red]x[/]", "x" * 5_000])
EXTREME = st.sampled_from([math.inf, -math.inf, math.nan, 1e308, 1e-300, 0, -1, 10**30, 1e7, 1e-7])
ODD = st.one_of(SPECIAL, SPECIAL, SPECIAL, st.floats(allow_nan=True, allow_infinity=True),
                st.integers(-10**18, 10**18), st.text(max_size=8))

request_classes = st.fixed_dictionaries({
    "name": st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True),
    "rate_rps": st.floats(0.01, 500),
    "input_tokens": st.integers(1, 20_000),
    "output_tokens": st.integers(1, 2_000),
    "slo": st.fixed_dictionaries({"ttft_ms": st.floats(10, 10_000), "tpot_ms": st.floats(1, 200)}),
}, optional={"prefix_cache_hit": st.floats(0, 0.99)})

valid_workloads = st.fixed_dictionaries({
    "model": st.sampled_from(MODELS),
    "classes": st.lists(request_classes, min_size=1, max_size=2, unique_by=lambda c: c["name"]),
    "constraints": st.fixed_dictionaries({
        "power_budget_kw": st.floats(1, 2_000),
        "devices": st.lists(st.sampled_from(DEVICES), min_size=1, max_size=3, unique=True),
    }, optional={"pue": st.floats(1, 2), "cost_budget_usd_per_hour": st.floats(1, 10_000),
                 "inventory": st.dictionaries(st.sampled_from(DEVICES), st.integers(0, 64), max_size=2)}),
    "spec_decode": st.fixed_dictionaries({"draft_model": st.just("llama-3.2-1b"),
                                          "acceptance_rate": st.floats(0.1, 0.95),
                                          "draft_tokens": st.integers(1, 8)}),
}, optional={
    "dtype": st.sampled_from(["bf16", "fp8", "fp4", "int4"]),
    "kv_dtype": st.sampled_from(["bf16", "fp8"]),
    "strategies": st.lists(st.sampled_from(STRATEGIES), min_size=1, max_size=3, unique=True),
    "objective": st.sampled_from(["max_goodput", "min_cost", "min_power"]),
})

AXES = {"slo.tpot_ms": st.floats(5, 100), "rate_scale": st.floats(0.5, 2), "power_budget_kw": st.floats(50, 1_000)}
valid_axes = st.sampled_from(sorted(AXES)).flatmap(lambda param: st.fixed_dictionaries({
    "name": st.just(param.replace(".", "_")), "param": st.just(param),
    "values": st.lists(AXES[param], min_size=1, max_size=2, unique=True)}))

valid_studies = st.fixed_dictionaries({
    "name": st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True),
    "base": st.one_of(st.just("workload.yaml"), valid_workloads),
    "axes": st.lists(valid_axes, min_size=1, max_size=2, unique_by=lambda a: a["name"]),
    "options": st.fixed_dictionaries({"time_limit_s": st.sampled_from([0.2, 0.3]), "baseline": st.just(False)}),
}, optional={"objective": st.just("min_cost")})


def paths_in(doc, prefix=()) -> list[tuple]:
    """Every key path inside ``doc`` (mappings and lists)."""
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    return [p for key, value in items for p in [(*prefix, key), *paths_in(value, (*prefix, key))]]


def _at(doc, path: tuple):
    for key in path:
        doc = doc[key]
    return doc


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@st.composite
def mutated(draw, valid: st.SearchStrategy):
    """A valid document, then (five times in six) one number made extreme, one value replaced by an odd one,
    or a key dropped or added."""
    doc = draw(valid)
    kind = draw(st.sampled_from(["none", "number", "number", "value", "drop", "extra"]))
    if kind == "none":
        return doc
    paths = paths_in(doc)
    if kind == "number":
        paths = [p for p in paths if _is_number(_at(doc, p))] or paths
    path = draw(st.sampled_from(paths))
    parent = _at(doc, path[:-1])
    if kind == "number":
        parent[path[-1]] = draw(EXTREME)
    elif kind == "value":
        parent[path[-1]] = draw(ODD)
    elif kind == "drop":
        del parent[path[-1]]
    elif isinstance(parent, dict):
        parent[draw(st.sampled_from(["surprise", "rate", "slo_ms"]))] = draw(ODD)
    return doc


def serialized(doc, as_json: bool, cut: float | None) -> str:
    """The document as JSON or YAML text, cut short at fraction ``cut`` of its length if given."""
    text = json.dumps(doc) if as_json else yaml.safe_dump(doc, sort_keys=False)
    return text if cut is None else text[: int(len(text) * cut)]


def check(result) -> None:
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code in (0, 1, 2), (result.exit_code, result.stderr)
    assert "Traceback" not in result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    if result.exit_code == 2:
        assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    elif result.exit_code == 1:
        assert len(lines) <= 1, result.stderr


cuts = st.none() | st.none() | st.none() | st.floats(0, 1)  # one text in four cut short


@CASES
@given(doc=mutated(valid_workloads), as_json=st.booleans(), cut=cuts)
def test_any_workload_file_gets_exit_0_1_or_2_and_one_line(tmp_path_factory, doc, as_json, cut):
    path = tmp_path_factory.mktemp("workload") / "w.yaml"
    path.write_text(serialized(doc, as_json, cut))
    check(CliRunner().invoke(app, ["plan", str(path), "--time-limit-s", SOLVER_LIMIT_S, "--no-baseline", "--json"]))


@settings(CASES, max_examples=20)  # a valid study starts a worker pool
@given(doc=mutated(valid_studies), base=mutated(valid_workloads), as_json=st.booleans(), cut=cuts)
def test_any_study_file_gets_exit_0_1_or_2_and_one_line(tmp_path_factory, doc, base, as_json, cut):
    folder: Path = tmp_path_factory.mktemp("study")
    (folder / "workload.yaml").write_text(yaml.safe_dump(base))
    path = folder / "study.yaml"
    path.write_text(serialized(doc, as_json, cut))
    check(CliRunner().invoke(app, ["study", str(path), "-o", str(folder / "out"), "--workers", "1", "--json"]))
