"""Recipes that compile a Venus / MiniCPM-o checkpoint's language backbone with existing engines.

We do not write a compiler: a recipe checks that a toolchain is installed, prepares its input,
runs the toolchain's own commands and records what it did in ``build/manifest.json``.

* ``tensorrt-edgellm``: NVIDIA TensorRT Edge-LLM (``pip install tensorrt-edgellm`` for the
  Python export tools; its C++ ``llm_build`` compiled against TensorRT, on the target device
  for Jetson) — ``tensorrt-edgellm-quantize-llm`` (fp8, int4_awq, nvfp4), then
  ``tensorrt-edgellm-export-llm`` to ONNX, then ``llm_build`` to a TensorRT engine for
  Jetson and desktop GPUs.
* ``gguf``: llama.cpp-omni (a source checkout at ``$LLAMA_CPP_OMNI_DIR``, built) —
  ``convert_hf_to_gguf.py`` to F16, then ``llama-quantize`` to Q8_0 or Q4_K_M, for 12 GB-class
  GPUs.

Both take only the language backbone: :func:`extract_backbone` copies the ``llm.*`` tensors of
the checkpoint (MiniCPM-o 4.5 holds its Qwen3 language model as ``self.llm``) into a plain
Qwen3 checkpoint folder, byte for byte, with a Qwen3 ``config.json`` made from the checkpoint's
top-level language-model fields. The audio encoder, vision encoder and speech decoder are not
compiled here (OpenBMB publishes GGUF builds of them for llama.cpp-omni).

Unverified: no toolchain exists on the development machines, so no recipe has been run end to
end; the commands follow the toolchains' documentation (TensorRT Edge-LLM 0.11 quick start and
``llm_build`` options; llama.cpp's converter and quantizer), and the tests cover everything
around them (spec, commands, toolchain check, backbone extraction, manifest).
"""

from __future__ import annotations

import datetime
import hashlib
import importlib.util
import json
import os
import shutil
import struct
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "RecipeSpec",
    "Step",
    "Tool",
    "extract_backbone",
    "missing_tools",
    "recipe_steps",
    "run_recipe",
]

EDGELLM_QUANT = ("fp16", "fp8", "int4_awq", "nvfp4")
GGUF_QUANT = ("F16", "Q8_0", "Q4_K_M")

#: Top-level config fields of the language model kept in the extracted Qwen3 config.
QWEN3_FIELDS = (
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "hidden_act",
    "max_position_embeddings",
    "rms_norm_eps",
    "rope_theta",
    "rope_scaling",
    "attention_bias",
    "tie_word_embeddings",
    "bos_token_id",
    "eos_token_id",
    "torch_dtype",
)
_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "generation_config.json",
)


class RecipeSpec(BaseModel):
    """``spec.yaml`` of a recipe engine; unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    recipe: Literal["tensorrt-edgellm", "gguf"]
    description: str = ""
    quantization: str
    max_input_len: int = Field(default=4096, ge=16)
    max_kv_cache: int = Field(default=8192, ge=16)
    weight_prefix: str = "llm."

    @model_validator(mode="after")
    def _known_quantization(self) -> RecipeSpec:
        allowed = EDGELLM_QUANT if self.recipe == "tensorrt-edgellm" else GGUF_QUANT
        if self.quantization not in allowed:
            raise ValueError(f"quantization for {self.recipe} must be one of {allowed}")
        return self


@dataclass(frozen=True)
class Tool:
    """Something a recipe needs: an executable, a Python module or a file."""

    kind: Literal["exe", "module", "file"]
    name: str
    how: str

    def present(self) -> bool:
        """Whether it is there."""
        if self.kind == "exe":
            return shutil.which(self.name) is not None or Path(self.name).is_file()
        if self.kind == "module":
            return importlib.util.find_spec(self.name) is not None
        return Path(self.name).is_file()


@dataclass(frozen=True)
class Step:
    """One command of a recipe (``argv[0] == "extract-backbone"`` is ours, run in process)."""

    name: str
    argv: tuple[str, ...]


def _edgellm_build_exe() -> str:
    folder = os.environ.get("EDGELLM_BUILD_DIR", "")
    return str(Path(folder) / "examples" / "llm" / "llm_build") if folder else "llm_build"


def _llama_dir() -> Path:
    return Path(os.environ.get("LLAMA_CPP_OMNI_DIR", "llama.cpp-omni"))


def toolchain(spec: RecipeSpec) -> tuple[Tool, ...]:
    """What ``spec``'s recipe needs."""
    if spec.recipe == "tensorrt-edgellm":
        tools = [
            Tool("module", "tensorrt_edgellm", "pip install 'tensorrt-edgellm[export,tools]'"),
            Tool("exe", "tensorrt-edgellm-export-llm", "comes with tensorrt-edgellm"),
            Tool(
                "exe",
                _edgellm_build_exe(),
                "build TensorRT Edge-LLM's C++ tools (cmake, TensorRT) and set EDGELLM_BUILD_DIR",
            ),
            Tool("exe", "nvidia-smi", "an NVIDIA GPU with its driver"),
        ]
        if spec.quantization != "fp16":
            tools.insert(1, Tool("exe", "tensorrt-edgellm-quantize-llm", "tensorrt-edgellm"))
        return tuple(tools)
    llama = _llama_dir()
    tools = [
        Tool(
            "file",
            str(llama / "convert_hf_to_gguf.py"),
            "clone llama.cpp-omni and set LLAMA_CPP_OMNI_DIR",
        ),
        Tool("module", "gguf", "pip install gguf (llama.cpp's converter needs it)"),
    ]
    if spec.quantization != "F16":
        quantize = str(llama / "build" / "bin" / "llama-quantize")
        tools.append(Tool("exe", quantize, "cmake -B build && cmake --build build in it"))
    return tuple(tools)


def missing_tools(spec: RecipeSpec) -> list[Tool]:
    """The tools of ``spec``'s recipe that are not installed here."""
    return [tool for tool in toolchain(spec) if not tool.present()]


def recipe_steps(spec: RecipeSpec, checkpoint: Path, out: Path) -> list[Step]:
    """The commands the recipe runs, in order (``out`` is the engine's ``build/``)."""
    work = out / "work"
    llm = work / "llm"
    steps = [Step("extract the language backbone", ("extract-backbone", str(checkpoint), str(llm)))]
    if spec.recipe == "tensorrt-edgellm":
        source = llm
        if spec.quantization != "fp16":
            source = work / "quantized"
            steps.append(
                Step(
                    f"quantize ({spec.quantization})",
                    (
                        "tensorrt-edgellm-quantize-llm",
                        "--model_dir",
                        str(llm),
                        "--output_dir",
                        str(source),
                        "--quantization",
                        spec.quantization,
                    ),
                )
            )
        steps.append(
            Step(
                "export to ONNX",
                (
                    "tensorrt-edgellm-export-llm",
                    "--model_dir",
                    str(source),
                    "--output_dir",
                    str(work / "onnx"),
                ),
            )
        )
        steps.append(
            Step(
                "build the TensorRT engine",
                (
                    _edgellm_build_exe(),
                    "--onnxDir",
                    str(work / "onnx"),
                    "--engineDir",
                    str(out / "engine"),
                    "--maxInputLen",
                    str(spec.max_input_len),
                    "--maxKVCacheCapacity",
                    str(spec.max_kv_cache),
                ),
            )
        )
        return steps
    llama = _llama_dir()
    f16 = out / "llm-F16.gguf"
    steps.append(
        Step(
            "convert to GGUF (F16)",
            (
                "python",
                str(llama / "convert_hf_to_gguf.py"),
                str(llm),
                "--outfile",
                str(f16),
                "--outtype",
                "f16",
            ),
        )
    )
    if spec.quantization != "F16":
        steps.append(
            Step(
                f"quantize ({spec.quantization})",
                (
                    str(llama / "build" / "bin" / "llama-quantize"),
                    str(f16),
                    str(out / f"llm-{spec.quantization}.gguf"),
                    spec.quantization,
                ),
            )
        )
    return steps


def _header(path: Path) -> tuple[dict[str, Any], int]:
    with path.open("rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(length)), 8 + length


def extract_backbone(checkpoint: Path, out: Path, prefix: str = "llm.") -> dict[str, Any]:
    """Copy the ``prefix`` tensors of every safetensors file into a plain Qwen3 checkpoint.

    Tensors are copied byte for byte (any dtype, bf16 included; no torch), renamed without the
    prefix; ``config.json`` becomes a Qwen3 config of the checkpoint's language-model fields;
    tokenizer files are copied.

    Returns:
        ``{"tensors": n, "bytes": b, "config": {...}}``.

    Raises:
        ValueError: no tensor has the prefix, or the checkpoint has no config.json.
    """
    checkpoint, out = Path(checkpoint), Path(out)
    config_path = checkpoint / "config.json"
    if not config_path.is_file():
        raise ValueError(f"{checkpoint} has no config.json")
    config = json.loads(config_path.read_text(encoding="utf-8"))
    source = config.get("text_config") or config  # nested where a checkpoint keeps it so
    out.mkdir(parents=True, exist_ok=True)
    tensors = copied = 0
    for file in sorted(checkpoint.glob("*.safetensors")):
        header, start = _header(file)
        keep = {k: v for k, v in header.items() if k.startswith(prefix)}
        if not keep:
            continue
        new_header: dict[str, Any] = {}
        offset = 0
        order = sorted(keep, key=lambda k: keep[k]["data_offsets"][0])
        for name in order:
            begin, end = keep[name]["data_offsets"]
            new_header[name[len(prefix) :]] = {
                "dtype": keep[name]["dtype"],
                "shape": keep[name]["shape"],
                "data_offsets": [offset, offset + end - begin],
            }
            offset += end - begin
        blob = json.dumps(new_header, separators=(",", ":")).encode()
        blob += b" " * (-len(blob) % 8)
        with file.open("rb") as src, (out / file.name).open("wb") as dst:
            dst.write(struct.pack("<Q", len(blob)) + blob)
            for name in order:
                begin, end = keep[name]["data_offsets"]
                src.seek(start + begin)
                dst.write(src.read(end - begin))
        tensors += len(order)
        copied += offset
    if not tensors:
        raise ValueError(f"no tensor of {checkpoint} starts with {prefix!r}")
    qwen3 = {k: source[k] for k in QWEN3_FIELDS if k in source}
    qwen3 |= {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"]}
    (out / "config.json").write_text(json.dumps(qwen3, indent=2) + "\n", encoding="utf-8")
    for name in _TOKENIZER_FILES:
        if (checkpoint / name).is_file():
            shutil.copyfile(checkpoint / name, out / name)
    return {"tensors": tensors, "bytes": copied, "config": qwen3}


def sha256_file(path: Path) -> str:
    """The SHA-256 of a file, read in 8 MiB pieces (recipe outputs can be gigabytes)."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(8 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def run_recipe(
    name: str,
    spec: RecipeSpec,
    checkpoint: Path,
    out: Path,
    *,
    dry_run: bool = False,
    run: Any = subprocess.run,
) -> dict[str, Any]:
    """Check the toolchain, then run the recipe's steps and write ``out/manifest.json``.

    Args:
        name: the engine's name.
        spec: its recipe spec.
        checkpoint: the Venus / MiniCPM-o checkpoint folder.
        out: the engine's ``build/`` folder.
        dry_run: only return the plan (steps and missing tools); run and write nothing.
        run: runs one command (``subprocess.run``'s signature).

    Raises:
        RuntimeError: a missing toolchain piece (all of them named, each with how to get it)
            or a failing command.
    """
    steps = recipe_steps(spec, checkpoint, out)
    missing = missing_tools(spec)
    plan = {
        "name": name,
        "recipe": spec.recipe,
        "quantization": spec.quantization,
        "steps": [{"name": s.name, "argv": list(s.argv)} for s in steps],
        "missing": [{"tool": t.name, "how": t.how} for t in missing],
    }
    if dry_run:
        return plan
    if missing:
        raise RuntimeError(
            f"recipe {spec.recipe} cannot run here; missing: "
            + "; ".join(f"{t.name} ({t.how})" for t in missing)
        )
    out.mkdir(parents=True, exist_ok=True)
    extracted: Mapping[str, Any] = {}
    for step in steps:
        if step.argv[0] == "extract-backbone":
            extracted = extract_backbone(Path(step.argv[1]), Path(step.argv[2]), spec.weight_prefix)
            continue
        result = run(list(step.argv), check=False)
        if result.returncode != 0:
            raise RuntimeError(f"recipe step {step.name!r} failed ({result.returncode})")
    outputs = {
        str(p.relative_to(out)): {"bytes": p.stat().st_size, "sha256": sha256_file(p)}
        for p in sorted(out.rglob("*"))
        if p.is_file() and "work" not in p.relative_to(out).parts and p.name != "manifest.json"
    }
    manifest = {
        **plan,
        "checkpoint": {
            "path": str(checkpoint),
            "config_sha256": sha256_file(checkpoint / "config.json"),
            "backbone_tensors": extracted.get("tensors"),
            "backbone_bytes": extracted.get("bytes"),
        },
        "built_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "outputs": outputs,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest
