"""Why a workload cannot be served, and what would make it feasible.

Two steps: a pre-check before any solve (a class none of the allowed devices can serve within its
SLO, with the best TTFT and TPOT any device reaches), then an elastic copy of the MILP at scale 1
whose penalised slack says which budget must bend and by how much (the least power budget first).
"""

from __future__ import annotations

import numpy as np

from planner.candidates import Candidate
from planner.catalog import Catalog
from planner.milp.build import BuildOptions, build_model
from planner.perf.model import RooflineModel, UnsupportedDtype
from planner.schema import Diagnosis, SloShortfall, Workload
from planner.solvers.base import SolveOptions, check_outcome, get_backend
from planner.units import s_to_ms

SHORTFALL_FIELDS = ("ttft_ms", "tpot_ms")


def unserved_classes(workload: Workload, candidates: list[Candidate], graph_units: dict) -> list[str]:
    """Classes with no strategy whose every pool unit has at least one candidate."""
    have = {(c.class_name, c.route, c.role) for c in candidates}
    out = []
    for rc in workload.classes:
        ok = any(all((rc.name, s, u) in have for u in us) for (k, s), us in graph_units.items() if k == rc.name)
        if not ok:
            out.append(rc.name)
    return out


def slo_shortfalls(workload: Workload, catalog: Catalog, class_names: list[str]) -> list[SloShortfall]:
    """For each unserved class: the best TTFT (1-prompt prefill) and TPOT (batch-1 decode) any device reaches in any
    replica shape it may take (``Silicon.replica_shapes``, pipelines up to ``max_pp``; decode pipelines only where an
    allowed strategy's decode pools take them: aggregated, pd_disagg), at any weights dtype the workload allows."""
    costs = RooflineModel(catalog)
    models = {d: costs.profile(workload.model, d, workload.kv_dtype) for d in workload.allowed_dtypes}
    out = []
    devices = workload.constraints.devices or tuple(catalog.devices)
    decode_pipelines = bool({"aggregated", "pd_disagg"} & set(workload.strategies))
    for rc in workload.classes:
        if rc.name not in class_names:
            continue
        best = {"ttft_ms": (np.inf, None), "tpot_ms": (np.inf, None)}
        new = rc.input_tokens * (1 - rc.prefix_cache_hit)
        for device_id, (dtype, model) in ((d, m) for d in devices for m in models.items()):
            try:
                silicon = costs.silicon(device_id, dtype)
            except UnsupportedDtype:
                continue
            for tp, pp in silicon.replica_shapes(model.weights_bytes, max_pp=workload.constraints.max_pp):
                n = tp * pp
                ttft = s_to_ms(float(costs.prefill(model, silicon, n, new, rc.input_tokens - new, pp=pp).total_s.reshape(-1)[0]))
                tpot = s_to_ms(float(costs.decode(model, silicon, n, 1, rc.input_tokens + rc.output_tokens / 2,
                                                  pp=pp).total_s.reshape(-1)[0]))
                for field, value in (("ttft_ms", ttft), ("tpot_ms", tpot if pp == 1 or decode_pipelines else np.inf)):
                    if value < best[field][0]:
                        best[field] = (value, device_id)
        for field in SHORTFALL_FIELDS:
            required = getattr(rc.slo, field)
            value, device_id = best[field]
            if not value <= required:
                out.append(SloShortfall(class_name=rc.name, slo=field, required_ms=required,
                                        best_ms=None if np.isinf(value) else value, best_device=device_id))
        if not any(s.class_name == rc.name for s in out):
            # each SLO is reachable alone, but no configuration meets both with memory for its batch
            out.append(SloShortfall(class_name=rc.name, slo="ttft_ms+tpot_ms", required_ms=rc.slo.tpot_ms,
                                    best_ms=None, best_device=None))
    return out


def slo_diagnosis(shortfalls: list[SloShortfall]) -> Diagnosis:
    parts = []
    for s in shortfalls:
        if s.slo == "ttft_ms+tpot_ms":
            parts.append(f"class {s.class_name}: each SLO is reachable alone, but no configuration meets TTFT and "
                         f"TPOT together with memory for its batch")
            continue
        best = (f"best reachable {s.best_ms:.1f} ms on {s.best_device}" if s.best_ms is not None else
                "no allowed device holds this model at this dtype in one scale-up domain or a pipeline of up to "
                "constraints.max_pp of them")
        parts.append(f"class {s.class_name}: {s.slo} {s.required_ms:g} ms is out of reach ({best})")
    return Diagnosis(reason="slo_unreachable", message="; ".join(parts) + "; loosen these SLOs or allow faster devices",
                     slo_shortfalls=tuple(shortfalls))


def budget_diagnosis(workload: Workload, units: dict, candidates: list[Candidate], backend: str,
                     options: SolveOptions) -> Diagnosis:
    """Solve the elastic model at scale 1: how far power, inventory and cost must bend."""
    model = build_model(workload, units, candidates, BuildOptions(objective=workload.objective, elastic=True))
    result = check_outcome(get_backend(backend).solve(model, options))
    if not result.has_solution:
        return Diagnosis(reason="no_candidates", message="no combination of candidates serves every class at scale 1")
    relaxations = {}
    for name, block in model.blocks.items():
        if name.startswith("slack_"):
            amount = float(result.x[block][0])
            if amount > 1e-6:
                relaxations[name.removeprefix("slack_")] = amount
    power = relaxations.get("power")
    least_kw = workload.constraints.power_budget_kw + power if power else None
    parts = []
    if power:
        parts.append(f"the power budget must grow by {power:,.1f} kW to {least_kw:,.1f} kW")
    for key, amount in relaxations.items():
        if key.startswith("inventory_"):
            parts.append(f"inventory of {key.removeprefix('inventory_')} must grow by {amount:.0f} devices")
        if key == "cost":
            parts.append(f"the cost budget must grow by ${amount:,.2f}/h")
    message = "cannot serve every class at its full rate: " + ("; ".join(parts) or "limits conflict")
    return Diagnosis(reason="budget", message=message, least_power_budget_kw=least_kw, relaxations=relaxations)
