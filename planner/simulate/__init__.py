"""A discrete-event replay of a plan's fleet (SimPy): requests arriving one at a time, per class, routed by the
plan's shares to its pools, each replica batching them as its strategy prices it (service.py), measured
against the SLOs and the plan's own predictions (summary.py). Pure computation: no I/O.

Entry point: ``simulate_plan(plan, costs, SimulationOptions(...)) -> Simulation``.
"""

from planner.simulate.outcome import Simulation, SimulationOptions
from planner.simulate.run import SimulationStopped, simulate_plan
from planner.simulate.service import SimulationError

__all__ = ["Simulation", "SimulationError", "SimulationOptions", "SimulationStopped", "simulate_plan"]
