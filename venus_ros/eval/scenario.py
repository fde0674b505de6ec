"""Scenario suites: the Full-Duplex-Bench v1.5 sample layout, extended for this project.

A suite is a folder ``SUITE/`` holding one folder per sample::

    SUITE/<sample_id>/input.wav          16 kHz mono, the user channel (required)
    SUITE/<sample_id>/metadata.json      the keys below (required)
    SUITE/<sample_id>/clean_input.wav    optional, as in FDB v1.5
    SUITE/tools.json                     optional: the suite's tool set

Other files in a sample folder (FDB v1.5 carries some) and folders without a ``metadata.json``
are ignored. ``metadata.json`` keys (see ``docs/eval-format.md``):

* ``category`` (str, required): one of :data:`CATEGORIES`.
* ``turns`` (list, required): ``{"start", "end", "text"}`` for the user's speech, seconds.
* ``overlap`` (``[start, end]``, seconds): required for :data:`OVERLAP_CATEGORIES`.
* ``expected`` (``"respond"`` or ``"resume"``): required for :data:`OVERLAP_CATEGORIES`.
* ``needs_delegation`` (bool): required for ``delegation``.
* ``expected_tool_calls`` (list of ``{"name", "arguments"}``): required for ``tool_use``.
* ``tools`` (list of str, optional): the tool names offered.
* ``assistant_turns`` (list of ``{"start", "text"}``, optional): the assistant is made to be
  speaking ``text`` from ``start``.
* ``idle`` (``{"start", "end", "text", "kind"}``): required for :data:`IDLE_CATEGORIES`: speech
  not addressed to the assistant while it is silent (a remark to another person, a second
  talker, a television); ``kind`` is one of :data:`IDLE_KINDS`. Any user turn after it is a
  real request to the assistant.

Unknown keys are kept in :attr:`Sample.extra` and otherwise ignored. The parser is strict about
the keys it knows: a missing required key, a wrong type, a non-finite or negative time or an
empty interval raises :class:`ScenarioError` naming the sample and the key.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

#: Every scenario category.
CATEGORIES: tuple[str, ...] = (
    "backchannel",
    "interruption",
    "other_directed",
    "background",
    "pause",
    "turn_taking",
    "delegation",
    "tool_use",
    "other_directed_idle",
    "background_idle",
)
#: Categories where the user speaks over the assistant; they need ``overlap`` and ``expected``.
OVERLAP_CATEGORIES: tuple[str, ...] = (
    "backchannel",
    "interruption",
    "other_directed",
    "background",
)
#: Categories where speech not addressed to the assistant comes while it is silent (expected:
#: no reply); they need ``idle``. ``other_directed_idle``: the user talks to someone else
#: (vocatives with other names, side remarks); ``background_idle``: a second talker or a
#: television, quieter and in another voice. Either may be followed by a real request.
IDLE_CATEGORIES: tuple[str, ...] = ("other_directed_idle", "background_idle")
#: What ``idle.kind`` may be: a vocative to another person, a side remark, a second talker, TV.
IDLE_KINDS: tuple[str, ...] = ("vocative", "side", "talker", "tv")
#: What the assistant should do after an overlap.
EXPECTED_VALUES: tuple[str, ...] = ("respond", "resume")
#: Sample rate of ``input.wav`` in the format.
INPUT_RATE = 16000

INPUT_WAV = "input.wav"
CLEAN_WAV = "clean_input.wav"
METADATA_JSON = "metadata.json"
TOOLS_JSON = "tools.json"

#: Keys the parser knows; anything else goes to :attr:`Sample.extra`.
KNOWN_KEYS: frozenset[str] = frozenset(
    {
        "category",
        "turns",
        "overlap",
        "expected",
        "needs_delegation",
        "expected_tool_calls",
        "tools",
        "assistant_turns",
        "idle",
    }
)

_SAMPLE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class ScenarioError(ValueError):
    """A sample or suite file breaks the format.

    Attributes:
        sample: the sample id (for suite-level files such as ``tools.json``: the suite folder).
        key: the offending key, with a path into it where useful (``turns[1].end``).
    """

    def __init__(self, sample: str, key: str, message: str) -> None:
        self.sample = sample
        self.key = key
        self.message = message
        super().__init__(f"sample {sample!r}: key {key!r}: {message}")


@dataclass(frozen=True)
class Turn:
    """One stretch of the user's speech in ``input.wav``, seconds from the file's start."""

    start: float
    end: float
    text: str


@dataclass(frozen=True)
class AssistantTurn:
    """The assistant is made to be speaking ``text`` from ``start`` seconds."""

    start: float
    text: str


@dataclass(frozen=True)
class IdleSpeech:
    """Speech not addressed to the assistant while it is silent (idle categories).

    Attributes:
        start: where it starts in ``input.wav``, seconds.
        end: where it ends, seconds (after ``start``).
        text: what is said.
        kind: one of :data:`IDLE_KINDS`.
    """

    start: float
    end: float
    text: str
    kind: str


@dataclass(frozen=True)
class ToolCall:
    """A tool call: the tool's name and its JSON arguments."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolSpec:
    """A tool of a suite's ``tools.json``.

    Attributes:
        name: the tool's name (unique in the suite).
        description: what the tool does, as shown to the model.
        schema: JSON schema of the arguments (``"parameters"`` in ``tools.json``).
        result: the canned result the runner's recording tool answers with.
    """

    name: str
    description: str
    schema: Mapping[str, Any]
    result: Any = "done"


@dataclass(frozen=True)
class Sample:
    """One parsed sample.

    Attributes:
        id: the folder name.
        folder: the sample's folder.
        category: one of :data:`CATEGORIES`.
        turns: the user's speech, sorted by start.
        overlap: ``(start, end)`` seconds of the overlapping speech (overlap categories).
        expected: ``"respond"`` or ``"resume"`` (overlap categories), else ``None`` unless given.
        needs_delegation: whether the request needs the back end (``delegation``), else ``None``.
        expected_tool_calls: the calls a correct assistant makes (``tool_use``), else empty.
        tools: the tool names offered, ``None`` when the key is absent.
        assistant_turns: scripted assistant speech, sorted by start; empty when absent.
        extra: every unknown key of ``metadata.json``, as read.
        idle: the speech not addressed to the assistant (idle categories), else ``None``.
    """

    id: str
    folder: Path
    category: str
    turns: tuple[Turn, ...]
    overlap: tuple[float, float] | None
    expected: str | None
    needs_delegation: bool | None
    expected_tool_calls: tuple[ToolCall, ...]
    tools: tuple[str, ...] | None
    assistant_turns: tuple[AssistantTurn, ...]
    extra: Mapping[str, Any]
    idle: IdleSpeech | None = None

    @property
    def input_path(self) -> Path:
        """The user channel, ``input.wav``."""
        return self.folder / INPUT_WAV

    @property
    def duration_s(self) -> float:
        """Length of ``input.wav`` in seconds, from its header.

        Raises:
            ScenarioError: the file is missing or unreadable.
        """
        info = wav_info(self.id, self.input_path)
        return info.frames / info.samplerate

    def load_audio(self) -> tuple[np.ndarray, int]:
        """Read ``input.wav``.

        Returns:
            ``(samples, rate)``: 1-D float32 samples in [-1, 1] and the file's sample rate.

        Raises:
            ScenarioError: the file is missing, unreadable or not mono.
        """
        wav_info(self.id, self.input_path)
        try:
            audio, rate = sf.read(str(self.input_path), dtype="float32", always_2d=True)
        except (sf.SoundFileError, OSError, RuntimeError) as exc:
            raise ScenarioError(
                self.id, INPUT_WAV, f"cannot read {self.input_path}: {exc}"
            ) from exc
        return np.ascontiguousarray(audio[:, 0]), int(rate)

    @property
    def clean_path(self) -> Path:
        """FDB v1.5's ``clean_input.wav``: the input without the overlap event."""
        return self.folder / CLEAN_WAV

    def clean_audio(self) -> tuple[np.ndarray, int] | None:
        """The input without the overlap event: ``clean_input.wav`` when the sample has one,
        else (a noise-free synthetic sample, where the overlap is the only speech in its span)
        ``input.wav`` with the overlap's span silenced; None without an overlap.

        Raises:
            ScenarioError: a file is missing, unreadable or not mono.
        """
        if self.clean_path.is_file():
            wav_info(self.id, self.clean_path)
            try:
                audio, rate = sf.read(str(self.clean_path), dtype="float32", always_2d=True)
            except (sf.SoundFileError, OSError, RuntimeError) as exc:
                raise ScenarioError(self.id, CLEAN_WAV, f"cannot read: {exc}") from exc
            return np.ascontiguousarray(audio[:, 0]), int(rate)
        if self.overlap is None:
            return None
        audio, rate = self.load_audio()
        clean = audio.copy()
        clean[round(self.overlap[0] * rate) : round(self.overlap[1] * rate)] = 0.0
        return clean, rate

    def to_metadata(self) -> dict[str, Any]:
        """The sample as a ``metadata.json`` object (unknown keys included); parses back equal."""
        data: dict[str, Any] = dict(self.extra)
        data["category"] = self.category
        data["turns"] = [{"start": t.start, "end": t.end, "text": t.text} for t in self.turns]
        if self.overlap is not None:
            data["overlap"] = list(self.overlap)
        if self.expected is not None:
            data["expected"] = self.expected
        if self.needs_delegation is not None:
            data["needs_delegation"] = self.needs_delegation
        if self.expected_tool_calls or self.category == "tool_use":
            data["expected_tool_calls"] = [
                {"name": c.name, "arguments": dict(c.arguments)} for c in self.expected_tool_calls
            ]
        if self.tools is not None:
            data["tools"] = list(self.tools)
        if self.assistant_turns:
            data["assistant_turns"] = [
                {"start": a.start, "text": a.text} for a in self.assistant_turns
            ]
        if self.idle is not None:
            i = self.idle
            data["idle"] = {"start": i.start, "end": i.end, "text": i.text, "kind": i.kind}
        return data

    def followups(self) -> tuple[Turn, ...]:
        """The user's turns after the idle speech (real requests to the assistant); empty when
        the sample has no ``idle`` or nothing follows it."""
        if self.idle is None:
            return ()
        return tuple(t for t in self.turns if t.start >= self.idle.end)


@dataclass(frozen=True)
class Suite:
    """A loaded suite: its samples sorted by id and the tools of its ``tools.json`` (or none)."""

    root: Path
    samples: tuple[Sample, ...]
    tools: tuple[ToolSpec, ...]

    def by_category(self, category: str) -> tuple[Sample, ...]:
        """The samples of one category, in id order."""
        return tuple(s for s in self.samples if s.category == category)


# --- parsing ---------------------------------------------------------------------------------


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _time(sample: str, key: str, value: Any) -> float:
    """A finite, non-negative number of seconds."""
    if not _is_number(value):
        raise ScenarioError(sample, key, f"must be a number of seconds, got {value!r}")
    try:
        value = float(value)
    except OverflowError:
        raise ScenarioError(
            sample, key, f"must be a finite number of seconds, got a {len(str(value))}-digit int"
        ) from None
    if not math.isfinite(value):
        raise ScenarioError(sample, key, f"must be finite, got {value!r}")
    if value < 0:
        raise ScenarioError(sample, key, f"must be >= 0 seconds, got {value!r}")
    return value


def _text(sample: str, key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ScenarioError(sample, key, f"must be a string, got {type(value).__name__}")
    return value


def _object(sample: str, key: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise ScenarioError(sample, key, f"must be a JSON object, got {type(value).__name__}")
    return value


def _list(sample: str, key: str, value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise ScenarioError(sample, key, f"must be a JSON list, got {type(value).__name__}")
    return value


def _required(sample: str, data: Mapping[str, Any], key: str, category: str) -> Any:
    if key not in data:
        raise ScenarioError(sample, key, f"missing (required for category {category})")
    return data[key]


def _turns(sample: str, value: Any) -> tuple[Turn, ...]:
    turns = []
    for i, item in enumerate(_list(sample, "turns", value)):
        key = f"turns[{i}]"
        item = _object(sample, key, item)
        for name in ("start", "end", "text"):
            if name not in item:
                raise ScenarioError(sample, f"{key}.{name}", "missing")
        start = _time(sample, f"{key}.start", item["start"])
        end = _time(sample, f"{key}.end", item["end"])
        if end < start:
            raise ScenarioError(sample, f"{key}.end", f"end {end} is before start {start}")
        turns.append(Turn(start, end, _text(sample, f"{key}.text", item["text"])))
    return tuple(sorted(turns, key=lambda t: (t.start, t.end)))


def _overlap(sample: str, value: Any) -> tuple[float, float]:
    items = _list(sample, "overlap", value)
    if len(items) != 2:
        raise ScenarioError(sample, "overlap", f"must be [start, end], got {len(items)} values")
    start = _time(sample, "overlap[0]", items[0])
    end = _time(sample, "overlap[1]", items[1])
    if end <= start:
        raise ScenarioError(sample, "overlap", f"end {end} must be after start {start}")
    return start, end


def _idle(sample: str, value: Any) -> IdleSpeech:
    item = _object(sample, "idle", value)
    for name in ("start", "end", "text", "kind"):
        if name not in item:
            raise ScenarioError(sample, f"idle.{name}", "missing")
    start = _time(sample, "idle.start", item["start"])
    end = _time(sample, "idle.end", item["end"])
    if end <= start:
        raise ScenarioError(sample, "idle.end", f"end {end} must be after start {start}")
    kind = _text(sample, "idle.kind", item["kind"])
    if kind not in IDLE_KINDS:
        raise ScenarioError(
            sample, "idle.kind", f"must be one of {', '.join(IDLE_KINDS)}, got {kind!r}"
        )
    return IdleSpeech(start, end, _text(sample, "idle.text", item["text"]), kind)


def _tool_calls(sample: str, value: Any) -> tuple[ToolCall, ...]:
    calls = []
    for i, item in enumerate(_list(sample, "expected_tool_calls", value)):
        key = f"expected_tool_calls[{i}]"
        item = _object(sample, key, item)
        if "name" not in item:
            raise ScenarioError(sample, f"{key}.name", "missing")
        name = _text(sample, f"{key}.name", item["name"])
        if not name:
            raise ScenarioError(sample, f"{key}.name", "must not be empty")
        arguments = _object(sample, f"{key}.arguments", item.get("arguments", {}))
        calls.append(ToolCall(name, dict(arguments)))
    return tuple(calls)


def _assistant_turns(sample: str, value: Any) -> tuple[AssistantTurn, ...]:
    turns = []
    for i, item in enumerate(_list(sample, "assistant_turns", value)):
        key = f"assistant_turns[{i}]"
        item = _object(sample, key, item)
        for name in ("start", "text"):
            if name not in item:
                raise ScenarioError(sample, f"{key}.{name}", "missing")
        start = _time(sample, f"{key}.start", item["start"])
        text = _text(sample, f"{key}.text", item["text"])
        if not text.strip():
            raise ScenarioError(sample, f"{key}.text", "must not be empty")
        turns.append(AssistantTurn(start, text))
    return tuple(sorted(turns, key=lambda a: a.start))


def parse_metadata(sample: str, folder: Path, data: Any) -> Sample:
    """Check a decoded ``metadata.json`` and build the :class:`Sample`.

    Args:
        sample: the sample id (named in errors).
        folder: the sample's folder (not read here).
        data: the decoded JSON.

    Returns:
        The sample.

    Raises:
        ScenarioError: the metadata breaks the format (the message names the sample and key).
    """
    if not isinstance(data, dict):
        raise ScenarioError(
            sample, METADATA_JSON, f"must hold a JSON object, got {type(data).__name__}"
        )
    if "category" not in data:
        raise ScenarioError(sample, "category", "missing (required for every sample)")
    category = data["category"]
    if not isinstance(category, str) or category not in CATEGORIES:
        raise ScenarioError(
            sample, "category", f"must be one of {', '.join(CATEGORIES)}, got {category!r}"
        )
    if "turns" not in data:
        raise ScenarioError(sample, "turns", "missing (required for every sample)")
    turns = _turns(sample, data["turns"])

    overlapping = category in OVERLAP_CATEGORIES
    overlap = None
    if overlapping or "overlap" in data:
        overlap = _overlap(sample, _required(sample, data, "overlap", category))
    expected = None
    if overlapping or "expected" in data:
        expected = _required(sample, data, "expected", category)
        if expected not in EXPECTED_VALUES:
            raise ScenarioError(
                sample, "expected", f"must be one of {', '.join(EXPECTED_VALUES)}, got {expected!r}"
            )
    needs_delegation = None
    if category == "delegation" or "needs_delegation" in data:
        needs_delegation = _required(sample, data, "needs_delegation", category)
        if not isinstance(needs_delegation, bool):
            raise ScenarioError(
                sample, "needs_delegation", f"must be true or false, got {needs_delegation!r}"
            )
    calls: tuple[ToolCall, ...] = ()
    if category == "tool_use" or "expected_tool_calls" in data:
        calls = _tool_calls(sample, _required(sample, data, "expected_tool_calls", category))
    tools = None
    if "tools" in data:
        names = _list(sample, "tools", data["tools"])
        tools = tuple(_text(sample, f"tools[{i}]", name) for i, name in enumerate(names))
        for i, call in enumerate(calls):
            if call.name not in tools:
                raise ScenarioError(
                    sample,
                    f"expected_tool_calls[{i}].name",
                    f"tool {call.name!r} is not among the offered tools {list(tools)}",
                )
    assistant_turns: tuple[AssistantTurn, ...] = ()
    if "assistant_turns" in data:
        assistant_turns = _assistant_turns(sample, data["assistant_turns"])
    idle = None
    if category in IDLE_CATEGORIES or "idle" in data:
        idle = _idle(sample, _required(sample, data, "idle", category))
    extra = {k: v for k, v in data.items() if k not in KNOWN_KEYS}
    return Sample(
        id=sample,
        folder=folder,
        category=category,
        turns=turns,
        overlap=overlap,
        expected=expected,
        needs_delegation=needs_delegation,
        expected_tool_calls=calls,
        tools=tools,
        assistant_turns=assistant_turns,
        extra=extra,
        idle=idle,
    )


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def read_json(sample: str, key: str, path: Path) -> Any:
    """Decode a JSON file strictly (UTF-8; no NaN/Infinity; bounded nesting).

    Raises:
        ScenarioError: unreadable, not UTF-8, not JSON or nested too deeply; naming ``key``.
    """
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ScenarioError(sample, key, f"cannot read {path}: {exc}") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(sample, key, f"{path} is not valid UTF-8: {exc}") from exc
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise ScenarioError(
            sample, key, f"{path} nests JSON too deeply to read (more than ~1000 levels)"
        ) from None
    except ValueError as exc:
        raise ScenarioError(sample, key, f"{path} is not valid JSON: {exc}") from exc


def wav_info(sample: str, path: Path) -> Any:
    """``soundfile.info`` of a mono WAV file.

    Raises:
        ScenarioError: the file is missing, unreadable or not mono.
    """
    if not path.is_file():
        raise ScenarioError(sample, path.name, f"missing: {path}")
    try:
        info = sf.info(str(path))
    except (sf.SoundFileError, OSError, RuntimeError) as exc:
        raise ScenarioError(sample, path.name, f"cannot read {path}: {exc}") from exc
    if info.channels != 1:
        raise ScenarioError(
            sample, path.name, f"{path} has {info.channels} channels; the format needs mono"
        )
    return info


def load_sample(folder: Path) -> Sample:
    """Read and check one sample folder.

    Args:
        folder: ``SUITE/<sample_id>``; the id is the folder's name.

    Returns:
        The sample (audio is not loaded; ``input.wav``'s header is checked).

    Raises:
        ScenarioError: ``metadata.json`` or ``input.wav`` is missing or broken.
    """
    folder = Path(folder)
    sample = folder.name
    meta_path = folder / METADATA_JSON
    if not meta_path.is_file():
        raise ScenarioError(sample, METADATA_JSON, f"missing: {meta_path}")
    parsed = parse_metadata(sample, folder, read_json(sample, METADATA_JSON, meta_path))
    duration = input_duration(sample, folder)
    if (folder / CLEAN_WAV).exists():
        wav_info(sample, folder / CLEAN_WAV)
    check_within_audio(parsed, duration)
    return parsed


def input_duration(sample: str, folder: Path) -> float:
    """Seconds of ``folder/input.wav`` (its header only).

    Raises:
        ScenarioError: the file is missing, unreadable, not mono or empty.
    """
    info = wav_info(sample, folder / INPUT_WAV)
    if info.frames == 0:
        raise ScenarioError(sample, INPUT_WAV, f"{folder / INPUT_WAV} holds no samples")
    return info.frames / info.samplerate


#: Times may reach this far past the end of ``input.wav`` (rounding of hand-written times).
END_SLACK_S = 0.05


def check_within_audio(sample: Sample, duration: float) -> None:
    """Every turn and the overlap must lie inside the audio (a sample that scores speech that
    is not there would be scored as valid)."""
    limit = duration + END_SLACK_S
    for i, turn in enumerate(sample.turns):
        if turn.end > limit:
            raise ScenarioError(
                sample.id,
                f"turns[{i}].end",
                f"{turn.end:g} s is past the end of input.wav ({duration:.3f} s)",
            )
    if sample.overlap is not None and sample.overlap[1] > limit:
        raise ScenarioError(
            sample.id,
            "overlap[1]",
            f"{sample.overlap[1]:g} s is past the end of input.wav ({duration:.3f} s)",
        )
    if sample.idle is not None and sample.idle.end > limit:
        raise ScenarioError(
            sample.id,
            "idle.end",
            f"{sample.idle.end:g} s is past the end of input.wav ({duration:.3f} s)",
        )


def parse_tools(data: Any, source: str = TOOLS_JSON) -> tuple[ToolSpec, ...]:
    """Check a decoded ``tools.json`` and build its :class:`ToolSpec` list.

    Each entry is ``{"name", "description"?, "parameters"?, "result"?}`` (``"schema"`` is
    accepted for ``"parameters"``); ``parameters`` must be a valid JSON schema of an object.

    Args:
        data: the decoded JSON.
        source: what to name in errors (the file or suite).

    Raises:
        ScenarioError: an entry breaks the format (``sample`` is ``source``).
    """
    from jsonschema import Draft202012Validator, SchemaError

    items = _list(source, TOOLS_JSON, data)
    specs = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        key = f"{TOOLS_JSON}[{i}]"
        item = _object(source, key, item)
        if "name" not in item:
            raise ScenarioError(source, f"{key}.name", "missing")
        name = _text(source, f"{key}.name", item["name"])
        if not name:
            raise ScenarioError(source, f"{key}.name", "must not be empty")
        if name in seen:
            raise ScenarioError(source, f"{key}.name", f"tool {name!r} is defined twice")
        seen.add(name)
        description = _text(source, f"{key}.description", item.get("description", ""))
        if "parameters" in item and "schema" in item:
            raise ScenarioError(source, f"{key}.schema", "give parameters or schema, not both")
        schema_key = "schema" if "schema" in item else "parameters"
        schema = _object(source, f"{key}.{schema_key}", item.get(schema_key, {"type": "object"}))
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            raise ScenarioError(
                source, f"{key}.{schema_key}", f"not a valid JSON schema: {exc.message}"
            ) from exc
        if schema.get("type", "object") != "object":
            raise ScenarioError(
                source, f"{key}.{schema_key}", f"must describe an object, got {schema['type']!r}"
            )
        specs.append(ToolSpec(name, description, dict(schema), item.get("result", "done")))
    return tuple(specs)


def load_suite(root: Path, categories: Collection[str] | None = None) -> Suite:
    """Read a suite folder: every sub-folder holding a ``metadata.json``, and ``tools.json``.

    Args:
        root: the suite folder.
        categories: keep only these categories (``None``: all).

    Returns:
        The suite, samples sorted by id.

    Raises:
        FileNotFoundError: ``root`` is not a folder.
        ValueError: an unknown category in ``categories``.
        ScenarioError: a sample or ``tools.json`` breaks the format, or the suite has no samples.
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"suite folder {root} does not exist")
    if categories is not None:
        unknown = sorted(set(categories) - set(CATEGORIES))
        if unknown:
            raise ValueError(f"unknown categories {unknown}; choose from {', '.join(CATEGORIES)}")
    folders = sorted(
        p
        for p in root.iterdir()
        if p.is_dir() and not p.name.startswith(".") and (p / METADATA_JSON).is_file()
    )
    if not folders:
        raise ScenarioError(
            str(root), METADATA_JSON, "no sample folders (SUITE/<id>/metadata.json) found"
        )
    samples = [load_sample(p) for p in folders]
    if categories is not None:
        samples = [s for s in samples if s.category in categories]
    tools: tuple[ToolSpec, ...] = ()
    tools_path = root / TOOLS_JSON
    if tools_path.is_file():
        tools = parse_tools(read_json(str(root), TOOLS_JSON, tools_path), str(root))
    return Suite(root, tuple(sorted(samples, key=lambda s: s.id)), tools)


# --- writing ---------------------------------------------------------------------------------


def _pcm_ready(sample_id: str, name: str, audio: np.ndarray) -> np.ndarray:
    audio = np.asarray(audio)
    if audio.ndim != 1:
        raise ValueError(f"sample {sample_id!r}: {name} must be 1-D mono, got shape {audio.shape}")
    if audio.dtype == np.int16:
        return audio
    audio = audio.astype(np.float32)
    if not np.all(np.isfinite(audio)):
        raise ValueError(f"sample {sample_id!r}: {name} holds NaN or infinite samples")
    peak = float(np.max(np.abs(audio))) if audio.size else 0.0
    if peak > 1.0:
        raise ValueError(f"sample {sample_id!r}: {name} peaks at {peak:.3f} (> 1.0, would clip)")
    return audio


def write_sample(
    root: Path,
    sample_id: str,
    audio: np.ndarray,
    rate: int,
    metadata: Mapping[str, Any],
    clean_audio: np.ndarray | None = None,
) -> Path:
    """Write one sample folder: ``input.wav`` (16-bit PCM), ``metadata.json`` and optionally
    ``clean_input.wav``.

    The metadata is checked with the same parser as :func:`load_sample` before anything is
    written.

    Args:
        root: the suite folder (created if needed).
        sample_id: the folder name: letters, digits, ``_``, ``.``, ``-``; not starting with ``.``.
        audio: 1-D float samples in [-1, 1] (or int16).
        rate: sample rate in Hz (the format uses :data:`INPUT_RATE`).
        metadata: the ``metadata.json`` object.
        clean_audio: optional ``clean_input.wav`` samples, same rules as ``audio``.

    Returns:
        The sample folder.

    Raises:
        ScenarioError: the metadata breaks the format.
        ValueError: a bad id, rate or audio (not 1-D, not finite, peak above 1).
    """
    if not isinstance(sample_id, str) or not _SAMPLE_ID.match(sample_id):
        raise ValueError(f"sample id {sample_id!r} must match {_SAMPLE_ID.pattern}")
    if not isinstance(rate, int) or rate <= 0:
        raise ValueError(f"sample {sample_id!r}: rate must be a positive int, got {rate!r}")
    folder = Path(root) / sample_id
    metadata = dict(metadata)
    parse_metadata(sample_id, folder, metadata)
    try:
        text = json.dumps(metadata, indent=2, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ScenarioError(sample_id, METADATA_JSON, f"not JSON-serialisable: {exc}") from exc
    pcm = _pcm_ready(sample_id, INPUT_WAV, audio)
    clean = None if clean_audio is None else _pcm_ready(sample_id, CLEAN_WAV, clean_audio)
    folder.mkdir(parents=True, exist_ok=True)
    sf.write(str(folder / INPUT_WAV), pcm, rate, subtype="PCM_16")
    if clean is not None:
        sf.write(str(folder / CLEAN_WAV), clean, rate, subtype="PCM_16")
    (folder / METADATA_JSON).write_text(text + "\n", encoding="utf-8")
    return folder


def write_tools(root: Path, tools: Sequence[ToolSpec]) -> Path:
    """Write a suite's ``tools.json`` (checked with the parser :func:`load_suite` uses).

    Args:
        root: the suite folder (created if needed).
        tools: the tool set.

    Returns:
        The path of ``tools.json``.

    Raises:
        ScenarioError: a tool breaks the format (duplicate name, invalid schema...).
    """
    data = []
    for tool in tools:
        entry: dict[str, Any] = {
            "name": tool.name,
            "description": tool.description,
            "parameters": dict(tool.schema),
            "result": tool.result,
        }
        data.append(entry)
    root = Path(root)
    parse_tools(data, str(root))
    root.mkdir(parents=True, exist_ok=True)
    path = root / TOOLS_JSON
    path.write_text(
        json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n", encoding="utf-8"
    )
    return path
