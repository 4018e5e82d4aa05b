"""Layering rules of DESIGN.md, checked on the source by AST.

- planner/ never imports api/, fastapi, starlette, uvicorn or a database library, not even its command
  line (the service plugs its ``serve`` command in through an entry point);
- only planner/solvers/ imports ortools or pulp/highspy;
- only catalog.py, files.py, export/, report/, study_runner.py and the command line touch files.
"""

import ast
from pathlib import Path

PLANNER = Path(__file__).resolve().parent.parent / "planner"
FORBIDDEN_IN_PLANNER = ("api", "fastapi", "starlette", "uvicorn", "sqlalchemy", "alembic")
SOLVER_LIBS = ("ortools", "pulp", "highspy")
FILE_CALLS = {"open", "read_text", "write_text", "read_bytes", "write_bytes", "safe_load", "safe_dump"}
#: solvers/cbc_run.py: CBC answers only in files (its solution file and log), which PuLP reads only in part
FILE_MODULES = ("catalog.py", "files.py", "export", "cli.py", "report", "commands", "study_runner.py", "cbc_run.py")


def _modules():
    for path in sorted(PLANNER.rglob("*.py")):
        yield path, ast.parse(path.read_text(), filename=str(path))


def _imports(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module


def test_planner_never_imports_io_layers():
    offenders = [
        f"{path.relative_to(PLANNER)} imports {name}"
        for path, tree in _modules()
        for name in _imports(tree)
        if name.split(".")[0] in FORBIDDEN_IN_PLANNER
    ]
    assert not offenders, offenders


def test_only_solver_backends_import_solver_libraries():
    offenders = [
        f"{path.relative_to(PLANNER)} imports {name}"
        for path, tree in _modules()
        for name in _imports(tree)
        if name.split(".")[0] in SOLVER_LIBS and "solvers" not in path.parts
    ]
    assert not offenders, offenders


def test_only_io_modules_touch_files():
    offenders = []
    for path, tree in _modules():
        rel = path.relative_to(PLANNER)
        if any(part in FILE_MODULES for part in rel.parts):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if name in FILE_CALLS:
                    offenders.append(f"{rel}:{node.lineno} calls {name}")
    assert not offenders, offenders


def test_every_caller_prices_through_the_cost_model_seam():
    """Outside planner/perf, the cost model is reached only through ``planner.perf.model`` (the CostModel)."""
    roots = (PLANNER, PLANNER.parent / "api")
    offenders = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            if "perf" in path.relative_to(PLANNER.parent).parts[1:2]:
                continue
            tree = ast.parse(path.read_text(), filename=str(path))
            for name in _imports(tree):
                if (name.startswith("planner.perf") and name != "planner.perf.model") or name == "planner.perf":
                    offenders.append(f"{path.relative_to(PLANNER.parent)} imports {name}")
    assert not offenders, offenders


def test_each_serving_strategy_lives_in_its_own_module():
    """planner/strategies/ holds one module per strategy of the schema, each with the whole interface; the graph,
    the candidate generator and the verifier go through the registry and name no strategy themselves."""
    from planner.schema import STRATEGIES
    from planner.strategies import REGISTRY

    assert sorted(REGISTRY) == sorted(STRATEGIES)
    for name, module in REGISTRY.items():
        assert module.NAME == name and module.__name__ == f"planner.strategies.{name}"
        for part in ("UNITS", "applies", "add_tasks", "price", "recheck"):
            assert hasattr(module, part), f"{module.__name__} has no {part}"
    for shared in ("graph.py", "candidates.py", "verify.py"):
        source = (PLANNER / shared).read_text()
        named = [s for s in STRATEGIES if f'"{s}"' in source]
        assert not named, f"{shared} names {named}: that belongs in its strategy module"


def test_the_service_command_is_plugged_in_not_imported():
    """``siliconmix serve`` exists (the entry point of the installed package) although planner/ never imports api/."""
    from typer.testing import CliRunner

    from planner.cli import app

    result = CliRunner().invoke(app, ["serve", "--help"])
    assert result.exit_code == 0 and "Serve the REST API" in result.output
