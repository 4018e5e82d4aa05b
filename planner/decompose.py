"""An exact class-by-class solve of the placement MILP, when only the power budget ties the classes together.

Without an inventory, a cost budget, a device-type limit, owned devices, whole nodes (a node's devices may serve
several classes) or excluded mixes, every row of the MILP (milp/build.py) but the power row belongs to one class
(a minimum of replicas per pool is a row of each pool's own). Then, for a traffic scale λ,

    F(λ) = Σ_k F_k(λ),   F_k(λ) = the least facility power that serves class k at λ · rate_k

(each F_k a small MILP over class k's candidates alone), and

* ``min_power`` / ``min_cost`` at λ = 1 are the sums of the classes' own optima when the classes' fleets together
  fit the power budget (the sum of their bounds bounds the problem without the shared power row, so with it too);
  when they do not, the full MILP answers;
* ``max_goodput`` is ``λ* = max {λ : F(λ) ≤ budget}``. F is non-decreasing (more traffic never needs less power),
  so λ* is bracketed: ``lo`` by a fleet within the budget (the scale it actually serves, λ_fleet ≥ the probe), ``hi``
  by the LP relaxation and by every probe where the classes' proven lower bounds already exceed the budget. Bisection
  narrows ``[lo, hi]`` until ``(hi − lo) / lo`` is within the requested gap: the plan is optimal to that gap, proven
  by ``hi``. The fleet at ``lo`` is also the least power at λ* (second stage): no fleet serving λ_fleet uses less
  than ``F(probe)``, and this one uses exactly that.

Each class's MILP, over its candidates less those copies of another of any type beat (``_split``), is solved to a
tenth of the requested gap (at most ``CLASS_GAP``); its bound (not its incumbent) decides infeasibility, so an
unproven class solve can only stop the search, never make it claim too much. A probe solves its classes largest
first (``WORKERS`` at once in PuLP's child processes) and stops once their bounds, with the bounds the rest had at
smaller scales (F_k is non-decreasing), exceed the budget: the probe is over it whatever the rest would need. The
search has ``SHARE`` of the time limit; when it stops short of the requested gap, the full MILP gets the rest.
"""

from __future__ import annotations

import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Callable

import numpy as np

from planner.candidates import Candidate, prune_dominated
from planner.milp.build import BuildOptions, build_model, completed_point
from planner.milp.model import IlpModel
from planner.milp.rounding import relaxed, rounded_solution
from planner.schema import Workload
from planner.solvers.base import SolveOptions, SolveResult, Termination, check_outcome, get_backend
from planner.solvers.cancel import CancelToken, cancellable, current_token
from planner.solvers.isolated import IsolatedBackend
from planner.units import WATTS_PER_KW

#: relative gap each class's MILP is solved to first, at most (its proven bound is what the search relies on), and
#: again to ``CLOSE_GAP`` when the classes' incumbents and bounds straddle the budget
CLASS_GAP = 1e-6
CLOSE_GAP = 1e-9
#: requested gaps below this are left to the full MILP (bisection cannot tell scales closer than engines can)
MIN_GAP = 1e-6
#: the share of the time limit the class-by-class search may take before the full MILP gets the rest: most of it,
#: for where the search applies it proves, and the full MILP in the rest rarely does (50 classes x 18 devices on
#: PuLP: 0.6 left the search 3 s of 5, short by a probe, and the full MILP ended at a gap of 4.5e-3; 0.8 proves
#: 6.6e-5 in 3.8 s)
SHARE = 0.8
#: the longest one class's solve may take, as a share of the time limit (near λ* a probe can be hard to decide:
#: then the search stops, and an unproven bracket hands over to the full MILP)
CLASS_TIME_SHARE = 0.1
#: scales closer than this (relative) are one to an engine: its feasibility tolerance is about 1e-6 per row
SOLVER_TOLERANCE = 1e-7
#: most bisection steps (each solves every class once); 60 halvings reach any float's precision
MAX_STEPS = 60
#: class MILPs a probe solves at once when its backend solves in child processes (PuLP's), on threads that wait
#: without the GIL: two solve at once on two cores. The next class is solved alongside the one whose bound may stop the
#: probe, and unused if it does (its failure too), so the answer is the one-at-a-time search's, but for the time limit
#: near the search's share of it: both classes of a wave get the time left when it starts. OR-Tools holds the GIL
#: while it solves in this process: one at a time there.
WORKERS = 2


def decomposable(workload: Workload, relative_gap: float) -> bool:
    """Whether only the power budget couples two or more classes (one class is the full MILP already) and the
    requested gap is one the search can prove (``MIN_GAP``)."""
    cons = workload.constraints
    return (len(workload.classes) > 1 and workload.objective in ("max_goodput", "min_power", "min_cost")
            and not cons.inventory and not cons.owned and cons.cost_budget_usd_per_hour is None
            and cons.max_device_types is None and not cons.whole_nodes and relative_gap >= MIN_GAP)


@dataclass(frozen=True)
class ClassSolve:
    """Class k served at one scale: its replicas (aligned with its candidates), objective and proven bound."""

    counts: np.ndarray | None
    objective: float
    bound: float
    result: SolveResult | None  # None: not solved (over_budget)

    @property
    def gap(self) -> float:
        return abs(self.objective - self.bound) / max(1e-9, abs(self.objective)) if np.isfinite(self.objective) else 0.0


def over_budget(bound: float) -> ClassSolve:
    """A class left unsolved at a probe the others already prove over the budget: no fleet, ``bound`` below."""
    return ClassSolve(None, np.inf, bound, None)


@dataclass(frozen=True)
class Decomposed:
    """The stages' models and results, in the full MILP's variables (as ``solve_first_stage`` gives them)."""

    models: tuple[IlpModel, ...]
    results: tuple[SolveResult, ...]
    probes: int


def solve(workload: Workload, units: dict, candidates: list[Candidate], solver: str, options: SolveOptions) -> Decomposed | None:
    """The workload's MILP solved class by class (None when a class's solve is unproven: use the full MILP)."""
    start = time.perf_counter()
    backend = get_backend(solver)
    by_class = _split(workload, units, candidates)
    deadline = start + SHARE * options.time_limit_s
    class_gap = min(CLASS_GAP, options.relative_gap / 10)
    known: dict[str, list[tuple[float, float, ClassSolve]]] = defaultdict(list)  # (scale, served, solve) per class

    def at(scale: float, gap: float = class_gap, budget: float | None = None) -> dict[str, ClassSolve] | None:
        """Every class at ``scale``. A class whose fleet at a smaller scale already serves this one needs no new
        solve: F_k is non-decreasing, so that fleet is still the least (its bound still holds). With a power
        ``budget`` the classes are solved largest first (by their bound known below ``scale``: the power a probe adds
        grows with a class's), and once the bounds of those solved and those known below ``scale`` of the rest exceed
        it, the rest are left unsolved (``over_budget``): the probe is over the budget whatever they would need."""
        out, todo = {}, []
        for name in by_class:
            again = [s for low, served, s in known[name] if low <= scale <= served and s.gap <= gap]
            if again:
                out[name] = again[0]
            else:
                todo.append(name)
        floors = {name: max((s.bound for low, _, s in known[name] if low <= scale), default=0.0) for name in todo}
        if budget is not None:
            todo.sort(key=lambda name: -floors[name])  # stable: the class order breaks ties

        def proven_over(i: int) -> bool:  # the bounds so far and the floors of todo[i:] exceed the budget
            return budget is not None and (sum(s.bound for s in out.values()) + sum(floors[k] for k in todo[i:])
                                           > budget * (1 + 1e-9))

        def left_unsolved(i: int) -> dict[str, ClassSolve]:
            out.update({k: over_budget(floors[k]) for k in todo[i:]})
            return out

        workers = WORKERS if isinstance(backend, IsolatedBackend) else 1
        for first in range(0, len(todo), workers):
            if proven_over(first):
                return left_unsolved(first)
            limit = min(deadline - time.perf_counter(), CLASS_TIME_SHARE * options.time_limit_s)
            if limit <= 0:
                return None
            wave = todo[first:first + workers]
            limits = replace(options, relative_gap=gap, hint=None, time_limit_s=limit)
            outcomes = _concurrently([partial(_class_solve, workload, name, scale, *by_class[name], backend, limits)
                                      for name in wave])
            for i, (name, outcome) in enumerate(zip(wave, outcomes), first):
                if i > first and proven_over(i):  # solved alongside the class that settled the probe: unused
                    return left_unsolved(i)
                solved = outcome()
                if solved is None:
                    return None
                out[name] = solved
                if solved.counts is not None:
                    rc = next(rc for rc in workload.classes if rc.name == name)
                    known[name].append((scale, _class_scale(rc, *by_class[name], solved.counts), solved))
        return out

    if workload.objective != "max_goodput":
        solved = at(1.0)
        if (solved is None or any(s.counts is None for s in solved.values())
                or _power_kw(workload, by_class, solved) > workload.constraints.power_budget_kw * (1 + 1e-9)):
            return None  # unproven, a class no fleet serves, or fleets that only fit apart: the full MILP answers
        model = build_model(workload, units, candidates, BuildOptions(objective=workload.objective))
        return Decomposed((model,), (_result(model, workload, by_class, solved, 1.0, None, start),), 1)
    return _max_goodput(workload, units, candidates, by_class, at, backend,
                        replace(options, time_limit_s=max(deadline - time.perf_counter(), 1e-3)), start)


def _concurrently(calls: list) -> list[Callable[[], Any]]:
    """Run ``calls`` (no arguments each), on threads when there are several (``WORKERS``). Returns per call one that
    gives its result or raises its exception, so a solve the search then leaves unused cannot fail it. The threads
    solve under a token of their own, cancelled with the caller's and whenever this thread stops waiting (an error,
    Ctrl-C): their child processes are killed at once rather than waited for."""
    if len(calls) == 1:
        return [_settled(calls[0])]
    mine = CancelToken()

    def run(call):
        with cancellable(mine):
            return _settled(call)

    caller = current_token()
    pool = ThreadPoolExecutor(max_workers=len(calls))
    try:
        with caller.interrupting(mine.cancel) if caller is not None else nullcontext():
            futures = [pool.submit(run, call) for call in calls]
            return [f.result() for f in futures]
    except BaseException:
        mine.cancel()
        raise
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _settled(call: Callable[[], Any]) -> Callable[[], Any]:
    """``call``'s outcome, to be read later: its value, or its exception raised then."""
    try:
        value = call()
    except Exception as exc:  # noqa: BLE001 - raised again where the outcome is used
        error = exc  # ``exc`` is unbound once the handler ends

        def failed():
            raise error
        return failed
    return lambda: value


def _power_kw(workload: Workload, by_class: dict, solved: dict[str, ClassSolve]) -> float:
    """Facility power of the classes' fleets together (kW)."""
    pue = workload.constraints.pue
    return sum(pue * n * c.power_w for name, (_, cands) in by_class.items()
               for c, n in zip(cands, solved[name].counts)) / WATTS_PER_KW


def _max_goodput(workload, units, candidates, by_class, at, backend, options: SolveOptions, start: float) -> Decomposed | None:
    budget = workload.constraints.power_budget_kw
    first = build_model(workload, units, candidates, BuildOptions(objective="max_goodput"))
    lp = check_outcome(backend.solve(relaxed(first), options))
    if lp.termination is not Termination.OPTIMAL or not lp.has_solution:
        return None
    hi = -float(lp.objective)
    lo, best = 0.0, None
    floor = 0.0  # the largest scale probed feasible (the fleet found serves ``lo``, within solver tolerance of it)
    rounded = rounded_solution(first, lp.x)
    probes, scale = 0, hi
    if rounded is not None:  # the LP-rounding fleet's scale is feasible: a good first probe, unless it is ~0
        scale = min(hi, float(rounded[first.blocks["scale"]][0]))
        scale = scale if scale > 1e-3 * hi else hi / 2
    while probes < MAX_STEPS and (best is None or (hi - lo) > options.relative_gap * lo):
        if (best is None and scale < 1e-12) or (best is not None and hi - floor <= SOLVER_TOLERANCE * hi):
            break  # nothing left to probe, or nothing an engine's feasibility tolerance can tell apart
        solved = at(scale, budget=budget)
        probes += 1
        if solved is not None and _straddles(solved, budget):
            solved = at(scale, CLOSE_GAP, budget)
        if solved is None:
            break  # a class's solve is unproven: the bracket so far is all the search knows
        power = sum(s.objective for s in solved.values())
        if power <= budget * (1 + 1e-9):
            floor = max(floor, scale)
            served = _served_scale(workload, by_class, solved)
            if served > lo:
                lo, best = served, solved
        elif sum(s.bound for s in solved.values()) > budget * (1 + 1e-9):
            hi = min(hi, scale)
        else:  # neither proven: the classes' gaps straddle the budget
            break
        scale = (max(lo, floor) + hi) / 2 if floor > 0 else scale / 2
    hi = max(hi, lo)
    if best is None or (hi - lo) > options.relative_gap * lo:
        return None  # no fleet found, or an unproven bracket: the full MILP (and its diagnosis) answers
    stage1 = _result(first, workload, by_class, best, lo, hi, start)
    second = build_model(workload, units, candidates, BuildOptions(objective="max_goodput", min_scale=lo * (1 - 1e-9)))
    return Decomposed((first, second), (stage1, _result(second, workload, by_class, best, lo, None, start)), probes)


def _straddles(solved: dict[str, ClassSolve], budget: float) -> bool:
    """The classes' bounds fit the budget but their incumbents do not: the probe is not decided."""
    return (sum(s.bound for s in solved.values()) <= budget * (1 + 1e-9)
            < sum(s.objective for s in solved.values()))


def _split(workload: Workload, units: dict, candidates: list[Candidate]) -> dict[str, tuple[dict, list[Candidate]]]:
    """Per class: its pool units and its candidates less those that whole copies of another of the same pool unit, of
    any device type, beat (``prune_dominated(across_types=True)``): a class's MILP has only its split and demand rows,
    the power row, the minimum replicas per pool and its objective, so swapping each such replica for its copies (as
    many at least) keeps every row and never worsens the optimum. Without the homogeneous baselines' need to keep each
    type's own best, that leaves about one candidate in ten of mixed-agents.yaml's (22 to 34 of 269 to 302 per class)."""
    cands: dict = defaultdict(lambda: defaultdict(list))
    for c in candidates:
        cands[c.class_name][(c.route, c.role)].append(c)
    return {rc.name: ({key: u for key, u in units.items() if key[0] == rc.name},
                      [c for group in cands[rc.name].values() for c in prune_dominated(group, workload, across_types=True)])
            for rc in workload.classes}


def _class_solve(workload: Workload, name: str, scale: float, units: dict, cands: list[Candidate], backend,
                 options: SolveOptions) -> ClassSolve | None:
    """The least power (min_cost: money) serving class ``name`` at ``scale`` times its rate; None if unproven."""
    rc = next(rc for rc in workload.classes if rc.name == name)
    objective = "min_cost" if workload.objective == "min_cost" else "min_power"
    one = workload.model_copy(update={"classes": (rc.model_copy(update={"rate_rps": rc.rate_rps * scale}),),
                                      "objective": objective})
    model = build_model(one, units, cands, BuildOptions(objective=objective))
    result = check_outcome(backend.solve(model, options))
    if result.termination is Termination.INFEASIBLE:
        return ClassSolve(None, np.inf, np.inf, result)
    if not result.has_solution or result.termination is not Termination.OPTIMAL or result.bound is None:
        return None
    counts = np.round(result.x[model.blocks["n"]]).astype(int)
    return ClassSolve(counts, float(result.objective), float(result.bound), result)


def _strategy_scales(rc, units: dict, cands: list[Candidate], counts) -> dict[str, float]:
    """Per strategy of class ``rc``: the scale of its rate a fleet ``counts`` carries (its tightest pool unit)."""
    out = {}
    for (_, strategy), roles in units.items():
        caps = [sum(n * c.effective_rps for c, n in zip(cands, counts) if (c.route, c.role) == (strategy, role))
                for role in roles]
        out[strategy] = min(caps, default=0.0) / rc.rate_rps
    return out


def _class_scale(rc, units: dict, cands: list[Candidate], counts) -> float:
    """The scale of class ``rc``'s rate its fleet serves: its strategies' scales summed."""
    return sum(_strategy_scales(rc, units, cands, counts).values())


def _served_scale(workload: Workload, by_class: dict, solved: dict[str, ClassSolve]) -> float:
    """The largest uniform scale the classes' fleets serve: the least over the classes."""
    if any(solved[rc.name].counts is None for rc in workload.classes):
        return 0.0
    return min(_class_scale(rc, *by_class[rc.name], solved[rc.name].counts) for rc in workload.classes)


def _result(model: IlpModel, workload: Workload, by_class: dict, solved: dict[str, ClassSolve], scale: float,
            hi: float | None, start: float) -> SolveResult:
    """The classes' fleets as a point of the full ``model``: replicas, each class's strategy split at ``scale``."""
    x = np.zeros(model.n_vars)
    index = {name: j for j, name in enumerate(model.var_names)}
    for rc in workload.classes:  # each class's strategies carry ``scale`` in proportion to what they can
        units, cands = by_class[rc.name]
        counts = solved[rc.name].counts
        for c, n in zip(cands, counts):
            x[index[f"n:{c.key}"]] += n
        mine = _strategy_scales(rc, units, cands, counts)
        total = sum(mine.values())
        for strategy, v in mine.items():
            x[index[f"z:{rc.name}/{strategy}"]] = scale * v / total if total > 0 else 0.0
    x[model.blocks["scale"]] = scale
    x = completed_point(model, x)
    objective = float(model.objective @ x + model.objective_offset)
    if hi is not None:  # the goodput stage: minimise −λ, proven down to −hi
        bound = -hi
    else:  # a cost or power stage: the classes' bounds
        bound = sum(s.bound for s in solved.values())
    engine = next(iter(solved.values())).result
    return SolveResult(Termination.OPTIMAL, engine.backend, engine.engine, objective=objective, bound=bound, x=x,
                       time_s=time.perf_counter() - start, engine_version=engine.engine_version,
                       message=f"class by class ({len(solved)} classes)")
