"""Kubernetes objects as plain dicts: a ConfigMap holding a pool's launch files, the Deployment that runs
them (replicas and accelerator limits from the plan), the Service in front; Dynamo's DynamoGraphDeployment."""

from __future__ import annotations

from planner.deploy.engines import PORT

CONFIG_MOUNT = "/config"
HF_SECRET = "hf-token"  # a Secret with key HF_TOKEN, for gated repositories (optional)


def labels(name: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "siliconmix"}


def config_map(name: str, files: dict[str, str]) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels(name)},
            "data": dict(files)}


def deployment(name: str, image: str, replicas: int, resource: str, devices: int) -> dict:
    """``replicas`` pods, each asking for ``devices`` of ``resource`` and running the pool's launch.sh."""
    container = {
        "name": "engine", "image": image,
        "command": ["bash", f"{CONFIG_MOUNT}/launch.sh"],
        "ports": [{"name": "http", "containerPort": PORT}],
        "env": [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": HF_SECRET, "key": "HF_TOKEN",
                                                                    "optional": True}}}],
        "resources": {"limits": {resource: devices}, "requests": {resource: devices}},
        "volumeMounts": [{"name": "config", "mountPath": CONFIG_MOUNT}, {"name": "shm", "mountPath": "/dev/shm"}],
        "readinessProbe": {"httpGet": {"path": "/health", "port": PORT}, "periodSeconds": 10,
                           "failureThreshold": 360},
    }
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": labels(name)},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels(name)},
            "template": {"metadata": {"labels": labels(name)}, "spec": {
                "containers": [container],
                "volumes": [{"name": "config", "configMap": {"name": name}},
                            {"name": "shm", "emptyDir": {"medium": "Memory"}}],
            }},
        },
    }


def service(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "labels": labels(name)},
            "spec": {"selector": labels(name), "ports": [{"name": "http", "port": PORT, "targetPort": PORT}]}}


def dynamo_graph(name: str, image: str, workers: dict[str, dict]) -> dict:
    """A DynamoGraphDeployment: one Frontend and the given worker services by name (``dynamo_worker``)."""
    services = {"Frontend": {"dynamoNamespace": name, "componentType": "frontend", "replicas": 1,
                             "extraPodSpec": {"mainContainer": {"image": image}}}}
    services.update({service_name: {"dynamoNamespace": name, **w} for service_name, w in workers.items()})
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment",
            "metadata": {"name": name, "labels": labels(name)}, "spec": {"services": services}}


def dynamo_worker(role: str, replicas: int, devices: int, image: str, args: list[str], nodes: int = 1) -> dict:
    """One worker service of a graph: ``role`` aggregated, prefill or decode; ``args`` to ``dynamo.vllm``; a replica
    on ``nodes`` nodes of ``devices`` GPUs each (Dynamo's ``multinode.nodeCount``, sources.DYNAMO_MULTINODE)."""
    worker = {"componentType": "worker", "replicas": replicas,
              "envFromSecret": HF_SECRET, "resources": {"limits": {"gpu": str(devices)}},
              "extraPodSpec": {"mainContainer": {"image": image, "command": ["python3", "-m", "dynamo.vllm"],
                                                 "args": args}}}
    if nodes > 1:
        worker["multinode"] = {"nodeCount": nodes}
    if role in ("prefill", "decode"):
        worker["subComponentType"] = role
    return worker
