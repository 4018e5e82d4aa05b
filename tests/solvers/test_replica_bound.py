"""U_c, the most replicas of a candidate the budgets could hold (the big-M of the device-type rows)."""

from __future__ import annotations

from planner.milp.build import BuildOptions, build_model, replica_bound
from tests.solvers.conftest import candidate, units_for, workload


def test_the_power_budget_and_each_inventory_bound_the_replicas():
    c = candidate("chat", "decode", "c", 3.0, 3000.0, devices=2)  # 3 kW and 2 devices of type c per replica
    assert replica_bound(workload({"chat": 1.0}, 10.0), c) == 3.0  # ⌊10 kW / 3 kW⌋
    assert replica_bound(workload({"chat": 1.0}, 9.0), c) == 3.0  # exactly 3, not 2.999…
    wl = workload({"chat": 1.0}, 10.0)
    at_pue = wl.model_copy(update={"constraints": wl.constraints.model_copy(update={"pue": 1.25})})
    assert replica_bound(at_pue, c) == 2.0  # ⌊10 / 3.75⌋
    assert replica_bound(workload({"chat": 1.0}, 10.0, inventory={"c": 5}), c) == 2.0  # ⌊5 devices / 2⌋
    assert replica_bound(workload({"chat": 1.0}, 10.0, inventory={"other": 1}), c) == 3.0  # another type's stock


def test_a_device_type_limit_opens_each_candidates_type_with_its_bound():
    wl = workload({"chat": 1.0}, 10.0)
    wl = wl.model_copy(update={"constraints": wl.constraints.model_copy(update={"max_device_types": 1})})
    cands = [candidate("chat", "prefill", "a", 2.0, 1000.0), candidate("chat", "decode", "c", 3.0, 2500.0)]
    model = build_model(wl, units_for(["chat"]), cands, BuildOptions())
    for key, bound in (("a", 10.0), ("c", 4.0)):  # ⌊10 / 1⌋ and ⌊10 / 2.5⌋
        i = model.row_names.index(f"types:{cands['ac'.index(key)].key}:{key}")
        cols, vals = model.rows_of(i)
        coef = dict(zip((model.var_names[j] for j in cols), vals))
        assert coef == {f"n:{cands['ac'.index(key)].key}": 1.0, f"use_type:{key}": -bound}
        assert (model.row_lo[i], model.row_hi[i]) == (-float("inf"), 0.0)
