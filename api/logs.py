"""Credentials never reach the access log: query parameters that look like one are logged as ``***``."""

from __future__ import annotations

import logging
from urllib.parse import parse_qsl, urlencode

#: query parameter names taken for credentials (compared lower-case, ``-`` as ``_``)
SECRET_PARAMS = frozenset({"api_key", "apikey", "key", "x_api_key", "token", "access_token", "auth", "authorization",
                           "password", "secret", "bearer"})
ACCESS_LOGGER = "uvicorn.access"


def is_secret(name: str) -> bool:
    return name.lower().replace("-", "_") in SECRET_PARAMS


def secret_params(query: str) -> list[str]:
    """Names of the parameters of ``query`` that look like credentials."""
    return [name for name, _ in parse_qsl(query, keep_blank_values=True) if is_secret(name)]


def redacted(target: str) -> str:
    """``path?query`` with the value of every credential-like parameter replaced by ``***``."""
    path, sep, query = target.partition("?")
    if not sep or not secret_params(query):
        return target
    pairs = [(name, "***" if is_secret(name) else value) for name, value in parse_qsl(query, keep_blank_values=True)]
    return f"{path}?{urlencode(pairs, safe='*')}"


class RedactSecrets(logging.Filter):
    """uvicorn's access record is ``(client, method, path?query, http version, status)``: redact its target."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str) and "?" in args[2]:
            record.args = (*args[:2], redacted(args[2]), *args[3:])
        return True


_FILTER = RedactSecrets()


def install() -> None:
    """Put the filter on the access logger (once; after uvicorn configured its logging)."""
    logger = logging.getLogger(ACCESS_LOGGER)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)


