"""Service settings from the environment (prefix ``SILICONMIX_``), read once through ``get_settings()``.

Nothing here is read at import time: ``create_app`` and the request dependencies call ``get_settings()``,
and tests or ``siliconmix serve`` hand ``create_app`` a ``Settings`` of their own.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

CommaList = Annotated[list[str], NoDecode]


class Settings(BaseSettings):
    """Every knob of the REST service; each maps to ``SILICONMIX_<NAME>`` in the environment."""

    model_config = SettingsConfigDict(env_prefix="SILICONMIX_", extra="ignore", frozen=True)

    database_url: str = Field("sqlite:///siliconmix.db", description="any SQLAlchemy URL; SQLite file by default")
    auto_migrate: bool = Field(True, description="apply the Alembic migrations at start-up")
    api_keys: CommaList = Field(default_factory=list, repr=False,
                                description="comma-separated keys; when set, every /v1 route needs one")
    catalog_dir: Path | None = Field(None, description="catalog folder (default: the repository's catalogs/)")
    cors_origins: CommaList = Field(default_factory=list, description="comma-separated origins allowed by CORS")

    plan_executor: Literal["thread", "process"] = Field("thread", description="pool that runs the planner")
    plan_workers: int = Field(2, ge=1, le=64, description="plans solved at once")
    plan_queue_limit: int = Field(64, ge=1, le=10_000, description="plans running or waiting; more answer 503")
    plan_baseline: bool = Field(True, description="also solve the best homogeneous fleet (default of ?baseline=)")
    default_time_limit_s: float | None = Field(None, gt=0, description="MILP time limit when the request gives "
                                                                       "none (default: the planner's, as the CLI)")
    max_time_limit_s: float = Field(120.0, gt=0, description="largest time_limit_s a request may ask for")

    study_dir: Path = Field(Path("studies"), description="folder holding one output folder per study (journal, results)")
    study_workers: int = Field(1, ge=1, le=16, description="studies run at once (each solves its scenarios in turn)")
    study_max_scenarios: int = Field(500, ge=1, description="most scenarios one POST /v1/studies may expand to")
    study_resume: bool = Field(False, description="at start-up, resume studies a previous process left unfinished "
                                                  "(false: mark them interrupted)")

    simulation_workers: int = Field(1, ge=1, le=16, description="simulations run at once")
    simulation_queue_limit: int = Field(16, ge=1, le=10_000, description="simulations running or waiting; more "
                                                                         "answer 503")
    simulation_max_duration_s: float = Field(3600.0, gt=0, description="longest simulated window one POST "
                                                                       ".../simulate may ask for (s)")
    simulation_max_replicas: int = Field(64, ge=1, description="most replicas per pool one simulation may run")

    max_body_bytes: int = Field(1_000_000, ge=1_024, description="largest request body (bytes); more answer 413")
    body_timeout_s: float = Field(30.0, gt=0, le=3600, description="seconds a request body may take to arrive; "
                                                                  "slower answer 408 and the connection is closed")
    max_classes: int = Field(50, ge=1, description="most request classes in one workload; more answer 422")
    max_devices: int = Field(32, ge=1, description="most device ids in constraints.devices / inventory; more answer 422")

    @field_validator("api_keys", "cors_origins", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        """``a,b`` or a JSON list; blanks dropped (``SILICONMIX_API_KEYS=`` means no keys)."""
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                import json

                value = json.loads(text)
            else:
                value = text.split(",")
        if isinstance(value, (list, tuple)):
            return [str(v).strip() for v in value if str(v).strip()]
        return value


@lru_cache
def get_settings() -> Settings:
    """The settings of this process (cached; ``get_settings.cache_clear()`` re-reads the environment)."""
    return Settings()
