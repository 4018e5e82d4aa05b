"""``siliconmix calibrate``: the cost model against published measurements, in-sample and left out."""

from __future__ import annotations

import datetime

import typer
from rich.console import Console
from rich.table import Table

from planner.cli import app, console, fail, print_json
from planner.catalog import CatalogError, load_catalog, load_families, load_measurements, write_fit


def _pct(value) -> str:
    return "-" if value is None else f"{value:.1f}"


@app.command("calibrate")
def calibrate_command(
    fit: bool = typer.Option(False, "--fit", help="refit every device family's efficiency terms to the records"),
    write: bool = typer.Option(False, "--write", help="with --fit: write catalogs/calibration/fit.yaml"),
    loo: bool = typer.Option(True, "--loo/--no-loo", help="leave-one-out errors (linearised refit without each record)"),
    exact: bool = typer.Option(False, "--exact-loo", help="leave-one-out by refitting each family once per record (slow)"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
) -> None:
    """Error per record, per family and overall, in-sample and leave-one-out (catalogs/calibration/)."""
    from planner import __version__
    from planner.calibration import calibrate, fit_body

    if write and not fit:
        fail("--write needs --fit")
    try:
        measurements = load_measurements()
        priors = load_catalog(apply_fit=False)
        prior_log_sd = load_families().prior_log_sd
        cal = calibrate(measurements, priors, prior_log_sd, leave_one_out="exact" if exact else loo)
        stored = load_catalog()
    except CatalogError as exc:
        fail(f"catalog: {exc}")
    if fit and write:
        path = write_fit(fit_body(cal, datetime.date.today().isoformat(), __version__))
        console.print(f"wrote {path}")
    elif not fit:
        _warn_if_stale(cal, stored)
    summary = cal.summary()
    if as_json:
        print_json({
            "summary": summary,
            "fits": {name: {"params": f.params, "records": len(f.records)} for name, f in cal.fits.items()},
            "bands": cal.bands,
            "records": [{"id": c.measurement.id, "family": c.family, "device": c.measurement.device,
                         "model": c.measurement.model, "regime": c.measurement.regime, "metric": c.measurement.metric,
                         "fit_target": c.measurement.fit_target, "measured": c.measurement.value,
                         "predicted": c.predicted, "error_pct": c.error_pct, "predicted_loo": c.predicted_loo,
                         "loo_error_pct": c.loo_error_pct, "source": c.measurement.source, "date": c.measurement.date}
                        for c in cal.comparisons],
        })
        return
    table = Table(title="Cost model vs published measurements (error %: in-sample / left out)")
    for col in ("record", "family", "regime", "metric", "measured", "predicted", "err %", "LOO err %", "use"):
        table.add_column(col, justify="right" if col in ("measured", "predicted", "err %", "LOO err %") else "left",
                         overflow="fold")
    for c in cal.comparisons:
        m = c.measurement
        table.add_row(m.id, c.family, m.regime, m.metric, f"{m.value:,.1f}", f"{c.predicted:,.1f}", f"{c.error_pct:+.0f}",
                      "-" if c.loo_error_pct is None else f"{c.loo_error_pct:+.0f}", "fit" if m.fit_target else "check")
    console.print(table)
    families = Table(title="Per family (fit targets): median absolute % error")
    for col in ("family", "records", "in-sample", "left out", "LOO p90", "signed"):
        families.add_column(col, justify="left" if col == "family" else "right")
    for name, s in summary["families"].items():
        families.add_row(name, str(s["records"]), _pct(s["median_ape_pct"]), _pct(s["loo_median_ape_pct"]),
                         _pct(s["loo_p90_ape_pct"]), _pct(s["median_signed_error_pct"]))
    o = summary["overall"]
    families.add_row("all", str(o["records"]), _pct(o["median_ape_pct"]), _pct(o["loo_median_ape_pct"]),
                     _pct(o["loo_p90_ape_pct"]), _pct(o["median_signed_error_pct"]), style="bold")
    console.print(families)
    console.print(f"mean of per-source leave-one-out medians: {_pct(summary['mean_of_source_loo_medians_pct'])}% "
                  f"over {len(summary['sources'])} sources; {summary['checks']['records']} check-only records; "
                  f"{_pct(summary['band_coverage_pct'])}% of fit targets inside their band")


def _warn_if_stale(cal, stored) -> None:
    """Say so on stderr when fit.yaml no longer matches a refit of the records (run --fit --write)."""
    err = Console(stderr=True, highlight=False)
    for name, fit in cal.fits.items():
        members = stored.families.get(name)
        if members is None or not members.fitted:
            err.print(f"note: family {name} has records but no stored fit; run `siliconmix calibrate --fit --write`",
                      markup=False)
            continue
        device = stored.device(members.devices[0])
        # fit.yaml keeps 6 decimals: a term fitted to ~1e-10 from a zero prior is stored as 0.0, not drift
        drift = max(abs(getattr(device, k) - v) / max(abs(v), 1e-9) if abs(getattr(device, k) - v) > 1e-6 else 0.0
                    for k, v in fit.params.items())
        if drift > 0.01:
            err.print(f"note: family {name}: fit.yaml differs from a refit by {100 * drift:.0f}%; "
                      f"run `siliconmix calibrate --fit --write`", markup=False)
