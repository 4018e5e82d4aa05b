"""The stamp every plan, estimate and study output carries (``planner.schema.Stamped``)."""

from __future__ import annotations

import datetime as dt

from planner import __version__
from planner.catalog import Catalog


def stamp(catalog: Catalog) -> dict:
    """siliconmix's version, the catalog's fingerprint (None for a catalog built in code) and now, in UTC."""
    return {"siliconmix_version": __version__, "catalog_fingerprint": catalog.fingerprint or None,
            "created_at": dt.datetime.now(dt.UTC)}
