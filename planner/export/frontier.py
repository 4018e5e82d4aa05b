"""Study results as rows, and which frontier the study workbook draws (the frontier itself is planner.pareto)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from planner.study import FrontierSpec

#: the study's own copy of its spec, written next to results.csv by ``siliconmix study``
SPEC_FILE = "study.yaml"
#: columns kept as text even when their values look like numbers (a hex hash can be all digits).
TEXT_COLUMNS = frozenset({"scenario", "hash", "status", "reason", "devices_by_type", "baseline_device"})


def parse_value(column: str, text: str) -> Any:
    """A CSV field as a number where it is one; empty is None; text columns stay text."""
    if text == "":
        return None
    if column in TEXT_COLUMNS:
        return text
    try:
        number = float(text)
    except ValueError:
        return text
    return int(number) if number.is_integer() and "." not in text and "e" not in text.lower() else number


def main_frontier(folder: str | Path) -> FrontierSpec:
    """The study's first ``pareto`` entry (what its report shows first); the default frontier without one."""
    path = Path(folder) / SPEC_FILE
    if not path.is_file():
        return FrontierSpec()
    try:
        doc = yaml.safe_load(path.read_text()) or {}
        entries = doc.get("pareto") if isinstance(doc, dict) else None
        return FrontierSpec.model_validate(entries[0]) if entries else FrontierSpec()
    except (OSError, yaml.YAMLError, ValidationError, TypeError, KeyError) as exc:
        raise ValueError(f"{path}: cannot read its pareto entry ({exc})") from exc
