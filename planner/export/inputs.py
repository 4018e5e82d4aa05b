"""Reading what the exporters take: a plan JSON file (what ``siliconmix plan -o`` writes)."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from planner.files import InputFileError, read_text
from planner.schema import Plan

#: largest plan file read, in bytes (a plan of 200 classes and every strategy is a few MB)
MAX_PLAN_BYTES = 20_000_000


class ExportInputError(ValueError):
    """An input the exporter cannot use; the message names the file and what is wrong, in one line."""


def read_plan(path: str | Path) -> Plan:
    """Parse and validate a plan file."""
    path = Path(path)
    try:
        text = read_text(path, MAX_PLAN_BYTES)
    except InputFileError as exc:
        raise ExportInputError(str(exc)) from exc
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ExportInputError(f"{path}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from exc
    except RecursionError as exc:
        raise ExportInputError(f"{path}: not a siliconmix plan (JSON nested too deeply)") from exc
    if not isinstance(raw, dict) or "pools" not in raw or "totals" not in raw:
        raise ExportInputError(f"{path}: not a siliconmix plan (siliconmix plan WORKLOAD -o plan.json writes one)")
    try:
        return Plan.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "plan"
        raise ExportInputError(f"{path}: not a valid siliconmix plan ({where}: {first['msg']}; "
                               f"{exc.error_count()} error(s))") from exc
