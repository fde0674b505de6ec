"""Scenario format: strict metadata parser, sample/suite loading and writing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf

from venus_ros.eval.scenario import (
    CATEGORIES,
    IDLE_CATEGORIES,
    INPUT_RATE,
    OVERLAP_CATEGORIES,
    AssistantTurn,
    IdleSpeech,
    ScenarioError,
    ToolCall,
    ToolSpec,
    Turn,
    load_sample,
    load_suite,
    parse_metadata,
    write_sample,
    write_tools,
)

TURN = {"start": 0.5, "end": 1.5, "text": "hello there"}


def valid_metadata(category: str) -> dict[str, Any]:
    """A minimal valid metadata object for ``category``."""
    data: dict[str, Any] = {"category": category, "turns": [dict(TURN)]}
    if category in OVERLAP_CATEGORIES:
        data["overlap"] = [0.5, 1.5]
        data["expected"] = "respond" if category == "interruption" else "resume"
        data["assistant_turns"] = [{"start": 0.2, "text": "Let me explain how this works."}]
    if category == "delegation":
        data["needs_delegation"] = True
    if category == "tool_use":
        data["expected_tool_calls"] = [{"name": "timer", "arguments": {"seconds": 600}}]
        data["tools"] = ["timer", "clock"]
    if category in IDLE_CATEGORIES:
        data["idle"] = {"start": 0.1, "end": 0.4, "text": "Sam, dinner!", "kind": "vocative"}
    return data


def tone(seconds: float = 2.0, rate: int = INPUT_RATE) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def write_raw(folder: Path, metadata: Any, *, wav: bool = True, raw: bytes | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if raw is not None:
        (folder / "metadata.json").write_bytes(raw)
    else:
        (folder / "metadata.json").write_text(json.dumps(metadata), encoding="utf-8")
    if wav:
        sf.write(str(folder / "input.wav"), tone(), INPUT_RATE, subtype="PCM_16")
    return folder


@pytest.mark.parametrize("category", CATEGORIES)
def test_valid_metadata_per_category(tmp_path: Path, category: str) -> None:
    meta = valid_metadata(category)
    meta["speaker"] = "en-us+m3"  # unknown key: kept, ignored
    sample = load_sample(write_raw(tmp_path / f"s_{category}", meta))
    assert sample.id == f"s_{category}"
    assert sample.category == category
    assert sample.turns == (Turn(0.5, 1.5, "hello there"),)
    assert sample.extra == {"speaker": "en-us+m3"}
    if category in OVERLAP_CATEGORIES:
        assert sample.overlap == (0.5, 1.5)
        assert sample.expected == ("respond" if category == "interruption" else "resume")
        assert sample.assistant_turns == (AssistantTurn(0.2, "Let me explain how this works."),)
    else:
        assert sample.overlap is None and sample.expected is None
        assert sample.assistant_turns == ()
    assert sample.needs_delegation is (True if category == "delegation" else None)
    if category in IDLE_CATEGORIES:
        assert sample.idle == IdleSpeech(0.1, 0.4, "Sam, dinner!", "vocative")
        assert sample.followups() == (Turn(0.5, 1.5, "hello there"),)
    else:
        assert sample.idle is None and sample.followups() == ()
    if category == "tool_use":
        assert sample.expected_tool_calls == (ToolCall("timer", {"seconds": 600}),)
        assert sample.tools == ("timer", "clock")
    else:
        assert sample.expected_tool_calls == () and sample.tools is None
    audio, rate = sample.load_audio()
    assert rate == INPUT_RATE and audio.dtype == np.float32 and audio.ndim == 1
    assert sample.duration_s == pytest.approx(2.0)


def _without(category: str, key: str) -> dict[str, Any]:
    meta = valid_metadata(category)
    del meta[key]
    return meta


def _with(base: str, **changes: Any) -> dict[str, Any]:
    meta = valid_metadata(base)
    meta.update(changes)
    return meta


_IDLE = {"start": 0.1, "end": 0.4, "text": "x", "kind": "tv"}

BROKEN: list[tuple[str, Any, str, str]] = [
    ("idle_missing", _without("background_idle", "idle"), "idle", "missing"),
    ("idle_not_object", _with("background_idle", idle=[0, 1]), "idle", "JSON object"),
    (
        "idle_no_kind",
        _with("background_idle", idle={"start": 0.1, "end": 0.4, "text": "x"}),
        "idle.kind",
        "missing",
    ),
    (
        "idle_bad_kind",
        _with("background_idle", idle={**_IDLE, "kind": "radio"}),
        "idle.kind",
        "must be one of",
    ),
    ("idle_empty", _with("background_idle", idle={**_IDLE, "end": 0.1}), "idle.end", "after"),
    ("idle_negative", _with("background_idle", idle={**_IDLE, "start": -1}), "idle.start", ">= 0"),
    ("no_category", {"turns": []}, "category", "missing"),
    ("bad_category", _with("pause", category="laughter"), "category", "must be one of"),
    ("int_category", _with("pause", category=3), "category", "must be one of"),
    ("no_turns", _without("pause", "turns"), "turns", "missing"),
    ("turns_not_list", _with("pause", turns={"start": 0}), "turns", "JSON list"),
    ("turn_not_object", _with("pause", turns=[[0, 1, "x"]]), "turns[0]", "JSON object"),
    ("turn_no_text", _with("pause", turns=[{"start": 0, "end": 1}]), "turns[0].text", "missing"),
    (
        "turn_text_int",
        _with("pause", turns=[{"start": 0, "end": 1, "text": 5}]),
        "turns[0].text",
        "string",
    ),
    (
        "turn_start_str",
        _with("pause", turns=[{"start": "0", "end": 1, "text": "a"}]),
        "turns[0].start",
        "number",
    ),
    (
        "turn_bool_time",
        _with("pause", turns=[{"start": True, "end": 1, "text": "a"}]),
        "turns[0].start",
        "number",
    ),
    (
        "turn_negative",
        _with("pause", turns=[{"start": -0.1, "end": 1, "text": "a"}]),
        "turns[0].start",
        ">= 0",
    ),
    (
        "turn_reversed",
        _with("pause", turns=[{"start": 2, "end": 1, "text": "a"}]),
        "turns[0].end",
        "before start",
    ),
    (
        "no_overlap",
        _without("backchannel", "overlap"),
        "overlap",
        "missing (required for category backchannel)",
    ),
    ("overlap_empty_interval", _with("interruption", overlap=[2.0, 2.0]), "overlap", "after start"),
    ("overlap_three", _with("interruption", overlap=[1, 2, 3]), "overlap", "[start, end]"),
    ("overlap_not_list", _with("interruption", overlap="1-2"), "overlap", "JSON list"),
    ("no_expected", _without("other_directed", "expected"), "expected", "missing"),
    ("bad_expected", _with("background", expected="ignore"), "expected", "respond, resume"),
    ("no_delegation", _without("delegation", "needs_delegation"), "needs_delegation", "missing"),
    (
        "delegation_str",
        _with("delegation", needs_delegation="yes"),
        "needs_delegation",
        "true or false",
    ),
    (
        "delegation_int",
        _with("delegation", needs_delegation=1),
        "needs_delegation",
        "true or false",
    ),
    ("no_calls", _without("tool_use", "expected_tool_calls"), "expected_tool_calls", "missing"),
    (
        "call_no_name",
        _with("tool_use", expected_tool_calls=[{"arguments": {}}]),
        "expected_tool_calls[0].name",
        "missing",
    ),
    (
        "call_args_list",
        _with("tool_use", expected_tool_calls=[{"name": "timer", "arguments": [1]}]),
        "expected_tool_calls[0].arguments",
        "JSON object",
    ),
    (
        "call_not_offered",
        _with("tool_use", expected_tool_calls=[{"name": "fly"}]),
        "expected_tool_calls[0].name",
        "not among the offered tools",
    ),
    ("tools_not_str", _with("tool_use", tools=["timer", 7]), "tools[1]", "string"),
    (
        "assistant_no_text",
        _with("backchannel", assistant_turns=[{"start": 1}]),
        "assistant_turns[0].text",
        "missing",
    ),
    (
        "assistant_empty_text",
        _with("backchannel", assistant_turns=[{"start": 1, "text": " "}]),
        "assistant_turns[0].text",
        "empty",
    ),
    (
        "assistant_neg",
        _with("backchannel", assistant_turns=[{"start": -1, "text": "hi"}]),
        "assistant_turns[0].start",
        ">= 0",
    ),
]


@pytest.mark.parametrize(("sid", "meta", "key", "message"), BROKEN, ids=[b[0] for b in BROKEN])
def test_broken_metadata(tmp_path: Path, sid: str, meta: Any, key: str, message: str) -> None:
    with pytest.raises(ScenarioError) as info:
        load_sample(write_raw(tmp_path / sid, meta))
    assert info.value.sample == sid
    assert info.value.key == key
    assert message in str(info.value)
    assert f"sample {sid!r}" in str(info.value) and f"key {key!r}" in str(info.value)


def test_error_message_names_sample_and_key() -> None:
    with pytest.raises(ScenarioError) as info:
        parse_metadata("bc_003", Path("x"), _without("backchannel", "overlap"))
    assert str(info.value) == (
        "sample 'bc_003': key 'overlap': missing (required for category backchannel)"
    )


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"category": "pause", "turns": [{"start": NaN, "end": 1, "text": "a"}]}', "NaN"),
        (
            b'{"category": "pause", "turns": [{"start": 0, "end": Infinity, "text": "a"}]}',
            "Infinity",
        ),
        (b"[1, 2, 3]", "JSON object"),
        (b'"pause"', "JSON object"),
        (b'{"category": "pause", "turns": [', "not valid JSON"),
        (b'{"category": "pause", "turns": [], "note": "caf\xe9"}', "UTF-8"),
    ],
    ids=["nan", "infinity", "list", "string", "truncated", "latin1"],
)
def test_broken_json_file(tmp_path: Path, raw: bytes, message: str) -> None:
    with pytest.raises(ScenarioError) as info:
        load_sample(write_raw(tmp_path / "s1", None, raw=raw))
    assert info.value.sample == "s1" and info.value.key == "metadata.json"
    assert message in str(info.value)


def test_missing_files(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError) as info:
        load_sample(write_raw(tmp_path / "nowav", valid_metadata("pause"), wav=False))
    assert (info.value.sample, info.value.key) == ("nowav", "input.wav")
    (tmp_path / "nometa").mkdir()
    with pytest.raises(ScenarioError) as info:
        load_sample(tmp_path / "nometa")
    assert (info.value.sample, info.value.key) == ("nometa", "metadata.json")


def test_unreadable_and_stereo_wav(tmp_path: Path) -> None:
    folder = write_raw(tmp_path / "junk", valid_metadata("pause"), wav=False)
    (folder / "input.wav").write_bytes(b"RIFF not really a wav")
    with pytest.raises(ScenarioError, match="cannot read") as info:
        load_sample(folder)
    assert info.value.key == "input.wav"
    stereo = write_raw(tmp_path / "stereo", valid_metadata("pause"), wav=False)
    sf.write(str(stereo / "input.wav"), np.zeros((100, 2), np.float32), INPUT_RATE)
    with pytest.raises(ScenarioError, match="2 channels"):
        load_sample(stereo)


def test_fdb_extra_files_are_ignored(tmp_path: Path) -> None:
    folder = write_raw(tmp_path / "fdb_1", valid_metadata("interruption"))
    sf.write(str(folder / "clean_input.wav"), tone(1.0), INPUT_RATE)
    (folder / "interrupt.json").write_text("[not parsed", encoding="utf-8")
    (folder / "output.wav").write_bytes(b"whatever")
    assert load_sample(folder).category == "interruption"


@pytest.mark.parametrize("category", CATEGORIES)
def test_write_then_load_round_trip(tmp_path: Path, category: str) -> None:
    meta = valid_metadata(category)
    meta["voice"] = "en-gb"
    audio = tone(1.5)
    folder = write_sample(tmp_path, f"rt_{category}", audio, INPUT_RATE, meta, clean_audio=audio)
    sample = load_sample(folder)
    assert sample.to_metadata() == meta
    assert (folder / "clean_input.wav").is_file()
    read, rate = sample.load_audio()
    assert rate == INPUT_RATE
    np.testing.assert_allclose(read, audio, atol=1.0 / 32767)
    assert sf.info(str(folder / "input.wav")).subtype == "PCM_16"


def test_write_sample_rejects_bad_input(tmp_path: Path) -> None:
    meta = valid_metadata("pause")
    with pytest.raises(ScenarioError) as info:
        write_sample(
            tmp_path, "bad", tone(), INPUT_RATE, _without("delegation", "needs_delegation")
        )
    assert info.value.key == "needs_delegation"
    assert not (tmp_path / "bad").exists()  # nothing written on a metadata error
    with pytest.raises(ValueError, match="sample id"):
        write_sample(tmp_path, "../escape", tone(), INPUT_RATE, meta)
    with pytest.raises(ValueError, match="would clip"):
        write_sample(tmp_path, "loud", tone() * 4, INPUT_RATE, meta)
    with pytest.raises(ValueError, match="1-D"):
        write_sample(tmp_path, "stereo", np.zeros((10, 2), np.float32), INPUT_RATE, meta)
    with pytest.raises(ValueError, match="NaN"):
        write_sample(tmp_path, "nan", np.full(10, np.nan, np.float32), INPUT_RATE, meta)
    with pytest.raises(ScenarioError, match="serialisable"):
        write_sample(tmp_path, "obj", tone(), INPUT_RATE, {**meta, "x": object()})


TOOLS = (
    ToolSpec(
        "timer",
        "Start a countdown timer.",
        {"type": "object", "properties": {"seconds": {"type": "number"}}, "required": ["seconds"]},
    ),
    ToolSpec("clock", "Tell the time.", {"type": "object", "properties": {}}, {"time": "12:00"}),
)


def test_tools_json_round_trip(tmp_path: Path) -> None:
    path = write_tools(tmp_path, TOOLS)
    write_sample(tmp_path, "t1", tone(), INPUT_RATE, valid_metadata("tool_use"))
    assert load_suite(tmp_path).tools == TOOLS
    data = json.loads(path.read_text(encoding="utf-8"))
    assert [d["name"] for d in data] == ["timer", "clock"]
    assert data[0]["parameters"]["required"] == ["seconds"]


def test_tools_json_schema_alias_and_errors(tmp_path: Path) -> None:
    write_sample(tmp_path, "t1", tone(), INPUT_RATE, valid_metadata("tool_use"))
    tools_path = tmp_path / "tools.json"
    tools_path.write_text(
        json.dumps([{"name": "clock", "schema": {"type": "object"}}]), encoding="utf-8"
    )
    (spec,) = load_suite(tmp_path).tools
    assert spec == ToolSpec("clock", "", {"type": "object"}, "done")
    broken = [
        ({"name": "a"}, "tools.json", "JSON list"),
        ([{"description": "x"}], "tools.json[0].name", "missing"),
        ([{"name": "a"}, {"name": "a"}], "tools.json[1].name", "twice"),
        ([{"name": "a", "parameters": {"type": 5}}], "tools.json[0].parameters", "JSON schema"),
        ([{"name": "a", "parameters": {"type": "string"}}], "tools.json[0].parameters", "object"),
    ]
    for data, key, message in broken:
        tools_path.write_text(json.dumps(data), encoding="utf-8")
        with pytest.raises(ScenarioError) as info:
            load_suite(tmp_path)
        assert info.value.key == key and message in str(info.value), data
    with pytest.raises(ScenarioError, match="twice"):
        write_tools(tmp_path / "other", (TOOLS[0], TOOLS[0]))


def test_load_suite_filters_sorts_and_skips_strays(tmp_path: Path) -> None:
    for sid, category in [("c_3", "pause"), ("a_1", "delegation"), ("b_2", "pause")]:
        write_sample(tmp_path, sid, tone(), INPUT_RATE, valid_metadata(category))
    (tmp_path / "notes").mkdir()  # a stray folder without metadata.json
    (tmp_path / "notes" / "readme.txt").write_text("hi", encoding="utf-8")
    (tmp_path / ".cache").mkdir()
    (tmp_path / "README.md").write_text("a suite", encoding="utf-8")  # a stray file
    suite = load_suite(tmp_path)
    assert [s.id for s in suite.samples] == ["a_1", "b_2", "c_3"]
    assert suite.tools == ()
    pauses = load_suite(tmp_path, categories=["pause"])
    assert [s.id for s in pauses.samples] == ["b_2", "c_3"]
    assert pauses.by_category("pause") == pauses.samples
    assert load_suite(tmp_path, categories=["tool_use"]).samples == ()
    with pytest.raises(ValueError, match="unknown categories"):
        load_suite(tmp_path, categories=["pause", "laughing"])


def test_load_suite_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_suite(tmp_path / "absent")
    with pytest.raises(ScenarioError, match="no sample folders"):
        load_suite(tmp_path)
    write_sample(tmp_path, "ok", tone(), INPUT_RATE, valid_metadata("pause"))
    write_raw(tmp_path / "zz_broken", _without("tool_use", "expected_tool_calls"))
    with pytest.raises(ScenarioError) as info:
        load_suite(tmp_path)
    assert (info.value.sample, info.value.key) == ("zz_broken", "expected_tool_calls")


def test_bad_input_from_issue_13_gives_clear_errors(tmp_path: Path) -> None:
    # A 400-digit time: json gives an int that float() cannot hold.
    huge = json.dumps(valid_metadata("turn_taking")).replace('"end": 1.5', '"end": ' + "9" * 400)
    write_raw(tmp_path / "huge", None, raw=huge.encode())
    with pytest.raises(ScenarioError, match=r"turns\[0\]\.end.*400-digit"):
        load_sample(tmp_path / "huge")
    # Very deep JSON.
    write_raw(tmp_path / "deep", None, raw=b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(ScenarioError, match="too deeply"):
        load_sample(tmp_path / "deep")
    # A 0-sample input.wav.
    empty = write_raw(tmp_path / "empty", valid_metadata("turn_taking"), wav=False)
    sf.write(str(empty / "input.wav"), np.zeros(0, np.float32), INPUT_RATE, subtype="PCM_16")
    with pytest.raises(ScenarioError, match="no samples"):
        load_sample(empty)
    # Turns or an overlap past the end of the audio (2 s of tone).
    late = valid_metadata("backchannel")
    late["turns"] = [{"start": 1.0, "end": 3.5, "text": "mm-hmm"}]
    write_raw(tmp_path / "late", late)
    with pytest.raises(ScenarioError, match=r"turns\[0\]\.end.*past the end"):
        load_sample(tmp_path / "late")
    late["turns"] = [dict(TURN)]
    late["overlap"] = [1.0, 2.5]
    write_raw(tmp_path / "late2", late)
    with pytest.raises(ScenarioError, match=r"overlap\[1\].*past the end"):
        load_sample(tmp_path / "late2")
    idle = valid_metadata("background_idle")
    idle["idle"] = {"start": 1.0, "end": 2.5, "text": "news", "kind": "tv"}
    write_raw(tmp_path / "late3", idle)
    with pytest.raises(ScenarioError, match=r"idle\.end.*past the end"):
        load_sample(tmp_path / "late3")


def test_clean_audio_is_the_file_or_the_input_without_the_overlap(tmp_path: Path) -> None:
    meta = valid_metadata("backchannel")
    folder = write_raw(tmp_path / "s", meta)
    sample = load_sample(folder)
    clean, rate = sample.clean_audio()
    audio, _ = sample.load_audio()
    lo, hi = round(0.5 * rate), round(1.5 * rate)
    assert not clean[lo:hi].any() and np.array_equal(clean[hi:], audio[hi:])
    sf.write(str(folder / "clean_input.wav"), tone(2.0) * 0.5, INPUT_RATE, subtype="PCM_16")
    given, _ = load_sample(folder).clean_audio()
    assert given[lo:hi].any()
    assert load_sample(write_raw(tmp_path / "t", valid_metadata("pause"))).clean_audio() is None
