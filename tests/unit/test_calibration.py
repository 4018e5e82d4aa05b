"""The calibration: records load, predictions are what `estimate` reports, the fit recovers known terms,
leave-one-out is a real refit, bands bracket the residuals, and fit.yaml is what a refit writes."""

import numpy as np
import pytest

from planner.calibration import (
    Calibration,
    Comparison,
    Measurement,
    bands_from,
    calibrate,
    fit_family,
    predict,
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
