"""``GET /v1/plans/{id}/deploy?target=``: a plan's deployment files as a zip, as ``siliconmix deploy`` writes them."""

from __future__ import annotations

import io
import zipfile
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Response

from api.deps import get_catalog, get_store
from api.errors import ProblemError, problem_docs
from api.routes.exports import CONFLICT, attachment
from api.routes.plans import PlanId, _row as plan_row
from api.store import PlanStore
from planner.catalog import Catalog
from planner.deploy import DeployError, deployment_for
from planner.schema import Plan

router = APIRouter(tags=["exports"])

ZIP = "application/zip"
Target = Literal["vllm", "sglang", "trtllm", "dynamo"]
#: a fixed timestamp, so the same plan and target give the same bytes
ZIP_TIME = (1980, 1, 1, 0, 0, 0)


def zip_tree(files: dict[str, str], root: str) -> bytes:
    """The files under folder ``root`` in a zip; launch scripts and the load test executable."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for relative, text in files.items():
            info = zipfile.ZipInfo(f"{root}/{relative}", date_time=ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (0o755 if relative.endswith((".sh", ".py")) else 0o644) << 16
            archive.writestr(info, text)
    return buffer.getvalue()


@router.get("/v1/plans/{plan_id}/deploy", response_class=Response, summary="Download a plan's deployment files",
            responses={200: {"description": "a zip of README.md, loadtest.py, pools/<pool>/... (and dynamo/ for "
                                            "target dynamo)",
                             "content": {ZIP: {"schema": {"type": "string", "format": "binary"}}}},
                       **problem_docs(401, 404, 409, 422, 503)})
def deploy_plan(plan_id: PlanId, store: Annotated[PlanStore, Depends(get_store)],
                catalog: Annotated[Catalog, Depends(get_catalog)],
                target: Annotated[Target, Query(description="serving stack: vllm, sglang, trtllm or dynamo")]
                ) -> Response:
    """Per pool: engine options, a launch script, Kubernetes manifests (Deployments, or DynamoGraphDeployments
    for dynamo); a load test checking each class's predicted TTFT/TPOT. An infeasible plan: 409."""
    plan = Plan.model_validate_json(plan_row(store, plan_id).plan_json)
    try:
        files = deployment_for(plan, target, catalog)
    except DeployError as exc:
        raise ProblemError(409, f"plan {plan_id}: {exc}", type=CONFLICT) from exc
    name = f"deploy-{plan_id}-{target}"
    return attachment(zip_tree(files, name), ZIP, f"{name}.zip")
