"""A plan as a deployment tree: ``{relative path: text}`` for one target stack (no I/O here)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass

import yaml

from planner.deploy.engines import (
    PORT, PoolSpec, notes, pool_spec, sglang_options, trtllm_config, vllm_options,
)
from planner.deploy.loadtest import TOLERANCE, class_targets, loadtest_script
from planner.deploy.manifests import config_map, deployment, dynamo_graph, dynamo_worker, service
from planner.deploy.models import hf_repo
from planner.deploy.platforms import NO_PUBLIC_STACK, PLATFORMS, TARGETS, stack_for
from planner.schema import Plan, Pool


class DeployError(ValueError):
    """A plan or target that cannot be deployed; the message says why in one line."""


@dataclass(frozen=True)
class PoolFiles:
    """One pool as written: its folder, its stack (None: bought as a service) and its spec."""

    folder: str
    k8s_name: str
    stack: str | None
    spec: PoolSpec
    vendor: str


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")


def dump_yaml(*documents: dict) -> str:
    return yaml.safe_dump_all(documents, sort_keys=False, default_flow_style=False, width=120)


def deployment_tree(plan: Plan, target: str, vendors: Mapping[str, str], moe: bool) -> dict[str, str]:
    """Every file of the deployment of ``plan`` on ``target``; ``vendors`` maps device ids to vendors
    (the catalog's), ``moe`` says whether the model has experts (expert parallelism on)."""
    if target not in TARGETS:
        raise DeployError(f"--target: unknown target {target!r} (choose {', '.join(TARGETS)})")
    pools = [p for p in plan.pools if p.replicas > 0]
    if plan.status == "infeasible" or not pools:
        reason = plan.diagnosis.message if plan.diagnosis else "no pools"
        raise DeployError(f"the plan is {plan.status}: nothing to deploy ({reason})")
    missing = sorted({p.device for p in pools} - set(vendors))
    if missing:
        raise DeployError(f"the catalog does not have the plan's devices: {', '.join(missing)}")
    written = [_pool_files(plan, i, p, target, vendors[p.device], moe) for i, p in enumerate(pools, 1)]
    files: dict[str, str] = {}
    for pf in written:
        files.update(_pool_tree(pf))
    if target == "dynamo":
        files.update(_dynamo_graphs([pf for pf in written if pf.stack == "dynamo"]))
    files["loadtest.py"] = loadtest_script(plan)
    files["README.md"] = _readme(plan, target, written)
    return dict(sorted(files.items()))


def _pool_files(plan: Plan, index: int, pool: Pool, target: str, vendor: str, moe: bool) -> PoolFiles:
    folder = f"{index:02d}-{slug(pool.class_name)}-{pool.role}-{pool.device}-tp{pool.tp}" + (
        f"pp{pool.pp}" if pool.pp > 1 else "")
    platform = PLATFORMS.get(vendor)
    spec = pool_spec(plan, pool, moe, platform.vllm_device if platform else None)
    return PoolFiles(folder=folder, k8s_name=("sm-" + slug(folder))[:63].rstrip("-"),
                     stack=stack_for(vendor, target), spec=spec, vendor=vendor)


def _command(pf: PoolFiles) -> tuple[list[str], list[tuple[str, str | None]]]:
    """The engine command of a pool: the program words and its (flag, value) options, values unquoted."""
    s, model = pf.spec, hf_repo(pf.spec.model)
    serve = [("--host", "0.0.0.0"), ("--port", str(PORT))]
    if pf.stack == "sglang":
        return ["python3", "-m", "sglang.launch_server"], serve + sglang_options(s)
    if pf.stack == "trtllm":
        return ["trtllm-serve", model], serve + [("--backend", "pytorch"),
                                                 ("--extra_llm_api_options", "${CONFIG_DIR}/config.yaml")]
    if pf.stack == "dynamo":
        opts = [("--model", model)] + [o for o in vllm_options(s) if o[0] != "--served-model-name"]
        return ["python3", "-m", "dynamo.vllm"], opts + ([("--is-prefill-worker", None)] if s.pool.role == "prefill" else [])
    return ["vllm", "serve", model], serve + vllm_options(s)


def _words(opts: list[tuple[str, str | None]]) -> list[str]:
    return [x for flag, value in opts for x in ((flag,) if value is None else (flag, value))]


def _quote(word: str) -> str:
    return word.replace("${CONFIG_DIR}", '"${CONFIG_DIR}"') if word.startswith("${CONFIG_DIR}") else shlex.quote(word)


def _launch_script(pf: PoolFiles) -> str:
    p = pf.spec.pool
    head, opts = _command(pf)
    lines = [" ".join(shlex.quote(w) for w in head)]
    lines += [flag if value is None else f"{flag} {_quote(value)}" for flag, value in opts]
    body = " \\\n  ".join(lines)
    return (f"#!/usr/bin/env bash\n# {p.class_name} / {p.strategy} / {p.role}: {p.replicas} replica(s) of "
            f"{_size(p)} (batch {p.batch}); stack {pf.stack}. Run one per replica.\n"
            "set -euo pipefail\n"
            'CONFIG_DIR="${CONFIG_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}"\n'
            "export CONFIG_DIR\n"
            f"exec {body}\n")


def _pool_tree(pf: PoolFiles) -> dict[str, str]:
    base = f"pools/{pf.folder}"
    out = {f"{base}/README.md": _pool_readme(pf)}
    if pf.stack is None:
        return out
    launch = _launch_script(pf)
    out[f"{base}/launch.sh"] = launch
    config_files = {"launch.sh": launch}
    if pf.stack == "trtllm":
        config = dump_yaml(trtllm_config(pf.spec))
        out[f"{base}/config.yaml"] = config_files["config.yaml"] = config
    else:
        opts = sglang_options(pf.spec) if pf.stack == "sglang" else vllm_options(pf.spec)
        out[f"{base}/engine.yaml"] = dump_yaml({f.lstrip("-"): _typed(v) for f, v in opts})
    if pf.stack != "dynamo" and pf.spec.pool.pp == 1:  # a multi-node replica is no Deployment (engines.notes)
        platform = PLATFORMS[pf.vendor]
        p = pf.spec.pool
        out[f"{base}/k8s.yaml"] = dump_yaml(
            config_map(pf.k8s_name, config_files),
            deployment(pf.k8s_name, platform.images[pf.stack], p.replicas, platform.resource, p.tp),
            service(pf.k8s_name))
    return out


def _typed(value: str | None) -> bool | int | float | str:
    """A flag's value as YAML should hold it: a bare flag is true, numbers are numbers."""
    if value is None:
        return True
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


def _pool_readme(pf: PoolFiles) -> str:
    p = pf.spec.pool
    head = (f"# {pf.folder}\n\n{p.replicas} replica(s) of {_size(p)} ({pf.vendor}), batch {p.batch}, "
            f"serving class `{p.class_name}` ({p.strategy}, role {p.role}); predicted TTFT "
            f"{_ms(p.ttft_ms)}, TPOT {_ms(p.tpot_ms)}; limited by {p.limited_by}.\n\n")
    if pf.stack is None:
        return head + f"**{NO_PUBLIC_STACK}.** {p.device} has no public serving stack to run yourself: buy " \
                      f"{p.devices} device(s) of capacity for this pool from the vendor's hosted service.\n"
    lines = [f"Stack: {pf.stack} ({PLATFORMS[pf.vendor].stack_note})."]
    lines += [f"- note: {n}" for n in notes(pf.spec, pf.stack)]
    files = "launch.sh, config.yaml (LLM API options)" if pf.stack == "trtllm" else "launch.sh, engine.yaml"
    kube = ("the DynamoGraphDeployment in ../../dynamo/" if pf.stack == "dynamo" else
            "k8s.yaml" if p.pp == 1 else "none written (see the note)")
    return head + "\n".join(lines) + f"\n\nFiles: {files}; Kubernetes: {kube}.\n"


def _size(p: Pool) -> str:
    """A replica's devices in words: ``8x h100-sxm``, or ``16x h100-sxm (tp 8 × pp 2)`` for a pipeline."""
    return f"{p.tp * p.pp}x {p.device}" + (f" (tp {p.tp} × pp {p.pp})" if p.pp > 1 else "")


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f} ms"


def _dynamo_graphs(pools: list[PoolFiles]) -> dict[str, str]:
    """One DynamoGraphDeployment per class and strategy (a Frontend and that group's workers)."""
    groups: dict[str, list[PoolFiles]] = {}
    for pf in pools:
        groups.setdefault(slug(f"{pf.spec.pool.class_name}-{pf.spec.pool.strategy}"), []).append(pf)
    out = {}
    for group, members in groups.items():
        image = PLATFORMS["nvidia"].images["dynamo"]
        workers = {}
        for j, pf in enumerate(members):
            p = pf.spec.pool
            role_name = {"prefill": "Prefill", "decode": "Decode"}.get(p.role, "")
            workers[f"Vllm{role_name}Worker{j}"] = dynamo_worker(p.role, p.replicas, p.tp, image,
                                                                 _words(_command(pf)[1]), nodes=p.pp)
        out[f"dynamo/sm-{group}.yaml"] = dump_yaml(dynamo_graph(f"sm-{group}"[:63], image, workers))
    return out


def _readme(plan: Plan, target: str, written: list[PoolFiles]) -> str:
    t = plan.totals
    rows = "\n".join(
        f"| {pf.folder} | {pf.spec.pool.class_name} | {pf.spec.pool.strategy} | {pf.spec.pool.role} | "
        f"{_size(pf.spec.pool)} | {pf.spec.pool.replicas} | {pf.spec.pool.batch} | "
        f"{pf.stack or 'service only'} | {_ms(pf.spec.pool.ttft_ms)} | {_ms(pf.spec.pool.tpot_ms)} |"
        for pf in written)
    bench = "\n".join(
        f"    vllm bench serve --backend openai --base-url http://HOST:{PORT} --model {hf_repo(plan.model)} "
        f"--dataset-name random --random-input-len {c['input_tokens']} --random-output-len {c['output_tokens']} "
        f"--request-rate {c['rate_rps']} --num-prompts 1000 --percentile-metrics ttft,tpot --metric-percentiles 50,90"
        f"    # {c['name']}: predicted TTFT {c['predicted_ttft_ms']} ms, TPOT {c['predicted_tpot_ms']} ms"
        for c in class_targets(plan))
    service_only = [pf.folder for pf in written if pf.stack is None]
    fallback = [pf.folder for pf in written if pf.stack not in (None, target)]
    run = {
        "vllm": "each pool's `launch.sh` (one per replica) or `kubectl apply -f pools/*/k8s.yaml`",
        "sglang": "each pool's `launch.sh` (one per replica) or `kubectl apply -f pools/*/k8s.yaml`; prefill/decode "
                  "pairs need SGLang's router in front (`python3 -m sglang_router.launch_router --pd-disaggregation`)",
        "trtllm": "each pool's `launch.sh` (one per replica) or `kubectl apply -f pools/*/k8s.yaml`; prefill/decode "
                  "pairs need `trtllm-serve disaggregated` in front",
        "dynamo": "install the Dynamo platform (CRDs and operator), then `kubectl apply -f dynamo/`; each graph "
                  "has a Frontend serving the OpenAI API",
    }[target]
    parts = [
        f"# Deployment of a siliconmix plan: {hf_repo(plan.model)} on {target}\n",
        f"Plan status {plan.status}, goodput scale {plan.goodput_scale:.3f}; {t.devices:,} devices "
        f"({', '.join(f'{n} {d}' for d, n in sorted(t.devices_by_type.items()))}), {t.power_kw:,.1f} kW facility. "
        f"siliconmix {plan.siliconmix_version or '?'}, catalog {plan.catalog_fingerprint or '?'}.\n",
        "## Pools\n",
        "| folder | class | strategy | role | devices per replica | replicas | batch | stack | TTFT | TPOT |",
        "|---|---|---|---|---|---|---|---|---|---|", rows, "",
        "## Files\n",
        "- `pools/<folder>/README.md`: what the pool is and what the files cannot express",
        "- `pools/<folder>/launch.sh`: the engine command (bash, one replica)",
        "- `pools/<folder>/engine.yaml` (vLLM, SGLang, Dynamo) or `config.yaml` (TensorRT-LLM LLM API options)",
        "- `pools/<folder>/k8s.yaml`: ConfigMap + Deployment (replicas, accelerator limits) + Service",
        "- `dynamo/*.yaml`: one DynamoGraphDeployment per class and strategy (target dynamo)",
        "- `loadtest.py`: checks each class's TTFT/TPOT (standard library only)\n",
        "## What to run\n", f"Start {run}. Prefill and decode pools of a class exchange KV over NIXL "
        "(set `UCX_TLS`/`UCX_NET_DEVICES` for your fabric).\n",
        "Then check the predictions (pass: median within "
        f"{TOLERANCE:g}x the prediction and p90 within the SLO):\n",
        f"    python3 loadtest.py --base-url http://HOST:{PORT} --duration 120\n",
        "or with vLLM's benchmark, per class:\n", bench, "",
    ]
    split = sorted({pf.spec.pool.class_name for pf in written if pf.spec.pool.role == "prefill"}
                   & {pf.spec.pool.class_name for pf in written if pf.spec.pool.role == "decode"})
    if split:
        parts += [f"Classes served by separate prefill and decode pools ({', '.join(split)}): route each request "
                  "to a prefill pool, then to a decode pool of the same class; where the two are on different "
                  "silicon or stacks, the KV transfer between them has to be set up across them (NIXL runs on "
                  "CUDA, ROCm, TPU and Neuron hosts, with the KV staged through host memory off-GPU).\n"]
    if fallback:
        parts += [f"Written for vLLM because {target} does not run on their silicon: {', '.join(fallback)}.\n"]
    if service_only:
        parts += [f"{NO_PUBLIC_STACK}: {', '.join(service_only)}.\n"]
    return "\n".join(parts)
