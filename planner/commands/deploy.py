"""``siliconmix deploy``: a plan as deployment files for a serving stack (see planner.deploy)."""

from __future__ import annotations

from pathlib import Path

import typer

from planner.cli import app, catalog_or_fail, console, fail
from planner.deploy import TARGETS, DeployError, deployment_for
from planner.export import ExportInputError, read_plan

@app.command("deploy")
def deploy_command(
    plan_file: Path = typer.Argument(..., help="a plan JSON file (siliconmix plan ... -o plan.json)"),
    target: str = typer.Option(..., "--target", "-t", help=f"serving stack: {' | '.join(TARGETS)}"),
    output: Path = typer.Option(..., "-o", "--output", help="folder to write the deployment into"),
) -> None:
    """Write engine options, launch scripts, Kubernetes manifests and a load test for every pool of a plan."""
    if target not in TARGETS:
        fail(f"--target: unknown target {target!r} (choose {', '.join(TARGETS)})")
    try:
        plan = read_plan(plan_file)
    except ExportInputError as exc:
        fail(str(exc))
    catalog = catalog_or_fail()
    try:
        files = deployment_for(plan, target, catalog)
    except DeployError as exc:
        fail(f"{plan_file}: {exc}", code=1 if plan.status == "infeasible" else 2)
    if output.exists() and not output.is_dir():
        fail(f"{output}: exists and is not a folder; choose another -o")
    try:
        write_tree(output, files)
    except OSError as exc:
        fail(f"{output}: cannot write ({exc.strerror or exc})", code=1)
    pools = sum(1 for path in files if path.startswith("pools/") and path.endswith("/README.md"))
    console.print(f"wrote {output}: {len(files)} files for {pools} pools on {target}; start with "
                  f"{output / 'README.md'}", highlight=False, markup=False)


def write_tree(root: Path, files: dict[str, str]) -> None:
    """Write every file under ``root``; launch scripts and the load test are made executable."""
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if path.suffix in (".sh", ".py"):
            path.chmod(0o755)
