"""Procurement exports: the plan workbook (xlsx with live formulas), the bill of materials as CSV, and the
study workbook with its frontier chart. With ``catalog.py`` and ``files.py``, the only modules that touch files.
"""

from planner.export.bom import BomLine, Tco, TcoInputs, bom_lines, output_tokens_per_s, tco_of
from planner.export.bom_csv import BOM_CSV_COLUMNS, bom_records, write_bom_csv
from planner.export.mix import mix_text
from planner.export.inputs import ExportInputError, read_plan
from planner.export.study_workbook import (
    StudyResultsError,
    StudyTable,
    read_results,
    write_scenarios_csv,
    write_study_workbook,
)
from planner.export.workbook import PlanBook, default_inputs, plan_book, write_plan_workbook

__all__ = [
    "BOM_CSV_COLUMNS", "BomLine", "ExportInputError", "PlanBook", "StudyResultsError",
    "StudyTable", "Tco", "TcoInputs", "bom_lines", "bom_records", "default_inputs", "mix_text",
    "output_tokens_per_s", "plan_book", "read_plan", "read_results", "tco_of", "write_bom_csv", "write_plan_workbook",
    "write_scenarios_csv", "write_study_workbook",
]
