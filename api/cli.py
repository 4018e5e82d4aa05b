"""``siliconmix serve``: the REST service (FastAPI under uvicorn), docs at /docs.

The service plugs its command into the planner's command line through the ``siliconmix.commands`` entry
point (pyproject.toml), so nothing under planner/ imports the service.
"""

from __future__ import annotations

import copy

import typer
from pydantic import ValidationError

from planner.cli import app, fail, validation_line


def _log_config(level: str) -> dict:
    """uvicorn's logging, plus the service's own logger through the same handler."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["loggers"]["siliconmix"] = {"handlers": ["default"], "level": level.upper(), "propagate": False}
    return config


@app.command("serve")
def serve_command(
    host: str = typer.Option("127.0.0.1", help="address to listen on (0.0.0.0 for every interface)"),
    port: int = typer.Option(8000, min=1, max=65535, help="TCP port"),
    db: str | None = typer.Option(None, "--db", help="SQLAlchemy URL [default: $SILICONMIX_DATABASE_URL or "
                                                    "sqlite:///siliconmix.db]"),
    log_level: str = typer.Option("info", help="critical, error, warning, info or debug"),
    access_log: bool = typer.Option(True, help="log every request"),
) -> None:
    """Serve the REST API: POST /v1/plans, /v1/estimate, /v1/catalog; interactive docs at /docs.

    Every other setting comes from SILICONMIX_* environment variables (see the README).
    """
    import uvicorn

    if log_level.lower() not in ("critical", "error", "warning", "info", "debug"):
        fail(f"--log-level: {log_level!r} is not one of critical, error, warning, info, debug")
    from api.main import create_app
    from api.settings import Settings

    try:
        settings = Settings(**({"database_url": db} if db else {}))
    except ValidationError as exc:
        fail(f"settings: {validation_line(exc)}")
    typer.echo(f"siliconmix API on http://{host}:{port} (docs: http://{host}:{port}/docs)", err=True)
    uvicorn.run(create_app(settings), host=host, port=port, log_level=log_level.lower(),
                log_config=_log_config(log_level.lower()), access_log=access_log)
