"""Alembic environment: the service's metadata, the URL from ``-x url=`` or the settings.

Run by the service at start-up (``api.store.migrate`` passes an open connection in
``config.attributes['connection']``) or by a maintainer with ``alembic -c api/alembic.ini ...``.
"""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from sqlalchemy.engine import Connection

from api.store import Base, create_db_engine

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    from api.settings import get_settings

    return context.get_x_argument(as_dictionary=True).get("url") or get_settings().database_url


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",  # SQLite alters tables by copying them
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_offline() -> None:
    """``alembic upgrade head --sql``: print the SQL instead of running it."""
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True,
                      dialect_opts={"paramstyle": "named"})
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    given = config.attributes.get("connection")
    if given is not None:
        _run(given)
        return
    engine = create_db_engine(_url())
    try:
        with engine.begin() as connection:
            _run(connection)
    finally:
        engine.dispose()


if config.attributes.get("connection") is None and config.config_file_name is not None:
    # only from the alembic command: inside the service, logging belongs to uvicorn
    fileConfig(config.config_file_name, disable_existing_loggers=False)

if context.is_offline_mode():
    run_offline()
else:
    run_online()
