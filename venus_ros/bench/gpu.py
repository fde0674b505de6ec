"""``venus-ros bench gpu``: per-unit compute of a MiniCPM-o-sized backbone and our ONNX engines.

Part 1, the language backbone. MiniCPM-o 4.5's language model is Qwen3-8B; one 1 s unit costs a
prefill of the unit's inputs (~114 tokens: 1 s of audio embeddings, a frame's vision tokens,
layout tokens) and up to 20 speak tokens decoded with the KV cache. The benchmark builds
``Qwen3ForCausalLM`` with Qwen3-8B dimensions and random weights (nothing is downloaded),
runs ``units`` such units one after another on a growing cache, and prints the median
per-unit time, split into prefill and decode, for each way of running it:

* ``bf16 eager``;
* ``bf16 torch.compile`` (the model compiled with dynamic shapes, default mode; the first two
  units, compiling, are not counted; skipped on CPU);
* ``int8 weight-only`` / ``int4 weight-only`` through torchao where it is installed.

Beside each figure: the memory-bandwidth bound of a unit, ``21 x weight bytes / bandwidth``
(each forward pass reads every weight once; :data:`~venus_ros.frontends.venus.checkpoint.
BANDWIDTH_GB_S` by GPU name, or ``--bandwidth``). A unit must finish well under 1 s.

Part 2, our ONNX networks (``engines/``): each engine is built (or checked) by the engines
pipeline, then every variant is timed on every usable provider (TensorRT, CUDA, CPU).

``--tiny`` runs the same code on CPU in seconds: a 2-layer backbone and the engines. Without
CUDA and without ``--tiny``, part 1 says it was skipped and why; part 2 runs on CPU.
"""

from __future__ import annotations

import inspect
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["QWEN3_8B", "TINY", "BackboneSize", "UnitTiming", "bench_gpu"]

PREFILL_TOKENS = 114
SPEAK_TOKENS = 20


@dataclass(frozen=True)
class BackboneSize:
    """Dimensions of a Qwen3 language model."""

    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int


#: Qwen3-8B, MiniCPM-o 4.5's language model (8.2 B parameters with embeddings).
QWEN3_8B = BackboneSize(4096, 12288, 36, 32, 8, 128, 151936)
#: The ``--tiny`` backbone: the same code path in seconds on CPU.
TINY = BackboneSize(64, 128, 2, 4, 2, 16, 1024)


@dataclass(frozen=True)
class UnitTiming:
    """Median times of one way of running the backbone."""

    label: str
    unit_ms: float
    prefill_ms: float
    decode_ms_per_token: float
    weight_bytes: int
    bound_ms: float | None
    note: str = ""


def _say(message: str) -> None:
    print(message, flush=True)


def _progress(message: str) -> None:
    print(f"[bench gpu] {message}", file=sys.stderr, flush=True)


def _bandwidth(device_name: str, override: float | None) -> tuple[float | None, str]:
    from venus_ros.frontends.venus.checkpoint import BANDWIDTH_GB_S

    if override:
        return override, "--bandwidth"
    key = device_name.lower()
    for name, value in BANDWIDTH_GB_S.items():
        if name == "cpu":
            continue
        if name.replace("-", " ") in key.replace("-", " "):
            return value, name
    if device_name == "cpu":
        return BANDWIDTH_GB_S["cpu"], "cpu (nominal)"
    return None, "unknown GPU (pass --bandwidth GB/s)"


def _build_backbone(size: BackboneSize, device: str, dtype: Any) -> Any:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(
        hidden_size=size.hidden_size,
        intermediate_size=size.intermediate_size,
        num_hidden_layers=size.num_hidden_layers,
        num_attention_heads=size.num_attention_heads,
        num_key_value_heads=size.num_key_value_heads,
        head_dim=size.head_dim,
        vocab_size=size.vocab_size,
        max_position_embeddings=32768,
        tie_word_embeddings=False,
    )
    config._attn_implementation = "sdpa"
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # build directly in the target precision
    try:
        with torch.device(device):
            model = Qwen3ForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    return model.eval()


def _weight_bytes(model: Any) -> int:
    """Bytes the weights occupy, counting torchao's quantised tensors by their parts."""
    return sum(_tensor_bytes(t) for t in [*model.parameters(), *model.buffers()])


_QUANT_PARTS = ("int_data", "qdata", "packed_weight", "scale", "zero_point", "scale_and_zero")


def _tensor_bytes(tensor: Any) -> int:
    for holder in (getattr(tensor, "tensor_impl", None), tensor):
        if holder is None:
            continue
        parts = [getattr(holder, name, None) for name in _QUANT_PARTS]
        parts = [p for p in parts if p is not None and p is not tensor and hasattr(p, "numel")]
        if parts:
            return sum(p.numel() * p.element_size() for p in parts)
    return tensor.numel() * tensor.element_size()


def _time_units(
    model: Any,
    forward: Callable[..., Any],
    device: str,
    units: int,
    warmup: int,
) -> tuple[float, float, float]:
    """Median (unit, prefill, per-token decode) ms over ``units`` units after ``warmup``."""
    import torch
    from transformers import DynamicCache

    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    vocab = model.config.vocab_size
    generator = torch.Generator(device="cpu").manual_seed(0)
    cache = DynamicCache()
    # transformers 5 names the cache keyword ``cache``; 4.x (the checkpoints' pin) only
    # ``past_key_values``
    key = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    units_ms, prefill_ms, decode_ms = [], [], []
    with torch.inference_mode():
        for index in range(warmup + units):
            ids = torch.randint(0, vocab, (1, PREFILL_TOKENS), generator=generator).to(device)
            sync()
            t0 = time.perf_counter()
            out = forward(input_ids=ids, use_cache=True, **{key: cache})
            token = out.logits[:, -1:].argmax(-1)
            sync()
            t1 = time.perf_counter()
            for _ in range(SPEAK_TOKENS):
                out = forward(input_ids=token, use_cache=True, **{key: cache})
                token = out.logits[:, -1:].argmax(-1)
            sync()
            t2 = time.perf_counter()
            if index >= warmup:
                units_ms.append((t2 - t0) * 1000)
                prefill_ms.append((t1 - t0) * 1000)
                decode_ms.append((t2 - t1) * 1000 / SPEAK_TOKENS)
    return statistics.median(units_ms), statistics.median(prefill_ms), statistics.median(decode_ms)


def _quantise(model: Any, bits: int) -> str:
    """Weight-only int8/int4 through torchao; returns "" or why it could not."""
    try:
        import torchao.quantization as tq
    except ImportError:
        return "torchao not installed (pip install torchao)"
    config = None
    for name in (f"Int{bits}WeightOnlyConfig", f"int{bits}_weight_only"):
        factory = getattr(tq, name, None)
        if factory is not None:
            config = factory()
            break
    if config is None:
        return f"this torchao has no int{bits} weight-only config"
    tq.quantize_(model, config)
    return ""


def bench_backbone(
    size: BackboneSize,
    device: str,
    *,
    units: int,
    bandwidth_gb_s: float | None,
    modes: tuple[str, ...] = ("eager", "compile", "int8", "int4"),
) -> list[UnitTiming]:
    """Time ``size`` on ``device`` in each of ``modes``; a mode that fails says why."""
    import torch

    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    precision = "bf16" if dtype is torch.bfloat16 else "fp32"
    rows: list[UnitTiming] = []
    for mode in modes:
        label = {
            "eager": f"{precision} eager",
            "compile": f"{precision} torch.compile",
            "int8": "int8 weight-only (torchao)",
            "int4": "int4 weight-only (torchao)",
        }[mode]
        _progress(f"backbone: {label}")
        why = ""
        if mode == "int4" and not device.startswith("cuda"):
            why = "int4 weight-only kernels need CUDA"
        elif mode == "compile" and not device.startswith("cuda"):
            why = "on CPU (inductor compiles C++ for minutes on a small CPU)"
        if why:
            rows.append(UnitTiming(label, 0, 0, 0, 0, None, f"skipped: {why}"))
            continue
        model = None
        try:
            model = _build_backbone(size, device, dtype)
            forward: Callable[..., Any] = model
            warmup = 1
            if mode in ("int8", "int4"):
                why = _quantise(model, 8 if mode == "int8" else 4)
            if why:
                rows.append(UnitTiming(label, 0, 0, 0, 0, None, f"skipped: {why}"))
                continue
            if mode == "compile":
                forward = torch.compile(model, dynamic=True)
                warmup = 2
            unit, prefill, decode = _time_units(model, forward, device, units, warmup)
            weights = _weight_bytes(model)
            bound = 21 * weights / (bandwidth_gb_s * 1e9) * 1000 if bandwidth_gb_s else None
            rows.append(UnitTiming(label, unit, prefill, decode, weights, bound))
        except Exception as exc:  # one failing mode must not hide the others
            rows.append(UnitTiming(label, 0, 0, 0, 0, None, f"failed: {type(exc).__name__}: {exc}"))
        finally:
            del model
            if device.startswith("cuda"):
                torch.cuda.empty_cache()
    return rows


def bench_engines(root: Path, runs: int = 50) -> list[tuple[str, str, str, float, str]]:
    """Build every engine under ``root`` and time each variant on each usable provider.

    Returns:
        ``(engine, variant, provider, median ms per call, note)`` rows.
    """
    from venus_ros.engines.build import EngineError, build_engine, list_engines
    from venus_ros.engines.networks import get_network
    from venus_ros.engines.providers import make_session, probe_providers

    rows: list[tuple[str, str, str, float, str]] = []
    probe = probe_providers()
    for status in list_engines(root):
        if status.network.startswith("recipe:"):
            note = (
                f"{status.network}: needs a checkpoint (engines build {status.name} --checkpoint)"
            )
            rows.append((status.name, "-", "-", 0.0, note))
            continue
        _progress(f"engine {status.name}: build")
        try:
            manifest = build_engine(root / status.name)
        except EngineError as exc:
            rows.append((status.name, "-", "-", 0.0, f"build failed: {exc}"))
            continue
        inputs = get_network(manifest["network"]).samples(1, np.random.default_rng(0))
        for variant, entry in manifest["variants"].items():
            data = (root / status.name / "build" / entry["file"]).read_bytes()
            for provider in probe.usable:
                try:
                    session = make_session(data, providers=[provider], fp16=variant == "fp16")
                    for _ in range(5):
                        session.run(None, inputs)
                    times = []
                    for _ in range(runs):
                        t0 = time.perf_counter()
                        session.run(None, inputs)
                        times.append((time.perf_counter() - t0) * 1000)
                    note = f"parity {entry['parity']['max_abs_diff']:.1e}"
                    rows.append((status.name, variant, provider, statistics.median(times), note))
                except Exception as exc:
                    rows.append((status.name, variant, provider, 0.0, f"failed: {exc}"))
    for provider, why in probe.failed.items():
        rows.append(("*", "*", provider, 0.0, f"skipped: {why}"))
    return rows


def _size(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.2f} MB"


def _specs_copy(source: Path, target: Path) -> Path:
    """Copy only the specs of ``source`` into ``target`` (so ``--tiny`` writes nothing there)."""
    for spec in sorted(source.glob("*/spec.yaml")):
        (target / spec.parent.name).mkdir(parents=True, exist_ok=True)
        (target / spec.parent.name / "spec.yaml").write_bytes(spec.read_bytes())
    return target


def bench_gpu(
    tiny: bool = False,
    units: int = 5,
    bandwidth_gb_s: float | None = None,
    engines_root: Path | None = None,
) -> int:
    """Print the benchmark (see the module docstring); exit status 0 (figures, not a test)."""
    from venus_ros.engines.build import default_root

    try:
        import torch
    except ImportError:
        torch = None
    cuda = torch is not None and torch.cuda.is_available()
    _say("# venus-ros bench gpu" + (" --tiny" if tiny else ""))
    if torch is None:
        _say("torch: not installed; part 1 skipped (pip install -e '.[test]' for CPU torch)")
    else:
        devices = torch.cuda.get_device_name(0) if cuda else "none"
        _say(f"torch {torch.__version__}, CUDA {torch.version.cuda or '-'}, GPU: {devices}")

    _say("\n## 1. language backbone per unit (prefill 114 tokens + 20 decode steps, KV cache)")
    if torch is not None and (tiny or cuda):
        size = TINY if tiny else QWEN3_8B
        device = "cpu" if tiny else "cuda"
        name = "cpu" if tiny else torch.cuda.get_device_name(0)
        bandwidth, source = _bandwidth(name, bandwidth_gb_s)
        what = "tiny (2 layers, hidden 64)" if tiny else "Qwen3-8B dimensions, random weights"
        _say(f"backbone: {what} on {device}; bandwidth {bandwidth or '?'} GB/s ({source})")
        rows = bench_backbone(size, device, units=units, bandwidth_gb_s=bandwidth)
        _say(
            f"{'mode':30} {'unit ms':>9} {'prefill':>9} {'ms/token':>9} {'weights':>10} "
            f"{'bound ms':>9}  note"
        )
        for row in rows:
            if row.note:
                _say(f"{row.label:30} {'-':>9} {'-':>9} {'-':>9} {'-':>10} {'-':>9}  {row.note}")
                continue
            bound = f"{row.bound_ms:9.1f}" if row.bound_ms is not None else f"{'?':>9}"
            real_time = "real time" if row.unit_ms < 1000 else "SLOWER than real time"
            _say(
                f"{row.label:30} {row.unit_ms:9.1f} {row.prefill_ms:9.1f} "
                f"{row.decode_ms_per_token:9.2f} {_size(row.weight_bytes):>10} {bound}  "
                f"{real_time}"
            )
    elif torch is not None:
        _say(
            "skipped: no CUDA device (the 8B backbone needs ~17 GB of GPU memory in bf16); "
            "--tiny runs the same code on CPU"
        )

    _say("\n## 2. ONNX engines (engines pipeline; every usable provider)")
    root = engines_root or default_root()
    with tempfile.TemporaryDirectory(prefix="venus-engines-") as scratch:
        if tiny:  # build into a scratch copy of the specs, leave the checkout alone
            root = _specs_copy(root, Path(scratch))
        rows2 = bench_engines(root, runs=20 if tiny else 200)
    _say(f"{'engine':10} {'variant':8} {'provider':28} {'ms/call':>9}  note")
    for engine, variant, provider, ms, note in rows2:
        figure = f"{ms:9.3f}" if ms else f"{'-':>9}"
        _say(f"{engine:10} {variant:8} {provider:28} {figure}  {note}")
    return 0
