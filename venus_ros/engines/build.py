"""The engines pipeline: a tracked spec in, ONNX variants with a manifest out.

``engines/<name>/spec.yaml`` (tracked) names a network (:mod:`.networks`) and the variants to
build::

    network: minilm
    samples: 32          # parity inputs
    seed: 0
    variants:
      fp32: {tolerance: 1.0e-5}             # the export itself
      int8: {tolerance: 0.05, target: cpu}  # dynamic int8 MatMul weights (ONNX Runtime)
      fp16: {tolerance: 0.01, target: gpu}  # float16 weights, float32 inputs and outputs

:func:`build_engine` writes ``engines/<name>/build/`` (git-ignored): ``<name>-<variant>.onnx``
and ``manifest.json`` with each file's inputs and outputs (names, types, shapes), opset, size,
SHA-256, its parity against the network's reference implementation (max absolute difference on
the spec's sample inputs, on the provider that measured it), whether the fp32 export reproduced
the reference file byte for byte and was the same on a second export, the host, and the
providers it was built with (:func:`~venus_ros.engines.providers.probe_providers`).
:func:`verify_engine` re-hashes the files and re-measures parity on this host.

A ``gpu`` variant's parity is measured on the best GPU provider where one is usable, else on CPU
(ONNX Runtime runs float16 graphs there too, slowly); the manifest records which.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import platform
import socket
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from venus_ros.engines.networks import NETWORKS, Network, get_network
from venus_ros.engines.providers import CPU, make_session, probe_providers
from venus_ros.engines.recipes import RecipeSpec, run_recipe, sha256_file

__all__ = [
    "MANIFEST",
    "SPEC",
    "EngineError",
    "EngineSpec",
    "EngineStatus",
    "build_engine",
    "default_root",
    "list_engines",
    "load_spec",
    "verify_engine",
]

SPEC = "spec.yaml"
MANIFEST = "manifest.json"
VariantName = Literal["fp32", "int8", "fp16"]


class EngineError(RuntimeError):
    """A spec that cannot be read, or a build or verification that failed."""


class VariantSpec(BaseModel):
    """One variant to build."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tolerance: float = Field(gt=0)
    target: Literal["cpu", "gpu"] = "cpu"


class EngineSpec(BaseModel):
    """``spec.yaml``; unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    network: str
    description: str = ""
    samples: int = Field(default=32, ge=1, le=4096)
    seed: int = 0
    variants: dict[VariantName, VariantSpec] = Field(min_length=1)


def default_root() -> Path:
    """``$VENUS_ENGINES_DIR``, else ``./engines`` if present, else the checkout's ``engines/``."""
    if os.environ.get("VENUS_ENGINES_DIR"):
        return Path(os.environ["VENUS_ENGINES_DIR"])
    here = Path.cwd() / "engines"
    if here.is_dir():
        return here
    return Path(__file__).resolve().parents[2] / "engines"


def load_spec(folder: Path) -> EngineSpec | RecipeSpec:
    """Read and check ``folder/spec.yaml`` (a network spec, or a recipe spec with ``recipe:``).

    Raises:
        EngineError: missing, not YAML, an invalid key, or an unknown network.
    """
    path = folder / SPEC
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and "recipe" in data:
            return RecipeSpec.model_validate(data)
        spec = EngineSpec.model_validate(data)
    except FileNotFoundError as exc:
        raise EngineError(f"engine {folder.name}: no {path}") from exc
    except (yaml.YAMLError, ValidationError) as exc:
        raise EngineError(f"engine {folder.name}: {path}: {exc}") from exc
    if spec.network not in NETWORKS:
        raise EngineError(
            f"engine {folder.name}: unknown network {spec.network!r}; "
            f"networks: {', '.join(sorted(NETWORKS))}"
        )
    return spec


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _io(values: Iterable[Any]) -> list[dict[str, Any]]:
    from onnx import TensorProto

    out = []
    for value in values:
        tensor = value.type.tensor_type
        shape = [d.dim_param or d.dim_value for d in tensor.shape.dim]
        out.append(
            {
                "name": value.name,
                "dtype": TensorProto.DataType.Name(tensor.elem_type).lower(),
                "shape": shape,
            }
        )
    return out


def _describe(data: bytes) -> dict[str, Any]:
    import onnx

    model = onnx.load_from_string(data)
    return {
        "bytes": len(data),
        "sha256": _sha256(data),
        "opset": max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
        "ir_version": model.ir_version,
        "inputs": _io(model.graph.input),
        "outputs": _io(model.graph.output),
    }


def _variant(fp32: bytes, name: str, folder: Path) -> bytes:
    """Bytes of one variant of the fp32 graph."""
    import onnx

    if name == "fp32":
        return fp32
    if name == "fp16":
        from onnxruntime.transformers.float16 import convert_float_to_float16

        return convert_float_to_float16(
            onnx.load_from_string(fp32), keep_io_types=True
        ).SerializeToString()
    from onnxruntime.quantization import QuantType, quantize_dynamic

    src, dst = folder / ".fp32.tmp.onnx", folder / ".int8.tmp.onnx"
    src.write_bytes(fp32)
    try:
        quantize_dynamic(
            src, dst, weight_type=QuantType.QInt8, per_channel=True, op_types_to_quantize=["MatMul"]
        )
        return dst.read_bytes()
    finally:
        src.unlink(missing_ok=True)
        dst.unlink(missing_ok=True)


def _parity(
    network: Network, data: bytes, spec: EngineSpec, variant: VariantSpec
) -> dict[str, Any]:
    probe = probe_providers()
    gpu = [p for p in probe.usable if p != CPU]
    provider = gpu[0] if variant.target == "gpu" and gpu else CPU
    inputs = network.samples(spec.samples, np.random.default_rng(spec.seed))
    with np.errstate(over="ignore"):
        want = network.reference(inputs)
    session = make_session(data, providers=[provider], fp16=variant.target == "gpu")
    got = session.run(None, inputs)
    diff = max(
        float(np.max(np.abs(np.asarray(g, np.float64) - w))) for g, w in zip(got, want, strict=True)
    )
    return {
        "provider": provider,
        "samples": spec.samples,
        "max_abs_diff": diff,
        "tolerance": variant.tolerance,
        "passed": bool(diff <= variant.tolerance),
    }


def _host() -> dict[str, Any]:
    from venus_ros.engines.providers import gpu_name

    def version(package: str) -> str:
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return ""

    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "onnx": version("onnx"),
        "onnxruntime": version("onnxruntime") or version("onnxruntime-gpu"),
        "gpu": gpu_name(),
    }


def build_engine(
    folder: Path, *, checkpoint: Path | None = None, dry_run: bool = False
) -> dict[str, Any]:
    """Build every variant of ``folder``'s spec into ``folder/build/``; returns the manifest.

    A recipe spec (:mod:`.recipes`) compiles ``checkpoint`` with its toolchain instead;
    ``dry_run`` returns its plan (commands, missing tools) without running anything.

    Raises:
        EngineError: an invalid spec, an export that is not reproducible or differs from the
            network's reference file, or a variant that fails its parity check (the manifest is
            written first, so the failure can be read there); for a recipe, no checkpoint, a
            missing toolchain or a failing command.
    """
    spec = load_spec(folder)
    if isinstance(spec, RecipeSpec):
        if checkpoint is None:
            raise EngineError(f"engine {folder.name}: recipe {spec.recipe} needs --checkpoint")
        try:
            return run_recipe(folder.name, spec, checkpoint, folder / "build", dry_run=dry_run)
        except (RuntimeError, ValueError, OSError) as exc:
            raise EngineError(f"engine {folder.name}: {exc}") from exc
    network = get_network(spec.network)
    out = folder / "build"
    out.mkdir(parents=True, exist_ok=True)
    fp32 = network.export()
    reproducible = network.export() == fp32
    reference = network.reference_file()
    ref_info = None
    if reference is not None:
        ref_bytes = reference.read_bytes()
        ref_info = {
            "file": str(reference),
            "sha256": _sha256(ref_bytes),
            "identical": ref_bytes == fp32,
        }
    probe = probe_providers()
    variants: dict[str, Any] = {}
    for name, variant in spec.variants.items():
        data = _variant(fp32, name, out)
        path = out / f"{folder.name}-{name}.onnx"
        path.write_bytes(data)
        variants[name] = {
            "file": path.name,
            "target": variant.target,
            **_describe(data),
            "parity": _parity(network, data, spec, variant),
        }
    manifest = {
        "name": folder.name,
        "network": spec.network,
        "spec_sha256": _sha256((folder / SPEC).read_bytes()),
        "built_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": _host(),
        "providers": {"listed": probe.listed, "usable": probe.usable, "failed": probe.failed},
        "reproducible": reproducible,
        "reference": ref_info,
        "variants": variants,
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    problems = _problems(manifest)
    if problems:
        raise EngineError(f"engine {folder.name}: " + "; ".join(problems))
    return manifest


def _problems(manifest: dict[str, Any]) -> list[str]:
    problems = []
    if not manifest["reproducible"]:
        problems.append("two exports of the same weights differ")
    ref = manifest["reference"]
    if ref is not None and not ref["identical"]:
        problems.append(f"the fp32 export differs from {ref['file']}")
    for name, variant in manifest["variants"].items():
        parity = variant["parity"]
        if not parity["passed"]:
            problems.append(
                f"{name}: parity {parity['max_abs_diff']:.3g} > {parity['tolerance']:g} "
                f"on {parity['provider']}"
            )
    return problems


def verify_engine(folder: Path) -> list[str]:
    """Problems with a built engine on this host (empty: it is sound).

    Checks that the manifest exists and matches the spec, that every file's hash is the
    recorded one, and re-measures parity here.
    """
    path = folder / "build" / MANIFEST
    if not path.is_file():
        return [f"engine {folder.name} is not built (venus-ros engines build {folder.name})"]
    manifest = json.loads(path.read_text(encoding="utf-8"))
    spec = load_spec(folder)
    if isinstance(spec, RecipeSpec):
        return [
            f"{name}: does not match its recorded sha256"
            for name, entry in manifest.get("outputs", {}).items()
            if not (folder / "build" / name).is_file()
            or sha256_file(folder / "build" / name) != entry["sha256"]
        ]
    problems = []
    if manifest["spec_sha256"] != _sha256((folder / SPEC).read_bytes()):
        problems.append("spec.yaml changed since the build")
    network = get_network(spec.network)
    for name, entry in manifest["variants"].items():
        file = folder / "build" / entry["file"]
        if not file.is_file():
            problems.append(f"{name}: {file} is missing")
            continue
        data = file.read_bytes()
        if _sha256(data) != entry["sha256"]:
            problems.append(f"{name}: {file.name} does not match its recorded sha256")
            continue
        if name in spec.variants:
            parity = _parity(network, data, spec, spec.variants[name])
            if not parity["passed"]:
                problems.append(
                    f"{name}: parity {parity['max_abs_diff']:.3g} > {parity['tolerance']:g} "
                    f"on {parity['provider']} here"
                )
    return problems


@dataclass(frozen=True)
class EngineStatus:
    """One engine folder as :func:`list_engines` sees it."""

    name: str
    network: str
    variants: tuple[str, ...]
    built: bool
    error: str = ""
    manifest: dict[str, Any] = field(default_factory=dict)


def list_engines(root: Path | None = None) -> list[EngineStatus]:
    """Every folder of ``root`` with a ``spec.yaml``, and whether it is built."""
    root = root or default_root()
    statuses = []
    for folder in sorted(p for p in root.iterdir() if (p / SPEC).is_file()):
        try:
            spec = load_spec(folder)
        except EngineError as exc:
            statuses.append(EngineStatus(folder.name, "", (), False, str(exc)))
            continue
        manifest_path = folder / "build" / MANIFEST
        manifest = (
            json.loads(manifest_path.read_text(encoding="utf-8")) if manifest_path.is_file() else {}
        )
        if isinstance(spec, RecipeSpec):
            kind, variants = f"recipe:{spec.recipe}", (spec.quantization,)
        else:
            kind, variants = spec.network, tuple(spec.variants)
        statuses.append(EngineStatus(folder.name, kind, variants, bool(manifest), "", manifest))
    return statuses
