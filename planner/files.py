"""Reading input files (workloads, studies) and writing outputs for the command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml


class InputFileError(ValueError):
    """A file that cannot be read or parsed; the message names the file."""


def read_document(path: str | Path) -> Any:
    """Parse a YAML or JSON file (JSON is YAML, so one parser reads both)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise InputFileError(f"{path}: not valid YAML/JSON{where}") from exc


def write_json(path: str | Path, payload: Any) -> Path:
    """Write ``payload`` as indented JSON, creating parent folders."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path
