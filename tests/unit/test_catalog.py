"""The catalog loads, is complete, every number has a source, and bad entries fail with file/entry/field."""

import shutil
from pathlib import Path

import pytest

from planner.catalog import CatalogError, UnknownId, load_catalog
from planner.catalog import DEFAULT_CATALOG_DIR

REQUIRED_DEVICES = (
    "a100-80gb h100-sxm h200 b200 gb200 l40s mi300x mi325x mi355x gaudi3 trn2 inf2 "
    "tpu-v5e tpu-v6e cs-3 groq-lpu dmatrix-corsair sn40l"
).split()
REQUIRED_MODELS = (
    "llama-3.1-8b llama-3.3-70b llama-3.1-405b llama-3.2-1b llama-3.2-3b mixtral-8x7b "
    "qwen3-235b-a22b deepseek-v3 gpt-oss-120b"
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
