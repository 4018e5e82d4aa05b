"""The calibration record: at least 10 sourced measurements, the error table, the fit applied to the catalog."""

import pytest

from planner.calibration import Measurement, compare, fit_family, median_ape, predict
from planner.catalog import load_catalog, load_measurements


@pytest.fixture(scope="module")
def record():
    return load_measurements()


def test_at_least_ten_sourced_measurements(record):
    measurements, families = record
    assert len(measurements) >= 10
    assert all(m.source and m.device and m.model for m in measurements)
    assert {f.name for f in families} >= {"nvidia-hopper", "nvidia-blackwell"}


def test_error_table_and_median_ape(record, catalog):
    measurements, _ = record
    comparisons = compare(measurements, catalog)
    mape = median_ape(comparisons)
    print(f"\nmedian APE over {len(comparisons)} records: {mape:.1f}%")
    for c in comparisons:
        print(f"  {c.measurement.id:55s} measured {c.measurement.value:10.1f} predicted {c.predicted:10.1f} {c.error_pct:+6.0f}%")
    # a regression guard on the recorded fit, not a target the factors were tuned to
    assert mape < 30.0


def test_fit_is_applied_and_named_in_provenance(catalog):
    h100 = catalog.device("h100-sxm")
    assert "fit.yaml" in h100.provenance["efficiency.mbu"].source
    priors = load_catalog(apply_fit=False).device("h100-sxm")
    assert "fit.yaml" not in priors.provenance["efficiency.mbu"].source


def test_single_user_prediction_is_inverse_tpot(catalog):
    m = Measurement(id="t", source="test", date=None, model="llama-3.1-8b", device="h100-sxm", devices=1, tp=1,
                    weights_dtype="bf16", kv_dtype="bf16", framework=None, regime="single_user", isl=1000, osl=500,
                    metric="tpot_ms", value=10.0)
    tpot_ms = predict(m, catalog)[0]
    per_user = predict(m.model_copy(update={"metric": "output_tokens_per_s_per_user"}), catalog)[0]
    assert per_user == pytest.approx(1000.0 / tpot_ms)


def test_fit_recovers_factors_from_synthetic_measurements(catalog):
    """Measurements made by the model itself at known factors are fitted back to those factors."""
    from planner.calibration import Family

    truth = {"mfu": 0.5, "mbu": 0.6, "layer_latency_us": 10.0}
    device = catalog.device("h200").model_copy(update=truth)
    shapes = [("max_throughput", 1000, 1000, "output_tokens_per_s"), ("max_throughput", 5000, 500, "output_tokens_per_s"),
              ("max_throughput", 128, 2048, "output_tokens_per_s"), ("single_user", 1000, 1000, "tpot_ms")]
    synthetic = []
    for i, (regime, isl, osl, metric) in enumerate(shapes):
        m = Measurement(id=f"s{i}", source="synthetic", date=None, model="llama-3.3-70b", device="h200", devices=1, tp=1,
                        weights_dtype="fp8", kv_dtype="fp8", framework=None, regime=regime, isl=isl, osl=osl,
                        metric=metric, value=1.0)
        synthetic.append(m.model_copy(update={"value": float(predict(m, catalog, [device])[0])}))
    fit = fit_family(Family(name="t", devices=("h200",)), synthetic, catalog)
    assert fit["mfu"] == pytest.approx(0.5, abs=0.05)
    assert fit["mbu"] == pytest.approx(0.6, abs=0.05)
    assert fit["layer_latency_us"] == pytest.approx(10.0, abs=5.0)
