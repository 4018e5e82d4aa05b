"""``siliconmix claims``: the talk's claims, each run as a product case (planner.claims), as a table, JSON or HTML."""

from __future__ import annotations

import time
from pathlib import Path

import typer
from pydantic import ValidationError
from rich.markup import escape
from rich.table import Table

from planner.cli import app, catalog_or_fail, console, fail, load_workload, print_json, validation_line
from planner.files import InputFileError

#: the repository's example workloads, which the fleet-level claims plan
DEFAULT_EXAMPLES = Path(__file__).resolve().parent.parent.parent / "examples" / "workloads"
VERDICT_STYLE = {"agrees": "green", "differs": "yellow"}


@app.command("claims")
def claims_command(
    examples: Path = typer.Option(DEFAULT_EXAMPLES, help="folder with the example workloads the fleet claims plan"),
    as_json: bool = typer.Option(False, "--json", help="print the claims as JSON"),
    html_file: Path | None = typer.Option(None, "--html", help="also write the claims as a self-contained HTML page"),
) -> None:
    """Check each claim of the talk against the product: the talk's figure, the product's, what it rests on, why."""
    from planner.claims import EXAMPLES, ClaimWorkloads, check_claims
    from planner.claims.record import ClaimFailed

    catalog = catalog_or_fail()
    try:
        workloads = ClaimWorkloads(**{field: load_workload(examples / f"{name}.yaml", {}) for field, name in EXAMPLES.items()})
    except ValidationError as exc:
        fail(validation_line(exc))
    except InputFileError as exc:
        fail(str(exc))
    start = time.perf_counter()
    try:
        claims = check_claims(catalog, workloads)
    except ClaimFailed as exc:
        fail(str(exc), code=1)
    elapsed_s = time.perf_counter() - start
    if html_file is not None:
        from planner.report.html import claims_page

        try:
            html_file.parent.mkdir(parents=True, exist_ok=True)
            html_file.write_text(claims_page(claims))
        except OSError as exc:
            fail(f"{html_file}: cannot write the page ({exc.strerror or exc})", code=1)
    if as_json:
        print_json([c.model_dump(mode="json") for c in claims])
        return
    show_claims(claims, elapsed_s)


def show_claims(claims, elapsed_s: float) -> None:
    """One row per claim: the talk's figure and where it is said, the product's, the verdict, what it rests on, why."""
    table = Table(title="The talk's claims, checked by the product", show_lines=True, expand=True)
    for col, ratio in (("claim", 3), ("talk", 3), ("product", 2), ("verdict", 3), ("rests on", 5), ("why", 9)):
        table.add_column(col, ratio=ratio, justify="right" if col == "product" else "left", overflow="fold")
    for c in claims:
        verdict = f"[{VERDICT_STYLE[c.verdict]}]{c.verdict}[/]\n[dim]{escape(c.test)}[/]"
        table.add_row(escape(f"{c.title} ({c.id})"), escape(f"{c.talk_figure} @{c.talk_at}"), escape(c.product_text),
                      verdict, escape(rests_on(c.inputs)), escape(c.why))
    console.print(table)
    agree = sum(c.verdict == "agrees" for c in claims)
    console.print(f"{agree} of {len(claims)} claims agree, {len(claims) - agree} differ ({elapsed_s:.1f} s)",
                  highlight=False, markup=False)


def rests_on(inputs) -> str:
    """The inputs in a line: model and dtype, each device with its confidence and how many of its catalog numbers
    are estimates, and the case (an example workload by its file; the JSON and the HTML page spell it out)."""
    head = " ".join(x for x in (inputs.model, inputs.dtype) if x)
    devices = "; ".join(f"{d} ({inputs.confidence.get(d, 'catalog')}"
                        + (f", {_count(len(inputs.estimated[d]), 'estimated input')}" if d in inputs.estimated else "") + ")"
                        for d in inputs.devices)
    return " | ".join(x for x in (head, devices, inputs.source or inputs.case) if x)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
