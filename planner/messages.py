"""Error messages that stay one short line: a bounded echo of the offending value, never a whole input."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

#: longest excerpt of an offending value echoed in an error message, in characters
MAX_ECHO_CHARS = 200
#: most field errors listed in one message (the rest are counted)
MAX_ERRORS_LISTED = 5


def excerpt(value: Any, limit: int = MAX_ECHO_CHARS) -> str:
    """``repr(value)`` cut to ``limit`` characters, saying how many were left out."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit:,} more characters)"


def one_line(text: str, limit: int | None = None) -> str:
    """``text`` with its line breaks turned into spaces, cut to ``limit`` characters if given."""
    text = " ".join(text.splitlines())
    if limit is not None and len(text) > limit:
        return f"{text[:limit]}... ({len(text) - limit:,} more characters)"
    return text


def describe_errors(exc: ValidationError, most: int = MAX_ERRORS_LISTED) -> str:
    """Each wrong field (dotted path), what was wrong and, for a scalar, the value given (cut short).

    A mapping or list given is not echoed (it is the user's whole input, or a file's contents). A list's
    "too short" is dropped when its own items failed: pydantic counts only the valid ones.
    """
    errors = exc.errors()
    locs = [tuple(e["loc"]) for e in errors]
    kept = [e for e, loc in zip(errors, locs)
            if not (e["type"] == "too_short" and any(len(o) > len(loc) and o[:len(loc)] == loc for o in locs))]
    parts = []
    for err in kept[:most]:
        field = ".".join(str(p) for p in err["loc"]) or "input"
        value = err.get("input")
        given = f" (got {excerpt(value)})" if value is None or isinstance(value, str | int | float | bool) else ""
        parts.append(f"{field}: {one_line(err['msg'], 2 * MAX_ECHO_CHARS)}{given}")
    if len(kept) > most:
        parts.append(f"and {len(kept) - most} more errors")
    return one_line("; ".join(parts))
