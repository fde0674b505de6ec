"""ONNX Runtime execution providers: which really load here, probed once, and session factories.

``onnxruntime-gpu`` lists the TensorRT and CUDA providers even where they cannot run (no GPU, no
CUDA/cuDNN/TensorRT libraries), and every session that asks for them then prints several error
lines before falling back to CPU. :func:`probe_providers` instead builds one tiny session per
listed GPU provider, once per process, with ONNX Runtime's own logging turned down, keeps those
that really came up, and logs one line saying what will run. :func:`make_session` builds
sessions over what the probe found, in the order TensorRT -> CUDA -> CPU, with the TensorRT
engine cache keyed by GPU, TensorRT version and model hash (:func:`tensorrt_cache_dir`).

onnxruntime is imported inside the functions only.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import onnxruntime

__all__ = [
    "CPU",
    "CUDA",
    "ORDER",
    "TENSORRT",
    "ProviderProbe",
    "gpu_name",
    "make_session",
    "probe_providers",
    "tensorrt_cache_dir",
]

_LOG = logging.getLogger(__name__)

TENSORRT = "TensorrtExecutionProvider"
CUDA = "CUDAExecutionProvider"
CPU = "CPUExecutionProvider"
#: Preference order.
ORDER: tuple[str, ...] = (TENSORRT, CUDA, CPU)


@dataclass(frozen=True)
class ProviderProbe:
    """What the probe found.

    Attributes:
        onnxruntime: its version (``""`` when it is not installed).
        listed: providers the installed package lists.
        usable: those of :data:`ORDER` that built a session here, in preference order.
        failed: ``{provider: reason}`` for listed ones that did not.
    """

    onnxruntime: str
    listed: tuple[str, ...]
    usable: tuple[str, ...]
    failed: dict[str, str]

    @property
    def best(self) -> str:
        """The provider sessions run on by default."""
        return self.usable[0] if self.usable else CPU

    def line(self) -> str:
        """The one log line."""
        parts = [f"{p.removesuffix('ExecutionProvider')}: ok" for p in self.usable]
        parts += [
            f"{p.removesuffix('ExecutionProvider')}: unavailable ({why})"
            for p, why in self.failed.items()
        ]
        return (
            f"onnxruntime {self.onnxruntime or '(not installed)'} providers "
            f"{'; '.join(parts) or 'none'} -> {self.best.removesuffix('ExecutionProvider')}"
        )


def _tiny_model() -> bytes:
    """An ``Add`` of two float32 vectors: enough to make a provider compile something."""
    from onnx import TensorProto, helper

    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [4]) for n in ("a", "b", "c")]
    graph = helper.make_graph([helper.make_node("Add", ["a", "b"], ["c"])], "probe", io[:2], io[2:])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


@functools.lru_cache(maxsize=1)
def probe_providers() -> ProviderProbe:
    """Find, once per process, which of TensorRT, CUDA and CPU really run here; log one line."""
    try:
        import onnxruntime as ort
    except ImportError:
        probe = ProviderProbe("", (), (), {})
        _LOG.info("%s", probe.line())
        return probe
    listed = tuple(ort.get_available_providers())
    usable: list[str] = []
    failed: dict[str, str] = {}
    model = _tiny_model()
    for provider in ORDER:
        if provider not in listed:
            continue
        if provider == CPU:
            usable.append(CPU)
            continue
        options = ort.SessionOptions()
        options.log_severity_level = 4  # fatal only: the fallback errors are what we replace
        try:
            session = ort.InferenceSession(model, options, providers=[provider, CPU])
            active = session.get_providers()
        except Exception as exc:  # any failure to bring a provider up means "not usable"
            failed[provider] = _short(str(exc))
            continue
        if active and active[0] == provider:
            usable.append(provider)
        else:
            failed[provider] = "its libraries did not load (CUDA/cuDNN/TensorRT missing?)"
    probe = ProviderProbe(ort.__version__, listed, tuple(usable), failed)
    _LOG.info("%s", probe.line())
    return probe


def _short(text: str) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return text[:120] + ("..." if len(text) > 120 else "")


@functools.lru_cache(maxsize=1)
def gpu_name() -> str:
    """The first GPU's name from ``nvidia-smi`` (``""`` where there is none)."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.strip().splitlines()[0].strip() if out.strip() else ""


def _tensorrt_version() -> str:
    for package in ("tensorrt", "tensorrt-cu12", "tensorrt-cu13", "tensorrt_libs"):
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return "unknown"


def tensorrt_cache_dir(root: Path, model_sha256: str) -> Path:
    """Where TensorRT keeps built engines for one model: one folder per GPU, TensorRT, model."""
    gpu = re.sub(r"[^A-Za-z0-9]+", "-", gpu_name() or "nogpu").strip("-").lower()
    key = f"{gpu}-trt{_tensorrt_version()}-{model_sha256[:16]}"
    return root / "trt_cache" / key


def make_session(
    model: str | Path | bytes,
    *,
    providers: Sequence[str] | None = None,
    threads: int = 1,
    cache_root: Path | None = None,
    fp16: bool = False,
) -> onnxruntime.InferenceSession:
    """An ONNX Runtime session on the best usable providers (TensorRT -> CUDA -> CPU).

    Args:
        model: an ONNX file or its bytes.
        providers: restrict to these (each must be usable); default: every usable one.
        threads: intra-op threads for the CPU provider (1 keeps the foreground predictable).
        cache_root: folder for the TensorRT engine cache (:func:`tensorrt_cache_dir`); default
            ``$XDG_CACHE_HOME/venus_ros`` (``~/.cache`` when unset).
        fp16: let TensorRT build fp16 kernels.

    Raises:
        ValueError: a requested provider is not usable here (the probe says why).
    """
    import onnxruntime as ort

    probe = probe_providers()
    chosen = list(providers) if providers is not None else list(probe.usable or (CPU,))
    for provider in chosen:
        if provider not in probe.usable:
            why = probe.failed.get(provider, "not in this onnxruntime package")
            raise ValueError(f"provider {provider} is not usable here: {why}")
    data = Path(model).read_bytes() if not isinstance(model, bytes) else model
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    configured: list[Any] = []
    for provider in chosen:
        if provider == TENSORRT:
            base = (
                cache_root
                or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "venus_ros"
            )
            cache = tensorrt_cache_dir(base, hashlib.sha256(data).hexdigest())
            cache.mkdir(parents=True, exist_ok=True)
            trt = {
                "trt_engine_cache_enable": "True",
                "trt_engine_cache_path": str(cache),
                "trt_fp16_enable": "True" if fp16 else "False",
            }
            configured.append((TENSORRT, trt))
        else:
            configured.append(provider)
    return ort.InferenceSession(data, options, providers=configured)
