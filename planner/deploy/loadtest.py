"""The load-test script written into a deployment: per class, open-loop Poisson requests of the class's
prompt and answer lengths against an OpenAI-compatible endpoint, streaming, timing TTFT and TPOT, and a
verdict against the plan's predictions and the class's SLO. Standard library only."""

from __future__ import annotations

import json

from planner.deploy.models import hf_repo
from planner.schema import Plan

#: a class passes when its median TTFT and TPOT are within this factor of the plan's prediction
TOLERANCE = 1.25

SCRIPT = '''#!/usr/bin/env python3
"""Load test for the siliconmix plan: checks each class's TTFT/TPOT against the prediction and the SLO.

usage: python3 loadtest.py --base-url http://HOST:8000 [--class NAME] [--duration 60] [--rate-scale 1.0]
Pass: median TTFT and TPOT <= prediction x TOLERANCE, and p90 TTFT and TPOT <= the SLO.
Exit 0 when every class tested passes, 1 otherwise. Uses /v1/completions with stream=true.
"""
import argparse, json, random, statistics, sys, threading, time, urllib.request

MODEL = __MODEL__
TOLERANCE = __TOLERANCE__
# name, input/output tokens, rate (req/s, the plan's served rate), predicted and SLO TTFT/TPOT (ms)
CLASSES = __CLASSES__


def one_request(base_url, c, results):
    prompt = "hello " * c["input_tokens"]  # ~1 token per word on BPE tokenizers
    body = json.dumps({"model": MODEL, "prompt": prompt, "max_tokens": c["output_tokens"], "stream": True,
                       "ignore_eos": True, "temperature": 0}).encode()
    req = urllib.request.Request(base_url + "/v1/completions", body, {"Content-Type": "application/json"})
    start = time.perf_counter()
    first, chunks = None, 0
    try:
        with urllib.request.urlopen(req, timeout=600) as resp:
            for raw in resp:
                line = raw.decode().strip()
                if not line.startswith("data:") or line == "data: [DONE]":
                    continue
                chunks += 1
                if first is None:
                    first = time.perf_counter()
    except OSError as exc:
        results.append({"error": str(exc)})
        return
    end = time.perf_counter()
    if first is None:
        results.append({"error": "no tokens"})
        return
    tpot = (end - first) / max(chunks - 1, 1)
    results.append({"ttft_ms": (first - start) * 1e3, "tpot_ms": tpot * 1e3})


def pct(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_class(base_url, c, duration, scale):
    rate = c["rate_rps"] * scale
    results, threads, t_end = [], [], time.perf_counter() + duration
    while time.perf_counter() < t_end:
        t = threading.Thread(target=one_request, args=(base_url, c, results))
        t.start()
        threads.append(t)
        time.sleep(random.expovariate(rate))
    for t in threads:
        t.join()
    ok = [r for r in results if "error" not in r]
    if not ok:
        print(f"{c['name']}: FAIL, no request succeeded ({len(results)} sent)")
        return False
    verdict = True
    for metric in ("ttft_ms", "tpot_ms"):
        values = [r[metric] for r in ok]
        med, p90 = statistics.median(values), pct(values, 0.9)
        limit, slo = c["predicted_" + metric] * TOLERANCE, c["slo_" + metric]
        passed = med <= limit and p90 <= slo
        verdict &= passed
        print(f"{c['name']} {metric}: median {med:.1f} (predicted {c['predicted_' + metric]:.1f}, limit {limit:.1f}), "
              f"p90 {p90:.1f} (SLO {slo:.1f}) -> {'pass' if passed else 'FAIL'}")
    print(f"{c['name']}: {len(ok)} ok, {len(results) - len(ok)} failed at {rate:.2f} req/s")
    return verdict and len(ok) == len(results)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--class", dest="only", choices=[c["name"] for c in CLASSES])
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of arrivals per class")
    ap.add_argument("--rate-scale", type=float, default=1.0, help="fraction of the plan's rate to send")
    args = ap.parse_args()
    chosen = [c for c in CLASSES if args.only in (None, c["name"])]
    passed = [run_class(args.base_url.rstrip("/"), c, args.duration, args.rate_scale) for c in chosen]
    sys.exit(0 if all(passed) else 1)


if __name__ == "__main__":
    main()
'''


def class_targets(plan: Plan) -> list[dict]:
    """Per class: lengths, the served rate, the predicted TTFT/TPOT and the SLO (ms); classes with no
    prediction (not served) are left out."""
    results = {c.name: c for c in plan.classes}
    out = []
    for rc in plan.workload.classes:
        r = results.get(rc.name)
        if r is None or r.ttft_ms is None or r.tpot_ms is None or r.rate_rps_served <= 0:
            continue
        out.append({"name": rc.name, "input_tokens": rc.input_tokens, "output_tokens": rc.output_tokens,
                    "rate_rps": round(r.rate_rps_served, 4),
                    "predicted_ttft_ms": round(r.ttft_ms, 2), "predicted_tpot_ms": round(r.tpot_ms, 2),
                    "slo_ttft_ms": rc.slo.ttft_ms, "slo_tpot_ms": rc.slo.tpot_ms})
    return out


def loadtest_script(plan: Plan) -> str:
    """The script's text with the plan's figures written in (JSON of strings and numbers: a Python literal)."""
    classes = json.dumps(class_targets(plan), indent=1)
    return (SCRIPT.replace("__MODEL__", repr(hf_repo(plan.model))).replace("__TOLERANCE__", repr(TOLERANCE))
            .replace("__CLASSES__", classes))
