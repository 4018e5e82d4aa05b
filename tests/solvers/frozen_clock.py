"""The PuLP backend under a clock that never moves (imported in a solver child only): whatever it reports about
how a solve ended must come from the engine, since elapsed time reads 0."""

from __future__ import annotations

import types

from planner.solvers import pulp_backend

pulp_backend.time = types.SimpleNamespace(perf_counter=lambda: 0.0)
PulpBackend = pulp_backend.PulpBackend
