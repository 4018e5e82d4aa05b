"""What CBC itself reports about a solve, read from its status line and its log (pure text in, facts out).

PuLP keeps only a code of CBC's answer (it reads "Stopped on time" and "Stopped on difficulties" alike) and
none of its bound, so the PuLP backend hands these functions CBC's own words: the first line of its
solution file and its log.
"""

from __future__ import annotations

import re

from planner.solvers.base import Termination

#: the first line of CBC's solution file, by its start; None: CBC could not tell infeasible from unbounded
#: (it writes "Unbounded" when the LP relaxation is, which an infeasible MILP may also have)
STATUS_LINES: tuple[tuple[str, Termination | None], ...] = (
    ("Optimal", Termination.OPTIMAL),
    ("Stopped on time", Termination.TIME_LIMIT),
    ("Stopped on iterations", Termination.FEASIBLE),  # a node limit (or an iteration limit, never set here)
    ("Infeasible", Termination.INFEASIBLE),
    ("Integer infeasible", Termination.INFEASIBLE),
    ("Unbounded", None),
)
_GAP_EXIT = re.compile(r"^Cbc0011I Exiting as integer gap of (\S+) less than", re.M)
_PARTIAL = re.compile(r"^Cbc0005I Partial search - best objective \S+ \(best possible (\S+)\)", re.M)
_COMPLETED = re.compile(r"^Cbc0001I Search completed - best objective", re.M)
_VERSION = re.compile(r"^Version: (\S+)", re.M)


def termination_of(status_line: str, has_solution: bool) -> Termination | None:
    """CBC's answer as a Termination (None: infeasible or unbounded); a node limit without an incumbent is
    NODE_LIMIT; "Stopped on difficulties / ctrl-c / due to errors" is an ERROR."""
    for start, termination in STATUS_LINES:
        if status_line.startswith(start):
            if termination is Termination.FEASIBLE and not has_solution:
                return Termination.NODE_LIMIT  # the node limit passed before any incumbent
            return termination
    return Termination.ERROR


def mip_bound(log: str, incumbent: float | None) -> float | None:
    """The dual bound CBC's log proves, in CBC's objective (``c·x``, no offset); None when it names none.

    Exiting on the gap: ``incumbent − gap`` (Cbc0011I gives the absolute gap); stopped by a limit: its "best
    possible" (Cbc0005I); a completed search proved the incumbent optimal (Cbc0001I): the incumbent. CBC prints
    a bound in no other case.
    """
    gaps = _GAP_EXIT.findall(log)
    if gaps and incumbent is not None:
        return incumbent - float(gaps[-1])
    partial = _PARTIAL.findall(log)
    if partial:
        bound = float(partial[-1])
        return bound if abs(bound) < 1e49 else None  # CBC's 1e50 stands for "none"
    if _COMPLETED.search(log) and incumbent is not None:
        return incumbent
    return None


def version_of(log: str) -> str | None:
    """The version in CBC's banner ("Version: 2.10.3"), which only a CBC run prints."""
    found = _VERSION.search(log)
    return found.group(1) if found else None
