"""Full-Duplex-Bench layouts in both directions: suites written for FDB run here unchanged, and
our outputs are written so that FDB's own scripts can score them.

Reading (:func:`load_any_suite`), learnt from FDB's ``v1_v1.5/dataset/README.md`` and example
data (our own code):

* **v1.5**: ``ROOT/<subset>/<id>/`` (or ``ROOT`` being one subset folder) with ``input.wav``,
  optional ``clean_input.wav`` and ``metadata.json`` ``{"context_text", "current_turn_text",
  "timestamps": [start, end]}``. The subset folder names the category: ``user_interruption`` ->
  ``interruption`` (expected ``respond``), ``user_backchannel`` -> ``backchannel``,
  ``talking_to_other`` -> ``other_directed``, ``background_speech`` -> ``background`` (expected
  ``resume``). The overlap is ``timestamps``; its text is ``current_turn_text``; nothing makes
  the assistant speak (it answers ``context_text`` itself, as in FDB).
* **v1**: a sample folder with ``input.wav`` and ``interrupt.json`` (``[{"context",
  "interrupt", "timestamp"}]``: an interruption), ``pause.json`` (``[{"text": "[PAUSE]",
  "timestamp"}]``: the pauses) or ``turn_taking.json`` (``[{"text": "[TURN-TAKING]",
  "timestamp"}]``: the user's turn ends at the first timestamp's start).
* Anything else is our own format (:func:`venus_ros.eval.scenario.load_suite`).

Writing (:func:`write_fdb_sample`), for ``venus-ros eval run --fdb-out DIR``:
``DIR/<subset>/<id>/`` holds ``input.wav`` and ``clean_input.wav`` (16 kHz), ``output.wav`` and
``clean_output.wav`` (the assistant's PLAYED audio on the session time axis, 16 kHz mono,
time-synchronous with the input: sample ``i`` of both is the same instant; at least as long as
the input), ``metadata.json`` in FDB v1.5's keys, and the transcripts ``input.json``,
``clean_input.json``, ``output.json``, ``clean_output.json`` as FDB writes them (``{"text",
"chunks": [{"text", "timestamp": [start, end]}]}``). Pause and turn-taking samples go to
``pause_handling`` / ``smooth_turn_taking`` with a v1 ``pause.json`` / ``turn_taking.json``;
delegation and tool use have no FDB task and are not written.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from venus_ros.eval.judge import TimedWord, fdb_transcript
from venus_ros.eval.scenario import (
    INPUT_WAV,
    METADATA_JSON,
    Sample,
    ScenarioError,
    Suite,
    check_within_audio,
    input_duration,
    load_suite,
    parse_metadata,
    read_json,
)

__all__ = [
    "CATEGORY_OF_SUBSET",
    "SUBSET_OF_CATEGORY",
    "V1_FILES",
    "is_fdb_suite",
    "load_any_suite",
    "load_fdb_suite",
    "write_fdb_sample",
]

#: FDB v1.5 subset folder -> our category.
CATEGORY_OF_SUBSET: dict[str, str] = {
    "user_interruption": "interruption",
    "user_backchannel": "backchannel",
    "talking_to_other": "other_directed",
    "background_speech": "background",
}
#: Our category -> the FDB folder it is written to.
SUBSET_OF_CATEGORY: dict[str, str] = {
    **{v: k for k, v in CATEGORY_OF_SUBSET.items()},
    "pause": "pause_handling",
    "turn_taking": "smooth_turn_taking",
}
#: FDB v1 task files.
V1_FILES: tuple[str, ...] = ("interrupt.json", "pause.json", "turn_taking.json")
_RATE = 16000
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


def _is_v15_sample(folder: Path) -> bool:
    meta = folder / METADATA_JSON
    if not meta.is_file():
        return False
    try:
        data = json.loads(meta.read_text(encoding="utf-8"))
    except (ValueError, OSError, RecursionError):
        return False
    return isinstance(data, dict) and "timestamps" in data and "category" not in data


def _is_v1_sample(folder: Path) -> bool:
    return (folder / INPUT_WAV).is_file() and any((folder / n).is_file() for n in V1_FILES)


def _sample_folders(root: Path) -> list[tuple[str | None, Path]]:
    """``(subset, folder)`` of every FDB sample under ``root`` (one or two levels down)."""
    found: list[tuple[str | None, Path]] = []

    def children(p: Path) -> list[Path]:
        return sorted(c for c in p.iterdir() if c.is_dir() and not c.name.startswith("."))

    def is_sample(p: Path) -> bool:
        return _is_v15_sample(p) or _is_v1_sample(p)

    subset = root.name if root.name in CATEGORY_OF_SUBSET else None
    for child in children(root):
        if is_sample(child):
            found.append((subset, child))
        else:
            inner = child.name if child.name in CATEGORY_OF_SUBSET else None
            found += [(inner, g) for g in children(child) if is_sample(g)]
    return found


def is_fdb_suite(root: Path) -> bool:
    """Whether ``root`` holds FDB v1.5 or v1 sample folders (rather than our own format)."""
    root = Path(root)
    return root.is_dir() and bool(_sample_folders(root))


def _sample_id(subset: str | None, folder: Path) -> str:
    name = _SAFE.sub("_", folder.name).lstrip(".") or "sample"
    prefix = subset or _SAFE.sub("_", folder.parent.name).lstrip(".")
    return f"{prefix}.{name}" if prefix else name


def _v15_sample(sample_id: str, subset: str, folder: Path) -> Sample:
    data = read_json(sample_id, METADATA_JSON, folder / METADATA_JSON)
    if not isinstance(data, dict):
        raise ScenarioError(sample_id, METADATA_JSON, "must hold a JSON object")
    if subset not in CATEGORY_OF_SUBSET:
        raise ScenarioError(
            sample_id,
            "subset",
            f"FDB v1.5 sample folder {folder} is not inside a subset folder "
            f"({', '.join(CATEGORY_OF_SUBSET)}), which names its category",
        )
    category = CATEGORY_OF_SUBSET[subset]
    stamps = data.get("timestamps")
    text = data.get("current_turn_text", "")
    if not isinstance(stamps, list) or len(stamps) != 2:
        raise ScenarioError(sample_id, "timestamps", f"must be [start, end], got {stamps!r}")
    if not isinstance(text, str):
        raise ScenarioError(sample_id, "current_turn_text", "must be a string")
    ours = {
        "category": category,
        "turns": [{"start": stamps[0], "end": stamps[1], "text": text}],
        "overlap": stamps,
        "expected": "respond" if category == "interruption" else "resume",
        **{k: v for k, v in data.items() if k != "timestamps"},
        "fdb": {"version": "1.5", "subset": subset},
    }
    return parse_metadata(sample_id, folder, ours)


def _v1_entries(sample_id: str, folder: Path, name: str) -> list[dict[str, Any]]:
    data = read_json(sample_id, name, folder / name)
    if not isinstance(data, list) or not data:
        raise ScenarioError(sample_id, name, "must be a non-empty JSON list")
    for i, item in enumerate(data):
        if not isinstance(item, dict) or "timestamp" not in item:
            raise ScenarioError(sample_id, f"{name}[{i}]", "must be an object with a timestamp")
    return data


def _first_interval(sample_id: str, folder: Path, name: str) -> tuple[dict[str, Any], list]:
    """The first entry of a v1 task file and its ``[start, end]`` timestamp."""
    (entry, *_) = _v1_entries(sample_id, folder, name)
    stamps = entry["timestamp"]
    if not isinstance(stamps, list) or len(stamps) != 2:
        raise ScenarioError(sample_id, f"{name}[0].timestamp", "must be [start, end]")
    return entry, stamps


def _v1_sample(sample_id: str, folder: Path) -> Sample:
    if (folder / "interrupt.json").is_file():
        entry, stamps = _first_interval(sample_id, folder, "interrupt.json")
        data = {
            "category": "interruption",
            "turns": [{"start": stamps[0], "end": stamps[1], "text": entry.get("interrupt", "")}],
            "overlap": stamps,
            "expected": "respond",
            "context_text": entry.get("context", ""),
            "fdb": {"version": "1", "task": "interrupt"},
        }
    elif (folder / "pause.json").is_file():
        entries = _v1_entries(sample_id, folder, "pause.json")
        data = {
            "category": "pause",
            "turns": [],
            "pause": [e["timestamp"] for e in entries],
            "fdb": {"version": "1", "task": "pause"},
        }
    else:
        _, stamps = _first_interval(sample_id, folder, "turn_taking.json")
        data = {
            "category": "turn_taking",
            "turns": [{"start": 0.0, "end": stamps[0], "text": ""}],
            "fdb": {"version": "1", "task": "turn_taking", "timestamp": stamps},
        }
    return parse_metadata(sample_id, folder, data)


def load_fdb_suite(root: Path) -> Suite:
    """Read FDB v1.5 subsets / v1 task folders under ``root`` as a suite (no conversion).

    Raises:
        ScenarioError: a sample breaks FDB's layout (named), or there is none.
    """
    root = Path(root)
    samples = []
    for subset, folder in _sample_folders(root):
        sample_id = _sample_id(subset, folder)
        if _is_v15_sample(folder):
            sample = _v15_sample(sample_id, subset or "", folder)
        else:
            sample = _v1_sample(sample_id, folder)
        check_within_audio(sample, input_duration(sample_id, folder))
        samples.append(sample)
    if not samples:
        raise ScenarioError(str(root), METADATA_JSON, "no FDB sample folders found")
    ids = [s.id for s in samples]
    if len(set(ids)) != len(ids):
        raise ScenarioError(str(root), "id", "two FDB samples map to the same id")
    return Suite(root, tuple(sorted(samples, key=lambda s: s.id)), ())


def load_any_suite(root: Path, categories: Sequence[str] | None = None) -> Suite:
    """An FDB suite (v1.5 or v1) when ``root`` holds one, else our own format."""
    root = Path(root)
    if not is_fdb_suite(root):
        return load_suite(root, categories)
    suite = load_fdb_suite(root)
    if categories is None:
        return suite
    return Suite(suite.root, tuple(s for s in suite.samples if s.category in categories), ())


# --- writing ----------------------------------------------------------------------------------


def _mono16k(audio: np.ndarray, rate: int, length: int | None = None) -> np.ndarray:
    from venus_ros.eval.timing import to_16k

    x = to_16k(np.asarray(audio, dtype=np.float32), int(rate))
    if length is not None and x.size < length:
        x = np.pad(x, (0, length - x.size))
    return np.clip(x, -1.0, 1.0)


def write_fdb_sample(
    out: Path,
    sample: Sample,
    played: tuple[np.ndarray, int],
    clean_played: tuple[np.ndarray, int] | None,
    transcripts: dict[str, Sequence[TimedWord]],
) -> Path | None:
    """Write one sample in FDB's layout (see the module docstring).

    Args:
        out: the export root (``--fdb-out``).
        sample: the scenario sample.
        played: ``(audio, rate)`` the assistant played on the run over ``input.wav``.
        clean_played: the same for the run over the clean input, when there was one.
        transcripts: word lists for any of ``input``, ``clean_input``, ``output``,
            ``clean_output``.

    Returns:
        The sample folder, or None for categories FDB has no task for.
    """
    subset = SUBSET_OF_CATEGORY.get(sample.category)
    if subset is None:
        return None
    folder = Path(out) / subset / _SAFE.sub("_", sample.id)
    folder.mkdir(parents=True, exist_ok=True)
    audio, rate = sample.load_audio()
    user = _mono16k(audio, rate)
    sf.write(str(folder / "input.wav"), user, _RATE, subtype="PCM_16")
    clean_in = sample.clean_audio()
    if clean_in is not None:
        sf.write(str(folder / "clean_input.wav"), _mono16k(*clean_in), _RATE, subtype="PCM_16")
    sf.write(str(folder / "output.wav"), _mono16k(*played, user.size), _RATE, subtype="PCM_16")
    if clean_played is not None:
        clean_out = _mono16k(*clean_played, user.size)
        sf.write(str(folder / "clean_output.wav"), clean_out, _RATE, subtype="PCM_16")
    for name, words in transcripts.items():
        (folder / f"{name}.json").write_text(
            json.dumps(fdb_transcript(words), ensure_ascii=False, indent=2) + "\n",
            encoding="utf-8",
        )
    if sample.category in CATEGORY_OF_SUBSET.values() and sample.overlap is not None:
        from venus_ros.eval.metrics import answer_reference, overlap_text

        meta = {
            "context_text": sample.extra.get("context_text") or answer_reference(sample),
            "current_turn_text": overlap_text(sample),
            "timestamps": list(sample.overlap),
        }
        (folder / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    elif sample.category == "pause":
        from venus_ros.eval.metrics import pause_intervals

        entries = [{"text": "[PAUSE]", "timestamp": list(p)} for p in pause_intervals(sample)]
        (folder / "pause.json").write_text(json.dumps(entries, indent=2) + "\n", encoding="utf-8")
    else:
        end = max((t.end for t in sample.turns), default=0.0)
        entries = [{"text": "[TURN-TAKING]", "timestamp": [end, end]}]
        (folder / "turn_taking.json").write_text(
            json.dumps(entries, indent=2) + "\n", encoding="utf-8"
        )
    return folder
