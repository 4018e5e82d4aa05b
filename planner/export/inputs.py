"""Reading what the exporters take: a plan JSON file (what ``siliconmix plan -o`` writes)."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from planner.schema import Plan


class ExportInputError(ValueError):
    """An input the exporter cannot use; the message names the file and what is wrong, in one line."""


def read_plan(path: str | Path) -> Plan:
    """Parse and validate a plan file."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ExportInputError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ExportInputError(f"{path}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from exc
    if not isinstance(raw, dict) or "pools" not in raw or "totals" not in raw:
        raise ExportInputError(f"{path}: not a siliconmix plan (siliconmix plan WORKLOAD -o plan.json writes one)")
    try:
        return Plan.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "plan"
        raise ExportInputError(f"{path}: not a valid siliconmix plan ({where}: {first['msg']}; "
                               f"{exc.error_count()} error(s))") from exc
