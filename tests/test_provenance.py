"""Provenance and CLI polish: --version and -h, the stamp on every output, tp checked against the heads,
``catalog hardware --sources`` and one unit per bandwidth column."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner import __version__
from planner.catalog import DEFAULT_CATALOG_DIR, catalog_fingerprint, load_catalog, sourced_value
from planner.cli import app
from planner.schema import Plan

REPO = Path(__file__).resolve().parent.parent
CHAT = str(REPO / "examples" / "workloads" / "chat-70b.yaml")
runner = CliRunner()


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "planner", *args], capture_output=True, text=True, timeout=300,
                          cwd=REPO, env={**os.environ, "COLUMNS": "200"})


def utc(text: str) -> dt.datetime:
    stamp = dt.datetime.fromisoformat(text)
    assert stamp.utcoffset() == dt.timedelta(0), text
    return stamp


# ------------------------------------------------------------------------------- version and help
def test_version_is_the_packages():
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"siliconmix {declared}" == f"siliconmix {__version__}"


@pytest.mark.parametrize("command", [[], ["plan"], ["estimate"], ["catalog"]])
def test_short_help_is_the_long_help(command):
    short, long = runner.invoke(app, [*command, "-h"]), runner.invoke(app, [*command, "--help"])
    assert short.exit_code == long.exit_code == 0
    assert short.output == long.output and "Usage" in short.output


@pytest.mark.parametrize(("command", "choices"), [
    ("plan", ["scip|highs|cbc", "ortools|pulp", "max_goodput|min_cost|min_power"]),
    ("estimate", ["bf16|fp16|fp8|int8|fp4|int4"]),
])
def test_help_lists_the_choices(command, choices):
    output = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"}).output
    for choice in choices:
        assert choice in output, output


def test_an_engine_outside_the_choices_is_bad_input():
    result = runner.invoke(app, ["plan", CHAT, "--engine", "gurobi"])
    assert result.exit_code == 2 and "gurobi" in result.output


# ------------------------------------------------------------------------------ catalog fingerprint
def test_fingerprint_is_sha256_over_sorted_paths_and_bytes(tmp_path):
    for rel, data in {"models/b.yaml": b"y", "hardware/a.yaml": b"x: 1\n", "calibration/c.yaml": b"",
                      "hardware/README.md": b"not catalog data"}.items():
        (tmp_path / rel).parent.mkdir(exist_ok=True)
        (tmp_path / rel).write_bytes(data)
    expected = hashlib.sha256(b"calibration/c.yaml\x000\x00" b"hardware/a.yaml\x005\x00x: 1\n" b"models/b.yaml\x001\x00y")
    assert catalog_fingerprint(tmp_path) == expected.hexdigest()[:16]


def test_fingerprint_follows_the_files_not_their_place(tmp_path):
    copy = tmp_path / "catalogs"
    shutil.copytree(DEFAULT_CATALOG_DIR, copy)
    original = load_catalog().fingerprint
    assert len(original) == 16 and int(original, 16) >= 0
    assert load_catalog(copy).fingerprint == original
    (copy / "README.md").write_text("prose is not a number\n")
    assert catalog_fingerprint(copy) == original
    fit = copy / "calibration" / "fit.yaml"
    fit.write_text(fit.read_text() + "\n")
    assert catalog_fingerprint(copy) != original
    fit.write_text((DEFAULT_CATALOG_DIR / "calibration" / "fit.yaml").read_text())
    assert catalog_fingerprint(copy) == original
    (copy / "models" / "llama-2-7b.yaml").rename(copy / "models" / "llama-2-7b-renamed.yaml")
    assert catalog_fingerprint(copy) != original


# --------------------------------------------------------------------------------- stamped outputs
def test_estimate_json_is_stamped_with_its_options():
    before = dt.datetime.now(dt.UTC)
    proc = cli("estimate", "--model", "llama-3.3-70b", "--device", "h100-sxm", "--tp", "8", "--batch", "4",
               "--kv-dtype", "fp8", "--json")
    after = dt.datetime.now(dt.UTC)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["siliconmix_version"] == __version__
    assert out["catalog_fingerprint"] == load_catalog().fingerprint
    assert before <= utc(out["created_at"]) <= after
    assert out["options"] == {"model": "llama-3.3-70b", "device": "h100-sxm", "dtype": "bf16", "kv_dtype": "fp8",
                              "tp": 8, "ep": 1, "pp": 1, "batch": 4, "isl": 2048, "osl": 256, "paged_kv": True}


def test_plan_json_is_stamped_with_its_solve_options(tmp_path):
    before = dt.datetime.now(dt.UTC)
    proc = cli("plan", CHAT, "--json", "--no-baseline", "--engine", "highs", "--time-limit-s", "4", "--gap", "0.001",
               "-o", str(tmp_path / "plan.json"))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["siliconmix_version"] == __version__
    assert out["catalog_fingerprint"] == load_catalog().fingerprint
    assert before <= utc(out["created_at"]) <= dt.datetime.now(dt.UTC)
    assert out["options"] == {"solver": "ortools", "engine": "highs", "time_limit_s": 4.0, "relative_gap": 0.001,
                              "baseline": False, "node_limit": None}
    assert json.loads((tmp_path / "plan.json").read_text()) == out


def test_a_plan_stored_before_the_stamp_still_loads(tmp_path):
    proc = cli("plan", CHAT, "--json", "--no-baseline")
    old = {k: v for k, v in json.loads(proc.stdout).items()
           if k not in ("siliconmix_version", "catalog_fingerprint", "created_at", "options")}
    plan = Plan.model_validate(old)
    assert plan.siliconmix_version is plan.catalog_fingerprint is plan.created_at is plan.options is None
    assert plan.status == "optimal"


# ------------------------------------------------------------------------- parallelism vs heads
@pytest.mark.parametrize(("model", "sizes"), [
    ("llama-3.3-70b", (1, 2, 4, 8, 16, 32, 64)),       # 64 heads, 8 KV heads
    ("llama-3.2-3b", (1, 2, 4, 8, 24)),                # 24 / 8: 3, 6, 12 split the heads but not the KV heads
    ("llama-2-13b", (1, 2, 4, 5, 8, 10, 20, 40)),      # 40 / 40
    ("deepseek-v3", (1, 2, 4, 8, 16, 32, 64, 128)),    # MLA, 128 heads
])
def test_tensor_parallel_sizes_split_the_heads(catalog, model, sizes):
    assert catalog.model(model).tensor_parallel_sizes() == sizes


def test_tp_the_heads_do_not_split_over_is_bad_input():
    proc = cli("estimate", "--model", "llama-3.3-70b", "--device", "h100-sxm", "--tp", "3")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0] == ("error: tp 3: llama-3.3-70b has 64 attention heads and 8 KV heads, which do not split evenly "
                        "over 3 devices; allowed tp: 1, 2, 4, 8, 16, 32, 64")


def test_with_ep_the_attention_replica_is_checked():
    proc = cli("estimate", "--model", "qwen3-30b-a3b", "--device", "h100-sxm", "--tp", "6", "--ep", "2")
    assert proc.returncode == 2
    assert "tp 6 / ep 2 = 3 per attention replica" in proc.stderr and "allowed tp with ep 2: 2, 4, 8," in proc.stderr


def test_sram_machines_split_by_layers_so_any_tp_goes():
    proc = cli("estimate", "--model", "llama-3.1-8b", "--device", "cs-3", "--tp", "3", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["tp"] == 3


# ------------------------------------------------------------------------------ hardware sources
def test_sourced_value_reads_each_kind_of_path(catalog):
    h100 = catalog.device("h100-sxm")
    assert sourced_value(h100, "peak_dense_tflops.bf16") == 989
    assert sourced_value(h100, "memory_tiers[0].bandwidth_tb_s") == 3.35
    assert sourced_value(h100, "scale_up.bandwidth_gb_s") == 450
    assert sourced_value(h100, "node.devices_per_node") == 8
    assert sourced_value(h100, "node.overhead_w") == h100.node_overhead_w
    assert sourced_value(h100, "efficiency.mfu") == h100.mfu


def test_catalog_hardware_sources_lists_every_sourced_number(catalog):
    proc = cli("catalog", "hardware", "--sources", "--vendor", "nvidia", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    nvidia = [d for d in catalog.devices.values() if d.vendor == "nvidia"]
    assert len(rows) == sum(len(d.provenance) for d in nvidia)
    tdp = next(r for r in rows if (r["device"], r["field"]) == ("h100-sxm", "tdp_w"))
    assert tdp == {"device": "h100-sxm", "field": "tdp_w", "value": 700, "estimate": False,
                   "source": catalog.device("h100-sxm").provenance["tdp_w"].source}
    table = cli("catalog", "hardware", "--sources", "--vendor", "cerebras").stdout
    assert "source" in table and "node.overhead_w" in table and "cs-3" in table and "h100-sxm" not in table


def test_hardware_table_gives_every_bandwidth_in_tb_s():
    proc = cli("catalog", "hardware", "--vendor", "nvidia")
    assert proc.returncode == 0, proc.stderr
    header = next(line for line in proc.stdout.splitlines() if "vendor" in line)
    assert "weights tier TB/s" in header and "scale-up TB/s" in header and "GB/s" not in header
    assert "calibration" in header
    h100 = next(line for line in proc.stdout.splitlines() if " h100-sxm " in line)
    assert "3.350" in h100 and "0.450" in h100  # 3.35 TB/s HBM3, NVLink 450 GB/s per direction


def test_study_summary_and_folder_are_stamped(tmp_path):
    (tmp_path / "chat.yaml").write_text(Path(CHAT).read_text())
    (tmp_path / "study.yaml").write_text(json.dumps({
        "name": "stamped", "base": "chat.yaml", "options": {"time_limit_s": 5, "engine": "highs"},
        "axes": [{"name": "fleet", "param": "constraints.devices", "values": [["h100-sxm"]]}]}))
    before = dt.datetime.now(dt.UTC)
    result = runner.invoke(app, ["study", str(tmp_path / "study.yaml"), "-o", str(tmp_path / "out"), "--workers", "1",
                                 "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["siliconmix_version"] == __version__
    assert summary["catalog_fingerprint"] == load_catalog().fingerprint
    assert before <= utc(summary["created_at"]) <= dt.datetime.now(dt.UTC)
    assert summary["options"] == {"solver": "ortools", "engine": "highs", "time_limit_s": 5.0, "relative_gap": 1e-4,
                                  "node_limit": None, "baseline": False, "simulate": False}
    stored = json.loads((tmp_path / "out" / "provenance.json").read_text())
    assert stored == {k: summary[k] for k in ("siliconmix_version", "catalog_fingerprint", "created_at", "options")}
