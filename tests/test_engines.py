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


def test_the_cascade_floor_policy_runs_the_built_engine_on_the_probed_provider(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import venus_ros.engines.providers as providers
    from venus_ros.frontends.cascade.floor import TrainedFloorPolicy

    root = _root(tmp_path, "floor")
    manifest = build_engine(root / "floor")
    built = root / "floor" / "build" / manifest["variants"]["fp32"]["file"]
    opened: list[Path] = []

    def spy(model, **kwargs):  # the factory, recording what it opened
        opened.append(Path(model))
        return make_session(model, **kwargs)

    monkeypatch.setattr(providers, "make_session", spy)
    policy = TrainedFloorPolicy(built)
    assert opened[0] == built  # (the MiniLM embedder, when built here, goes through it too)
    assert policy._session.get_providers()[0] == probe_providers().best
    x = np.random.default_rng(0).standard_normal((3, policy._session.get_inputs()[0].shape[1]))
    reference = make_session(FloorNetwork().reference_file(), providers=[CPU])
    name = policy._session.get_inputs()[0].name
    feed = {name: x.astype(np.float32)}
    np.testing.assert_allclose(
        policy._session.run(None, feed)[0], reference.run(None, feed)[0], rtol=1e-6, atol=1e-6
    )


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
    assert "floor          floor                    fp32,fp16        not built" in text
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


# --- recipes (toolchains absent here: everything around the commands is tested) ------------


def _safetensors(path: Path, tensors: dict[str, tuple[str, list[int], bytes]]) -> None:
    header, offset, data = {}, 0, b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        data += raw
    blob = json.dumps(header).encode()
    path.write_bytes(len(blob).to_bytes(8, "little") + blob + data)


def _venus_like(folder: Path) -> Path:
    """A checkpoint with MiniCPM-o's layout: ``llm.*`` next to other modules, bf16 weights."""
    folder.mkdir()
    config = {
        "model_type": "minicpmo",
        "architectures": ["MiniCPMO"],
        "hidden_size": 8,
        "num_hidden_layers": 1,
        "vocab_size": 4,
        "rope_theta": 1e6,
        "audio_config": {"d_model": 16},
    }
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "tokenizer.json").write_text("{}")
    rng = np.random.default_rng(0)
    bf16 = rng.integers(0, 255, 64, dtype=np.uint8).tobytes()
    f32 = np.arange(32, dtype=np.float32)
    _safetensors(
        folder / "model-00001-of-00002.safetensors",
        {
            "apm.conv.weight": ("F32", [32], f32.tobytes()),
            "llm.model.embed_tokens.weight": ("BF16", [4, 8], bf16),
        },
    )
    _safetensors(
        folder / "model-00002-of-00002.safetensors",
        {"llm.lm_head.weight": ("F32", [4, 8], f32.tobytes()), "tts.x": ("F32", [32], b"\0" * 128)},
    )
    return folder


def test_recipe_specs_are_tracked_and_checked(tmp_path: Path) -> None:
    from venus_ros.engines.recipes import RecipeSpec

    edge = load_spec(ENGINES / "venus-edgellm")
    gguf = load_spec(ENGINES / "venus-gguf")
    assert isinstance(edge, RecipeSpec) and edge.quantization == "int4_awq"
    assert isinstance(gguf, RecipeSpec) and gguf.quantization == "Q4_K_M"
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "spec.yaml").write_text("recipe: gguf\nquantization: int4_awq\n")
    with pytest.raises(EngineError, match="Q4_K_M"):
        load_spec(tmp_path / "x")


def test_recipe_commands_follow_the_toolchains(tmp_path: Path, monkeypatch) -> None:
    from venus_ros.engines.recipes import RecipeSpec, recipe_steps

    monkeypatch.setenv("LLAMA_CPP_OMNI_DIR", "/opt/llama.cpp-omni")
    monkeypatch.delenv("EDGELLM_BUILD_DIR", raising=False)
    ckpt, out = Path("/models/venus"), tmp_path / "build"
    edge = recipe_steps(RecipeSpec(recipe="tensorrt-edgellm", quantization="fp8"), ckpt, out)
    assert [s.argv[0] for s in edge] == [
        "extract-backbone",
        "tensorrt-edgellm-quantize-llm",
        "tensorrt-edgellm-export-llm",
        "llm_build",
    ]
    assert edge[1].argv[-2:] == ("--quantization", "fp8")
    assert edge[3].argv[-4:] == ("--maxInputLen", "4096", "--maxKVCacheCapacity", "8192")
    fp16 = recipe_steps(RecipeSpec(recipe="tensorrt-edgellm", quantization="fp16"), ckpt, out)
    assert "tensorrt-edgellm-quantize-llm" not in [s.argv[0] for s in fp16]
    gguf = recipe_steps(RecipeSpec(recipe="gguf", quantization="Q8_0"), ckpt, out)
    assert gguf[1].argv[:2] == ("python", "/opt/llama.cpp-omni/convert_hf_to_gguf.py")
    assert gguf[2].argv == (
        "/opt/llama.cpp-omni/build/bin/llama-quantize",
        str(out / "llm-F16.gguf"),
        str(out / "llm-Q8_0.gguf"),
        "Q8_0",
    )


def test_backbone_extraction_copies_the_llm_tensors_byte_for_byte(tmp_path: Path) -> None:
    from venus_ros.engines.recipes import _header, extract_backbone

    ckpt = _venus_like(tmp_path / "venus")
    info = extract_backbone(ckpt, tmp_path / "llm")
    assert info["tensors"] == 2 and info["bytes"] == 64 + 128
    assert info["config"]["model_type"] == "qwen3" and info["config"]["rope_theta"] == 1e6
    assert "audio_config" not in info["config"]
    first, start = _header(tmp_path / "llm" / "model-00001-of-00002.safetensors")
    assert set(first) == {"model.embed_tokens.weight"}
    assert first["model.embed_tokens.weight"]["dtype"] == "BF16"
    source, src_start = _header(ckpt / "model-00001-of-00002.safetensors")
    a, b = source["llm.model.embed_tokens.weight"]["data_offsets"]
    original = (ckpt / "model-00001-of-00002.safetensors").read_bytes()[
        src_start + a : src_start + b
    ]
    copied = (tmp_path / "llm" / "model-00001-of-00002.safetensors").read_bytes()[start:]
    assert copied == original
    from safetensors.numpy import load_file

    second = load_file(tmp_path / "llm" / "model-00002-of-00002.safetensors")
    assert list(second) == ["lm_head.weight"] and second["lm_head.weight"].shape == (4, 8)
    assert (tmp_path / "llm" / "tokenizer.json").is_file()
    with pytest.raises(ValueError, match=r"starts with 'vision\.'"):
        extract_backbone(ckpt, tmp_path / "none", prefix="vision.")


def test_a_recipe_names_every_missing_tool_and_runs_nothing(tmp_path: Path) -> None:
    from venus_ros.engines.recipes import missing_tools

    root = _root(tmp_path, "venus-gguf")
    spec = load_spec(root / "venus-gguf")
    if not missing_tools(spec):
        pytest.skip("llama.cpp-omni is installed here")
    with pytest.raises(EngineError, match=r"missing: .*convert_hf_to_gguf\.py"):
        build_engine(root / "venus-gguf", checkpoint=_venus_like(tmp_path / "venus"))
    with pytest.raises(EngineError, match="needs --checkpoint"):
        build_engine(root / "venus-gguf")
    assert not (root / "venus-gguf" / "build").exists()


def test_a_recipe_run_writes_its_manifest(tmp_path: Path, monkeypatch) -> None:
    """The toolchain's commands are the boundary: a stand-in runner writes what they would."""
    from venus_ros.engines import recipes

    monkeypatch.setattr(recipes.Tool, "present", lambda self: True)
    ran: list[list[str]] = []

    class Done:
        returncode = 0

    def runner(argv: list[str], check: bool) -> Done:
        ran.append(argv)
        if "--outfile" in argv:
            Path(argv[argv.index("--outfile") + 1]).write_bytes(b"GGUF-f16")
        else:
            Path(argv[2]).write_bytes(b"GGUF-q4")
        return Done()

    spec = recipes.RecipeSpec(recipe="gguf", quantization="Q4_K_M")
    out = tmp_path / "build"
    manifest = recipes.run_recipe("g", spec, _venus_like(tmp_path / "venus"), out, run=runner)
    assert len(ran) == 2 and (out / "work" / "llm" / "config.json").is_file()
    assert set(manifest["outputs"]) == {"llm-F16.gguf", "llm-Q4_K_M.gguf"}
    assert manifest["checkpoint"]["backbone_tensors"] == 2
    saved = json.loads((out / "manifest.json").read_text())
    assert saved["outputs"]["llm-Q4_K_M.gguf"]["bytes"] == len(b"GGUF-q4")
