"""A study file that would expand to too many scenarios is refused from its axes' lengths, before any is built."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from planner.study import StudyError, StudySpec, expand, scenario_count

ROOT = Path(__file__).resolve().parent.parent
BASE = ROOT / "examples" / "workloads" / "chat-70b.yaml"


def _bomb(axes: int) -> dict:
    return {"name": "bomb", "base": {"model": "llama-3.3-70b",
                                     "classes": [{"name": "c", "rate_rps": 1, "input_tokens": 100, "output_tokens": 10,
                                                  "slo": {"ttft_ms": 1000, "tpot_ms": 50}}],
                                     "constraints": {"power_budget_kw": 100}},
            "axes": [{"name": f"a{i}", "param": "power_budget_kw", "values": list(range(1, 11))} for i in range(axes)]}


def test_the_count_is_the_product_of_the_axes():
    assert scenario_count(StudySpec.model_validate(_bomb(3))) == 1000


def test_expand_refuses_before_building():
    spec = StudySpec.model_validate(_bomb(6))
    with pytest.raises(StudyError, match="1,000,000 scenarios; a study may have at most 100,000"):
        expand(spec)
    assert len(expand(StudySpec.model_validate(_bomb(2)))) == 100


def test_the_cli_refuses_a_million_scenarios_with_one_line(tmp_path):
    axes = "\n".join(f"  - {{name: a{i}, param: power_budget_kw, values: [1,2,3,4,5,6,7,8,9,10]}}" for i in range(6))
    study = tmp_path / "bomb.yaml"
    study.write_text(f"name: bomb\nbase: {BASE}\naxes:\n{axes}\n")
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "planner", "study", str(study), "-o", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "1,000,000 scenarios" in proc.stderr
    assert not out.exists()
