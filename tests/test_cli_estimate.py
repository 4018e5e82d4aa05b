"""``siliconmix catalog`` and ``siliconmix estimate`` as a user runs them (real subprocesses)."""

import json
import subprocess
import sys

import pytest

ESTIMATE_FIELDS = (
    "model device dtype tp batch isl osl ttft_ms tpot_ms output_tokens_per_s output_tokens_per_s_per_device "
    "prefill_tokens_per_s weights_bytes_per_device kv_bytes_per_token kv_bytes_per_request max_batch_in_memory fits bound"
).split()


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "planner", *args], capture_output=True, text=True, timeout=120)


def test_estimate_json_has_exactly_the_promised_fields():
    proc = run("estimate", "--model", "llama-3.3-70b", "--device", "h100-sxm", "--tp", "8", "--batch", "1",
               "--isl", "2048", "--osl", "256", "--json")
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert set(ESTIMATE_FIELDS) <= set(payload)
    assert payload["kv_bytes_per_token"] == 327_680
    assert payload["weights_bytes_per_device"] == pytest.approx(70.55e9 * 2 / 8, rel=0.01)
    assert payload["bound"] in {"compute", "memory", "communication", "overhead"}
    assert payload["fits"] is True
    # one user: its own prompt folded into the replica's rate puts it just under 1000 / TPOT
    assert 0.95 * 1000 / payload["tpot_ms"] < payload["output_tokens_per_s"] < 1000 / payload["tpot_ms"]
    assert payload["tpot_ms_low"] < payload["tpot_ms"] < payload["tpot_ms_high"]
    assert payload["ttft_ms_low"] < payload["ttft_ms"] < payload["ttft_ms_high"]
    assert payload["output_tokens_per_s_low"] < payload["output_tokens_per_s"] < payload["output_tokens_per_s_high"]
    assert payload["confidence"] in {"calibrated", "extrapolated", "estimated"} and payload["confidence_reasons"]


def test_estimate_table_for_people():
    proc = run("estimate", "--model", "llama-3.1-8b", "--device", "h100-sxm")
    assert proc.returncode == 0, proc.stderr
    assert "TPOT" in proc.stdout and "TTFT" in proc.stdout


@pytest.mark.parametrize(
    "args, fragment",
    [
        (("--model", "llama-9", "--device", "h100-sxm"), "llama-3.3-70b"),
        (("--model", "llama-3.3-70b", "--device", "h1000"), "h100-sxm"),
        (("--model", "llama-3.3-70b", "--device", "h100-sxm", "--tp", "1"), "weights"),
        (("--model", "llama-3.3-70b", "--device", "h100-sxm", "--tp", "64"), "domain"),
        (("--model", "llama-3.3-70b", "--device", "h100-sxm", "--tp", "8", "--batch", "100000"), "batch"),
        (("--model", "llama-3.3-70b", "--device", "h100-sxm", "--batch", "0"), "batch"),
        (("--model", "llama-3.3-70b", "--device", "h100-sxm", "--dtype", "fp7"), "dtype"),
        (("--model", "llama-3.3-70b", "--device", "h100-sxm", "--tp", "abc"), "tp"),
    ],
)
def test_bad_input_exits_2_with_one_readable_line(args, fragment):
    proc = run("estimate", *args)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert fragment in proc.stderr


@pytest.mark.parametrize("kind", ["hardware", "models"])
def test_catalog_json_lists_ids_and_vendors(kind):
    proc = run("catalog", kind, "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert all("id" in row and "vendor" in row for row in rows)
    assert len(rows) >= 9


def test_catalog_table():
    proc = run("catalog", "hardware")
    assert proc.returncode == 0 and "h100-sxm" in proc.stdout
