"""The cost-model seam (model.RooflineModel) over a catalog built in code: every method forwards its
arguments to the formula it names, and the trust it attaches (bands, source, confidence) is the family's."""

import numpy as np
import pytest

from planner.catalog import Catalog
from planner.perf.af import af_decode_step
from planner.perf.grid import GridSpec, evaluate_grid
from planner.perf.model import RooflineModel
from planner.perf.profile import ModelProfile
from planner.perf.roofline import decode_step, prefill_pass
from planner.perf.silicon import HardwareArrays, Silicon
from planner.schema import FamilyCalibration, Provenance


@pytest.fixture()
def costs(toy_model, moe_model, toy_device):
    guess, sourced = Provenance(source="derived from a sibling", estimate=True), Provenance(source="datasheet")
    estimated = toy_device.model_copy(update={"id": "toy-est", "provenance": {
        "tdp_w": guess, "price_usd": guess, "peak_dense_tflops.bf16": guess, "memory_tiers.hbm.bandwidth_tb_s": guess,
        "scale_up.latency_us": guess, "mfu": sourced}})
    devices = {d.id: d for d in (toy_device, toy_device.model_copy(update={"id": "toy-claims"}),
                                 toy_device.model_copy(update={"id": "toy-bare"}),
                                 toy_device.model_copy(update={"id": "toy-nofam"}), estimated)}
    families = {
        "toy-fam": FamilyCalibration(name="toy-fam", devices=("toy-gpu", "toy-est"), records=12, fitted=True,
                                     date="2026-11-30", bands={"tpot": {"low": 0.8, "high": 1.25},
                                                               "ttft": {"low": 0.7, "high": 1.5}},
                                     dtypes=("bf16", "fp8"), max_tp=4, max_isl=4096, max_batch=64),
        "toy-claims": FamilyCalibration(name="toy-claims", devices=("toy-claims",), records=3, fitted=True,
                                        checks_only=True, date="2026-11-30",
                                        bands={"tpot": {"low": 0.9, "high": 1.1}}),
        "toy-bare": FamilyCalibration(name="toy-bare", devices=("toy-bare",)),
    }
    return RooflineModel(Catalog(devices=devices, models={m.id: m for m in (toy_model, moe_model)}, families=families))


def _arrays(costs, *ids):
    return HardwareArrays.of([costs.silicon(i, "bf16") for i in ids])


def test_decode_forwards_every_argument_and_carries_the_tpot_band(costs):
    model = costs.profile("toy", "bf16")
    cost = costs.decode(model, costs.silicon("toy-gpu", "bf16"), 2, 64, 10, prefill_tokens=8)
    direct = decode_step(model, _arrays(costs, "toy-gpu"), 2, 64, 10, 8)
    assert cost.total_s == pytest.approx(direct.total_s)
    assert cost.parts.communication_s == pytest.approx(direct.communication_s)
    assert cost.low_s == pytest.approx(0.8 * direct.total_s)
    assert cost.high_s == pytest.approx(1.25 * direct.total_s)
    assert cost.bound == direct.bound
    assert cost.source == ("roofline, efficiencies fitted for family toy-fam (12 records, 2026-11-30)",)


def test_decode_forwards_expert_parallelism(costs):
    model = costs.profile("toy-moe", "bf16")
    cost = costs.decode(model, costs.silicon("toy-gpu", "bf16"), 4, 8, 10, ep=4)
    assert cost.total_s == pytest.approx(decode_step(model, _arrays(costs, "toy-gpu"), 4, 8, 10, ep=4).total_s)
    assert not np.allclose(cost.total_s, decode_step(model, _arrays(costs, "toy-gpu"), 4, 8, 10).total_s)


def test_prefill_forwards_every_argument_and_carries_the_ttft_band(costs):
    model = costs.profile("toy-moe", "bf16")
    cost = costs.prefill(model, costs.silicon("toy-gpu", "bf16"), 4, 512, cached_tokens=128, prompts=3, ep=2)
    direct = prefill_pass(model, _arrays(costs, "toy-gpu"), 4, 512, 128, 3, 2)
    assert cost.total_s == pytest.approx(direct.total_s)
    assert cost.low_s == pytest.approx(0.7 * direct.total_s)
    assert cost.high_s == pytest.approx(1.5 * direct.total_s)
    assert not np.allclose(cost.total_s, prefill_pass(model, _arrays(costs, "toy-gpu"), 4, 512).total_s)
    plain = costs.prefill(model, costs.silicon("toy-gpu", "bf16"), 4, 512)  # no prefix, one prompt, no EP
    assert plain.total_s == pytest.approx(prefill_pass(model, _arrays(costs, "toy-gpu"), 4, 512).total_s)


def test_bands_follow_each_device_of_a_stack(costs):
    model = costs.profile("toy", "bf16")
    hw = costs.hardware([costs.silicon("toy-gpu", "bf16"), costs.silicon("toy-nofam", "bf16")]).expand(2)
    cost = costs.decode(model, hw, 1, np.asarray([[1.0, 8.0, 64.0]]), 10)
    assert cost.total_s.shape == (2, 3)
    assert cost.low_s[0] == pytest.approx(0.8 * cost.total_s[0])
    assert cost.low_s[1] == pytest.approx(0.5 * cost.total_s[1])  # no family: the uncalibrated ×0.5 … ×2
    assert cost.high_s[1] == pytest.approx(2.0 * cost.total_s[1])
    assert cost.source[1] == "roofline, efficiency priors (no calibration record)"


def test_uncalibrated_band_for_no_family_no_fit_claims_only_or_missing_metric(costs):
    for device_id, metric in [("toy-nofam", "tpot"), ("toy-bare", "tpot"), ("toy-claims", "tpot"),
                              ("toy-gpu", "throughput")]:
        band = costs.band(device_id, metric)
        assert (band.low, band.high) == (0.5, 2.0), device_id
    assert (costs.band("toy-gpu", "ttft").low, costs.band("toy-gpu", "ttft").high) == (0.7, 1.5)
    assert costs.source("toy-bare") == "roofline, efficiency priors (no calibration record)"
    assert costs.source("toy-claims") == "roofline, efficiencies fitted for family toy-claims (3 records, 2026-11-30)"


def test_confidence_inside_and_outside_the_fitted_range(costs):
    inside = costs.confidence("toy-gpu", weights_dtype="fp8", tp=4, isl=4096, batch=64)
    assert inside.level == "calibrated"
    assert inside.reasons == ("family toy-fam: 12 records, fitted 2026-11-30",)
    assert costs.confidence("toy-gpu").level == "calibrated"
    outside = costs.confidence("toy-gpu", weights_dtype="fp4", tp=8, isl=8192, batch=128)
    assert outside.level == "extrapolated"
    assert outside.reasons == ("dtype fp4 not among the family's records (bf16, fp8)",
                               "tp 8 above the records' largest (4)",
                               "isl 8192 above the records' longest (4096)",
                               "batch 128 above the records' largest (64)")


def test_confidence_estimated_without_records_or_with_estimated_numbers(costs):
    assert costs.confidence("toy-nofam").reasons == (
        "no calibration record for toy-nofam's family: efficiencies are priors",)
    assert costs.confidence("toy-bare").level == "estimated"
    claims = costs.confidence("toy-claims", tp=1)
    assert claims.level == "estimated"
    assert claims.reasons == ("family toy-claims is fitted only on vendor claims (3 check-only records)",)
    # estimated compute, memory and TDP count; an estimated price or link latency does not
    assert costs.confidence("toy-est").reasons == (
        "estimated catalog numbers: memory_tiers.hbm.bandwidth_tb_s, peak_dense_tflops.bf16, tdp_w",)


def test_silicon_and_arrays_are_converted_once(costs, toy_device):
    silicon = costs.silicon("toy-gpu", "bf16")
    assert costs.silicon("toy-gpu", "bf16") is silicon
    assert costs.silicon(costs.catalog.device("toy-gpu"), "bf16") is silicon
    other = costs.silicon("toy-bare", "bf16")
    assert costs.silicon("toy-gpu", "bf16") is silicon and costs.silicon("toy-bare", "bf16") is other
    assert costs.silicon(toy_device.model_copy(), "bf16") is not silicon  # another Device object: converted again
    arrays = costs.hardware(silicon)
    assert costs.hardware(silicon) is arrays
    assert costs.hardware(arrays) is arrays
    pair = costs.hardware([silicon, costs.silicon("toy-bare", "bf16")])
    assert pair.ids == ("toy-gpu", "toy-bare")


def test_profile_defaults_the_kv_dtype(costs):
    assert costs.profile("toy", "fp4").kv_bytes_per_token_layer == pytest.approx(4.0)  # fp8 KV: 2·1·2·1 B
    assert costs.profile("toy", "fp4", "bf16").kv_bytes_per_token_layer == pytest.approx(8.0)
    assert costs.profile("toy", "fp8").weights_bytes == pytest.approx(368.0)


def test_af_decode_is_the_af_step_with_the_attention_sides_band(costs):
    model = ModelProfile.of(costs.catalog.model("toy-moe"), "bf16", "bf16")
    a, f = costs.silicon("toy-gpu", "bf16"), costs.silicon("toy-bare", "bf16")
    # attention on two devices (paying all-reduces) is the slower side; experts on one
    cost = costs.af_decode(model, a, 2, f, 1, 4, 10, 100e9, 1e-6)
    step, attention, experts = af_decode_step(model, _arrays(costs, "toy-gpu"), 2, _arrays(costs, "toy-bare"), 1, 4,
                                              10, 100e9, 1e-6)
    assert attention.total_s > experts.total_s
    assert cost.total_s == pytest.approx(step)
    assert cost.parts.communication_s == pytest.approx(attention.communication_s)
    assert cost.low_s == pytest.approx(0.8 * step)
    # a fixed step cost on the attention side stays in the total once; experts on 2 devices, attention on 1
    slow = costs.silicon(costs.catalog.device("toy-gpu").model_copy(update={"step_overhead_us": 5.0}), "bf16")
    cost = costs.af_decode(model, slow, 1, f, 2, 4, 10, 100e9, 1e-6)
    step, attention, experts = af_decode_step(model, HardwareArrays.of([slow]), 1, _arrays(costs, "toy-bare"), 2, 4,
                                              10, 100e9, 1e-6)
    assert float(np.ravel(experts.communication_s)[0]) > 0.0
    assert cost.total_s == pytest.approx(step)


def test_speculation_arithmetic_through_the_seam(costs):
    # 4 draft steps of 1 ms, verify 20 ms, 2 ms round trip → 26 ms per round of (1 − 0.8^5)/0.2 = 3.3616 tokens
    assert costs.spec_round_s(1e-3, 4, 20e-3, 2e-3) == pytest.approx(26e-3)
    assert costs.spec_round_s(1e-3, 4, 20e-3) == pytest.approx(24e-3)
    assert costs.expected_tokens_per_round(0.8, 4) == pytest.approx(3.3616)
    assert costs.spec_tpot_s(1e-3, 20e-3, 4, 0.8, 2e-3) == pytest.approx(26e-3 / 3.3616)
    assert costs.spec_tpot_s(1e-3, 20e-3, 4, 0.8) == pytest.approx(24e-3 / 3.3616)


def test_kv_share_and_grid_through_the_seam(costs):
    model = costs.profile("toy", "bf16")
    silicon = costs.silicon("toy-gpu", "bf16")
    assert costs.kv_share(model, silicon, 2) == pytest.approx(1.0)  # one KV head: replicated under TP
    spec = GridSpec(tp=(1, 2), batch=(1, 4), input_tokens=(16,), output_tokens=8)
    got = costs.grid(model, silicon, spec)
    want = evaluate_grid(model, _arrays(costs, "toy-gpu"), spec)
    assert got.tpot_s == pytest.approx(want.tpot_s)
    assert got.ttft_s == pytest.approx(want.ttft_s)
