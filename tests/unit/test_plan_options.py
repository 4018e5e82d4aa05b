"""One reading of a request's solve options for every caller (CLI, REST, studies, jobs)."""

from planner.optimize import PlanOptions
from planner.study import StudyOptions


def test_options_of_a_mapping_keep_every_stated_field_and_default_the_rest():
    options = PlanOptions.of({"solver": "pulp", "engine": "cbc", "time_limit_s": 7.5, "relative_gap": 0.01,
                              "baseline": False, "unrelated": 1})
    assert (options.solver, options.engine, options.time_limit_s, options.relative_gap, options.baseline) == (
        "pulp", "cbc", 7.5, 0.01, False)
    assert PlanOptions.of({}) == PlanOptions()


def test_a_studys_gap_reaches_its_plans():
    stated = StudyOptions(relative_gap=0.003, time_limit_s=4.0)
    options = PlanOptions.of(stated.model_dump())
    assert options.relative_gap == 0.003 and options.time_limit_s == 4.0 and options.baseline is False
