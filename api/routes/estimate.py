"""``/v1/estimate``: the roofline cost model for one model on one device configuration."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends, Query

from api.deps import get_catalog, strict_json
from api.errors import VALIDATION, FieldError, ProblemError, problem_docs
from api.examples import ESTIMATE_EXAMPLES
from planner.catalog import Catalog, UnknownId
from planner.estimate import DoesNotFit, InvalidParallelism, estimate
from planner.perf.model import UnsupportedDtype
from planner.schema import Estimate, EstimateRequest

router = APIRouter(prefix="/v1", tags=["estimate"])


@router.post("/estimate", response_model=Estimate, summary="Price one configuration",
             dependencies=[strict_json(EstimateRequest)],
             responses=problem_docs(401, 413, 415, 422, 503))
def create_estimate(
    request: Annotated[EstimateRequest, Body(openapi_examples=ESTIMATE_EXAMPLES)],
    catalog: Annotated[Catalog, Depends(get_catalog)],
    require_fit: Annotated[bool, Query(
        description="answer 422 when the configuration does not fit (weights, KV or TP over the scale-up domain); "
                    "false answers with `fits: false` instead")] = True,
) -> Estimate:
    """TTFT, TPOT, throughput per replica/user/device, memory per device and what bounds the decode step.

    The same numbers as `siliconmix estimate --json`.
    """
    try:
        return estimate(request, catalog, require_fit=require_fit)
    except UnknownId as exc:
        field = "device" if exc.kind == "device" else "model"
        raise _invalid(field, str(exc), "unknown_id") from exc
    except UnsupportedDtype as exc:
        raise _invalid("dtype", str(exc), "unsupported_dtype") from exc
    except InvalidParallelism as exc:
        raise _invalid(exc.field, str(exc), "invalid_parallelism") from exc
    except DoesNotFit as exc:
        raise _invalid("", str(exc), "does_not_fit") from exc


def _invalid(field: str, message: str, kind: str) -> ProblemError:
    return ProblemError(422, message, type=VALIDATION, title="Invalid input",
                        errors=[FieldError(location="body", field=field, message=message, type=kind)])
