"""``siliconmix deploy`` on real plans (mixed-agents, a pd_disagg plan, the Trainium+CS-3 and MoE attention/FFN
examples) for every target: every YAML/JSON parses back, every option name is a documented one, the Kubernetes
manifests validate against the Kubernetes schemas (kubernetes-validate ships them, offline), the bash scripts
pass ``bash -n``, the load test runs against a stand-in server; bad input exits 2 with one line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import kubernetes_validate
import pytest
import yaml
from tests.deploy_trees import example, pd_disagg_workload, solve, unknown_options
from typer.testing import CliRunner

from planner.cli import app
from planner.deploy import TARGETS, deployment_for
from planner.deploy.platforms import NO_PUBLIC_STACK
from planner.files import write_json

K8S_VERSION = "1.30.0"
PLANS = ("mixed-agents", "pd-disagg", "seed-prefill-decode", "moe-af")


@pytest.fixture(scope="module")
def plans(catalog) -> dict:
    out = {name: solve(example(name), catalog) for name in ("mixed-agents", "seed-prefill-decode", "moe-af")}
    out["pd-disagg"] = solve(pd_disagg_workload(), catalog)
    for plan in out.values():
        assert plan.status in ("optimal", "feasible", "time_limit") and plan.pools
    assert {p.strategy for p in out["pd-disagg"].pools} == {"pd_disagg"}
    assert {p.role for p in out["pd-disagg"].pools} == {"prefill", "decode"}
    return out


@pytest.fixture(scope="module")
def trees(plans, catalog) -> dict:
    return {(name, target): deployment_for(plan, target, catalog) for name, plan in plans.items() for target in TARGETS}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", PLANS)
def test_every_file_parses_and_names_documented_options(trees, name, target):
    files = trees[name, target]
    assert {"README.md", "loadtest.py"} <= set(files)
    for path, text in files.items():
        if path.endswith((".yaml", ".yml")):
            assert all(doc is not None for doc in yaml.safe_load_all(text)), path
        if path.endswith(".py"):
            compile(text, path, "exec")
    assert unknown_options(files) == []


def test_a_misspelt_flag_is_caught(trees):
    files = dict(trees["mixed-agents", "vllm"])
    script = next(p for p in files if p.endswith("launch.sh"))
    files[script] = files[script].replace("--max-num-seqs", "--max-num-seq")
    assert unknown_options(files) == [f"{script}: --max-num-seq"]
    files = dict(trees["pd-disagg", "trtllm"])
    config = next(p for p in files if p.endswith("config.yaml"))
    files[config] = files[config].replace("free_gpu_memory_fraction", "free_gpu_mem_fraction")
    assert unknown_options(files) == [f"{config}: kv_cache_config.free_gpu_mem_fraction"]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", PLANS)
def test_kubernetes_manifests_validate_against_the_schemas(trees, plans, name, target):
    files = trees[name, target]
    deployments = []
    for path, text in files.items():
        if path.endswith("k8s.yaml"):
            for doc in yaml.safe_load_all(text):
                kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
                if doc["kind"] == "Deployment":
                    deployments.append(doc)
    replicas = {d["metadata"]["name"]: d["spec"]["replicas"] for d in deployments}
    pool_readmes = [p for p in files if p.startswith("pools/") and p.endswith("README.md")]
    assert len(pool_readmes) == len(plans[name].pools)
    assert sum(replicas.values()) + _dynamo_replicas(files) == sum(
        p.replicas for p in plans[name].pools if "no public self-hosted" not in files[_readme_of(files, p)])


def _readme_of(files, pool) -> str:
    return next(path for path in files if path.startswith("pools/") and path.endswith("README.md")
                and f"-{pool.role}-{pool.device}-tp{pool.tp}/" in path and f"`{pool.class_name}`" in files[path]
                and f"{pool.replicas} replica(s)" in files[path])


def _dynamo_replicas(files) -> int:
    return sum(svc["replicas"] for path, text in files.items() if path.startswith("dynamo/")
               for name, svc in yaml.safe_load(text)["spec"]["services"].items() if name != "Frontend")


def test_accelerator_resources_follow_the_silicon(trees):
    def limits(files):
        return {path.split("/")[1]: doc["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
                for path, text in files.items() if path.endswith("k8s.yaml")
                for doc in yaml.safe_load_all(text) if doc["kind"] == "Deployment"}
    mixed = limits(trees["mixed-agents", "vllm"])
    assert {r for lim in mixed.values() for r in lim} == {"google.com/tpu", "nvidia.com/gpu"}
    seed = trees["seed-prefill-decode", "sglang"]
    assert {r for lim in limits(seed).values() for r in lim} == {"aws.amazon.com/neuron"}
    cs3 = [text for path, text in seed.items() if "-cs-3-" in path]
    assert cs3 and all(NO_PUBLIC_STACK in text for text in cs3) and not any(p.endswith("launch.sh") for p in seed
                                                                           if "-cs-3-" in p)
    assert "vllm serve" in next(t for p, t in seed.items() if "-trn2-" in p and p.endswith("launch.sh"))
    assert "--device neuron" in next(t for p, t in seed.items() if "-trn2-" in p and p.endswith("launch.sh"))
    pd = limits(trees["pd-disagg", "vllm"])
    for folder, lim in pd.items():
        assert lim == {("amd.com/gpu" if "mi300x" in folder else "nvidia.com/gpu"): int(folder.rsplit("tp", 1)[1])}


def test_disaggregated_pools_carry_roles_and_a_kv_connector(trees):
    vllm = trees["pd-disagg", "vllm"]
    for path, text in vllm.items():
        if path.endswith("launch.sh"):
            assert '"kv_connector": "NixlConnector"' in text
    sglang = trees["pd-disagg", "sglang"]
    for path, text in sglang.items():
        if path.endswith("launch.sh"):
            role = "prefill" if "-prefill-" in path else "decode"
            assert f"--disaggregation-mode {role}" in text and "--disaggregation-transfer-backend nixl" in text
    graphs = [yaml.safe_load(t) for p, t in trees["pd-disagg", "dynamo"].items() if p.startswith("dynamo/")]
    sub = {svc.get("subComponentType") for g in graphs for svc in g["spec"]["services"].values()}
    assert {"prefill", "decode"} <= sub
    prefill_args = [svc["extraPodSpec"]["mainContainer"]["args"] for g in graphs
                    for svc in g["spec"]["services"].values() if svc.get("subComponentType") == "prefill"]
    assert prefill_args and all("--is-prefill-worker" in a for a in prefill_args)


def test_speculative_and_expert_settings(trees, plans):
    """Each speculative pool's engine gets the draft model and the draft length that pool was priced with."""
    pools = [p for p in plans["mixed-agents"].pools if p.strategy == "spec_decode" and p.role == "decode"]
    assert pools and all(p.draft_tokens for p in pools)
    vllm, trt = trees["mixed-agents", "vllm"], trees["mixed-agents", "trtllm"]
    on_nvidia = 0
    for pool in pools:
        name = f"-{pool.class_name}-decode-{pool.device}-tp{pool.tp}/"
        launch = next(t for path, t in vllm.items() if name in path and path.endswith("launch.sh"))
        assert f'"num_speculative_tokens": {pool.draft_tokens}' in launch and "Llama-3.2-1B-Instruct" in launch
        config = next((t for path, t in trt.items() if name in path and path.endswith("config.yaml")), None)
        if config is not None:  # TensorRT-LLM runs on the NVIDIA pools only
            on_nvidia += 1
            assert yaml.safe_load(config)["speculative_config"] == {
                "decoding_type": "DraftTarget", "max_draft_len": pool.draft_tokens,
                "speculative_model": "meta-llama/Llama-3.2-1B-Instruct"}
    assert on_nvidia  # a speculative pool on NVIDIA silicon
    moe = trees["moe-af", "vllm"]
    assert all("--enable-expert-parallel" in t for p, t in moe.items() if p.endswith("launch.sh"))
    # its decode pool runs 8 expert groups of one B200 each: 8 data-parallel engines of TP1, a share of the batch each
    decode = next(p for p in plans["moe-af"].pools if p.role == "decode" and p.ep > 1)
    launch = next(t for path, t in moe.items() if f"-decode-{decode.device}-tp{decode.tp}/" in path and path.endswith("launch.sh"))
    assert f"--data-parallel-size {decode.ep}" in launch and f"--tensor-parallel-size {decode.tp // decode.ep}" in launch
    assert f"--max-num-seqs {decode.batch // decode.ep}" in launch
    trt = next(t for path, t in trees["moe-af", "trtllm"].items()
               if f"-decode-{decode.device}-tp{decode.tp}/" in path and path.endswith("config.yaml"))
    assert yaml.safe_load(trt)["enable_attention_dp"] is (decode.ep == decode.tp)


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
def test_launch_scripts_pass_bash_n(trees, tmp_path):
    scripts = [(k, p, t) for k, files in trees.items() for p, t in files.items() if p.endswith(".sh")]
    assert scripts
    for (name, target), path, text in scripts:
        assert text.startswith("#!/usr/bin/env bash\n") and "set -euo pipefail" in text
        file = tmp_path / "launch.sh"
        file.write_text(text)
        done = subprocess.run(["bash", "-n", str(file)], capture_output=True, text=True)
        assert done.returncode == 0, (name, target, path, done.stderr)


def test_cli_writes_the_tree(plans, trees, tmp_path):
    plan_file = tmp_path / "plan.json"
    write_json(plan_file, plans["mixed-agents"].model_dump(mode="json"))
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["deploy", str(plan_file), "--target", "dynamo", "-o", str(out)])
    assert result.exit_code == 0, result.output
    written = {str(p.relative_to(out)): p.read_text() for p in out.rglob("*") if p.is_file()}
    assert written == trees["mixed-agents", "dynamo"]
    assert (out / "loadtest.py").stat().st_mode & 0o111


@pytest.mark.parametrize("args, message", [
    (["--target", "kserve"], "--target: unknown target 'kserve' (choose vllm, sglang, trtllm, dynamo)"),
    (["--target", "vllm", "PLAN=missing"], "cannot read"),
    (["--target", "vllm", "PLAN=notjson"], "not JSON"),
    (["--target", "vllm", "PLAN=notaplan"], "not a siliconmix plan"),
])
def test_cli_bad_input_exits_2_with_one_line(tmp_path, plans, args, message):
    files = {"missing": tmp_path / "none.json", "notjson": tmp_path / "bad.json", "notaplan": tmp_path / "obj.json"}
    files["notjson"].write_text("{not json")
    files["notaplan"].write_text(json.dumps({"pools": []}))
    good = tmp_path / "plan.json"
    write_json(good, plans["pd-disagg"].model_dump(mode="json"))
    plan = next((str(files[a.split("=")[1]]) for a in args if a.startswith("PLAN=")), str(good))
    argv = ["deploy", plan, *[a for a in args if not a.startswith("PLAN=")], "-o", str(tmp_path / "out")]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_cli_infeasible_plan_exits_1(tmp_path, catalog):
    w = example("chat-70b")
    w["classes"][0]["slo"] = {"ttft_ms": 1, "tpot_ms": 0.01}
    plan = solve(w, catalog)
    assert plan.status == "infeasible"
    plan_file = tmp_path / "plan.json"
    write_json(plan_file, plan.model_dump(mode="json"))
    result = CliRunner().invoke(app, ["deploy", str(plan_file), "--target", "vllm", "-o", str(tmp_path / "out")])
    assert result.exit_code == 1, result.output
    assert len(result.output.strip().splitlines()) == 1 and "nothing to deploy" in result.output
    assert not (tmp_path / "out").exists()


class _FakeOpenAI(BaseHTTPRequestHandler):
    """Streams ``max_tokens`` completion chunks at once (an endpoint far faster than any prediction)."""

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for _ in range(body["max_tokens"]):
            self.wfile.write(b'data: {"choices": [{"text": "x"}]}\n\n')
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, *args):
        pass


def test_load_test_checks_each_class(trees, tmp_path):
    script = tmp_path / "loadtest.py"
    script.write_text(trees["pd-disagg", "vllm"]["loadtest.py"])
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeOpenAI)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        ok = subprocess.run([sys.executable, str(script), "--base-url", url, "--duration", "0.2",
                             "--rate-scale", "0.02"], capture_output=True, text=True, timeout=120)
        assert ok.returncode == 0, ok.stdout + ok.stderr
        assert "chat ttft_ms" in ok.stdout and "-> pass" in ok.stdout
        down = subprocess.run([sys.executable, str(script), "--base-url", "http://127.0.0.1:9", "--duration", "0.1",
                               "--rate-scale", "0.02"], capture_output=True, text=True, timeout=120)
        assert down.returncode == 1 and "FAIL" in down.stdout
    finally:
        server.shutdown()
        server.server_close()
