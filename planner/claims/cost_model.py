"""The talk's claims that one configuration answers: KV bytes, the TP tax, paging, bandwidth, decode speed,
chunked prefill. Each asks the CostModel (or the catalog) for the talk's case and returns a ``Claim``."""

from __future__ import annotations

import math

import numpy as np

from planner.candidates import CandidateOptions
from planner.claims.record import Claim, ClaimInputs, checked, estimated_fields
from planner.claims.talk import TALK
from planner.estimate import estimate
from planner.perf.model import GridSpec, RooflineModel, kv_bytes_per_token, paged_kv_tokens
from planner.schema import Estimate, EstimateRequest
from planner.units import BYTES_PER_GB, DTYPE_BYTES, s_to_ms

#: the talk's "70 billion parameter model"
MODEL_70B = "llama-3.3-70b"
#: "128k context": 128,000 tokens (the talk's 42 GB is 327,680 B x 128,000; at 131,072 tokens it is 42.9 GB)
CONTEXT_128K = 128_000
#: catalog fields a decode step's price rests on
DECODE_FIELDS = ("memory_tiers", "peak_dense_tflops", "efficiency", "scale_up")


def _confidence(costs: RooflineModel, device: str, dtype: str, tp: int, isl: int, batch: int) -> dict[str, str]:
    return {device: costs.confidence(device, dtype, tp, isl, batch).level}


def _estimated(costs: RooflineModel, devices, prefixes=DECODE_FIELDS) -> dict[str, tuple[str, ...]]:
    found = {d: estimated_fields(costs.catalog.device(d), prefixes) for d in devices}
    return {d: fields for d, fields in found.items() if fields}


def _kv_formula(costs: RooflineModel, dtype: str) -> tuple[float, str]:
    arch = costs.catalog.model(MODEL_70B)
    per_token = kv_bytes_per_token(arch, dtype)
    text = (f"GQA: 2 (K, V) x {arch.layers} layers x {arch.kv_heads} KV heads x {arch.head_dim} head dim x "
            f"{DTYPE_BYTES[dtype]:g} B ({dtype}) = {per_token:,.0f} B per token")
    return per_token, text


def kv_per_token(costs: RooflineModel) -> Claim:
    """Tokens whose bf16 KV cache fills 1 GB on Llama-3.3-70B: ``1e9 / (2·L·n_kv·d_h·2 B)``."""
    per_token, formula = _kv_formula(costs, "bf16")
    fp8, _ = _kv_formula(costs, "fp8")
    inputs = ClaimInputs(model=MODEL_70B, devices=(), dtype="bf16", case="KV cache, any device (published config)")
    return checked("kv-per-token", BYTES_PER_GB / per_token, inputs,
                   f"{formula}; an fp8 cache holds {BYTES_PER_GB / fp8:,.0f} tokens per GB",
                   {"kv_bytes_per_token": per_token})


def kv_at_128k(costs: RooflineModel) -> Claim:
    """bf16 KV cache of one 128,000-token request on Llama-3.3-70B (GB)."""
    per_token, formula = _kv_formula(costs, "bf16")
    gb = per_token * CONTEXT_128K / BYTES_PER_GB
    inputs = ClaimInputs(model=MODEL_70B, devices=(), dtype="bf16", case=f"one request at {CONTEXT_128K:,} tokens")
    return checked("kv-128k", gb, inputs,
                   f"{formula}, x {CONTEXT_128K:,} tokens; at 131,072 tokens it is "
                   f"{per_token * 131_072 / BYTES_PER_GB:.1f} GB", {"kv_bytes_per_token": per_token})


def _estimate(costs: RooflineModel, **request) -> Estimate:
    return estimate(EstimateRequest(**request), costs.catalog)


def tp4_speedup(costs: RooflineModel) -> Claim:
    """Decode speed-up of Llama-3.3-70B (fp8, batch 1) on H100 from TP1 to TP4, and where TP4's step goes."""
    case = dict(model=MODEL_70B, device="h100-sxm", batch=1, isl=2048, osl=256, dtype="fp8")
    one, four = _estimate(costs, tp=1, **case), _estimate(costs, tp=4, **case)
    speedup = one.tpot_ms / four.tpot_ms
    tax = four.decode_communication_ms + four.decode_overhead_ms
    roofline = four.tpot_ms - tax
    needed = one.tpot_ms / TALK["tp4-speedup"].low - roofline  # all-reduce + fixed time the talk's speed-up implies
    why = (f"TP4 step {four.tpot_ms:.2f} ms = {roofline:.2f} ms weights/KV read (TP1: "
           f"{one.tpot_ms - one.decode_communication_ms - one.decode_overhead_ms:.2f} ms) + "
           f"{four.decode_communication_ms:.2f} ms all-reduce (2 per layer) + {four.decode_overhead_ms:.2f} ms fixed; "
           f"the talk's {TALK['tp4-speedup'].figure} needs {needed:.2f} ms of that tax, {needed / tax:.1f}x what the "
           f"product prices ({four.confidence}: {'; '.join(four.confidence_reasons)})")
    inputs = ClaimInputs(model=MODEL_70B, devices=("h100-sxm",), dtype="fp8",
                         case="batch 1, 2,048-token prompt, 256 output tokens; TP1 vs TP4",
                         confidence=_confidence(costs, "h100-sxm", "fp8", 4, 2048, 1),
                         estimated=_estimated(costs, ("h100-sxm",)))
    return checked("tp4-speedup", speedup, inputs, why,
                   {"tpot_tp1_ms": one.tpot_ms, "tpot_tp4_ms": four.tpot_ms,
                    "tp4_communication_ms": four.decode_communication_ms, "tp4_fixed_ms": four.decode_overhead_ms})


def paged_kv(costs: RooflineModel) -> Claim:
    """Requests that fit in 8x H100 next to Llama-3.3-70B (bf16), paged vs reserved per request: a chat mix (1,024
    prompt, 256 answer tokens) against a 4,096-token reservation."""
    model, hw = costs.profile(MODEL_70B, "bf16", "bf16"), costs.silicon("h100-sxm", "bf16")
    isl, osl, reserved = 1024, 256, 4096
    common = dict(tp=(8,), batch=(1,), input_tokens=(isl,), output_tokens=osl)

    def fit(paged: bool, reserve: int) -> float:
        grid = costs.grid(model, hw, GridSpec(**common, paged_kv=paged, reserved_context_tokens=reserve))
        return grid.max_batch_in_memory.item()

    arch = costs.catalog.model(MODEL_70B)
    paged, contiguous, at_max = fit(True, reserved), fit(False, reserved), fit(False, arch.max_context_tokens)
    live = float(paged_kv_tokens(isl, osl))
    why = (f"{paged:,.0f} vs {contiguous:,.0f} requests: a paged cache holds the live {live:,.0f} tokens "
           f"(isl + osl/2 in 16-token pages), a contiguous one reserves {reserved:,} ({reserved / live:.2f}x); the "
           f"ratio is the reservation's: reserving the model's whole {arch.max_context_tokens:,}-token context fits "
           f"{at_max:,.0f}")
    inputs = ClaimInputs(model=MODEL_70B, devices=("h100-sxm",), dtype="bf16",
                         case=f"8x H100, {isl:,}-token prompts, {osl} output tokens, {reserved:,}-token reservation",
                         confidence=_confidence(costs, "h100-sxm", "bf16", 8, isl, int(paged)),
                         estimated=_estimated(costs, ("h100-sxm",), ("memory_tiers",)))
    return checked("paged-kv", paged / contiguous, inputs, why,
                   {"paged_requests": paged, "contiguous_requests": contiguous, "contiguous_at_max_context": at_max})


def bandwidth(costs: RooflineModel) -> Claim:
    """CS-3's on-wafer SRAM bandwidth over H100's HBM3 bandwidth, from the catalog."""
    h100, cs3 = costs.catalog.device("h100-sxm"), costs.catalog.device("cs-3")
    b_h100, b_cs3 = h100.weights_memory.bandwidth_tb_s, cs3.weights_memory.bandwidth_tb_s
    why = (f"the catalog has the talk's own figures ({b_cs3:,.0f} and {b_h100:g} TB/s), whose ratio is "
           f"{b_cs3 / b_h100:,.0f}x; decode sees little of it: the CS-3's MBU is {cs3.mbu:.2f} and a batch-1 step is "
           "bound by fixed per-layer and pipeline costs (see decode-speed)")
    inputs = ClaimInputs(model=None, devices=("cs-3", "h100-sxm"), dtype=None, case="peak memory bandwidth (catalog)",
                         estimated=_estimated(costs, ("cs-3", "h100-sxm"), ("memory_tiers",)))
    return checked("bandwidth", b_cs3 / b_h100, inputs, why, {"h100_tb_s": b_h100, "cs3_tb_s": b_cs3})


def fastest_per_user(costs: RooflineModel, model_id: str, device_id: str, dtype: str) -> Estimate:
    """The fastest batch-1 decode (tokens/s per user) over the parallelisms that fit ``device_id``."""
    arch, device = costs.catalog.model(model_id), costs.catalog.device(device_id)
    sizes = [2**i for i in range(6) if 2**i <= device.scale_up.domain_size
             and (device.is_sram_machine or arch.splits_over(2**i))]
    found = [e for e in (_estimate(costs, model=model_id, device=device_id, tp=tp, batch=1, isl=2048, osl=256,
                                   dtype=dtype) for tp in sizes) if e.fits]
    return max(found, key=lambda e: e.output_tokens_per_s_per_user)


def decode_speed(costs: RooflineModel) -> Claim:
    """Per-user decode speed, CS-3 over H100, at each one's fastest batch-1 parallelism. The talk names no model;
    ~3,000 tok/s is Cerebras's published gpt-oss-120B speed (third-party summary, 2026:
    https://ailearningguides.com/cerebras-llama-405b-969-tokens-second/; for Llama 3.1 70B it publishes 2,100), so
    gpt-oss-120b it is (bf16: CS-3 serves 16-bit weights), with Llama-3.3-70B beside it."""
    model_id, dtype = "gpt-oss-120b", "bf16"
    cs3, h100 = (fastest_per_user(costs, model_id, d, dtype) for d in ("cs-3", "h100-sxm"))
    cs3_70b, h100_70b = (fastest_per_user(costs, MODEL_70B, d, dtype) for d in ("cs-3", "h100-sxm"))
    speed = cs3.output_tokens_per_s_per_user / h100.output_tokens_per_s_per_user
    why = (f"CS-3x{cs3.tp} {cs3.output_tokens_per_s_per_user:,.0f} tok/s (talk 3,000): its {cs3.tpot_ms:.2f} ms step is "
           f"{cs3.decode_overhead_ms:.2f} ms fixed per-layer/pass cost and {cs3.decode_communication_ms:.2f} ms of hops "
           f"between wafers, not SRAM reads; H100x{h100.tp} {h100.output_tokens_per_s_per_user:,.0f} tok/s (talk 600); "
           f"Llama-3.3-70B gives {cs3_70b.output_tokens_per_s_per_user:,.0f} vs {h100_70b.output_tokens_per_s_per_user:,.0f} "
           f"tok/s = {cs3_70b.output_tokens_per_s_per_user / h100_70b.output_tokens_per_s_per_user:.1f}x")
    inputs = ClaimInputs(model=model_id, devices=("cs-3", "h100-sxm"), dtype=dtype,
                         case="batch 1, 2,048-token prompt, 256 output tokens; each device's fastest parallelism",
                         confidence={cs3.device: cs3.confidence, h100.device: h100.confidence},
                         estimated=_estimated(costs, ("cs-3", "h100-sxm")))
    return checked("decode-speed", speed, inputs, why,
                   {"cs3_tokens_per_s_per_user": cs3.output_tokens_per_s_per_user, "cs3_tp": cs3.tp,
                    "h100_tokens_per_s_per_user": h100.output_tokens_per_s_per_user, "h100_tp": h100.tp,
                    "cs3_70b_tokens_per_s_per_user": cs3_70b.output_tokens_per_s_per_user,
                    "h100_70b_tokens_per_s_per_user": h100_70b.output_tokens_per_s_per_user})


def chunked_prefill(costs: RooflineModel) -> Claim:
    """The longest wait between two tokens of a decoding user when a 120,000-token coding-agent prompt arrives at
    an aggregated 8x H100 replica (Llama-3.3-70B fp8, 32 chat sequences at 1,650 tokens of context), unchunked
    (the whole prefill pass) over chunked (the step carrying the prompt's last chunk, the planner's chunk budget).

    A step carrying chunk ``i`` costs the decode step with ``C`` prefill tokens plus that chunk's attention over the
    ``i·C`` prompt tokens before it: ``decode(b, c, C) + prefill(C, cached=i·C) − prefill(C, cached=0)`` (the two
    prefills differ only in their attention kernels).
    """
    model, hw = costs.profile(MODEL_70B, "fp8", "fp8"), costs.silicon("h100-sxm", "fp8")
    tp, batch, context, prompt = 8, 32, 1650, 120_000
    chunk = CandidateOptions().chunk_tokens
    plain = costs.decode(model, hw, tp, batch, context).total_s.item()
    mixed = costs.decode(model, hw, tp, batch, context, prefill_tokens=chunk,
                         prefill_context_tokens=chunk / 2.0).total_s.item()
    before = np.arange(math.ceil(prompt / chunk)) * chunk  # prompt tokens ahead of each chunk
    prefix = costs.prefill(model, hw, tp, chunk, cached_tokens=before).total_s.reshape(-1)
    carrying = mixed + prefix - costs.prefill(model, hw, tp, chunk).total_s.item()
    whole = costs.prefill(model, hw, tp, prompt).total_s.item() + plain
    why = (f"unchunked, every decoding user waits {s_to_ms(whole):,.0f} ms for the prompt's pass; with {chunk:,}-token "
           f"chunks a {s_to_ms(plain):.1f} ms step grows to {s_to_ms(carrying[0]):.0f}-{s_to_ms(carrying[-1]):.0f} ms "
           f"for {len(carrying)} steps, and the long prompt's own prefill takes {s_to_ms(carrying.sum()):,.0f} ms "
           f"instead of {s_to_ms(whole - plain):,.0f}")
    inputs = ClaimInputs(model=MODEL_70B, devices=("h100-sxm",), dtype="fp8",
                         case=f"8x H100, batch {batch} at {context:,} tokens, one {prompt:,}-token prompt, "
                              f"{chunk:,}-token chunks",
                         confidence=_confidence(costs, "h100-sxm", "fp8", tp, prompt, batch),
                         estimated=_estimated(costs, ("h100-sxm",)))
    return checked("chunked-prefill", whole / carrying[-1], inputs, why,
                   {"plain_step_ms": s_to_ms(plain), "longest_chunked_step_ms": s_to_ms(carrying[-1]),
                    "unchunked_stall_ms": s_to_ms(whole), "chunked_prefill_ms": s_to_ms(carrying.sum())})
