"""Bad input exits 2 and a failed write exits 1, each with one line naming the file and field: no traceback,
no file contents, no markup eaten, at most a short excerpt of the offending value."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from planner.catalog import DEFAULT_CATALOG_DIR, load_catalog
from planner.cli import app
from planner.files import MAX_INPUT_BYTES

ROOT = Path(__file__).resolve().parent.parent
CHAT = ROOT / "examples" / "workloads" / "chat-70b.yaml"
ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi"))
QUICK = ["--time-limit-s", "2", "--no-baseline"]


def workload(**changes) -> dict:
    doc = yaml.safe_load(CHAT.read_text())
    doc["constraints"]["devices"] = ["h100-sxm", "mi300x"]
    doc.update(changes)
    return doc


def invoke(*args: str, env: dict | None = None):
    result = CliRunner().invoke(app, [str(a) for a in args], env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def one_error_line(result, code: int) -> str:
    """The single stderr line of a failed command (exit ``code``), with its ``error: `` prefix removed."""
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0].removeprefix("error: ")


def write(tmp_path: Path, name: str, content: str | bytes | dict) -> Path:
    path = tmp_path / name
    if isinstance(content, dict):
        content = yaml.safe_dump(content)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


@pytest.mark.parametrize(("content", "fragment"), [
    ("constraints:\n  power_budget_kw: .inf\n", "constraints.power_budget_kw: Input should be a finite number (got inf)"),
    ("classes:\n- {name: c, rate_rps: 1e309, input_tokens: 10, output_tokens: 10, slo: {ttft_ms: 1, tpot_ms: 1}}\n",
     "classes.0.rate_rps: Input should be a finite number"),
    ("[" * 5000 + "]" * 5000, "nested deeper than 32 levels"),
    (ALIAS_BOMB, "aliases expand to more than 10,000 values"),
    ("model: caf\xe9\n".encode("latin-1"), "not UTF-8 text (byte 0xe9 at offset 10)"),
    ("model: a\nmodel: b\n", "duplicate key 'model'"),
    ("- just\n- a list\n", "a workload is a mapping"),
])
def test_bad_workload_files_exit_2_with_one_line_naming_the_file(tmp_path, content, fragment):
    path = write(tmp_path, "w.yaml", content)
    line = one_error_line(invoke("plan", path, *QUICK), 2)
    assert line.startswith(f"{path}: ") and fragment in line, line


@pytest.mark.parametrize(("option", "value"), [("--time-limit-s", "inf"), ("--time-limit-s", "nan"),
                                               ("--time-limit-s", "1e9"), ("--power-budget-kw", "inf"),
                                               ("--gap", "nan")])
def test_infinite_or_huge_options_exit_2(option, value):
    args = ["plan", CHAT, "--no-baseline", option, value]
    line = one_error_line(invoke(*args), 2)
    assert option.removeprefix("--").replace("-", "_") in line.replace("-", "_"), line


def test_special_and_oversized_files_are_refused_by_size_or_kind(tmp_path):
    assert one_error_line(invoke("plan", "/dev/zero"), 2) == "/dev/zero: not a regular file"
    big = write(tmp_path, "big.yaml", "# " + "x" * MAX_INPUT_BYTES + "\n")
    assert f"more than the {MAX_INPUT_BYTES:,} allowed" in one_error_line(invoke("plan", big), 2)


def test_a_long_value_is_echoed_cut_short(tmp_path):
    path = write(tmp_path, "w.yaml", workload(model="x" * 50_000))
    line = one_error_line(invoke("plan", path, *QUICK), 2)
    assert "model: String should have at most 64 characters" in line and len(line) < 600


def test_messages_are_not_read_as_markup(tmp_path):
    path = write(tmp_path, "w.yaml", workload(model="Llama 70B"))
    line = one_error_line(invoke("plan", path, *QUICK), 2)
    assert r"'^[a-z0-9][a-z0-9.\-]*$'" in line, line


def test_field_errors_do_not_repeat_the_classes_or_add_too_short(tmp_path):
    doc = workload()
    doc["classes"][0]["slo"]["tpot_ms"] = -1
    line = one_error_line(invoke("plan", write(tmp_path, "w.yaml", doc), *QUICK), 2)
    assert "classes.0.slo.tpot_ms: Input should be greater than 0 (got -1)" in line
    assert "at least 1 item" not in line and "input_tokens" not in line


def test_af_disagg_on_a_dense_model_exits_2_not_an_slo_diagnosis(tmp_path):
    path = write(tmp_path, "w.yaml", workload(strategies=["aggregated", "af_disagg"]))
    line = one_error_line(invoke("plan", path, *QUICK), 2)
    assert "strategies: af_disagg needs an MoE model (llama-3.3-70b is dense)" in line, line


@pytest.mark.parametrize("target", ["/dev/full", "{tmp}/file.txt/plan.json"])
def test_an_unwritable_plan_output_exits_1_with_one_line(tmp_path, target):
    (tmp_path / "file.txt").write_text("not a folder")
    target = target.format(tmp=tmp_path)
    line = one_error_line(invoke("plan", CHAT, *QUICK, "-o", target), 1)
    assert line.startswith(f"{target}: cannot write the plan ("), line


@pytest.fixture(scope="module")
def plan_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("plan") / "plan.json"
    result = invoke("plan", CHAT, *QUICK, "-o", path)
    assert result.exit_code == 0, result.stderr
    return path


@pytest.mark.parametrize("fmt", ["xlsx", "csv"])
def test_export_to_a_full_disk_exits_1_with_one_line(plan_file, fmt):
    line = one_error_line(invoke("export", plan_file, "-f", fmt, "-o", "/dev/full"), 1)
    assert line == "/dev/full: cannot write (No space left on device)"


def test_export_of_a_binary_file_exits_2(tmp_path):
    path = write(tmp_path, "plan.json", bytes(range(256)) * 4)
    assert "plan.json: not UTF-8 text" in one_error_line(invoke("export", path), 2)


def test_a_broken_catalog_names_its_file(tmp_path):
    root = tmp_path / "catalogs"
    shutil.copytree(DEFAULT_CATALOG_DIR, root)
    (root / "hardware" / "intel.yaml").write_bytes(b"vendor: intel\n# \xff\n")
    load_catalog.cache_clear()  # the default catalog is cached per process; this one is read from the env
    line = one_error_line(invoke("catalog", "hardware", env={"SILICONMIX_CATALOG_DIR": str(root)}), 2)
    assert line.startswith(f"catalog: {root / 'hardware' / 'intel.yaml'}: not UTF-8 text"), line
    load_catalog.cache_clear()


def study_file(tmp_path: Path, base: str) -> Path:
    return write(tmp_path, "study.yaml", {"name": "s", "base": base, "options": {"time_limit_s": 2},
                                          "axes": [{"name": "tpot", "param": "slo.tpot_ms", "values": [50]}]})


def test_a_study_whose_base_is_a_device_file_does_not_print_it(tmp_path):
    path = study_file(tmp_path, str(DEFAULT_CATALOG_DIR / "models" / "llama-3.3-70b.yaml"))
    line = one_error_line(invoke("study", path, "-o", tmp_path / "out"), 2)
    assert "llama-3.3-70b.yaml is not a workload" in line and line.startswith(f"{path}: base: ")
    assert "huggingface" not in line and "Llama 3.3 70B Instruct" not in line and len(line) < 600
    assert not (tmp_path / "out").exists()


def test_a_study_whose_axes_do_not_fit_its_base_exits_2(tmp_path):
    base = write(tmp_path, "w.yaml", workload(constraints="none"))
    path = write(tmp_path, "study.yaml", {"name": "s", "base": base.name,
                                          "axes": [{"name": "kw", "param": "power_budget_kw", "values": [100]}]})
    line = one_error_line(invoke("study", path, "-o", tmp_path / "out"), 2)
    assert line.startswith(f"{path}: the axes cannot be applied to the base workload ("), line


def test_too_many_workers_exit_2(tmp_path):
    path = study_file(tmp_path, "w.yaml")
    assert one_error_line(invoke("study", path, "--workers", "1000000"), 2).startswith("--workers: must be in [1, ")


@pytest.mark.parametrize("base", ["/dev/zero", "/etc"])
def test_a_study_whose_base_is_not_a_regular_file_exits_2(tmp_path, base):
    path = study_file(tmp_path, base)
    assert one_error_line(invoke("study", path, "-o", tmp_path / "out"), 2) == f"{base}: not a regular file"


def test_no_traceback_through_the_console_script(tmp_path):
    """The real entry point, as a user runs it: one line on stderr even for an error no command expected."""
    path = write(tmp_path, "w.yaml", "[" * 100_000 + "]" * 100_000)
    proc = subprocess.run([sys.executable, "-m", "planner", "plan", str(path)], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    code = "import planner.cli as c; c.app.command('boom')(lambda: 1 / 0); c.main()"
    proc = subprocess.run([sys.executable, "-c", code, "boom"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == "error: internal error: ZeroDivisionError: division by zero"


@pytest.mark.parametrize("args, fragment", [
    (["plan", "examples/workloads/chat-70b.yaml", "--engine", "gurobi"], "'gurobi' is not one of"),
    (["estimate", "--model", "llama-3.1-8b"], "Missing option '--device'"),
    (["estimate", "--model", "llama-3.1-8b", "--device", "h100-sxm", "--bogus", "1"], "No such option: --bogus"),
    (["nosuchcommand"], "No such command"),
])
def test_usage_errors_are_one_line_exit_2(args, fragment):
    proc = subprocess.run([sys.executable, "-m", "planner", *args], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parent.parent)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and "-h" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr and "╭" not in proc.stderr
