"""The engines pipeline: specs, ONNX builds with manifests and parity, provider selection, CLI.

The floor policy and the MiniLM encoder are built for real from their weights (into a scratch
copy of engines/) and compared byte for byte with what the cascade runs. GPU providers are
exercised only where ONNX Runtime can really bring them up (onnxruntime-gpu on a GPU machine).
"""

from __future__ import annotations

import io
import json
import logging
import shutil
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest

from venus_ros.cli import main
from venus_ros.engines.build import (
    EngineError,
    build_engine,
    list_engines,
    load_spec,
    verify_engine,
)
from venus_ros.engines.networks import FloorNetwork
from venus_ros.engines.providers import (
    CPU,
    CUDA,
    TENSORRT,
    make_session,
    probe_providers,
    tensorrt_cache_dir,
)

ENGINES = Path(__file__).resolve().parents[1] / "engines"
USABLE = probe_providers().usable


def _root(tmp_path: Path, *names: str) -> Path:
    """A scratch engines folder holding copies of the tracked specs ``names``."""
    for name in names:
        (tmp_path / name).mkdir(parents=True)
        shutil.copyfile(ENGINES / name / "spec.yaml", tmp_path / name / "spec.yaml")
    return tmp_path


def test_tracked_specs_are_valid() -> None:
    names = {s.name: s for s in list_engines(ENGINES)}
    assert {"floor", "minilm"} <= set(names)
    assert all(not s.error for s in names.values())
    assert load_spec(ENGINES / "minilm").variants["int8"].target == "cpu"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("network: floor\nvariants: {fp32: {tolerance: 1e-5}}\ncolour: red\n", "colour"),
        ("network: resnet\nvariants: {fp32: {tolerance: 1e-5}}\n", "unknown network"),
        ("network: floor\nvariants: {fp8: {tolerance: 1e-5}}\n", "fp8"),
        ("network: floor\nvariants: {fp32: {tolerance: 0}}\n", "tolerance"),
        ("network: floor\nvariants: {}\n", "variants"),
    ],
)
def test_bad_specs_are_refused(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "spec.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(EngineError, match=message):
        load_spec(tmp_path / "x")


def test_floor_build_reproduces_the_committed_model(tmp_path: Path) -> None:
    root = _root(tmp_path, "floor")
    manifest = build_engine(root / "floor")
    assert manifest["reproducible"] is True
    assert manifest["reference"]["identical"] is True
    fp32 = manifest["variants"]["fp32"]
    built = (root / "floor" / "build" / fp32["file"]).read_bytes()
    assert built == FloorNetwork().reference_file().read_bytes()
    assert fp32["opset"] == 13 and fp32["inputs"][0]["name"] == "features"
    assert fp32["inputs"][0]["shape"][0] == "batch" and fp32["outputs"][0]["shape"] == ["batch", 2]
    assert all(v["parity"]["passed"] for v in manifest["variants"].values())
    fp16 = manifest["variants"]["fp16"]
    assert fp16["bytes"] < 0.6 * fp32["bytes"]  # weights really in float16
    on_disk = json.loads((root / "floor" / "build" / "manifest.json").read_text())
    assert on_disk["providers"]["usable"][-1] == CPU and on_disk["host"]["python"]
    assert verify_engine(root / "floor") == []
    # tampering is caught
    path = root / "floor" / "build" / fp16["file"]
    path.write_bytes(path.read_bytes()[:-1] + b"\0")
    (root / "floor" / "spec.yaml").write_text(
        (root / "floor" / "spec.yaml").read_text() + "\n# edited\n"
    )
    problems = verify_engine(root / "floor")
    assert any("sha256" in p for p in problems) and any("spec.yaml" in p for p in problems)


def test_minilm_build_matches_the_cascade_graph_and_passes_parity(tmp_path: Path) -> None:
    from venus_ros.frontends.cascade.embed import cached_model_path, model_files

    cascade_graph, _ = cached_model_path(model_files())  # what the cascade runs (built if absent)
    root = _root(tmp_path, "minilm")
    manifest = build_engine(root / "minilm")
    assert manifest["reference"] == {
        "file": str(cascade_graph),
        "sha256": manifest["variants"]["fp32"]["sha256"],
        "identical": True,
    }
    parity = {name: v["parity"] for name, v in manifest["variants"].items()}
    assert parity["fp32"]["max_abs_diff"] < 1e-5
    assert 0 < parity["int8"]["max_abs_diff"] <= 0.08 and parity["int8"]["provider"] == CPU
    assert manifest["variants"]["int8"]["bytes"] < manifest["variants"]["fp32"]["bytes"]


def test_a_failed_parity_check_fails_the_build(tmp_path: Path) -> None:
    (tmp_path / "floor").mkdir()
    (tmp_path / "floor" / "spec.yaml").write_text(
        "network: floor\nvariants: {fp16: {tolerance: 1.0e-9}}\n", encoding="utf-8"
    )
    with pytest.raises(EngineError, match=r"fp16: parity .* > 1e-09"):
        build_engine(tmp_path / "floor")
    manifest = json.loads((tmp_path / "floor" / "build" / "manifest.json").read_text())
    assert manifest["variants"]["fp16"]["parity"]["passed"] is False


def test_providers_are_probed_once_with_one_log_line(caplog: pytest.LogCaptureFixture) -> None:
    probe_providers.cache_clear()
    with caplog.at_level(logging.INFO, logger="venus_ros.engines.providers"):
        first = probe_providers()
        second = probe_providers()
    assert first is second
    lines = [r for r in caplog.records if r.name == "venus_ros.engines.providers"]
    assert len(lines) == 1 and lines[0].getMessage().startswith("onnxruntime ")
    assert first.usable[-1] == CPU and first.best == first.usable[0]
    order = [p for p in (TENSORRT, CUDA, CPU) if p in first.usable]
    assert list(first.usable) == order
    for provider in (TENSORRT, CUDA):
        if provider not in first.usable:
            with pytest.raises(ValueError, match=provider):
                make_session(b"", providers=[provider])


def test_tensorrt_cache_is_keyed_by_gpu_version_and_model(tmp_path: Path) -> None:
    a = tensorrt_cache_dir(tmp_path, "ab" * 32)
    b = tensorrt_cache_dir(tmp_path, "cd" * 32)
    assert a.parent == b.parent == tmp_path / "trt_cache" and a != b
    assert a.name.endswith("-" + "ab" * 8) and "-trt" in a.name


@pytest.mark.skipif(CUDA not in USABLE, reason="needs onnxruntime-gpu with a working CUDA provider")
def test_cuda_provider_runs_the_fp16_floor(tmp_path: Path) -> None:
    manifest = build_engine(_root(tmp_path, "floor") / "floor")
    assert manifest["variants"]["fp16"]["parity"]["provider"] in (TENSORRT, CUDA)
    data = (tmp_path / "floor" / "build" / "floor-fp16.onnx").read_bytes()
    session = make_session(data, providers=[CUDA])
    x = np.zeros((1, manifest["variants"]["fp16"]["inputs"][0]["shape"][1]), np.float32)
    assert session.get_providers()[0] == CUDA and session.run(None, {"features": x})[0].shape == (
        1,
        2,
    )


@pytest.mark.skipif(TENSORRT not in USABLE, reason="needs ONNX Runtime's TensorRT provider")
def test_tensorrt_provider_writes_its_engine_cache(tmp_path: Path) -> None:
    data = (FloorNetwork().reference_file()).read_bytes()
    session = make_session(data, providers=[TENSORRT], cache_root=tmp_path)
    x = np.zeros((1, 427), np.float32)
    session.run(None, {"features": x})
    assert any((tmp_path / "trt_cache").rglob("*"))


def test_cli_engines_build_list_verify(tmp_path: Path) -> None:
    root = _root(tmp_path, "floor")
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["engines", "list", "--root", str(root)]) == 0
        assert main(["engines", "build", "floor", "--root", str(root)]) == 0
        assert main(["engines", "verify", "--root", str(root)]) == 0
        assert main(["engines", "build", "absent", "--root", str(root)]) == 2
    text = out.getvalue()
    assert "floor        floor    fp32,fp16        not built" in text
    assert "floor: built (identical to reference: True; reproducible: True)" in text
    assert "floor: ok" in text


def test_bench_gpu_tiny_prints_its_table(tmp_path: Path) -> None:
    root = _root(tmp_path, "floor")
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["bench", "gpu", "--tiny", "--units", "2", "--engines-root", str(root)]) == 0
    text = out.getvalue()
    assert "## 1. language backbone" in text and "## 2. ONNX engines" in text
    eager = next(line for line in text.splitlines() if line.startswith("fp32 eager"))
    assert float(eager.split()[2]) > 0  # unit ms
    assert "skipped:" in text  # what could not run here is said
    assert "floor      fp32     CPUExecutionProvider" in text
    assert not (root / "floor" / "build").exists()  # --tiny builds into a scratch copy


def test_gpu_modules_import_no_heavy_library() -> None:
    """Importing the engines, the venus frontend and bench gpu loads none of the engines."""
    import subprocess
    import sys

    modules = [
        "venus_ros.engines.build",
        "venus_ros.engines.networks",
        "venus_ros.engines.providers",
        "venus_ros.frontends.venus",
        "venus_ros.frontends.venus.checkpoint",
        "venus_ros.frontends.venus.standin",
        "venus_ros.bench.gpu",
    ]
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "heavy = {'torch', 'transformers', 'onnx', 'onnxruntime', 'tensorrt', 'rclpy'}\n"
        "print(sorted({n.split('.')[0] for n in sys.modules} & heavy))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
