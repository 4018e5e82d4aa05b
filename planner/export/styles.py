"""Cell formats shared by the workbooks: inputs look different from formulas, numbers carry their unit's format.

The convention of financial models: inputs are blue on pale yellow, formulas black, totals bold on grey.
"""

from __future__ import annotations

from typing import Any

NUMBER_FORMATS = {
    "text": None,
    "general": "General",
    "int": "#,##0",
    "dec1": "#,##0.0",
    "dec2": "#,##0.00",
    "dec3": "#,##0.000",
    "usd": "$#,##0",
    "usd2": "$#,##0.00",
    "usd3": "$#,##0.000",
    "pct": "0%",
    "pct1": "0.0%",
    "pct2": "0.00%",
    "gain": '0.00"x"',
}

ROLES: dict[str, dict[str, Any]] = {
    "value": {"valign": "top"},
    "formula": {"valign": "top"},
    "input": {"font_color": "#1F4E9E", "bg_color": "#FFF2CC", "border": 1, "border_color": "#BFBFBF", "valign": "top"},
    "total": {"bold": True, "bg_color": "#E7E6E6", "top": 1},
    "header": {"bold": True, "font_color": "#FFFFFF", "bg_color": "#1F4E79", "text_wrap": True, "valign": "top",
               "border": 1, "border_color": "#BFBFBF"},
    "title": {"bold": True, "font_size": 14},
    "section": {"bold": True, "font_size": 11, "bottom": 1},
    "label": {"bold": True, "valign": "top"},
    "label_wrap": {"bold": True, "valign": "top", "text_wrap": True},
    "note": {"italic": True, "font_color": "#595959"},
    "headline": {"bold": True, "font_size": 13, "bg_color": "#E2EFDA", "border": 1},
    "estimate": {"font_color": "#C65911", "valign": "top"},
    "warning": {"bold": True, "font_color": "#C00000"},
    "flagged": {"bold": True, "font_color": "#C00000", "valign": "top"},
    "value_wrap": {"text_wrap": True, "valign": "top"},
    "estimate_wrap": {"font_color": "#C65911", "text_wrap": True, "valign": "top"},
    "note_wrap": {"italic": True, "font_color": "#595959", "text_wrap": True, "valign": "top"},
}


class Styles:
    """Formats of one workbook, created on first use: ``styles("input", "usd")``."""

    def __init__(self, workbook):
        self._workbook = workbook
        self._cache: dict[tuple[str, str], Any] = {}

    def __call__(self, role: str = "value", number: str = "text"):
        key = (role, number)
        if key not in self._cache:
            props = dict(ROLES[role])
            if NUMBER_FORMATS[number] is not None:
                props["num_format"] = NUMBER_FORMATS[number]
            self._cache[key] = self._workbook.add_format(props)
        return self._cache[key]
