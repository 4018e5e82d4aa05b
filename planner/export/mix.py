"""Fleet mixes as text a person reads: ``{"h200": 8, "cs-3": 4}`` -> "8× h200, 4× cs-3"."""

from __future__ import annotations

import json
from collections.abc import Mapping


def mix_text(devices_by_type: Mapping[str, int] | str | None) -> str:
    """Largest count first (ties by device id); a JSON object string is read first; empty: "none"."""
    if isinstance(devices_by_type, str):
        devices_by_type = json.loads(devices_by_type) if devices_by_type.strip() else {}
    counts = [(device, int(n)) for device, n in (devices_by_type or {}).items() if n]
    if not counts:
        return "none"
    return ", ".join(f"{n:,}× {device}" for device, n in sorted(counts, key=lambda c: (-c[1], c[0])))
