"""A model with a non-finite number is a ValueError naming its row, from every backend (never an engine crash)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from planner.milp.build import BuildOptions, build_model
from planner.solvers import SolveOptions, get_backend


@pytest.mark.parametrize("backend", ["ortools", "pulp"])
def test_a_model_with_an_infinite_coefficient_is_a_value_error_naming_the_row(backend, tiny):
    wl, units, cands = tiny
    model = build_model(wl, units, cands, BuildOptions(objective="max_goodput"))
    val = model.val.copy()
    val[0] = -np.inf  # what an infinite rate or budget used to put in a row (OR-Tools then raised AttributeError)
    with pytest.raises(ValueError, match=f"row {model.row_names[model.row[0]]} has a non-finite coefficient"):
        get_backend(backend).solve(dataclasses.replace(model, val=val), SolveOptions())
