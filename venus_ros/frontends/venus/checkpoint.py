"""What a Realtime-Venus / MiniCPM-o checkpoint folder holds, read without loading it.

Everything here reads files only (``config.json``, ``added_tokens.json``, safetensors headers)
and imports no heavy library, so a bad path, a checkpoint that needs another transformers, or
a missing GPU is reported in a second, before torch is even imported.

The remote code of MiniCPM-o 4.5 and both Realtime-Venus checkpoints pins its own library
versions (:data:`REMOTE_CODE_PINS`, from their model cards): ``transformers==4.51.0`` and
``torch>=2.3,<=2.8``. They do not fit this package's default environment (torch 2.13 CPU,
transformers 5.x); ``scripts/venus_gpu_env.sh`` creates a separate one on a GPU machine.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from venus_ros.core.frontend import FrontendError
from venus_ros.core.protocol import TOKEN_IDS

__all__ = [
    "BANDWIDTH_GB_S",
    "PROTOCOL_TOKENS",
    "REMOTE_CODE_PINS",
    "CheckpointInfo",
    "check_versions",
    "expected_unit_seconds",
    "inspect_checkpoint",
]

#: Library pins of the upstream remote code, by ``model_type`` in ``config.json``.
REMOTE_CODE_PINS: Mapping[str, Mapping[str, str]] = {
    "minicpmo": {"transformers": "==4.51.0", "torch": ">=2.3,<=2.8"},
}

#: Protocol tokens a Realtime-Venus tokenizer defines (the first four exist in MiniCPM-o 4.5
#: too; the delegation tokens only in the Realtime-Venus checkpoints).
PROTOCOL_TOKENS: tuple[str, ...] = (
    "<|speak|>",
    "<|listen|>",
    "<|turn_eos|>",
    "<|chunk_eos|>",
    "<unit>",
    "</unit>",
    "<image>",
    "</image>",
    "<delegate>",
    "</delegate>",
    "<backend>",
    "</backend>",
)

#: Memory bandwidth, GB/s, used for the expected per-unit time (decoding is bandwidth bound).
BANDWIDTH_GB_S: Mapping[str, float] = {
    "cpu": 20.0,  # a desktop's dual-channel DDR; what a CPU-only run can hope for
    "jetson-orin-agx": 204.8,
    "rtx-4090": 1008.0,
    "a100": 1555.0,
    "rtx-pro-6000": 1792.0,
    "h100": 3350.0,
    "h200": 4800.0,
}

#: Forward passes per unit: one prefill of the unit's inputs and up to 20 speak tokens.
PASSES_PER_UNIT = 21

_SAFETENSORS_BYTES = {"F64": 8, "F32": 4, "BF16": 2, "F16": 2, "I64": 8, "I32": 4, "I8": 1}
_SAFETENSORS_BYTES |= {"U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1, "I16": 2}


@dataclass(frozen=True)
class CheckpointInfo:
    """A checkpoint folder as read from its files.

    Attributes:
        path: the folder.
        model_type: ``config.json``'s ``model_type``.
        auto_model: ``auto_map["AutoModel"]``: the remote-code class transformers will load.
        parameters: weight count from the safetensors headers (0 if there are none).
        stored_bytes: bytes of weights as stored.
        token_ids: protocol token ids from ``added_tokens.json`` (the ones present).
        pins: library pins of its remote code (:data:`REMOTE_CODE_PINS`), empty if unknown.
    """

    path: Path
    model_type: str
    auto_model: str
    parameters: int
    stored_bytes: int
    token_ids: Mapping[str, int] = field(default_factory=dict)
    pins: Mapping[str, str] = field(default_factory=dict)

    @property
    def can_delegate(self) -> bool:
        """The tokenizer has the ``<delegate>`` / ``<backend>`` tokens (Realtime-Venus)."""
        return all(t in self.token_ids for t in ("<delegate>", "</delegate>", "<backend>"))


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise FrontendError(f"venus: {path} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise FrontendError(f"venus: {path} must hold a JSON object")
    return data


def _safetensors_header(path: Path) -> dict[str, Any]:
    with path.open("rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        if length > 100_000_000:
            raise FrontendError(f"venus: {path} has a corrupt safetensors header")
        return json.loads(f.read(length))


def _weights(folder: Path) -> tuple[int, int]:
    """(parameters, stored bytes) over every ``*.safetensors`` file of ``folder``."""
    params = stored = 0
    for file in sorted(folder.glob("*.safetensors")):
        for name, entry in _safetensors_header(file).items():
            if name == "__metadata__":
                continue
            count = 1
            for dim in entry["shape"]:
                count *= int(dim)
            params += count
            stored += count * _SAFETENSORS_BYTES.get(entry["dtype"], 4)
    return params, stored


def inspect_checkpoint(path: str | Path) -> CheckpointInfo:
    """Read a checkpoint folder's description.

    Raises:
        FrontendError: the folder or its ``config.json`` is missing, or it is not a
            remote-code checkpoint (no ``auto_map["AutoModel"]``), or a protocol token id is
            duplicated.
    """
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise FrontendError(
            f"venus: no checkpoint folder at {folder}; download one first, e.g. "
            "`hf download inclusionAI/Realtime-Venus --local-dir PATH` (or openbmb/MiniCPM-o-4_5)"
        )
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise FrontendError(f"venus: {folder} has no config.json: not a transformers checkpoint")
    config = _read_json(config_path)
    auto_model = (config.get("auto_map") or {}).get("AutoModel", "")
    if not auto_model:
        raise FrontendError(
            f"venus: {config_path} names no auto_map.AutoModel: not a remote-code "
            "MiniCPM-o / Realtime-Venus checkpoint"
        )
    model_type = str(config.get("model_type", ""))
    token_ids: dict[str, int] = {}
    added = folder / "added_tokens.json"
    if added.is_file():
        table = _read_json(added)
        token_ids = {t: int(table[t]) for t in PROTOCOL_TOKENS if t in table}
    if len(set(token_ids.values())) != len(token_ids):
        raise FrontendError(f"venus: {added} gives two protocol tokens the same id")
    params, stored = _weights(folder)
    return CheckpointInfo(
        path=folder,
        model_type=model_type,
        auto_model=str(auto_model),
        parameters=params,
        stored_bytes=stored,
        token_ids=token_ids,
        pins=dict(REMOTE_CODE_PINS.get(model_type, {})),
    )


def _installed(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def check_versions(info: CheckpointInfo, installed: Mapping[str, str | None] | None = None) -> None:
    """Refuse to load a checkpoint whose remote code pins other library versions.

    Args:
        info: the checkpoint.
        installed: ``{package: version}`` to check against (default: this environment's).

    Raises:
        FrontendError: naming each package, the version installed and the one required, and
            the script that creates a matching environment.
    """
    problems = []
    for package, spec in info.pins.items():
        have = installed[package] if installed is not None else _installed(package)
        if have is None:
            problems.append(f"{package} is not installed (needs {spec})")
            continue
        try:
            version = Version(have)
        except InvalidVersion:
            problems.append(f"{package} {have} is not a version (needs {spec})")
            continue
        # a local build such as 2.8.0+cu128 satisfies <=2.8 like 2.8.0 does
        if Version(version.base_version) not in SpecifierSet(spec):
            problems.append(f"{package} {have} is installed, its remote code needs {spec}")
    if problems:
        raise FrontendError(
            f"venus: checkpoint {info.path} ({info.model_type}) cannot load here: "
            + "; ".join(problems)
            + ". Create its environment with scripts/venus_gpu_env.sh (pip install -e '.[venus]'"
            " in a separate venv), or pass versions=ignore to try anyway."
        )


def expected_unit_seconds(weight_bytes: int, device: str = "cpu") -> float:
    """Lower bound of one unit's compute: every pass reads all weights once.

    Args:
        weight_bytes: bytes of weights as they sit in memory while running.
        device: a key of :data:`BANDWIDTH_GB_S`.
    """
    return PASSES_PER_UNIT * weight_bytes / (BANDWIDTH_GB_S[device] * 1e9)


def known_token_mismatches(info: CheckpointInfo) -> dict[str, tuple[int, int]]:
    """Protocol tokens whose id differs from MiniCPM-o 4.5's (:data:`TOKEN_IDS`)."""
    return {
        token: (info.token_ids[token], want)
        for token, want in TOKEN_IDS.items()
        if token in info.token_ids and info.token_ids[token] != want
    }
