"""``/v1/catalog``: the accelerators and model architectures the planner prices, with their sources."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Query

from api.deps import get_catalog
from api.errors import NOT_FOUND, ProblemError, problem_docs
from planner.catalog import Catalog
from planner.schema import Device, DeviceKind, ModelArch

router = APIRouter(prefix="/v1/catalog", tags=["catalog"])

CatalogId = Annotated[str, Path(max_length=64, description="catalog id")]


@router.get("/hardware", response_model=list[Device], summary="List accelerators",
            responses=problem_docs(401, 422, 503))
def list_hardware(
    catalog: Annotated[Catalog, Depends(get_catalog)],
    vendor: Annotated[str | None, Query(max_length=64, description="only this vendor, e.g. nvidia, amd, cerebras")] = None,
    kind: Annotated[DeviceKind | None, Query(description="only this kind of device")] = None,
) -> list[Device]:
    """Every accelerator (or system, for wafer-scale machines), sorted by id; `provenance` holds each number's source."""
    return [d for d in catalog.devices.values()
            if (vendor is None or d.vendor == vendor) and (kind is None or d.kind == kind)]


@router.get("/hardware/{device_id}", response_model=Device, summary="Fetch one accelerator",
            responses=problem_docs(401, 404, 422, 503))
def get_hardware(device_id: CatalogId, catalog: Annotated[Catalog, Depends(get_catalog)]) -> Device:
    """One accelerator by id, with the source of every number."""
    if device_id not in catalog.devices:
        raise ProblemError(404, f"no device {device_id!r}; known: {', '.join(catalog.devices)}", type=NOT_FOUND)
    return catalog.devices[device_id]


@router.get("/models", response_model=list[ModelArch], summary="List model architectures",
            responses=problem_docs(401, 422, 503))
def list_models(
    catalog: Annotated[Catalog, Depends(get_catalog)],
    family: Annotated[str | None, Query(max_length=64, description="only this family, e.g. llama, qwen3, deepseek")] = None,
    attention: Annotated[Literal["gqa", "mla"] | None, Query(description="only this attention kind")] = None,
    moe: Annotated[bool | None, Query(description="only mixture-of-experts models (true) or dense ones (false)")] = None,
) -> list[ModelArch]:
    """Published model configurations, sorted by id."""
    return [m for m in catalog.models.values()
            if (family is None or m.family == family) and (attention is None or m.attention == attention)
            and (moe is None or m.is_moe == moe)]


@router.get("/models/{model_id}", response_model=ModelArch, summary="Fetch one model architecture",
            responses=problem_docs(401, 404, 422, 503))
def get_model(model_id: CatalogId, catalog: Annotated[Catalog, Depends(get_catalog)]) -> ModelArch:
    """One model architecture by id (the fields of its published config)."""
    if model_id not in catalog.models:
        raise ProblemError(404, f"no model {model_id!r}; known: {', '.join(catalog.models)}", type=NOT_FOUND)
    return catalog.models[model_id]
