"""The catalog loads, is complete, every number has a source, and bad entries fail with file/entry/field."""

import shutil
from pathlib import Path

import pytest

from planner.catalog import CatalogError, UnknownId, load_catalog
from planner.catalog import DEFAULT_CATALOG_DIR

REQUIRED_DEVICES = (
    "a100-80gb h100-sxm h200 b200 gb200 l40s mi300x mi325x mi355x gaudi3 trn2 inf2 "
    "tpu-v5e tpu-v6e cs-3 groq-lpu dmatrix-corsair sn40l "
    "gh200 h100-nvl h100-pcie gaudi2 l4 a10g h20 b300 gb300 tpu-v5p tpu-v7 trn1 trn3"
).split()
REQUIRED_MODELS = (
    "llama-3.1-8b llama-3.3-70b llama-3.1-405b llama-3.2-1b llama-3.2-3b mixtral-8x7b "
    "qwen3-235b-a22b deepseek-v3 gpt-oss-120b "
    "llama-2-7b llama-2-13b qwen3-32b qwen3-30b-a3b gpt-oss-20b kimi-k2"
).split()


def test_required_ids_present(catalog):
    assert set(REQUIRED_DEVICES) <= set(catalog.devices)
    assert set(REQUIRED_MODELS) <= set(catalog.models)


@pytest.mark.parametrize("device_id", REQUIRED_DEVICES)
def test_every_device_number_has_a_source(catalog, device_id):
    device = catalog.device(device_id)
    sourced = set(device.provenance)
    for required in ("tdp_w", "price_usd", "price_usd_per_hour", "efficiency.mfu", "efficiency.mbu",
                     "efficiency.layer_latency_us", "scale_up.bandwidth_gb_s", "scale_up.latency_us",
                     "scale_up.domain_size", "node.devices_per_node", "node.overhead_w"):
        assert required in sourced, f"{device_id}: {required} has no source"
    for dtype in device.peak_dense_tflops:
        assert f"peak_dense_tflops.{dtype}" in sourced
    assert all(len(p.source) > 10 for p in device.provenance.values())


def test_sram_machines_keep_weights_in_sram(catalog):
    for device_id in ("cs-3", "groq-lpu"):
        assert catalog.device(device_id).is_sram_machine
    assert not catalog.device("h100-sxm").is_sram_machine


def test_unknown_id_lists_known_ids(catalog):
    with pytest.raises(UnknownId) as info:
        catalog.device("h1000")
    assert "h100-sxm" in str(info.value)


def _copy_catalog(tmp_path: Path) -> Path:
    root = tmp_path / "catalogs"
    shutil.copytree(DEFAULT_CATALOG_DIR / "hardware", root / "hardware")
    shutil.copytree(DEFAULT_CATALOG_DIR / "models", root / "models")
    return root


def test_malformed_hardware_entry_names_file_entry_and_field(tmp_path):
    root = _copy_catalog(tmp_path)
    path = root / "hardware" / "nvidia.yaml"
    text = path.read_text()
    assert "tdp_w: {value: 700" in text
    path.write_text(text.replace("tdp_w: {value: 700", "tdp_w: {value: -700", 1))
    with pytest.raises(CatalogError) as info:
        load_catalog(root)
    message = str(info.value)
    assert "nvidia.yaml" in message and "tdp_w" in message and "'h" in message


def test_unsourced_number_is_rejected(tmp_path):
    root = _copy_catalog(tmp_path)
    path = root / "hardware" / "amd.yaml"
    text = path.read_text()
    start = text.index("tdp_w:")
    end = text.index("\n", start)
    path.write_text(text[:start] + "tdp_w: 750" + text[end:])
    with pytest.raises(CatalogError, match="no source"):
        load_catalog(root)


def test_malformed_model_names_file_and_field(tmp_path):
    root = _copy_catalog(tmp_path)
    path = root / "models" / "llama-3.1-8b.yaml"
    path.write_text(path.read_text().replace("layers: 32", "layers: 0", 1))
    with pytest.raises(CatalogError) as info:
        load_catalog(root)
    assert "llama-3.1-8b.yaml" in str(info.value) and "layers" in str(info.value)


def test_a_source_that_says_estimate_is_flagged_as_one(catalog):
    for device in catalog.devices.values():
        for field, provenance in device.provenance.items():
            if provenance.source.lower().startswith("estimate"):
                assert provenance.estimate, f"{device.id}.{field}: source reads as an estimate but estimate is false"


# Dense rates written out from the datasheets' sparse figures (sparse / 2), so a sparse value slipping in fails.
DENSE_FROM_SPARSE = [
    ("h100-pcie", "bf16", 756), ("h100-pcie", "fp8", 1513),   # 1,513 / 3,026 sparse
    ("h100-nvl", "bf16", 835), ("h100-nvl", "fp8", 1671),     # 1,671 / 3,341 sparse
    ("gh200", "fp8", 1979), ("h20", "fp8", 296),
    ("l4", "bf16", 121), ("l4", "fp8", 242),                   # 242 / 485 sparse
    ("b300", "fp8", 4500), ("gb300", "fp4", 15000),            # 9,000 sparse; 1.08 EF dense / 72
    ("trn2", "bf16", 667), ("trn3", "bf16", 671),              # Neuron docs list sparse separately
    ("tpu-v7", "fp8", 4614), ("tpu-v5p", "bf16", 459),
]


@pytest.mark.parametrize("device_id, dtype, dense", DENSE_FROM_SPARSE)
def test_peak_rates_are_dense(catalog, device_id, dtype, dense):
    assert catalog.device(device_id).peak_dense_tflops[dtype] == dense


def test_cs3_compute_is_not_the_sparse_headline(catalog):
    cs3 = catalog.device("cs-3")
    # 125 PF 'peak AI' counts unstructured sparsity (~8x); halving it (62.5 PF) overstated dense compute 4x
    assert cs3.peak_dense_tflops["bf16"] == 15000
    assert cs3.provenance["peak_dense_tflops.bf16"].estimate


# Per-direction scale-up bandwidth (GB/s) from bidirectional vendor figures, written out by hand.
PER_DIRECTION = [
    ("h100-nvl", 300),   # NVLink bridge 600 bidirectional
    ("h100-pcie", 64),   # PCIe Gen5 x16 128 bidirectional
    ("gh200", 450), ("h20", 450), ("b300", 900), ("gb300", 900),
    ("tpu-v5p", 600),    # ICI 1,200 GBps bidirectional
    ("tpu-v7", 600),     # ICI 1.2 TB/s
    ("gaudi2", 262.5),   # 21 x 100 GbE
    ("l4", 32), ("a10g", 32),
]


@pytest.mark.parametrize("device_id, gb_s", PER_DIRECTION)
def test_scale_up_bandwidth_is_per_direction(catalog, device_id, gb_s):
    assert catalog.device(device_id).scale_up.bandwidth_gb_s == gb_s


# Published totals (billions) and the layer/expert shape each new config must reproduce, within 3 %.
NEW_MODELS = [
    ("llama-2-7b", 6.74), ("llama-2-13b", 13.0), ("qwen3-32b", 32.8),
    ("qwen3-30b-a3b", 30.5), ("gpt-oss-20b", 20.9), ("kimi-k2", 1000),
]


@pytest.mark.parametrize("model_id, published_total_b", NEW_MODELS)
def test_new_model_parameter_totals_match_their_cards(catalog, model_id, published_total_b):
    from planner.perf import memory

    assert memory.total_params(catalog.model(model_id)) / 1e9 == pytest.approx(published_total_b, rel=0.03)


def test_new_model_shapes(catalog):
    kimi = catalog.model("kimi-k2")
    assert (kimi.attention, kimi.attention_heads, kimi.moe.experts, kimi.moe.dense_layers) == ("mla", 64, 384, 1)
    assert kimi.head_dim == kimi.mla.qk_nope_head_dim + kimi.mla.qk_rope_head_dim
    oss = catalog.model("gpt-oss-20b")
    assert (oss.layers, oss.sliding_window_layers, oss.sliding_window_tokens, oss.moe.experts) == (24, 12, 128, 32)
    a3b = catalog.model("qwen3-30b-a3b")
    assert (a3b.ffn_size, a3b.kv_heads, a3b.moe.expert_ffn_size, a3b.moe.experts_active) == (0, 4, 768, 8)
    assert catalog.model("llama-2-7b").kv_heads == 32 and catalog.model("llama-2-13b").kv_heads == 40
