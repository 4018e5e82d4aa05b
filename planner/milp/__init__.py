"""The placement MILP: a solver-neutral model (model.py) and its formulation (build.py)."""
