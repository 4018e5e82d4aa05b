"""Solver backends: translation of an IlpModel into OR-Tools or PuLP, and back into a SolveResult."""

from planner.solvers.base import BACKENDS, SolveOptions, SolveResult, Termination, get_backend

__all__ = ["BACKENDS", "SolveOptions", "SolveResult", "Termination", "get_backend"]
