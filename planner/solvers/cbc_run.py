"""CBC through PuLP, with CBC's own words kept: the one solver module that reads files.

CBC answers only in files: PuLP writes the model to a temporary MPS file, CBC writes its solution file and
(here) its log, and PuLP keeps a status code of the solution file's first line, dropping the reason ("Stopped
on time" and "Stopped on difficulties" read alike) and every bound. ``solve`` returns that first line and the
log for ``planner.solvers.cbc_log`` to read.
"""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

import pulp

from planner.solvers.base import SolveOptions


class _Cbc(pulp.PULP_CBC_CMD):
    """PuLP's bundled CBC, keeping CBC's status line (the first line of its solution file)."""

    status_line = ""

    def get_status(self, filename):
        self.status_line = Path(filename).read_text().split("\n", 1)[0].strip()
        return super().get_status(filename)


def solve(problem: pulp.LpProblem, options: SolveOptions) -> tuple[str, str]:
    """Solve ``problem`` with CBC (its values and status land on ``problem``); CBC's status line and log."""
    with tempfile.TemporaryDirectory(prefix="siliconmix-cbc-") as folder:
        log_path = Path(folder) / "cbc.log"
        with warnings.catch_warnings():
            # the CBC binary bundled with pulp 3.x; deprecated only for pulp 4, which needs Python 3.12
            warnings.simplefilter("ignore", DeprecationWarning)
            solver = _Cbc(msg=False, timeLimit=options.time_limit_s, gapRel=options.relative_gap, threads=options.threads,
                          options=[f"randomSeed {options.seed}", f"randomCbcSeed {options.seed}"], logPath=str(log_path),
                          maxNodes=options.node_limit)
        problem.solve(solver)
        return solver.status_line, log_path.read_text(errors="replace")
