"""The calibration: records load, predictions are what `estimate` reports, the fit recovers known terms,
leave-one-out is a real refit, bands bracket the residuals, and fit.yaml is what a refit writes."""

import math

import numpy as np
import pytest

from planner.calibration import (
    BOUNDS,
    Calibration,
    Comparison,
    FamilyFit,
    Measurement,
    _from_x,
    _measured_over_predicted,
    _to_x,
    _x_bounds,
    bands_from,
    calibrate,
    chosen_batch,
    coverage_of,
    fit_body,
    family_priors,
    fit_family,
    fitted_catalog,
    linearised_loo,
    median_ape,
    predict,
    replica_devices,
    source_of,
    summarise,
)
from planner.catalog import FITTED_TERMS, load_catalog, load_families, load_measurements
from planner.estimate import estimate
from planner.perf.model import RooflineModel
from planner.schema import EstimateRequest


def _m(**kw):
    base = dict(id="t", source="test", date=None, model="llama-3.1-8b", device="h100-sxm", devices=1, tp=1,
                weights_dtype="fp8", kv_dtype="fp8", framework=None, regime="single_user", isl=1000, osl=500,
                metric="tpot_ms", value=10.0)
    return Measurement(**{**base, **kw})


@pytest.fixture(scope="module")
def measurements():
    return load_measurements()


def test_records_are_sourced_and_unique(measurements):
    ids = [m.id for m in measurements]
    assert len(ids) == len(set(ids))
    assert all(m.source and len(m.source) > 10 for m in measurements)


@pytest.mark.parametrize("metric,field", [("tpot_ms", "tpot_ms"), ("ttft_ms", "ttft_ms"),
                                          ("output_tokens_per_s_per_user", "output_tokens_per_s_per_user")])
def test_single_user_prediction_is_what_estimate_reports(catalog, metric, field):
    m = _m(metric=metric)
    got = predict(m, RooflineModel(catalog))[0]
    est = estimate(EstimateRequest(model="llama-3.1-8b", device="h100-sxm", dtype="fp8", kv_dtype="fp8",
                                   tp=1, batch=1, isl=1000, osl=500), catalog)
    assert got == pytest.approx(getattr(est, field), rel=1e-9)


def test_fixed_concurrency_prediction_is_estimate_at_the_replica_batch(catalog):
    # 16 requests over 2 devices at TP1: 2 replicas of batch 8
    m = _m(regime="fixed_concurrency", concurrency=16, devices=2, metric="output_tokens_per_s")
    est = estimate(EstimateRequest(model="llama-3.1-8b", device="h100-sxm", dtype="fp8", kv_dtype="fp8",
                                   tp=1, batch=8, isl=1000, osl=500), catalog)
    assert predict(m, RooflineModel(catalog))[0] == pytest.approx(2 * est.output_tokens_per_s, rel=1e-9)


def test_a_static_batch_is_prefilled_together_then_decoded_without_new_prompts(catalog):
    """Static batch of 8 on each of 2 replicas: tokens/s = 2 · 8 · osl / (prefill of the 8 prompts + 499 plain steps)."""
    costs = RooflineModel(catalog)
    m = _m(regime="fixed_concurrency", concurrency=16, devices=2, metric="output_tokens_per_s",
           notes="Static batch: all 8 requests are prefilled together and decoded to 500 tokens")
    assert m.static_batch and not _m(regime="fixed_concurrency", concurrency=16, devices=2).static_batch
    model, s = costs.profile("llama-3.1-8b", "fp8", "fp8"), costs.silicon("h100-sxm", "fp8")
    prefill = costs.prefill(model, s, 1, 1000, prompts=8.0).total_s.item()
    step = costs.decode(model, s, 1, 8, 1250).total_s.item()
    host = 8 * s.sequence_overhead_s  # a static batch runs no per-request scheduler
    assert predict(m, costs)[0] == pytest.approx(2 * 8 * 500 / (prefill - host + 499 * (step - host)), rel=1e-9)
    steady = predict(m.model_copy(update={"notes": ""}), costs)[0]
    assert steady != pytest.approx(predict(m, costs)[0], rel=1e-3)


def test_end_to_end_latency_is_ttft_plus_the_remaining_tokens(catalog):
    costs = RooflineModel(catalog)
    ttft = predict(_m(metric="ttft_ms"), costs)[0]
    tpot = predict(_m(metric="tpot_ms"), costs)[0]
    assert predict(_m(metric="e2e_latency_ms"), costs)[0] == pytest.approx(ttft + 499 * tpot)


def test_max_throughput_picks_the_best_batch_that_fits(catalog):
    costs = RooflineModel(catalog)
    best = predict(_m(regime="max_throughput", metric="output_tokens_per_s"), costs)[0]
    for batch in (1, 64, 256):
        est = estimate(EstimateRequest(model="llama-3.1-8b", device="h100-sxm", dtype="fp8", kv_dtype="fp8",
                                       tp=1, batch=batch, isl=1000, osl=500), catalog)
        assert best >= est.output_tokens_per_s * (1 - 1e-9)


def test_check_only_records_are_not_fit_targets():
    assert not _m(notes="vendor claim, LOW CONFIDENCE").fit_target
    assert not _m(speculative=True).fit_target
    assert not _m(regime="server").comparable
    assert not _m(regime="fixed_concurrency").comparable  # no concurrency given
    assert _m().fit_target


def test_fit_recovers_terms_from_measurements_the_model_made(catalog):
    """Records priced at known terms are fitted back to those terms, starting from the priors."""
    priors = load_catalog(apply_fit=False)
    truth = {"mfu": 0.55, "mbu": 0.6, "layer_latency_us": 20.0, "step_overhead_us": 800.0}
    shapes = [("max_throughput", 1000, 1000, "output_tokens_per_s", 1), ("max_throughput", 5000, 500, "output_tokens_per_s", 1),
              ("max_throughput", 128, 2048, "output_tokens_per_s", 1), ("single_user", 1000, 1000, "tpot_ms", 1),
              ("single_user", 128, 256, "tpot_ms", 1), ("single_user", 2000, 200, "ttft_ms", 1),
              ("single_user", 1000, 500, "tpot_ms", 2), ("fixed_concurrency", 1000, 500, "tpot_ms", 1)]
    costs = RooflineModel(priors)
    device = priors.device("h200").model_copy(update=truth)
    synthetic = []
    for i, (regime, isl, osl, metric, tp) in enumerate(shapes):
        for model_id in ("llama-3.1-8b", "llama-3.3-70b"):
            m = _m(id=f"s{i}-{model_id}", model=model_id, device="h200", devices=tp, tp=tp, regime=regime, isl=isl,
                   osl=osl, metric=metric, concurrency=16 if regime == "fixed_concurrency" else None)
            synthetic.append(m.model_copy(update={"value": float(predict(m, costs, [device])[0])}))
    fit = fit_family("nvidia-hopper", synthetic, priors, {k: 100.0 for k in FITTED_TERMS})  # priors barely pull
    # fp8 records pin the fp8 GEMM efficiency, mfu · fp8_compute_scale, not the bf16 peak on its own
    fp8_mfu = fit.params["mfu"] * fit.params["fp8_compute_scale"]
    assert fp8_mfu == pytest.approx(0.55 * device.fp8_compute_scale, rel=0.05)
    assert fit.params["mbu"] == pytest.approx(0.6, rel=0.05)
    assert fit.params["layer_latency_us"] == pytest.approx(20.0, rel=0.25)
    assert fit.params["step_overhead_us"] == pytest.approx(800.0, rel=0.25)
    assert fit.loss < 1e-3


def test_a_term_the_records_do_not_inform_stays_at_its_prior():
    priors = load_catalog(apply_fit=False)
    costs = RooflineModel(priors)
    # dense single-device records: nothing informs the MoE layer cost or the all-reduce floor
    records = []
    for i, (isl, osl) in enumerate([(1000, 500), (128, 2048), (4000, 200)]):
        m = _m(id=f"r{i}", device="h200", isl=isl, osl=osl)
        records.append(m.model_copy(update={"value": 1.3 * float(predict(m, costs)[0])}))
    fit = fit_family("nvidia-hopper", records, priors, load_families().prior_log_sd)
    prior = priors.device("h200")
    assert fit.params["moe_layer_latency_us"] == pytest.approx(prior.moe_layer_latency_us, rel=1e-3)
    assert fit.params["collective_latency_us"] == pytest.approx(prior.collective_latency_us, rel=1e-3)


def test_bands_are_quantiles_of_the_left_out_ratios():
    # ten records whose left-out predictions are 0.8 .. 1.25 of the measurement, all latencies
    comps = [Comparison(_m(id=f"c{i}", value=100.0), "fam", 100.0, 100.0 * r)
             for i, r in enumerate(np.linspace(0.8, 1.25, 10))]
    band = bands_from(comps)["fam"]["tpot"]
    measured_over_predicted = 1.0 / np.linspace(0.8, 1.25, 10)
    assert band[0] == pytest.approx(np.quantile(measured_over_predicted, 0.1), abs=1e-4)
    assert band[1] == pytest.approx(np.quantile(measured_over_predicted, 0.9), abs=1e-4)
    assert band[0] <= 1.0 <= band[1]


def test_summary_medians_by_hand():
    comps = [Comparison(_m(id=f"c{i}", value=100.0), "fam", p, q)
             for i, (p, q) in enumerate([(110.0, 120.0), (90.0, 70.0), (100.0, 105.0)])]
    s = summarise(comps)["overall"]
    assert s["median_ape_pct"] == pytest.approx(10.0)  # |10|, |-10|, |0|
    assert s["loo_median_ape_pct"] == pytest.approx(20.0)  # |20|, |-30|, |5|


def test_leave_one_out_refits_without_the_record():
    """A record the rest disagree with is predicted worse left out than in-sample."""
    priors = load_catalog(apply_fit=False)
    costs = RooflineModel(priors)
    records = []
    for i, (isl, osl) in enumerate([(1000, 500), (128, 2048), (4000, 200), (500, 1000)]):
        m = _m(id=f"r{i}", device="h200", isl=isl, osl=osl)
        scale = 2.0 if i == 0 else 1.0  # record 0 measured twice as slow as the rest imply
        records.append(m.model_copy(update={"value": scale * float(predict(m, costs)[0])}))
    cal = calibrate(records, priors, load_families().prior_log_sd, leave_one_out=True)
    outlier = next(c for c in cal.comparisons if c.measurement.id == "r0")
    assert abs(outlier.loo_error_pct) > abs(outlier.error_pct)
    assert isinstance(cal, Calibration)


def test_linearised_leave_one_out_matches_exact_refits():
    """The PRESS residuals the CLI prints agree with refitting the family once per record."""
    priors = load_catalog(apply_fit=False)
    records = [m for m in load_measurements() if priors.device(m.device).family == "amd-cdna3"]
    assert len(records) >= 20
    sd = load_families().prior_log_sd
    fast = {c.measurement.id: c.loo_error_pct for c in calibrate(records, priors, sd, leave_one_out=True).comparisons}
    exact = {c.measurement.id: c.loo_error_pct for c in calibrate(records, priors, sd, leave_one_out="exact").comparisons}
    assert fast.keys() == exact.keys()
    for record_id, value in fast.items():
        if value is not None:
            assert value == pytest.approx(exact[record_id], abs=1.0), record_id


# ------------------------------------------------------------------ reporting, by hand on synthetic comparisons
def _c(id, value, predicted, loo=None, family="fam", **kw):
    return Comparison(_m(id=id, value=value, **kw), family, predicted, loo)


def test_summarise_by_family_source_and_checks_by_hand():
    comps = [_c("a1", 10.0, 11.0, 12.0, family="A", source="Alpha lab, 2025 blog post"),
             _c("a2", 20.0, 15.0, 14.0, family="A", source="Alpha lab (second run)"),
             _c("b1", 100.0, 95.0, family="B", source="Beta"),
             _c("k1", 5.0, 4.0, family="A", source="Kappa", notes="vendor claim, LOW CONFIDENCE")]
    s = summarise(comps)
    # fit targets: errors +10, −25, −5 %; left out +20, −30 %
    assert s["overall"] == {"records": 3, "median_ape_pct": pytest.approx(10.0), "loo_median_ape_pct": pytest.approx(25.0),
                            "loo_p90_ape_pct": pytest.approx(29.0), "median_signed_error_pct": pytest.approx(-5.0)}
    assert s["checks"]["records"] == 1 and s["checks"]["median_ape_pct"] == pytest.approx(20.0)
    assert s["checks"]["loo_median_ape_pct"] is None and s["checks"]["loo_p90_ape_pct"] is None
    assert s["families"]["A"]["median_ape_pct"] == pytest.approx(17.5)
    assert s["families"]["A"]["median_signed_error_pct"] == pytest.approx(-5.0)  # left out where known: +20, −30
    assert s["families"]["B"] == {"records": 1, "median_ape_pct": pytest.approx(5.0), "loo_median_ape_pct": None,
                                  "loo_p90_ape_pct": None, "median_signed_error_pct": pytest.approx(-5.0)}
    assert list(s["sources"]) == ["Alpha lab", "Beta"]
    assert s["sources"]["Alpha lab"]["records"] == 2
    assert s["mean_of_source_loo_medians_pct"] == pytest.approx(25.0)  # Beta has no left-out error
    assert summarise([_c("b1", 100.0, 95.0)])["mean_of_source_loo_medians_pct"] is None
    assert median_ape(comps[:2]) == pytest.approx(17.5)


def test_source_of_is_the_publication_before_any_comma_or_parenthesis():
    assert source_of(_m(source="vLLM blog, 2025-01")) == "vLLM blog"
    assert source_of(_m(source="NVIDIA NIM docs (Llama 3.1 table)")) == "NVIDIA NIM docs"
    assert source_of(_m(source="  padded name  ")) == "padded name"
    assert source_of(_m(source="x" * 80)) == "x" * 60


def test_measured_over_predicted_inverts_rates():
    assert _measured_over_predicted(_m(metric="tpot_ms", value=12.0), 10.0) == pytest.approx(1.2)
    assert _measured_over_predicted(_m(metric="output_tokens_per_s_per_user", value=100.0), 80.0) == pytest.approx(0.8)
    assert _measured_over_predicted(_m(metric="output_tokens_per_s", value=100.0), 80.0) == pytest.approx(0.8)


def _calibration(comps, bands):
    return Calibration(fits={}, comparisons=comps, bands=bands, coverage={})


def test_band_coverage_counts_fit_targets_inside_their_familys_band():
    bands = {"fam": {"tpot": (0.9, 1.2), "throughput": (0.8, 1.0)}}
    comps = [_c("check", 20.0, 15.0, notes="LOW CONFIDENCE"),  # not a fit target: not counted
             _c("in", 10.0, 11.0),  # measured/predicted 0.909: inside
             _c("out", 20.0, 15.0),  # 1.333: outside
             _c("rate", 100.0, 95.0, metric="output_tokens_per_s"),  # a rate: predicted/measured 0.95, inside
             _c("other", 20.0, 15.0, family="no-band"),  # no band for its family: not counted
             _c("ttft", 20.0, 15.0, metric="ttft_ms")]  # no ttft band: not counted
    cal = _calibration(comps, bands)
    assert cal.band_coverage_pct() == pytest.approx(100.0 * 2 / 3)
    assert cal.summary()["band_coverage_pct"] == pytest.approx(100.0 * 2 / 3)
    assert cal.summary()["overall"]["records"] == 5
    assert _calibration(comps[:1] + comps[4:], bands).band_coverage_pct() is None
    edges = [_c("low", 9.0, 10.0), _c("high", 12.0, 10.0)]  # exactly 0.9 and 1.2: a band includes its bounds
    assert _calibration(edges, bands).band_coverage_pct() == 100.0


def test_bands_need_two_ratios_and_take_a_familys_own_from_five():
    # two rate records (predicted/measured 0.8 and 1.25) pooled: the band is their p10–p90
    two = [_c(f"r{i}", 100.0, 100.0, loo, family=f"f{i}", metric="output_tokens_per_s")
           for i, loo in enumerate((80.0, 125.0))]
    assert bands_from(two)["f0"]["throughput"] == pytest.approx((0.845, 1.205))  # 0.8 + 0.1·0.45, 0.8 + 0.9·0.45
    assert bands_from(two[:1]) == {}
    assert bands_from([_c("no-loo", 100.0, 100.0, family="f0", metric="output_tokens_per_s")] + two) == bands_from(two)
    # five of a family's own latency ratios 1.0 .. 1.4 (others pooled elsewhere do not count)
    own = [_c(f"o{i}", 100.0 * r, 100.0, 100.0) for i, r in enumerate((1.0, 1.1, 1.2, 1.3, 1.4))]
    far = [_c(f"x{i}", 300.0, 100.0, 100.0, family="far") for i in range(5)]
    assert bands_from(own + far)["fam"]["tpot"] == pytest.approx((1.0, 1.36))
    assert bands_from(own[:4] + far)["fam"]["tpot"][1] == pytest.approx(3.0)  # four: the pooled ratios
    # TTFT records band on their own; bounds are rounded to 4 decimals (p90 of 1, 1.1, 1.23456: 1.1 + 0.8·0.13456)
    ttft = [_c(f"t{i}", 100.0 * r, 100.0, 100.0, metric="ttft_ms") for i, r in enumerate((1.0, 1.1, 1.23456))]
    assert bands_from(ttft)["fam"] == {"ttft": (1.0, 1.2076)}
    # p10 of 0.876543, 1, 1.1: 0.876543 + 0.2·0.123457 = 0.9012344
    low = [_c(f"l{i}", 100.0 * r, 100.0, 100.0, metric="ttft_ms") for i, r in enumerate((0.876543, 1.0, 1.1))]
    assert bands_from(low)["fam"]["ttft"][0] == 0.9012


def test_fit_body_is_the_calibration_rounded_for_fit_yaml():
    comps = [_c("c1", 10.0, 11.23456, 12.34567), _c("c2", 20.0, 18.0),
             _c("c3", 5.0, 4.0, family="claims", notes="LOW CONFIDENCE")]
    fits = {"fam": FamilyFit("fam", {"mfu": 0.12345678, "mbu": 0.5}, ["c1", "c2"], 0.0123456789),
            "claims": FamilyFit("claims", {"mfu": 0.3}, ["c3"], 0.5)}
    coverage = {"fam": {"dtypes": ["fp8"], "max_tp": 1, "max_isl": 1000, "max_batch": 1}}
    cal = Calibration(fits=fits, comparisons=comps, bands={"fam": {"tpot": (0.9, 1.2)}}, coverage=coverage)
    assert fit_body(cal, "2026-12-01", "1.2.3") == {
        "date": "2026-12-01",
        "cost_model": "siliconmix 1.2.3",
        "summary": {"records": 2, "median_ape_pct": pytest.approx(11.1728), "loo_median_ape_pct": pytest.approx(23.4567)},
        "families": [
            {"name": "fam", "params": {"mfu": 0.123457, "mbu": 0.5}, "records": ["c1", "c2"],
             "fitted_on_check_records": False, "loss": 0.012346, "bands": {"tpot": [0.9, 1.2]}, "coverage": coverage["fam"]},
            {"name": "claims", "params": {"mfu": 0.3}, "records": ["c3"], "fitted_on_check_records": True, "loss": 0.5,
             "bands": {}, "coverage": {}},
        ],
        "residuals_predicted_over_measured": {"c1": {"in_sample": 1.1235, "loo": 1.2346}, "c2": {"in_sample": 0.9, "loo": None},
                                              "c3": {"in_sample": 0.8, "loo": None}},
    }


def test_coverage_spans_the_fit_targets_dtypes_tp_prompt_and_batch(catalog):
    comps = [_c("r1", 10.0, 10.0, tp=2, devices=2),
             _c("r2", 10.0, 10.0, weights_dtype="bf16", kv_dtype="bf16", tp=1, pp=2, devices=2, isl=4000,
                regime="fixed_concurrency", concurrency=16),
             _c("r3", 10.0, 10.0, tp=8, devices=8, isl=9000, notes="LOW CONFIDENCE")]  # a check: not coverage
    assert coverage_of(comps, RooflineModel(catalog)) == {
        "fam": {"dtypes": ["bf16", "fp8"], "max_tp": 2, "max_isl": 4000, "max_batch": 16}}
    # no stated TP: 70B in bf16 needs 2 H100s
    untold = _c("r5", 10.0, 10.0, model="llama-3.3-70b", weights_dtype="bf16", kv_dtype="bf16", tp=None, devices=8)
    assert coverage_of(comps + [untold], RooflineModel(catalog))["fam"]["max_tp"] == 2
    best = _c("r4", 10.0, 10.0, regime="max_throughput", metric="output_tokens_per_s", isl=2000, osl=2000)
    batch = chosen_batch(best.measurement, RooflineModel(catalog))
    assert batch > 16
    assert coverage_of(comps + [best], RooflineModel(catalog))["fam"]["max_batch"] == batch


# ------------------------------------------------------------------ prediction and fit edge cases
def test_prediction_uses_the_records_kv_dtype(catalog):
    est = estimate(EstimateRequest(model="llama-3.1-8b", device="h100-sxm", dtype="fp8", kv_dtype="bf16",
                                   tp=1, batch=1, isl=8000, osl=500), catalog)
    got = predict(_m(kv_dtype="bf16", isl=8000), RooflineModel(catalog))[0]
    assert got == pytest.approx(est.tpot_ms, rel=1e-9)
    assert got != pytest.approx(predict(_m(isl=8000), RooflineModel(catalog))[0], rel=1e-3)


def test_a_per_user_speed_without_lengths_is_predicted_at_the_assumed_ones(catalog):
    est = estimate(EstimateRequest(model="llama-3.1-8b", device="h100-sxm", dtype="fp8", kv_dtype="fp8",
                                   tp=1, batch=1, isl=1000, osl=500), catalog)
    m = _m(isl=None, osl=None, metric="output_tokens_per_s_per_user")
    assert m.comparable and not m.fit_target
    assert predict(m, RooflineModel(catalog))[0] == pytest.approx(est.output_tokens_per_s_per_user, rel=1e-9)


def test_replica_devices_without_a_stated_tp(catalog):
    costs = RooflineModel(catalog)
    assert replica_devices(_m(tp=2, pp=2, devices=8), costs) == 4
    # 70B in bf16 (141 GB) on 72 GB-usable H100s: the fewest power of two that holds it is 2
    assert replica_devices(_m(model="llama-3.3-70b", weights_dtype="bf16", kv_dtype="bf16", tp=None, devices=8),
                           costs) == 2
    est = estimate(EstimateRequest(model="llama-3.3-70b", device="h100-sxm", dtype="bf16", kv_dtype="bf16",
                                   tp=2, batch=1, isl=1000, osl=500), catalog)
    untold = _m(model="llama-3.3-70b", weights_dtype="bf16", kv_dtype="bf16", tp=None, devices=8)
    assert predict(untold, costs)[0] == pytest.approx(est.tpot_ms, rel=1e-9)  # priced at those 2
    # an SRAM machine runs the whole published system as one pipeline
    assert replica_devices(_m(model="llama-3.3-70b", device="groq-lpu", tp=None, devices=576), costs) == 576
    # the weights' dtype sizes the replica, not the KV's
    assert replica_devices(_m(model="llama-3.3-70b", weights_dtype="bf16", kv_dtype="fp8", tp=None, devices=8),
                           costs) == 2
    # the published device count caps the search: 405B in fp8 needs 8 H100s, the record used 2; 70B bf16, 1
    assert replica_devices(_m(model="llama-3.1-405b", tp=None, devices=2), costs) == 2
    assert replica_devices(_m(model="llama-3.3-70b", weights_dtype="bf16", kv_dtype="bf16", tp=None, devices=1),
                           costs) == 1
    # nothing holds 405B in bf16 within 4 H100s: the published count
    assert replica_devices(_m(model="llama-3.1-405b", weights_dtype="bf16", kv_dtype="bf16", tp=None, devices=4),
                           costs) == 4


def test_a_single_users_tokens_per_second_is_one_over_tpot(catalog):
    costs = RooflineModel(catalog)
    rate = predict(_m(metric="output_tokens_per_s"), costs)[0]
    assert rate == pytest.approx(1000.0 / predict(_m(), costs)[0], rel=1e-9)


def test_fixed_concurrency_below_one_request_per_replica_runs_one(catalog):
    costs = RooflineModel(catalog)
    one = predict(_m(regime="fixed_concurrency", concurrency=1, devices=2, metric="output_tokens_per_s"), costs)[0]
    est = estimate(EstimateRequest(model="llama-3.1-8b", device="h100-sxm", dtype="fp8", kv_dtype="fp8",
                                   tp=1, batch=1, isl=1000, osl=500), catalog)
    assert one == pytest.approx(2 * est.output_tokens_per_s, rel=1e-9)  # 2 replicas of batch 1


def test_replicas_are_whole(catalog):
    costs = RooflineModel(catalog)
    m = _m(regime="max_throughput", metric="output_tokens_per_s", tp=2, devices=3)
    assert predict(m, costs)[0] == pytest.approx(predict(m.model_copy(update={"devices": 2}), costs)[0])


def test_a_sub_token_output_length_predicts_one_output_token(catalog):
    # osl 0.4 rounds to zero tokens; the prediction runs one, as estimate does at osl 1
    est = estimate(EstimateRequest(model="llama-3.1-8b", device="h100-sxm", dtype="fp8", kv_dtype="fp8",
                                   tp=1, batch=1, isl=1000, osl=1), catalog)
    assert predict(_m(osl=0.4), RooflineModel(catalog))[0] == pytest.approx(est.tpot_ms, rel=1e-9)


def test_max_throughput_where_nothing_fits_predicts_no_throughput(catalog):
    # 405B in bf16 (810 GB) on one 80 GB H100: no batch fits, so the rate is the 1e-9 tokens/s floor
    m = _m(model="llama-3.1-405b", weights_dtype="bf16", kv_dtype="bf16", regime="max_throughput",
           metric="output_tokens_per_s")
    assert predict(m, RooflineModel(catalog))[0] == pytest.approx(1e-9)


def test_chosen_batch_is_the_batch_max_throughput_is_priced_at(catalog):
    costs = RooflineModel(catalog)
    # long prompts, short outputs: the prompts folded into every step make a batch below the memory's limit the best
    # (72 GB usable − 8.03 GB of fp8 weights) / (8,032 paged tokens · 64 KiB of fp8 KV) = 121 requests
    m = _m(regime="max_throughput", metric="output_tokens_per_s", isl=8000, osl=50)
    batch = chosen_batch(m, costs)
    est = estimate(EstimateRequest(model="llama-3.1-8b", device="h100-sxm", dtype="fp8", kv_dtype="fp8",
                                   tp=1, batch=batch, isl=8000, osl=50), catalog)
    assert 1 < batch < 121
    assert predict(m, costs)[0] == pytest.approx(est.output_tokens_per_s, rel=1e-9)
    assert chosen_batch(_m(), costs) == 1
    assert chosen_batch(_m(regime="fixed_concurrency", concurrency=24, devices=4, tp=2), costs) == 12
    assert chosen_batch(_m(regime="fixed_concurrency", concurrency=1, devices=2, tp=1), costs) == 1  # 0.5 → 1
    assert chosen_batch(m.model_copy(update={"tp": None}), costs) == batch  # 8B fp8 needs one H100
    # a bf16 KV cache holds half the requests of an fp8 one: a smaller batch (or equal) where memory binds
    long = _m(regime="max_throughput", metric="output_tokens_per_s", isl=8000, osl=2000)
    assert chosen_batch(long.model_copy(update={"kv_dtype": "bf16"}), costs) < chosen_batch(long, costs)


def test_fit_bounds_are_the_bounds_of_each_term():
    lo, hi = _x_bounds()
    assert _from_x(lo) == pytest.approx({k: BOUNDS[k][0] for k in FITTED_TERMS})
    assert _from_x(hi) == pytest.approx({k: BOUNDS[k][1] for k in FITTED_TERMS})
    # a latency term of zero is fittable: log(0 µs + 1) = 0
    assert _to_x({**{k: BOUNDS[k][1] for k in FITTED_TERMS}, "layer_latency_us": 0.0})[
        FITTED_TERMS.index("layer_latency_us")] == 0.0
    # outside the bounds, terms are clipped
    assert _from_x(hi + 1.0) == pytest.approx({k: BOUNDS[k][1] for k in FITTED_TERMS})


def test_a_family_without_records_keeps_its_priors():
    priors = load_catalog(apply_fit=False)
    fit = fit_family("nvidia-ampere", [], priors, load_families().prior_log_sd)  # a one-device family
    a100 = priors.device("a100-80gb")
    assert fit.params == {k: float(getattr(a100, k)) for k in FITTED_TERMS}
    assert fit.params == family_priors(priors, "nvidia-ampere")
    assert (fit.name, fit.records, fit.loss) == ("nvidia-ampere", [], 0.0)
    assert fit.x == pytest.approx(_to_x(fit.params))


def test_the_fit_stays_inside_the_bounds():
    """Records 3x faster than the priors allow push the efficiencies against their upper bound, not past it."""
    priors = load_catalog(apply_fit=False)
    costs = RooflineModel(priors)
    records = []
    for i, (isl, osl) in enumerate([(1000, 500), (128, 2048), (4000, 200)]):
        m = _m(id=f"r{i}", device="h200", isl=isl, osl=osl)
        records.append(m.model_copy(update={"value": float(predict(m, costs)[0]) / 3.0}))
    fit = fit_family("nvidia-hopper", records, priors, {k: 100.0 for k in FITTED_TERMS})
    lo, hi = _x_bounds()
    assert np.all(fit.x <= hi + 1e-12) and np.all(fit.x >= lo - 1e-12)
    assert fit.params["mbu"] == pytest.approx(1.0)
    assert fit.name == "nvidia-hopper" and fit.records == ["r0", "r1", "r2"]
    # the loss is the sum of squares at the fit: records' log errors and the priors' pulls
    fitted = RooflineModel(fitted_catalog(priors, {"nvidia-hopper": fit}))
    data = sum(math.log(float(predict(r, fitted)[0]) / r.value) ** 2 for r in records)
    pulls = float(np.sum(((fit.x - _to_x(family_priors(priors, "nvidia-hopper"))) / 100.0) ** 2))
    assert fit.loss == pytest.approx(data + pulls, rel=1e-6)


def test_a_family_with_only_check_records_is_fitted_on_its_non_speculative_ones():
    priors = load_catalog(apply_fit=False)
    costs = RooflineModel(priors)
    claim = _m(id="claim", device="h200", notes="vendor page, LOW CONFIDENCE")
    claim = claim.model_copy(update={"value": float(predict(claim, costs)[0])})
    spec = claim.model_copy(update={"id": "spec", "speculative": True})
    target = _m(id="target", device="mi300x", weights_dtype="fp8", tp=None)
    target = target.model_copy(update={"value": float(predict(target, costs)[0])})
    other_claim = target.model_copy(update={"id": "other-claim", "notes": "LOW CONFIDENCE"})
    server = target.model_copy(update={"id": "server", "regime": "server"})  # not comparable: left out entirely
    cal = calibrate([claim, spec, target, other_claim, server], priors, load_families().prior_log_sd,
                    leave_one_out=False)
    assert cal.fits["nvidia-hopper"].records == ["claim"]
    assert cal.fits["amd-cdna3"].records == ["target"]  # a family with a fit target is fitted on it alone
    assert cal.bands == {}  # no left-out residuals, no bands
    assert cal.coverage == {"amd-cdna3": {"dtypes": ["fp8"], "max_tp": 1, "max_isl": 1000, "max_batch": 1}}
    assert {c.measurement.id: c.family for c in cal.comparisons} == {
        "claim": "nvidia-hopper", "spec": "nvidia-hopper", "target": "amd-cdna3", "other-claim": "amd-cdna3"}


def test_max_throughput_of_an_expert_parallel_record_is_its_chosen_batch_at_fixed_concurrency(catalog):
    """The batch chosen_batch reports, run as a fixed-concurrency record, gives the max-throughput prediction:
    both price the same steady state with the record's expert parallelism."""
    costs = RooflineModel(catalog)
    # Qwen3-235B in fp8 over TP4: its dense part whole on each EP rank leaves room for fewer requests
    m = _m(model="qwen3-235b-a22b", tp=4, ep=4, devices=8, regime="max_throughput", metric="output_tokens_per_s",
           isl=8000, osl=1000)
    batch = chosen_batch(m, costs)
    fixed = m.model_copy(update={"regime": "fixed_concurrency", "concurrency": 2 * batch})  # two replicas
    assert predict(fixed, costs)[0] == pytest.approx(predict(m, costs)[0], rel=1e-9)
    without_ep = m.model_copy(update={"ep": None})
    assert predict(without_ep, costs)[0] != pytest.approx(predict(m, costs)[0], rel=1e-3)


def test_linearised_loo_is_the_press_residual_by_hand():
    # fitting one mean to three points: leverage 1/3 each, so a left-out residual is r / (2/3)
    jacobian = np.ones((3, 1))
    assert linearised_loo(np.asarray([1.0, -1.0, 0.0]), jacobian, 3) == pytest.approx([1.5, -1.5, 0.0])
    # a prior row is a fourth point that is never left out: leverage 1/4, r / (3/4); its own row is not returned
    loo = linearised_loo(np.asarray([1.0, -1.0, 0.0, 0.5]), np.ones((4, 1)), 3)
    assert loo == pytest.approx([4 / 3, -4 / 3, 0.0])


def test_exact_leave_one_out_refits_and_agrees_with_the_linearised_one():
    """Small and fast beside test_linearised_leave_one_out_matches_exact_refits: four H200 records, one off."""
    priors = load_catalog(apply_fit=False)
    costs = RooflineModel(priors)
    records = []
    for i, (isl, osl) in enumerate([(1000, 500), (128, 2048), (4000, 200), (500, 1000)]):
        m = _m(id=f"r{i}", device="h200", isl=isl, osl=osl)
        records.append(m.model_copy(update={"value": (1.5, 0.8, 1.1, 0.95)[i] * float(predict(m, costs)[0])}))
    sd = load_families().prior_log_sd
    exact = {c.measurement.id: c for c in calibrate(records, priors, sd, leave_one_out="exact").comparisons}
    fast = {c.measurement.id: c for c in calibrate(records, priors, sd, leave_one_out=True).comparisons}
    none = calibrate(records, priors, sd, leave_one_out=False).comparisons
    assert all(c.predicted_loo is None for c in none)
    assert abs(exact["r0"].loo_error_pct) > abs(exact["r0"].error_pct)
    # "exact" is a refit without the record (the linearised value differs from it by ~1e-6 here)
    for i, record in enumerate(records):
        refit = fit_family("nvidia-hopper", records[:i] + records[i + 1:], priors, sd)
        alone = RooflineModel(fitted_catalog(priors, {"nvidia-hopper": refit}))
        assert exact[record.id].predicted_loo == pytest.approx(float(predict(record, alone)[0]), rel=1e-7), record.id
    default = calibrate(records, priors, sd).comparisons  # linearised by default
    assert [c.predicted_loo for c in default] == pytest.approx([fast[c.measurement.id].predicted_loo for c in default])
    for record_id, c in exact.items():
        assert c.predicted == pytest.approx(fast[record_id].predicted)
        assert c.loo_error_pct == pytest.approx(fast[record_id].loo_error_pct, abs=1.0), record_id
