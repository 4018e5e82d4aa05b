"""Plans the deployment tests share, and a checker of every option name a deployment tree uses against the
documented tables of planner.deploy.sources."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import yaml

from planner.deploy import sources
from planner.optimize import PlanOptions, plan_workload
from planner.schema import Plan, Workload

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ROOT / "examples" / "workloads"


def solve(workload: dict, catalog) -> Plan:
    return plan_workload(Workload.model_validate(workload), catalog, PlanOptions(baseline=False, time_limit_s=3))


def example(name: str) -> dict:
    return yaml.safe_load((WORKLOADS / f"{name}.yaml").read_text())


def pd_disagg_workload() -> dict:
    """chat-70b served by prefill/decode pools only, on NVIDIA and AMD GPUs."""
    w = example("chat-70b")
    return {**w, "strategies": ["pd_disagg"], "constraints": {**w["constraints"], "devices": ["h200", "mi300x"]}}


def _flatten(mapping: dict, prefix: str = "") -> list[str]:
    keys = []
    for key, value in mapping.items():
        keys.append(prefix + key)
        if isinstance(value, dict):
            keys += _flatten(value, prefix + key + ".")
    return keys


def _command_words(script: str) -> list[str]:
    body = script[script.index("exec ") + 5:].replace("\\\n", " ")
    return shlex.split(body.replace('"${CONFIG_DIR}"', "CONFIG"))


def _flag_table(words: list[str]) -> dict[str, str]:
    program = " ".join(words[:3])
    if program.startswith("vllm serve"):
        return sources.VLLM_FLAGS
    if "sglang.launch_server" in program:
        return sources.SGLANG_FLAGS
    if program.startswith("trtllm-serve"):
        return sources.TRTLLM_FLAGS
    if "dynamo.vllm" in program:
        return sources.FLAG_TABLES["dynamo"]
    raise AssertionError(f"unknown program {program!r}")


def _json_values(words: list[str]) -> list[str]:
    """Keys of the JSON values of vLLM's --speculative-config / --kv-transfer-config not documented."""
    bad = []
    for flag, table in (("--speculative-config", sources.VLLM_SPEC_KEYS),
                        ("--kv-transfer-config", sources.VLLM_KV_TRANSFER_KEYS)):
        if flag in words:
            value = json.loads(words[words.index(flag) + 1])
            bad += [f"{flag}.{k}" for k in value if k not in table]
            if flag == "--kv-transfer-config" and value["kv_connector"] not in sources.VLLM_KV_CONNECTORS:
                bad.append(f"connector {value['kv_connector']}")
    return bad


def unknown_options(files: dict[str, str]) -> list[str]:
    """Every flag, YAML key and resource name of ``files`` that the documented tables do not list."""
    bad = []
    for path, text in files.items():
        if path.endswith("launch.sh"):
            words = _command_words(text)
            table = _flag_table(words)
            bad += [f"{path}: {w}" for w in words if w.startswith("--") and w not in table]
            bad += [f"{path}: {b}" for b in _json_values(words)]
        elif path.endswith("engine.yaml"):
            table = {**sources.VLLM_FLAGS, **sources.SGLANG_FLAGS}
            bad += [f"{path}: {k}" for k in yaml.safe_load(text) if "--" + k not in table]
        elif path.endswith("config.yaml"):
            bad += [f"{path}: {k}" for k in _flatten(yaml.safe_load(text)) if k not in sources.TRTLLM_KEYS]
        elif path.endswith("k8s.yaml"):
            for doc in yaml.safe_load_all(text):
                if doc["kind"] == "Deployment":
                    for c in doc["spec"]["template"]["spec"]["containers"]:
                        bad += [f"{path}: {r}" for r in c["resources"]["limits"] if r not in sources.ACCELERATOR_RESOURCES]
        elif path.startswith("dynamo/"):
            for name, svc in yaml.safe_load(text)["spec"]["services"].items():
                keys = [k for k in _flatten(svc) if k.count(".") <= 2]
                bad += [f"{path}: {name}.{k}" for k in keys if k not in sources.DYNAMO_SERVICE_KEYS]
                args = svc.get("extraPodSpec", {}).get("mainContainer", {}).get("args", [])
                bad += [f"{path}: {a}" for a in args if a.startswith("--") and a not in sources.FLAG_TABLES["dynamo"]]
                bad += [f"{path}: {b}" for b in _json_values(args)]
        elif path == "README.md":
            for line in text.splitlines():
                if line.strip().startswith("vllm bench serve"):
                    bad += [f"README: {w}" for w in re.findall(r"--[a-z-]+", line.split("#")[0])
                            if w not in sources.VLLM_BENCH_FLAGS]
    return bad
