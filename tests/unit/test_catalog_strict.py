"""Corrupted catalog files fail with one line naming the file, the entry and the field; nothing is coerced."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from planner.catalog import DEFAULT_CATALOG_DIR, CatalogError, load_catalog, load_measurements


def copy_catalog(tmp_path: Path) -> Path:
    root = tmp_path / "catalogs"
    shutil.copytree(DEFAULT_CATALOG_DIR, root, ignore=shutil.ignore_patterns("*.md"))
    return root


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def catalog_error(root: Path, loader=load_catalog) -> str:
    with pytest.raises(CatalogError) as info:
        loader(root)
    message = str(info.value)
    assert "\n" not in message and "<unicode string>" not in message, message
    return message


H100_TDP = "tdp_w: {value: 700"


@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan", "1e400"])
def test_an_infinite_number_names_file_entry_and_field(tmp_path, value):
    root = copy_catalog(tmp_path)
    edit(root / "hardware" / "nvidia.yaml", H100_TDP, "tdp_w: {value: " + value)
    message = catalog_error(root)
    assert "nvidia.yaml: device 'h100-sxm': tdp_w: Input should be" in message


def test_a_number_written_as_a_string_is_rejected(tmp_path):
    root = copy_catalog(tmp_path)
    edit(root / "hardware" / "nvidia.yaml", H100_TDP, 'tdp_w: {value: "700"')
    assert "device 'h100-sxm': tdp_w: Input should be a valid number (got '700')" in catalog_error(root)


def test_a_model_number_written_as_a_string_is_rejected(tmp_path):
    root = copy_catalog(tmp_path)
    edit(root / "models" / "llama-3.1-8b.yaml", "layers: 32", 'layers: "32"')
    assert "llama-3.1-8b.yaml: model 'llama-3.1-8b': layers: Input should be a valid integer" in catalog_error(root)


def test_a_duplicate_key_is_rejected(tmp_path):
    root = copy_catalog(tmp_path)
    edit(root / "models" / "llama-3.1-8b.yaml", "layers: 32", "layers: 32\nlayers: 16")
    message = catalog_error(root)
    assert "llama-3.1-8b.yaml: not valid YAML/JSON at line" in message and "duplicate key 'layers'" in message


def test_a_yaml_error_is_one_line_naming_the_file(tmp_path):
    root = copy_catalog(tmp_path)
    edit(root / "hardware" / "amd.yaml", "devices:", "devices: [")
    assert "amd.yaml: not valid YAML/JSON at line" in catalog_error(root)


def test_a_non_utf8_catalog_file_names_the_file(tmp_path):
    root = copy_catalog(tmp_path)
    path = root / "hardware" / "intel.yaml"
    path.write_bytes(path.read_bytes() + b"# \xff\n")
    assert "intel.yaml: not UTF-8 text" in catalog_error(root)


def test_a_bad_fit_file_names_the_file_and_field(tmp_path):
    root = copy_catalog(tmp_path)
    fit = root / "calibration" / "fit.yaml"
    first = next(line for line in fit.read_text().splitlines(keepends=True) if line.startswith("    mfu: "))
    edit(fit, first, "    mfu: 0.4x\n")
    assert "fit.yaml: families.0.params.mfu: Input should be a valid number (got '0.4x')" in catalog_error(root)


def test_a_fit_family_missing_from_families_names_the_file(tmp_path):
    root = copy_catalog(tmp_path)
    fit = root / "calibration" / "fit.yaml"
    edit(fit, "- name: amd-cdna3\n", "- name: amd-cdna9\n")
    assert "fit.yaml: family 'amd-cdna9' is not in families.yaml" in catalog_error(root)


def test_a_family_without_devices_names_the_file(tmp_path):
    root = copy_catalog(tmp_path)
    families = root / "calibration" / "families.yaml"
    edit(families, "  - name: nvidia-ampere\n    devices: [a100-80gb]\n", "  - name: nvidia-ampere\n")
    assert "families.yaml: families.0.devices: Field required" in catalog_error(root)


def test_a_bad_measurement_record_names_the_file_and_record(tmp_path):
    root = copy_catalog(tmp_path)
    path = root / "calibration" / "measurements.yaml"
    text = path.read_text()
    start = text.index("value:")
    path.write_text(text[:start] + 'value: "12"' + text[text.index("\n", start):])
    assert "measurements.yaml: record 0" in catalog_error(root, load_measurements)
