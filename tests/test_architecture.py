"""Layering rules of DESIGN.md, checked on the source by AST.

- nothing under planner/ imports api/ (nor fastapi, starlette, uvicorn or a database library), not even its
  command line (the service plugs its ``serve`` command in through an entry point);
- only planner/solvers/ imports ortools or pulp/highspy;
- only catalog.py, files.py, export/, report/, study_runner.py and the command line touch files;
- the CLI's study runner and the service's study jobs run one study loop (``study_runner.run_scenarios``);
- the CLI, the service and studies read a request's solve options one way (``PlanOptions.of``).
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLANNER = ROOT / "planner"
API = ROOT / "api"
FORBIDDEN_IN_PLANNER = ("api", "fastapi", "starlette", "uvicorn", "sqlalchemy", "alembic")
SOLVER_LIBS = ("ortools", "pulp", "highspy")
FILE_CALLS = {"open", "read_text", "write_text", "read_bytes", "write_bytes", "safe_load", "safe_dump"}
#: solvers/cbc_run.py: CBC answers only in files (its solution file and log), which PuLP reads only in part
FILE_MODULES = ("catalog.py", "files.py", "export", "cli.py", "report", "commands", "study_runner.py", "cbc_run.py")


def _modules(root: Path = PLANNER):
    for path in sorted(root.rglob("*.py")):
        yield path, ast.parse(path.read_text(), filename=str(path))


def _imports(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module


def _calls(tree, names: set[str], scope: str = "<module>"):
    """(innermost enclosing function, call) for each call in ``tree`` of a function or method named in ``names``."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.Call) and _name(child) in names:
            yield scope, child
        yield from _calls(child, names, child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else scope)


def _name(call: ast.Call) -> str:
    return call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")


def test_planner_never_imports_io_layers():
    """Nothing under planner/ imports api/, a web framework or a database."""
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


def test_the_cli_runner_and_the_service_share_one_study_loop():
    """The study's outputs are written by ``study_runner.run_scenarios`` alone; ``run_study`` (the CLI) and the
    service's study jobs both run it, and the jobs take none of the loop's steps themselves."""
    writers = {"write_outputs", "write_spec", "write_provenance"}
    places = {(path.relative_to(ROOT).as_posix(), scope) for root in (PLANNER, API) for path, tree in _modules(root)
              for scope, _ in _calls(tree, writers)}
    assert places == {("planner/study_runner.py", "run_scenarios")}, places
    runners = {(path.relative_to(ROOT).as_posix(), scope) for root in (PLANNER, API) for path, tree in _modules(root)
               for scope, _ in _calls(tree, {"run_scenarios"})}
    assert {("planner/study_runner.py", "run_study"), ("api/study_jobs.py", "_solve")} <= runners, runners
    steps = {"expand", "run_key", "solve_context", "table_row", "analyse", "plan_workload", "solve_task", "Journal"}
    jobs = ast.parse((API / "study_jobs.py").read_text())
    assert not [f"{scope} calls {_name(node)}" for scope, node in _calls(jobs, steps)]


def test_callers_read_solve_options_through_plan_options_of():
    """The CLI, the service and the study code never assemble PlanOptions field by field (PlanOptions() for the
    defaults aside): every stated option is read by ``PlanOptions.of``, so none is dropped on one path."""
    files = [*(PLANNER / n for n in ("cli.py", "study.py", "study_runner.py")), *sorted((PLANNER / "commands").rglob("*.py")),
             *sorted(API.rglob("*.py"))]
    offenders = [f"{path.relative_to(ROOT)}:{node.lineno}" for path in files
                 for _, node in _calls(ast.parse(path.read_text()), {"PlanOptions"}) if node.args or node.keywords]
    assert not offenders, offenders
