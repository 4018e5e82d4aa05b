"""The only reader of ``catalogs/``: hardware and model YAML files into a validated, immutable Catalog.

Hardware numbers are written as sourced mappings ``{value, source, estimate}``; the loader keeps the
value in the Device and the source in ``Device.provenance`` under the field's dotted path. Files are
read within the input limits of ``planner.files`` (size, depth, aliases; duplicate keys refused) and
validated strictly: a number written as a string is an error, as is an infinite one. A malformed
file or entry raises CatalogError naming the file, the entry and the field. ``Catalog.fingerprint``
identifies the files a catalog was loaded from, so every output can say which numbers priced it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Mapping, TypeVar

import yaml
from pydantic import Field, ValidationError

from planner.files import InputFileError, read_document
from planner.messages import describe_errors, excerpt
from planner.schema import Band, Device, FamilyCalibration, Frozen, Id, ModelArch, Provenance

M = TypeVar("M", bound=Frozen)
DEFAULT_CATALOG_DIR = Path(__file__).resolve().parent.parent / "catalogs"


class CatalogError(ValueError):
    """A catalog file or entry that cannot be loaded."""


class UnknownId(KeyError):
    """An id that is not in the catalog; the message lists the known ids."""

    def __init__(self, kind: str, wanted: str, known: list[str]):
        self.kind, self.wanted, self.known = kind, wanted, known
        super().__init__(f"unknown {kind} {wanted!r}; known: {', '.join(known)}")

    def __str__(self) -> str:
        return self.args[0]


@dataclass(frozen=True)
class Catalog:
    """Devices and models by id (read-only mappings, sorted by id)."""

    devices: Mapping[str, Device]
    models: Mapping[str, ModelArch]
    families: Mapping[str, FamilyCalibration] = field(default_factory=lambda: MappingProxyType({}))
    fingerprint: str = ""  # of the catalog files (catalog_fingerprint); empty for a catalog built in code

    def device(self, device_id: str) -> Device:
        if device_id not in self.devices:
            raise UnknownId("device", device_id, list(self.devices))
        return self.devices[device_id]

    def model(self, model_id: str) -> ModelArch:
        if model_id not in self.models:
            raise UnknownId("model", model_id, list(self.models))
        return self.models[model_id]


def catalog_dir() -> Path:
    """``$SILICONMIX_CATALOG_DIR`` if set, else the repository's ``catalogs/``."""
    return Path(os.environ.get("SILICONMIX_CATALOG_DIR", DEFAULT_CATALOG_DIR))


@lru_cache(maxsize=8)
def load_catalog(root: Path | None = None, apply_fit: bool = True) -> Catalog:
    """Load and validate every hardware and model file under ``root`` (cached per directory).

    Every device takes its family's structural priors (``calibration/families.yaml``); with
    ``apply_fit``, the terms fitted to published measurements (``calibration/fit.yaml``) replace the
    priors for the devices of each fitted family.
    """
    root = Path(root) if root is not None else catalog_dir()
    devices: dict[str, Device] = {}
    for path in sorted((root / "hardware").glob("*.yaml")):
        for device in _read_hardware_file(path):
            if device.id in devices:
                raise CatalogError(f"{path}: device {device.id!r} is defined twice")
            devices[device.id] = device
    models: dict[str, ModelArch] = {}
    for path in sorted((root / "models").glob("*.yaml")):
        model = _read_model_file(path)
        if model.id in models:
            raise CatalogError(f"{path}: model {model.id!r} is defined twice")
        models[model.id] = model
    if not devices or not models:
        raise CatalogError(f"{root}: no hardware or no model files found")
    devices, families = _apply_families(root / "calibration" / "families.yaml", devices)
    fit_path = root / "calibration" / "fit.yaml"
    if apply_fit and fit_path.exists():
        devices, families = _apply_fit(fit_path, devices, families)
    return Catalog(MappingProxyType(dict(sorted(devices.items()))), MappingProxyType(dict(sorted(models.items()))),
                   MappingProxyType(families), catalog_fingerprint(root))


#: the folders whose YAML files make a catalog, and so its fingerprint
FINGERPRINT_FOLDERS = ("hardware", "models", "calibration")


def catalog_fingerprint(root: Path) -> str:
    """A stable id of the catalog files' contents: the first 16 hex digits of a SHA-256 over each YAML file
    of ``FINGERPRINT_FOLDERS``, in order of relative path, as ``path NUL size NUL bytes``.

    Any changed, added, removed or renamed file changes it; where the files sit on disk does not.
    """
    digest = hashlib.sha256()
    paths = sorted((p for folder in FINGERPRINT_FOLDERS for p in (root / folder).glob("*.yaml")),
                   key=lambda p: p.relative_to(root).as_posix())
    for path in paths:
        data = path.read_bytes()
        digest.update(f"{path.relative_to(root).as_posix()}\0{len(data)}\0".encode() + data)
    return digest.hexdigest()[:16]


def load_measurements(root: Path | None = None) -> list:
    """Published measurements (``calibration/measurements.yaml``), validated strictly."""
    from planner.calibration import Measurement

    root = Path(root) if root is not None else catalog_dir()
    path = root / "calibration" / "measurements.yaml"
    raw = _read_yaml(path) or []
    if not isinstance(raw, list):
        raise CatalogError(f"{path}: expected a list of measurement records")
    measurements = []
    for i, entry in enumerate(raw):
        entry_id = entry.get("id", "?") if isinstance(entry, dict) else "?"
        try:
            measurements.append(_strict(Measurement, entry))
        except ValidationError as exc:
            raise CatalogError(f"{path}: record {i} ({excerpt(entry_id)}): {describe_errors(exc)}") from exc
        except CatalogError as exc:
            raise CatalogError(f"{path}: record {i} ({excerpt(entry_id)}): {exc}") from exc
    return measurements


def write_fit(body: dict, root: Path | None = None) -> Path:
    """Rewrite ``calibration/fit.yaml`` (its comment header kept) with ``body``, and drop cached catalogs."""
    root = Path(root) if root is not None else catalog_dir()
    path = root / "calibration" / "fit.yaml"
    header = "".join(line for line in path.read_text().splitlines(keepends=True) if line.startswith("#")) if path.exists() else ""
    path.write_text(header + yaml.safe_dump(body, sort_keys=False, width=120))
    load_catalog.cache_clear()
    return path


#: efficiency terms a family's fit sets on its devices (Device fields).
FITTED_TERMS = ("mfu", "mbu", "layer_latency_us", "moe_layer_latency_us", "step_overhead_us", "collective_latency_us",
                "collective_efficiency", "grouped_gemm_efficiency", "attention_read_efficiency",
                "fp8_compute_scale", "fp4_compute_scale", "collective_step_latency_us", "sequence_overhead_us",
                "gemm_half_width")
#: terms whose priors live in families.yaml rather than the hardware files.
FAMILY_TERMS = ("layer_latency_us", "moe_layer_latency_us", "step_overhead_us", "collective_latency_us",
                "collective_efficiency", "grouped_gemm_efficiency", "attention_read_efficiency",
                "fp8_compute_scale", "fp4_compute_scale", "collective_step_latency_us", "sequence_overhead_us",
                "gemm_half_width")


class FamilyEntry(Frozen):
    """One family of ``calibration/families.yaml``: its devices and its own priors (sourced mappings)."""

    name: str = Field(min_length=1)
    devices: tuple[Id, ...] = Field(min_length=1)
    priors: dict[str, Any] = Field(default_factory=dict)


class FamiliesFile(Frozen):
    """``calibration/families.yaml``: prior spreads, default priors and the families."""

    prior_log_sd: dict[str, Annotated[float, Field(gt=0)]] = Field(default_factory=dict)
    default_priors: dict[str, Any] = Field(default_factory=dict)
    families: tuple[FamilyEntry, ...] = ()


class FitFamily(Frozen):
    """One fitted family of ``calibration/fit.yaml``."""

    name: str = Field(min_length=1)
    params: dict[str, Annotated[float, Field(ge=0)]] = Field(default_factory=dict)
    records: tuple[str, ...] = ()
    fitted_on_check_records: bool = False
    loss: float | None = None
    bands: dict[str, tuple[Annotated[float, Field(gt=0)], Annotated[float, Field(gt=0)]]] = Field(default_factory=dict)
    coverage: dict[str, Any] = Field(default_factory=dict)


class FitFile(Frozen):
    """``calibration/fit.yaml``: the fitted terms per family and each record's predicted/measured ratios."""

    date: str | None = None
    cost_model: str = ""
    summary: dict[str, Any] = Field(default_factory=dict)
    families: tuple[FitFamily, ...] = ()
    residuals_predicted_over_measured: dict[str, dict[str, float | None]] = Field(default_factory=dict)


def _read_checked(model: type[M], path: Path) -> M:
    return _validated(model, _read_yaml(path) or {}, f"{path}")


def _validated(model: type[M], raw: Any, where: str) -> M:
    """``raw`` validated strictly as ``model``; any error one CatalogError line starting with ``where``."""
    try:
        return _strict(model, raw)
    except ValidationError as exc:
        raise CatalogError(f"{where}: {describe_errors(exc)}") from exc
    except CatalogError as exc:
        raise CatalogError(f"{where}: {exc}") from exc


def load_families(root: Path | None = None) -> FamiliesFile:
    """``calibration/families.yaml``, validated (an empty one when the file is absent)."""
    root = Path(root) if root is not None else catalog_dir()
    path = root / "calibration" / "families.yaml"
    return _read_checked(FamiliesFile, path) if path.exists() else FamiliesFile()


def _apply_families(path: Path, devices: dict[str, Device]) -> tuple[dict[str, Device], dict[str, FamilyCalibration]]:
    """Set each device's family and the family's priors of the structural terms (with their sources)."""
    raw = load_families(path.parent.parent)
    out, families = dict(devices), {}
    for family in raw.families:
        priors = {**raw.default_priors, **family.priors}
        provenance: dict[str, Provenance] = {}
        try:
            values = _unwrap({k: priors[k] for k in FAMILY_TERMS if k in priors}, "efficiency", provenance)
        except CatalogError as exc:
            raise CatalogError(f"{path}: family {family.name!r}: {exc}") from exc
        for device_id in family.devices:
            if device_id not in out:
                raise CatalogError(f"{path}: family {family.name!r} names unknown device {device_id!r}")
            device = out[device_id]
            try:
                out[device_id] = _strict(Device, {**device.model_dump(), **values, "family": family.name,
                                                  "provenance": {k: p.model_dump() for k, p in
                                                                 {**device.provenance, **provenance}.items()}})
            except ValidationError as exc:
                raise CatalogError(f"{path}: family {family.name!r}: {describe_errors(exc)}") from exc
        families[family.name] = FamilyCalibration(name=family.name, devices=family.devices)
    return out, families


def _apply_fit(path: Path, devices: dict[str, Device], families: dict[str, FamilyCalibration]):
    """Replace the priors of every fitted family's devices by the fitted terms; record bands and coverage."""
    fit = _read_checked(FitFile, path)
    out, fams = dict(devices), dict(families)
    for family in fit.families:
        if family.name not in fams:
            raise CatalogError(f"{path}: family {family.name!r} is not in families.yaml")
        params = {k: v for k, v in family.params.items() if k in FITTED_TERMS}
        if not params or not family.records:
            continue
        source = (f"fitted to {len(family.records)} published measurements, family {family.name} "
                  f"(catalogs/calibration/fit.yaml, {fit.date})")
        for device_id in fams[family.name].devices:
            device = out[device_id]
            provenance = {**device.provenance, **{f"efficiency.{k}": Provenance(source=source) for k in params}}
            try:
                out[device_id] = device.model_validate({**device.model_dump(), **params,
                                                         "provenance": {k: p.model_dump() for k, p in provenance.items()}})
            except ValidationError as exc:
                raise CatalogError(f"{path}: family {family.name!r}: {describe_errors(exc)}") from exc
        cov = family.coverage
        fams[family.name] = fams[family.name].model_copy(update={
            "records": len(family.records), "fitted": True, "date": str(fit.date),
            "checks_only": family.fitted_on_check_records,
            "bands": {k: Band(low=v[0], high=v[1]) for k, v in family.bands.items()},
            "dtypes": tuple(cov.get("dtypes", ())), "max_tp": int(cov.get("max_tp", 0)),
            "max_isl": int(cov.get("max_isl", 0)), "max_batch": int(cov.get("max_batch", 0)),
        })
    return out, fams


def _read_yaml(path: Path) -> Any:
    """A catalog file, parsed as shipped code (``files.TrustedLoader``) when it is under ``DEFAULT_CATALOG_DIR``."""
    try:
        return read_document(path, trusted=Path(path).resolve().is_relative_to(DEFAULT_CATALOG_DIR))
    except InputFileError as exc:
        raise CatalogError(str(exc)) from exc


def _strict(model: type[M], raw: Any) -> M:
    """Validate ``raw`` in pydantic's strict JSON mode: "700" is not a number, a list may fill a tuple."""
    try:
        text = json.dumps(raw, default=str)
    except (TypeError, ValueError) as exc:  # keys YAML allows and JSON does not, e.g. a list as a key
        raise CatalogError(f"not a plain mapping of names to values ({exc})") from exc
    return model.model_validate_json(text, strict=True)


def _read_model_file(path: Path) -> ModelArch:
    raw = _read_yaml(path)
    entry = raw.get("id", "?") if isinstance(raw, dict) else "?"
    return _validated(ModelArch, raw, f"{path}: model {excerpt(entry)}")


def _read_hardware_file(path: Path) -> list[Device]:
    raw = _read_yaml(path)
    if not isinstance(raw, dict) or not isinstance(raw.get("devices"), list) or "vendor" not in raw:
        raise CatalogError(f"{path}: expected a mapping with 'vendor' and a list 'devices'")
    return [_device(path, raw["vendor"], entry) for entry in raw["devices"]]


#: the hardware files' ``node:`` keys and the Device fields they fill; ``efficiency.X`` fills ``X``
NODE_FIELDS = {"devices_per_node": "devices_per_node", "overhead_w": "node_overhead_w", "rack_units": "rack_units"}


def sourced_value(device: Device, path: str) -> Any:
    """The value of the catalog number at ``path`` (a key of ``Device.provenance``, e.g. ``node.overhead_w``,
    ``memory_tiers[0].bandwidth_tb_s``, ``efficiency.mfu``) as the device holds it."""
    head, _, rest = path.partition(".")
    field = NODE_FIELDS[rest] if head == "node" else rest if head == "efficiency" else path
    value: Any = device
    for part in re.findall(r"[^.\[\]]+", field):
        value = value[int(part)] if isinstance(value, tuple) else value[part] if isinstance(value, dict) else getattr(value, part)
    return value


def _device(path: Path, vendor: str, entry: Any) -> Device:
    entry_id = entry.get("id", "?") if isinstance(entry, dict) else "?"
    try:
        provenance: dict[str, Provenance] = {}
        plain = _unwrap(entry, "", provenance)
        node = plain.pop("node", {})
        efficiency = plain.pop("efficiency", {})
        flat = {
            **plain,
            "vendor": vendor,
            **{field: node.get(key) for key, field in NODE_FIELDS.items()},
            "mfu": efficiency.get("mfu"),
            "mbu": efficiency.get("mbu"),
            "layer_latency_us": efficiency.get("layer_latency_us"),
            "provenance": {k: p.model_dump() for k, p in provenance.items()},
        }
        return _strict(Device, flat)
    except ValidationError as exc:
        raise CatalogError(f"{path}: device {excerpt(entry_id)}: {describe_errors(exc)}") from exc
    except (CatalogError, AttributeError, TypeError) as exc:
        raise CatalogError(f"{path}: device {excerpt(entry_id)}: {exc}") from exc


def _unwrap(node: Any, path: str, provenance: dict[str, Provenance]) -> Any:
    """Replace every ``{value, source, estimate}`` mapping by its value, recording its provenance.

    A bare number is an error: every catalog number carries a source.
    """
    if isinstance(node, dict):
        if "value" in node:
            extra = set(node) - {"value", "source", "estimate", "note"}
            if extra or "source" not in node:
                raise CatalogError(f"{path}: a sourced number needs 'value' and 'source' (got {sorted(node)})")
            provenance[path] = Provenance(source=str(node["source"]), estimate=bool(node.get("estimate", False)))
            return node["value"]
        return {k: _unwrap(v, f"{path}.{k}" if path else str(k), provenance) for k, v in node.items()}
    if isinstance(node, list):
        return [_unwrap(v, f"{path}[{i}]", provenance) for i, v in enumerate(node)]
    if isinstance(node, (int, float)) and not isinstance(node, bool):
        raise CatalogError(f"{path}: the number {node} has no source (write {{value: {node}, source: ...}})")
    return node
