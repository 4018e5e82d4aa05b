"""Deployment files for a plan: engine options, launch scripts, Kubernetes manifests and a load test per
serving stack (vLLM, SGLang, TensorRT-LLM, Dynamo). Pure: a plan in, ``{relative path: text}`` out."""

from planner.catalog import Catalog
from planner.deploy.platforms import TARGETS
from planner.deploy.tree import DeployError, deployment_tree
from planner.schema import Plan

__all__ = ["TARGETS", "DeployError", "deployment_tree", "deployment_for"]


def deployment_for(plan: Plan, target: str, catalog: Catalog) -> dict[str, str]:
    """``deployment_tree`` with the device vendors and the model's experts taken from ``catalog``."""
    model = catalog.models.get(plan.model)
    return deployment_tree(plan, target, {d.id: d.vendor for d in catalog.devices.values()},
                           moe=bool(model and model.is_moe))
