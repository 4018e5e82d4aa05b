"""Plan a workload end to end: graph → candidates → MILP → backend → Plan → verification.

``plan_workload`` is the one entry point the CLI, the REST service and studies call.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

import numpy as np

from planner import decompose
from planner import graph as task_graph
from planner import interactivity
from planner.candidates import Candidate, CandidateOptions, generate_candidates
from planner.catalog import Catalog
from planner.diagnose import budget_diagnosis, slo_diagnosis, slo_shortfalls, unserved_classes
from planner.milp.build import BuildOptions, build_model
from planner.milp.rounding import relaxed, rounded_solution
from planner.nodes import fleet_totals, in_nodes, per_device_of
from planner.perf.model import RooflineModel
from planner.progress import Progress, report
from planner.plan import (
    banded,
    binding_constraints,
    classes_of,
    confidence_of,
    device_dtypes,
    infeasible_plan,
    plan_status,
    pools_of,
    replica_counts,
    scale_of,
    shared_loads,
    solver_info,
    totals_of,
    traffic_split,
)
from planner.provenance import stamp
from planner.schema import (
    GOODPUT_OBJECTIVES,
    Alternative,
    Baseline,
    Diagnosis,
    Footprint,
    Gain,
    Gains,
    Interactivity,
    Plan,
    SimulatedMiss,
    SimulationCheck,
    SolveSettings,
    Workload,
    route_of,
)
from planner.sensitivity import SensitivityOptions, analyse
from planner.simulate import SimulationOptions, SimulationStopped, simulate_plan
from planner.solvers.base import SolveOptions, SolveResult, Termination, check_outcome, get_backend
from planner.solvers.cancel import SolveCancelled, current_token
from planner.strategies.base import profiles
from planner.units import WATTS_PER_KW
from planner.verify import verify_plan

#: a plan whose goodput scale is below this serves nothing: it counts as no plan.
MIN_SCALE = 1e-6


@dataclass(frozen=True)
class PlanOptions:
    """How to solve: backend, engine, limits, and whether to compute the homogeneous baseline."""

    solver: str = "ortools"
    engine: str | None = None
    time_limit_s: float = 5.0
    relative_gap: float = 1e-4
    node_limit: int | None = None  # branch-and-bound nodes per MILP solve (SolveOptions.node_limit)
    #: baselines are comparisons, not plans: solved to a looser gap and a shorter limit
    baseline_gap: float = 5e-3
    baseline_time_limit_s: float = 2.0
    #: the second stage of max_goodput (least power at the best scale) is a tie-break: it gets this share
    tie_break_time_share: float = 0.3
    baseline: bool = True
    #: also solve the best plans whose device-type mix differs from every one found before (0: none)
    alternatives: int = 0
    #: also re-solve with each estimated input moved by ±delta (planner.sensitivity); None: no analysis
    sensitivity: SensitivityOptions | None = None
    #: also replay the plan request by request (planner.simulate); None: no replay
    simulate: SimulationOptions | None = None
    candidates: CandidateOptions = field(default_factory=CandidateOptions)

    @classmethod
    def of(cls, settings: Mapping[str, Any]) -> PlanOptions:
        """The options a request, a study or a job states, one reading for every caller (CLI, REST, studies):
        ``solver``, ``engine``, ``time_limit_s``, ``relative_gap``, ``node_limit``, ``baseline``, ``alternatives``,
        ``sensitivity_delta`` (re-solve with each estimated input moved by ± it; None: no analysis) and
        ``simulate: true`` (a replay at the default settings). A missing one keeps its default; others are ignored."""
        known = ("solver", "engine", "time_limit_s", "relative_gap", "node_limit", "baseline", "alternatives")
        extras: dict[str, Any] = {}
        if settings.get("sensitivity_delta") is not None:
            extras["sensitivity"] = SensitivityOptions(delta=settings["sensitivity_delta"])
        if settings.get("simulate"):
            extras["simulate"] = SimulationOptions()
        return cls(**{k: settings[k] for k in known if k in settings}, **extras)

    def solve_options(self) -> SolveOptions:
        return SolveOptions(time_limit_s=self.time_limit_s, relative_gap=self.relative_gap, engine=self.engine,
                            node_limit=self.node_limit)

    def for_resolve(self) -> PlanOptions:
        """The options of a sensitivity re-solve: the plan alone (no baseline, alternatives, analysis or replay)."""
        return replace(self, baseline=False, alternatives=0, sensitivity=None, simulate=None)

    def for_baseline(self) -> PlanOptions:
        return replace(self, relative_gap=max(self.relative_gap, self.baseline_gap),
                       time_limit_s=min(self.time_limit_s, self.baseline_time_limit_s))


@dataclass(frozen=True)
class Solved:
    """A finished solve of the placement MILP: the last stage's model and result, and every stage's result."""

    candidates: list[Candidate]
    model: object
    result: SolveResult
    stages: tuple[SolveResult, ...]
    time_s: float

    @property
    def scale(self) -> float:
        return scale_of(self.model, self.result) if self.result.has_solution else 0.0

    @property
    def status(self) -> str:
        """The weakest status over the stages (the goodput stage counts as much as the power stage)."""
        order = ["optimal", "feasible", "time_limit", "infeasible"]
        return max((plan_status(r) for r in self.stages), key=order.index)

    @property
    def gap(self) -> float | None:
        """The widest gap over the stages with an incumbent; None (unknown) when one of them has no bound."""
        gaps = [r.gap for r in self.stages if r.has_solution]
        return None if not gaps or None in gaps else max(gaps)


def solve_with_rounding(backend, model, options: SolveOptions, start: np.ndarray | None = None) -> SolveResult:
    """Solve the MILP from the better of the LP-rounding point (rounding.py) and ``start`` (a feasible point, e.g.
    the class-by-class plan without shared pools) as a hint; if that point still beats the incumbent, return it
    instead. The bound stays the solver's, so the reported gap is honest.
    """
    lp = check_outcome(backend.solve(relaxed(model), options))
    points = [p for p in (rounded_solution(model, lp.x) if lp.has_solution else None, start) if p is not None]
    value = {id(p): float(model.objective @ p + model.objective_offset) for p in points}
    hint = min(points, key=lambda p: value[id(p)]) if points else None
    result = backend.solve(model, replace(options, hint=hint))
    if hint is None:
        return result
    if result.has_solution and result.objective <= value[id(hint)] + 1e-9 * max(1.0, abs(value[id(hint)])):
        return result
    # an engine that found nothing (node limit) or called the model infeasible ends short of the gap with this point
    found_nothing = result.termination in (Termination.INFEASIBLE, Termination.NODE_LIMIT)
    termination = Termination.FEASIBLE if found_nothing else result.termination
    source = "the class-by-class plan" if hint is start else "LP rounding"
    return replace(result, x=hint, objective=value[id(hint)], termination=termination,
                   message=f"{result.message}; {source} beat the incumbent")


def solve_candidates(workload: Workload, units: dict, candidates: list[Candidate], options: PlanOptions,
                     first_stage: Callable[[Solved], None] | None = None) -> Solved:
    """Solve the MILP; for max_goodput, a second stage keeps λ* and minimises power (fixed_footprint: the money
    paid for additions); ``first_stage`` is called with the first stage's outcome before the second starts.
    When only the power budget couples the classes, class by class (decompose.py: exact, both stages at once)."""
    own = [c for c in candidates if not c.mix]
    apart: tuple[Solved, ...] = ()  # the class-by-class plan's stages, over the candidates without a mix
    if decompose.decomposable(workload, options.relative_gap):
        start = time.perf_counter()
        split = decompose.solve(workload, units, own, options.solver, options.solve_options())
        if split is not None:
            apart = tuple(Solved(own, m, r, (r,), time.perf_counter() - start) for m, r in zip(split.models, split.results))
            if len(own) == len(candidates):
                if first_stage is not None and len(apart) > 1 and apart[0].result.has_solution:
                    first_stage(apart[0])
                return replace(apart[-1], stages=split.results, time_s=time.perf_counter() - start)
        options = replace(options, time_limit_s=max(options.time_limit_s - (time.perf_counter() - start), 1e-3))
    # shared pools couple the classes: the full MILP starts from the class-by-class plan and must not end worse
    solved = solve_first_stage(workload, units, candidates, options, start_from=apart[0] if apart else None)
    if workload.objective in GOODPUT_OBJECTIVES and solved.result.has_solution and solved.scale > MIN_SCALE:
        if first_stage is not None:
            first_stage(solved)
        solved = tie_break(workload, units, solved, options)
    return better(workload, solved, apart[-1]) if apart else solved


def better(workload: Workload, solved: Solved, apart: Solved) -> Solved:
    """The full MILP's plan, or the class-by-class one (over the candidates without a mix) when it serves at least
    as much for less (a tie-break cut short must not end worse than where it started); the stages keep the full
    MILP's first stage, whose gap bounds both."""
    def key(s: Solved) -> tuple[float, float]:  # larger is better
        f = fleet_figures(workload, s)
        spent = f["cost_usd_per_hour"] if workload.objective == "min_cost" else f["power_kw"]
        return (s.scale if workload.objective in GOODPUT_OBJECTIVES else 0.0), -spent
    kept = replace(apart, stages=solved.stages[:1] + apart.stages[1:], time_s=solved.time_s)
    if not solved.result.has_solution:
        return kept
    mine, theirs = key(solved), key(apart)
    close = [1e-9 * max(1.0, abs(v)) for v in mine]
    if theirs[0] > mine[0] + close[0] or (theirs[0] >= mine[0] - close[0] and theirs[1] > mine[1] + close[1]):
        return kept
    return solved


def solve_first_stage(workload: Workload, units: dict, candidates: list[Candidate], options: PlanOptions,
                      exclude_mixes: tuple[frozenset[str], ...] = (), start_from: Solved | None = None) -> Solved:
    """The MILP of the workload's objective (for max_goodput: the best scale, at any power), with none of the
    ``exclude_mixes`` device-type sets, from ``start_from``'s plan when given (a solve of fewer candidates)."""
    start = time.perf_counter()
    model = build_model(workload, units, candidates, BuildOptions(objective=workload.objective, exclude_mixes=exclude_mixes))
    point = model.carried(start_from.model, start_from.result.x) if start_from is not None else None
    result = check_outcome(solve_with_rounding(get_backend(options.solver), model, options.solve_options(), point))
    return Solved(candidates, model, result, (result,), time.perf_counter() - start)


def tie_break(workload: Workload, units: dict, first: Solved, options: PlanOptions) -> Solved:
    """A goodput objective's second stage: the least power (fixed_footprint: money paid) at the first stage's
    scale λ* (the first stage's plan is kept if it finds none)."""
    start = time.perf_counter()
    second = build_model(workload, units, first.candidates,
                         BuildOptions(objective=workload.objective, min_scale=first.scale * (1 - 1e-9)))
    limits = replace(options.solve_options(), time_limit_s=max(1.0, options.tie_break_time_share * options.time_limit_s))
    refined = check_outcome(get_backend(options.solver).solve(second, replace(limits, hint=first.result.x)))
    elapsed = first.time_s + time.perf_counter() - start
    if not refined.has_solution:
        return replace(first, time_s=elapsed)
    return Solved(first.candidates, second, refined, (first.result, refined), elapsed)


def lp_bound(workload: Workload, units: dict, candidates: list[Candidate], options: PlanOptions) -> float | None:
    """Bound on the first stage's objective from its LP relaxation (a floor: every objective is minimised):
    its optimum, the engine's bound when it stopped short, ``-inf`` (no pruning) without one; None only when
    the relaxation is infeasible (then so is the MILP)."""
    model = build_model(workload, units, candidates, BuildOptions(objective=workload.objective))
    result = check_outcome(get_backend(options.solver).solve(relaxed(model), options.solve_options()))
    if result.termination is Termination.INFEASIBLE:
        return None
    if result.termination is Termination.OPTIMAL and result.has_solution:
        return result.objective
    return result.bound if result.bound is not None else -np.inf


def check_ids(workload: Workload, catalog: Catalog) -> None:
    """Raise UnknownId for a model, draft model, device or inventory id the catalog does not hold."""
    catalog.model(workload.model)
    if workload.spec_decode is not None:
        catalog.model(workload.spec_decode.draft_model)
    for device_id in (*(workload.constraints.devices or ()), *workload.constraints.inventory, *workload.constraints.owned,
                      *((workload.baseline_device,) if workload.baseline_device else ())):
        catalog.device(device_id)


def plan_workload(workload: Workload, catalog: Catalog, options: PlanOptions = PlanOptions()) -> Plan:
    """The best fleet for ``workload`` under its constraints, verified, with its homogeneous baseline,
    stamped with how it was made (version, catalog fingerprint, time, solve options); with
    ``options.sensitivity``, also its best alternative and which estimated inputs could change it; with
    ``options.simulate``, also its replay."""
    if options.sensitivity is None:
        return replayed(_stamped(_plan(workload, catalog, options), catalog, options), catalog, options)
    options = replace(options, alternatives=max(options.alternatives, 1))  # whose devices are probed too
    plan = _stamped(_plan(workload, catalog, options), catalog, options)
    if plan.status == "infeasible":
        return plan
    alone = workload.model_copy(update={"baseline_device": None})
    section = analyse(plan, catalog, options.sensitivity, lambda moved: _plan(alone, moved, options.for_resolve()))
    return replayed(plan.model_copy(update={"sensitivity": section}), catalog, options)


def replayed(plan: Plan, catalog: Catalog, options: PlanOptions) -> Plan:
    """``plan`` with its replay (``options.simulate``; none for a plan without pools)."""
    if options.simulate is None or not plan.pools:
        return plan
    token = current_token()
    try:
        sim = simulate_plan(plan, RooflineModel(catalog), options.simulate,
                            should_stop=(lambda: token.cancelled) if token is not None else None)
    except SimulationStopped as exc:  # the request was cancelled, or its time cap passed
        raise SolveCancelled("the replay was cancelled") from exc
    check = SimulationCheck(
        verdict=sim.verdict, requests=sim.requests, duration_s=sim.options.duration_s, seed=sim.options.seed,
        misses=tuple(SimulatedMiss(class_name=m.class_name, metric=m.metric, statistic=m.statistic, simulated=m.simulated,
                                   target=m.target, relative=m.relative) for m in sim.misses if not m.within_noise),
        simulated_ttft_ms={c.name: c.simulated_ttft_ms for c in sim.classes},
        simulated_tpot_ms={c.name: c.simulated_tpot_ms for c in sim.classes})
    return plan.model_copy(update={"simulation": check})


def _stamped(plan: Plan, catalog: Catalog, options: PlanOptions) -> Plan:
    settings = SolveSettings(solver=options.solver, engine=options.engine, time_limit_s=options.time_limit_s,
                             relative_gap=options.relative_gap, baseline=options.baseline, node_limit=options.node_limit)
    return plan.model_copy(update={**stamp(catalog), "options": settings})


@dataclass(frozen=True)
class Priced:
    """A workload's task graph (and its JSON), pool units, every priced candidate (the reference device's
    included) and the candidates the plan may use."""

    graph_json: dict
    units: dict
    priced: list[Candidate]
    candidates: list[Candidate]


def price_workload(workload: Workload, catalog: Catalog, options: PlanOptions, costs: RooflineModel) -> Priced:
    """Graph → candidates for ``workload``."""
    graph = task_graph.build_task_graph(workload, *profiles(costs, workload))
    priced, _ = generate_candidates(with_reference_device(workload), catalog, graph, options.candidates, costs)
    allowed = set(workload.constraints.devices or catalog.devices)
    dtypes = workload.dtypes or (None,)  # each allowed dtype is its own route through each strategy
    units = {(k, route_of(s, d)): task_graph.units(graph, k, s)
             for k in {rc.name for rc in workload.classes} for s in task_graph.strategies_of(graph, k) for d in dtypes}
    return Priced(task_graph.to_json(graph), units, priced, [c for c in priced if set(c.devices_by_type) <= allowed])


def _plan(workload: Workload, catalog: Catalog, options: PlanOptions) -> Plan:
    check_ids(workload, catalog)
    if workload.objective == "max_interactivity":
        return most_interactive(workload, catalog, options)
    start = time.perf_counter()
    costs = RooflineModel(catalog)
    report(Progress("candidates"))
    p = price_workload(workload, catalog, options, costs)
    graph_json, graph_units, priced, candidates = p.graph_json, p.units, p.priced, p.candidates
    unserved = unserved_classes(workload, candidates, graph_units)
    if unserved:
        info = solver_info(SolveResult(Termination.INFEASIBLE, options.solver, options.engine or "-"), time.perf_counter() - start, None)
        return infeasible_plan(workload, graph_json, info, slo_diagnosis(slo_shortfalls(workload, catalog, unserved)))

    def reached(stage: str, solved: Solved) -> None:
        """Report ``stage`` with the solve so far; its plan (no baseline) is the best one yet."""
        has_plan = solved.result.has_solution and solved.scale > MIN_SCALE
        best = (lambda: _stamped(_finished(workload, solved, graph_json, start, None, options, catalog), catalog, options)
                ) if has_plan else None
        report(Progress(stage, len(candidates), solved.result.objective, solved.result.bound, solved.gap, best))

    report(Progress("solve", len(candidates)))
    solved = solve_candidates(workload, graph_units, candidates, options, lambda first: reached("tie_break", first))
    if options.baseline:
        reached("baseline", solved)
    baseline = best_homogeneous(workload, graph_units, candidates, options) if options.baseline else None
    reference = (homogeneous_fleet(workload, graph_units, priced, workload.baseline_device, options)
                 if workload.baseline_device else None)
    info = solver_info(solved.result, time.perf_counter() - start, solved.gap)
    if not solved.result.has_solution or solved.scale <= MIN_SCALE:
        limit = {Termination.TIME_LIMIT: f"time limit ({options.time_limit_s:g} s per MILP solve; raise time_limit_s)",
                 Termination.NODE_LIMIT: f"node limit ({options.node_limit} nodes per MILP solve; raise node_limit)"}
        if solved.result.termination in limit and not solved.result.has_solution:
            diagnosis = Diagnosis(reason="no_candidates",
                                  message=f"the {limit[solved.result.termination]} passed before any plan was found")
        else:
            diagnosis = budget_diagnosis(workload, graph_units, candidates, options.solver, options.solve_options())
        return infeasible_plan(workload, graph_json, info, diagnosis, baseline).model_copy(update={"reference": reference})
    reached("verify", solved)
    plan = _finished(workload, solved, graph_json, start, baseline, options, catalog)
    footprint = footprint_of(workload, graph_units, candidates, plan, options, costs) if workload.constraints.owned else None
    return plan.model_copy(update={"reference": reference, "gains": gains_of(workload, plan, baseline, reference),
                                   "alternatives": alternatives(workload, graph_units, candidates, plan, options),
                                   "footprint": footprint})


def most_interactive(workload: Workload, catalog: Catalog, options: PlanOptions) -> Plan:
    """max_interactivity (interactivity.py): the least-power plan at the tightest TPOT factor a fleet within the
    budgets serves the rates at, with the best single device type's factor beside it."""
    costs = RooflineModel(catalog)
    # a probe asks for any fleet, not the best one: a loose gap, the plan's own time limit
    probe_options = replace(options, relative_gap=max(options.relative_gap, options.baseline_gap))
    cache: dict[float, Priced] = {}

    def priced(f: float) -> Priced:
        if f not in cache:
            cache[f] = price_workload(interactivity.tightened(workload, f), catalog, options, costs)
        return cache[f]

    answers: dict[tuple[float, str | None], bool] = {}

    def feasible(f: float, device: str | None = None) -> bool:
        """Whether a fleet (of ``device`` alone) serves the rates at TPOT factor ``f`` (each probe solved once)."""
        if (f, device) not in answers:
            tight, p = interactivity.tightened(workload, f), priced(f)
            candidates = p.candidates if device is None else homogeneous_subsets(p.priced).get(device, [])
            answers[(f, device)] = bool(candidates) and not unserved_classes(tight, candidates, p.units) and \
                solve_first_stage(tight, p.units, candidates, probe_options).result.has_solution
        return answers[(f, device)]

    def refined(device: str, lowest: float) -> float | None:
        """``device``'s tightest factor, walking the grid down to one step below ``lowest`` and bisecting."""
        walk = [f for f in interactivity.grid() if f >= lowest * interactivity.GRID_STEP * (1 - 1e-9)]
        return interactivity.tightest(lambda f: feasible(f, device), walk)[0]

    factor, probes = interactivity.tightest(feasible)
    best_device = best_factor = reference_factor = None
    if options.baseline and factor is not None:
        # every device type down the grid (no type alone beats the mix), the best of them then refined
        allowed = homogeneous_subsets(priced(1.0).candidates)
        reach = {d: interactivity.tightest(lambda f, d=d: feasible(f, d), [f for f in interactivity.grid() if f >= factor])[0]
                 for d in allowed}
        reach = {d: f for d, f in reach.items() if f is not None}
        if reach:
            lowest = min(reach.values())
            best_factor, best_device = min((refined(d, lowest), d) for d, f in reach.items() if f == lowest)
    if workload.baseline_device is not None and factor is not None:
        reference_factor = refined(workload.baseline_device, factor)
    plan = _plan(interactivity.tightened(workload, factor or 1.0), catalog, replace(options, baseline=False, alternatives=0))
    tight = plan.workload
    section = Interactivity(
        tpot_factor=factor,
        tpot_ms={rc.name: rc.slo.tpot_ms for rc in tight.classes},
        output_tokens_per_s_per_user={rc.name: 1000.0 / rc.slo.tpot_ms for rc in tight.classes},
        best_homogeneous=best_device, best_homogeneous_factor=best_factor,
        gain=best_factor / factor if best_factor is not None and factor else None,
        reference=workload.baseline_device, reference_factor=reference_factor, probes=tuple(probes))
    # the single-device fleets are compared in the section, at their own tightest TPOT
    return plan.model_copy(update={"objective": "max_interactivity", "interactivity": section, "reference": None,
                                   "workload": tight.model_copy(update={"objective": "max_interactivity"})})


def _finished(workload: Workload, solved: Solved, graph_json: dict, start: float, baseline: Baseline | None,
              options: PlanOptions, catalog: Catalog) -> Plan:
    """The plan of a solve that has a solution, verified."""
    info = solver_info(solved.result, time.perf_counter() - start, solved.gap)
    plan = _decode(workload, solved, graph_json, info, baseline, catalog)
    return plan.model_copy(update={"verification": verify_plan(plan, catalog, options.candidates)})


def _decode(workload: Workload, solved: Solved, graph_json: dict, info, baseline: Baseline | None,
            catalog: Catalog) -> Plan:
    counts = replica_counts(solved.model, solved.result)
    split = traffic_split(solved.model, solved.result)
    costs = RooflineModel(catalog)
    pools = pools_of(workload, solved.candidates, counts, split, shared_loads(solved.model, solved.result))
    confidence = confidence_of(workload, pools, costs)
    pools = banded(pools, confidence, costs)
    totals = fleet_totals(totals_of(pools, workload.constraints.pue), per_device_of(solved.candidates),
                          workload.constraints.whole_nodes, workload.constraints.pue)
    scale = solved.scale
    return Plan(
        status=solved.status, objective=workload.objective, model=workload.model, goodput_scale=scale,
        solver=info, pools=tuple(pools), totals=totals, classes=tuple(classes_of(workload, pools, split, scale)),
        binding_constraints=tuple(binding_constraints(workload, solved.candidates, pools, totals)),
        baseline=baseline, gain=_gain(workload, scale, totals, baseline), graph=graph_json, workload=workload,
        confidence=tuple(confidence),
    )


def alternatives(workload: Workload, units: dict, candidates: list[Candidate], best: Plan,
                 options: PlanOptions) -> tuple[Alternative, ...]:
    """Up to ``options.alternatives`` runner-up fleets, each the best plan whose device-type mix differs from the
    best plan's and every earlier runner-up's (a no-good cut on the mix per plan found), best first."""
    found: list[Alternative] = []
    mixes = [frozenset(best.totals.devices_by_type)]
    for _ in range(options.alternatives):
        solved = solve_first_stage(workload, units, candidates, options, tuple(mixes))
        if not solved.result.has_solution or (workload.objective in GOODPUT_OBJECTIVES and solved.scale <= MIN_SCALE):
            break
        fleet = fleet_figures(workload, solved)
        ratio = _ratio(workload.objective, (solved.scale, fleet["cost_usd_per_hour"], fleet["power_kw"]),
                       (best.goodput_scale, best.totals.cost_usd_per_hour, best.totals.power_kw))
        found.append(Alternative(devices_by_type=fleet["devices_by_type"], goodput_scale=solved.scale,
                                 power_kw=fleet["power_kw"], cost_usd_per_hour=fleet["cost_usd_per_hour"],
                                 status=solved.status, shortfall=max(0.0, 1.0 - ratio) if ratio is not None else 1.0))
        mixes.append(frozenset(fleet["devices_by_type"]))
    return tuple(found)


def homogeneous_subsets(candidates: list[Candidate]) -> dict[str, list[Candidate]]:
    """Candidates that use one device type only, by device type."""
    out: dict[str, list[Candidate]] = {}
    for c in candidates:
        if len(c.devices_by_type) == 1:
            out.setdefault(next(iter(c.devices_by_type)), []).append(c)
    return dict(sorted(out.items()))


def best_homogeneous(workload: Workload, units: dict, candidates: list[Candidate], options: PlanOptions) -> Baseline:
    """The best single-device-type fleet under the same constraints (by the workload's objective).

    Lean and exact up to the baseline gap: each device type's LP relaxation bounds what its fleet can reach;
    types are solved best bound first, and one whose bound cannot beat the best fleet found so far (an
    incumbent within ``baseline_gap``) is never solved. Only the winner gets max_goodput's power tie-break
    (the figures the baseline reports).
    """
    options = options.for_baseline()
    subsets = homogeneous_subsets(candidates)
    bounds = {device: lp_bound(workload, units, subset, options) for device, subset in subsets.items()}
    winner: tuple[float, Solved] | None = None  # (first-stage objective, solve), minimised
    for device in sorted((d for d, b in bounds.items() if b is not None), key=lambda d: (bounds[d], d)):
        if winner is not None and bounds[device] >= winner[0] - 1e-9 * max(1.0, abs(winner[0])):
            break  # sorted by bound: no later type can beat the winner either
        solved = solve_first_stage(workload, units, subsets[device], options)
        if not solved.result.has_solution or (workload.objective in GOODPUT_OBJECTIVES and solved.scale <= MIN_SCALE):
            continue
        if winner is None or solved.result.objective < winner[0] - 1e-12:
            winner = (solved.result.objective, solved)
    if winner is None:
        return NO_FLEET
    solved = winner[1]
    if workload.objective in GOODPUT_OBJECTIVES:
        solved = tie_break(workload, units, solved, options)
    return fleet_of(workload, solved)


#: the answer when no single-device-type fleet serves the workload
NO_FLEET = Baseline(device=None, goodput_scale=0.0, power_kw=0.0, cost_usd_per_hour=0.0, status="infeasible")


def fleet_figures(workload: Workload, solved: Solved) -> dict:
    """The fleet of a finished solve: devices by type, facility power (kW), $/h, capex and device count (with
    ``whole_nodes``, of the whole nodes bought)."""
    pairs = [(c, n) for c, n in zip(solved.candidates, replica_counts(solved.model, solved.result)) if n > 0]
    by_type: dict[str, int] = {}
    for c, n in pairs:
        for device, k in c.devices_by_type.items():
            by_type[device] = by_type.get(device, 0) + int(n * k)
    cons = workload.constraints
    nodes = in_nodes(by_type, per_device_of(solved.candidates), cons.whole_nodes)
    return {"devices_by_type": nodes.devices_by_type,
            "power_kw": cons.pue * (sum(n * c.power_w for c, n in pairs) + nodes.idle_power_w) / WATTS_PER_KW,
            "cost_usd_per_hour": sum(n * c.cost_usd_per_hour for c, n in pairs) + nodes.idle_usd_per_hour,
            "capex_usd": sum(n * c.capex_usd for c, n in pairs) + nodes.idle_capex_usd,
            "devices": sum(nodes.devices_by_type.values())}


def fleet_of(workload: Workload, solved: Solved) -> Baseline:
    """The single-device-type fleet of a finished solve: its scale, facility power, $/h, capex and devices."""
    figures = fleet_figures(workload, solved)
    return Baseline(device=next(iter(solved.candidates[0].devices_by_type)), goodput_scale=solved.scale,
                    power_kw=figures["power_kw"], cost_usd_per_hour=figures["cost_usd_per_hour"],
                    capex_usd=figures["capex_usd"], devices=figures["devices"], status=solved.status)


def homogeneous_fleet(workload: Workload, units: dict, candidates: list[Candidate], device: str,
                      options: PlanOptions) -> Baseline:
    """The best fleet of ``device`` alone under the workload's constraints (NO_FLEET-like when none serves it)."""
    subset = homogeneous_subsets(candidates).get(device, [])
    if not subset:
        return NO_FLEET.model_copy(update={"device": device})
    solved = solve_candidates(workload, units, subset, options.for_baseline())
    if not solved.result.has_solution or solved.scale <= MIN_SCALE:
        return NO_FLEET.model_copy(update={"device": device})
    return fleet_of(workload, solved)


def owned_fleet(workload: Workload, units: dict, candidates: list[Candidate], options: PlanOptions) -> Baseline:
    """The best the owned devices do alone: only their types, at most the owned counts, same constraints."""
    owned = workload.constraints.owned
    cons = workload.constraints
    inventory = {**cons.inventory, **{d: min(k, cons.inventory.get(d, k)) for d, k in owned.items()}}
    alone = workload.model_copy(update={"constraints": cons.model_copy(update={"devices": tuple(sorted(owned)),
                                                                               "inventory": inventory})})
    subset = [c for c in candidates if set(c.devices_by_type) <= set(owned)]
    name = " + ".join(sorted(owned))
    solved = solve_candidates(alone, units, subset, options.for_baseline()) if subset else None
    if solved is None or not solved.result.has_solution or (
            workload.objective in GOODPUT_OBJECTIVES and solved.scale <= MIN_SCALE):
        return NO_FLEET.model_copy(update={"device": name})
    figures = fleet_figures(alone, solved)
    return Baseline(device=name, goodput_scale=solved.scale, power_kw=figures["power_kw"],
                    cost_usd_per_hour=figures["cost_usd_per_hour"], capex_usd=figures["capex_usd"],
                    devices=figures["devices"], status=solved.status)


def footprint_of(workload: Workload, units: dict, candidates: list[Candidate], plan: Plan, options: PlanOptions,
                 costs: RooflineModel) -> Footprint:
    """What ``plan`` adds to the owned fleet (devices, $/h, capex and facility power at catalog figures) and
    what that buys over the owned fleet alone."""
    owned, used = workload.constraints.owned, plan.totals.devices_by_type
    added = {d: n - owned.get(d, 0) for d, n in used.items() if n > owned.get(d, 0)}
    devices = {d: costs.catalog.device(d) for d in added}
    at = device_dtypes(plan.pools, workload.dtype)
    alone = owned_fleet(workload, units, candidates, options)
    mine = (plan.goodput_scale, plan.totals.cost_usd_per_hour, plan.totals.power_kw)
    gain = (None if alone.status == "infeasible"
            else _ratio(workload.objective, mine, (alone.goodput_scale, alone.cost_usd_per_hour, alone.power_kw)))
    return Footprint(
        owned=dict(sorted(owned.items())), owned_used={d: min(used.get(d, 0), k) for d, k in sorted(owned.items())},
        added=dict(sorted(added.items())),
        added_cost_usd_per_hour=sum(k * devices[d].price_usd_per_hour for d, k in added.items()),
        added_capex_usd=sum(k * devices[d].price_usd for d, k in added.items()),
        added_power_kw=sum(workload.constraints.pue * costs.silicon(devices[d], at[d]).replica_power_w(k)
                           for d, k in added.items()) / WATTS_PER_KW,
        owned_only=alone, gain=gain)


def with_reference_device(workload: Workload) -> Workload:
    """``workload`` whose allowed devices include its ``baseline_device`` (so that fleet can be priced)."""
    devices, reference = workload.constraints.devices, workload.baseline_device
    if reference is None or devices is None or reference in devices:
        return workload
    constraints = workload.constraints.model_copy(update={"devices": (*devices, reference)})
    return workload.model_copy(update={"constraints": constraints})


def output_tokens_per_s(workload: Workload, scale: float) -> float:
    """Output tokens/s a fleet at goodput ``scale`` serves: ``scale · Σ rate · osl``."""
    return scale * sum(rc.rate_rps * rc.output_tokens for rc in workload.classes)


def usd_per_million_tokens(cost_usd_per_hour: float, tokens_per_s: float) -> float | None:
    """``$/h / (tokens/s · 3600) · 10⁶``; None when nothing is served."""
    return cost_usd_per_hour / (tokens_per_s * 3600.0) * 1e6 if tokens_per_s > 0 else None


def _ratio(objective: str, better: tuple[float, float, float], worse: tuple[float, float, float]) -> float | None:
    """How much ``better`` beats ``worse`` on ``objective``, each given as (scale, $/h, kW): goodput ratio, or the
    inverse ratio of cost or power (above 1: ``better`` is better)."""
    scale, cost, power = better
    scale0, cost0, power0 = worse
    if objective in GOODPUT_OBJECTIVES:
        return scale / scale0 if scale0 > 0 else None
    if objective == "min_cost":
        return cost0 / cost if cost > 0 and cost0 > 0 else None
    return power0 / power if power > 0 and power0 > 0 else None


def gains_of(workload: Workload, plan: Plan, best: Baseline | None, reference: Baseline | None) -> Gains | None:
    """The plan against the best homogeneous fleet and the reference, in the objective and in money, and the
    reference → plan gain split into the best single device and mixing."""
    mine = (plan.goodput_scale, plan.totals.cost_usd_per_hour, plan.totals.power_kw)
    tokens = output_tokens_per_s(workload, plan.goodput_scale)
    against = []
    for versus, fleet in (("best_homogeneous", best), ("reference", reference)):
        if fleet is None or fleet.device is None or fleet.status == "infeasible":
            continue
        theirs = (fleet.goodput_scale, fleet.cost_usd_per_hour, fleet.power_kw)
        against.append(Gain(
            versus=versus, device=fleet.device, objective_ratio=_ratio(workload.objective, mine, theirs),
            cost_change_usd_per_hour=plan.totals.cost_usd_per_hour - fleet.cost_usd_per_hour,
            capex_change_usd=plan.totals.capex_usd - fleet.capex_usd,
            usd_per_million_tokens=usd_per_million_tokens(plan.totals.cost_usd_per_hour, tokens),
            fleet_usd_per_million_tokens=usd_per_million_tokens(
                fleet.cost_usd_per_hour, output_tokens_per_s(workload, fleet.goodput_scale))))
    if not against:
        return None
    by = {g.versus: g for g in against}
    split = {}
    if "best_homogeneous" in by:
        split["mixing"] = by["best_homogeneous"].objective_ratio
    if "best_homogeneous" in by and "reference" in by:
        split["best_device"] = _ratio(workload.objective, (best.goodput_scale, best.cost_usd_per_hour, best.power_kw),
                                      (reference.goodput_scale, reference.cost_usd_per_hour, reference.power_kw))
    return Gains(against=tuple(against), **split)


def _gain(workload: Workload, scale: float, totals, baseline: Baseline | None) -> float | None:
    """How much better than the best homogeneous fleet: goodput ratio, or cost / power ratio."""
    if baseline is None or baseline.device is None:
        return None
    return _ratio(workload.objective, (scale, totals.cost_usd_per_hour, totals.power_kw),
                  (baseline.goodput_scale, baseline.cost_usd_per_hour, baseline.power_kw))
