"""Suite synthesis: determinism, seed ranges, and that every sample says what its metadata says."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
import soundfile as sf

from venus_ros.audio.tts import piper_available
from venus_ros.core.errors import DeviceError
from venus_ros.eval.scenario import (
    CATEGORIES,
    IDLE_CATEGORIES,
    INPUT_RATE,
    OVERLAP_CATEGORIES,
    Sample,
    Suite,
)
from venus_ros.eval.synth import (
    ASSISTANT_TEXTS,
    ESPEAK_VOICES,
    FAMILIES,
    GATE_DB,
    IDLE_GAP_S,
    IDLE_SILENCE_S,
    NOISE_DBFS,
    PIPER_VOICE,
    SEED_RANGES,
    USER_RMS_DBFS,
    Voices,
    active_rms_dbfs,
    frame_rms,
    suite_tools,
    synthesize,
)

SEED = 123
FRAME_S = 0.01


def digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Suite:
    return synthesize(tmp_path_factory.mktemp("a") / "suite", 1, SEED, voices="espeak")


def test_same_seed_same_bytes_other_seed_other_bytes(suite: Suite, tmp_path: Path) -> None:
    again = synthesize(tmp_path / "again", 1, SEED, voices="espeak")
    first = digest(suite.root)
    # input.wav + metadata.json per sample, tools.json (no noise: no clean_input.wav)
    assert len(first) == len(CATEGORIES) * 2 + 1
    assert digest(again.root) == first
    other = synthesize(tmp_path / "other", 1, SEED + 1, voices="espeak")
    changed = {k for k, v in digest(other.root).items() if first.get(k) != v}
    assert changed >= {f"{c}_000/input.wav" for c in CATEGORIES}


def test_a_category_does_not_depend_on_the_others(suite: Suite, tmp_path: Path) -> None:
    alone = synthesize(tmp_path / "alone", 1, SEED, ["pause", "tool_use"], voices="espeak")
    assert [s.id for s in alone.samples] == ["pause_000", "tool_use_000"]
    whole = digest(suite.root)
    for path, value in digest(alone.root).items():
        assert whole[path] == value, path


def test_seed_ranges_and_arguments(tmp_path: Path) -> None:
    assert SEED_RANGES["eval"].stop <= SEED_RANGES["train"].start
    train = SEED_RANGES["train"].start
    with pytest.raises(ValueError, match="outside the eval range"):
        synthesize(tmp_path / "x", 1, train)
    with pytest.raises(ValueError, match="outside the train range"):
        synthesize(tmp_path / "x", 1, 5, purpose="train")
    bad: list[tuple[dict[str, Any], str]] = [
        ({"seed": -1}, "outside"),
        ({"seed": True}, "outside"),
        ({"purpose": "test"}, "split"),
        ({"split": "test"}, "split"),
        ({"split": "eval", "purpose": "train"}, "disagree"),
        ({"split": "train", "seed": 1_000_005, "voices": "piper"}, "not part of the train"),
        ({"n": 0}, "n "),
        ({"categories": ["laughter"]}, "unknown"),
        ({"categories": []}, "unknown or no"),
        ({"voices": "festival"}, "voices"),
    ]
    for changes, message in bad:
        kwargs: dict[str, Any] = {"out": tmp_path / "x", "n": 1, "seed": 5, **changes}
        with pytest.raises(ValueError, match=message):
            synthesize(**kwargs)
    assert not (tmp_path / "x").exists()
    made = synthesize(tmp_path / "t", 1, train + 7, ["turn_taking"], purpose="train")
    assert made.samples[0].extra["split"] == "train"
    assert made.samples[0].extra["seed"] == train + 7


def test_out_folder_must_be_empty_unless_overwrite(suite: Suite, tmp_path: Path) -> None:
    out = tmp_path / "s"
    synthesize(out, 1, 9, ["delegation", "tool_use"], voices="espeak")
    (out / "README.md").write_text("mine", encoding="utf-8")
    with pytest.raises(FileExistsError, match="not empty"):
        synthesize(out, 1, 9, ["pause"], voices="espeak")
    replaced = synthesize(out, 1, 9, ["pause"], voices="espeak", overwrite=True)
    assert [s.id for s in replaced.samples] == ["pause_000"]
    assert not (out / "tools.json").exists()
    assert (out / "README.md").read_text(encoding="utf-8") == "mine"


def _spans(sample: Sample) -> list[tuple[float, float]]:
    if sample.category == "background":
        assert sample.overlap is not None
        return [sample.overlap]
    spans = [(t.start, t.end) for t in sample.turns]
    if sample.category == "background_idle":
        assert sample.idle is not None
        spans.append((sample.idle.start, sample.idle.end))
    return spans


def test_every_category_turn_times_are_where_the_speech_is(suite: Suite) -> None:
    assert [s.category for s in suite.samples] == sorted(CATEGORIES)
    for sample in suite.samples:
        audio, rate = sample.load_audio()
        assert rate == INPUT_RATE
        spans = _spans(sample)
        assert spans, sample.id
        inside = np.zeros(audio.size, bool)
        for start, end in spans:
            first, last = round(start * rate), round(end * rate)
            assert last <= audio.size
            inside[first:last] = True
            rms = frame_rms(audio[first:last])
            gate = rms.max() * 10 ** (-GATE_DB / 20)
            # the turn starts and ends with a frame of speech (the energy gate's verdict)
            assert rms[0] > gate and rms[-1] > gate, (sample.id, start, end)
            assert rms.max() > 0.01, sample.id
        # nothing but exact silence outside the turns (noise is off)
        assert not np.any(audio[~inside]), sample.id
        assert sample.extra["voice"] in FAMILIES["eval"].espeak_voices
        assert 140 <= sample.extra["rate_wpm"] <= 190


def test_overlap_samples(suite: Suite) -> None:
    for category in OVERLAP_CATEGORIES:
        (sample,) = suite.by_category(category)
        assert sample.expected == ("respond" if category == "interruption" else "resume")
        (assistant,) = sample.assistant_turns
        assert assistant.text in FAMILIES["eval"].assistant_texts
        assert len(re.findall(r"[.?!](?: |$)", assistant.text)) >= 3  # several sentences
        assert 0.5 <= assistant.start <= 1.0
        assert sample.overlap is not None
        assert 2.0 <= sample.overlap[0] - assistant.start <= 4.0 + FRAME_S
        assert 8.0 <= sample.duration_s <= 12.0
        assert sample.duration_s - sample.overlap[1] >= 3.0
        if category != "background":
            (turn,) = sample.turns
            assert (turn.start, turn.end) == sample.overlap
        else:
            assert sample.turns == ()
            assert sample.extra["background"]["kind"] in ("talker", "tv")


def test_pause_turn_taking_and_delegation(suite: Suite, tmp_path: Path) -> None:
    (pause,) = suite.by_category("pause")
    first, second = pause.turns
    assert pause.extra["pause"] == [first.end, second.start]
    assert 1.0 <= second.start - first.end <= 2.0 + FRAME_S
    assert pause.duration_s - second.end >= 3.0
    (question,) = suite.by_category("turn_taking")
    assert question.turns[0].text.endswith("?")
    assert question.duration_s - question.turns[-1].end >= 3.0
    labels = synthesize(tmp_path / "d", 6, 77, ["delegation"], voices="espeak")
    assert sorted(s.needs_delegation for s in labels.samples) == [False] * 3 + [True] * 3
    assert len({s.turns[0].text for s in labels.samples}) == 6


def test_idle_samples(tmp_path: Path) -> None:
    """Idle speech while the assistant is silent; half the samples then ask a real request."""
    made = {
        split: synthesize(
            tmp_path / split, 6, seed, list(IDLE_CATEGORIES), split=split, voices="espeak"
        )
        for split, seed in (("eval", 31), ("train", SEED_RANGES["train"].start + 31))
    }
    for split, suite in made.items():
        fam = FAMILIES[split]
        requests = set(fam.questions) | set(fam.delegate_yes)
        for category in IDLE_CATEGORIES:
            samples = suite.by_category(category)
            assert len(samples) == 6
            assert sum(bool(s.followups()) for s in samples) == 3  # half and half
            for sample in samples:
                idle = sample.idle
                assert idle is not None and not sample.assistant_turns
                assert sample.expected is None and sample.overlap is None
                audio, rate = sample.load_audio()
                remark = audio[round(idle.start * rate) : round(idle.end * rate)]
                level = active_rms_dbfs(remark)
                user = sample.extra["level_dbfs"] + sample.extra.get("gain_db", 0.0)
                if category == "other_directed_idle":
                    assert idle.kind in ("vocative", "side")
                    assert sample.turns[0].text == idle.text
                    assert (sample.turns[0].start, sample.turns[0].end) == (idle.start, idle.end)
                    said = idle.text
                    assert said in fam.side_comments + fam.phone_talk or any(
                        said == v.format(name=n) for v in fam.vocatives for n in fam.other_names
                    )
                    assert 0.0 <= user - level <= 3.0 + 0.5
                else:
                    assert idle.kind in ("talker", "tv")
                    assert idle.text in fam.background_talk + fam.background_tv
                    assert all(t.start >= idle.end for t in sample.turns)  # not the user's
                    assert sample.extra["background_voice"] != sample.extra["voice"]
                    assert 5.0 - 0.5 <= user - level <= 20.0 + 0.5
                followups = sample.followups()
                if followups:
                    (request,) = followups
                    assert request.text in requests
                    assert IDLE_GAP_S[0] <= request.start - idle.end <= IDLE_GAP_S[1] + FRAME_S
                    assert sample.duration_s - request.end >= 3.0 - 1e-3
                else:
                    assert sample.duration_s - idle.end >= IDLE_SILENCE_S - 1e-3
                # round trip through the format
                again = json.loads((sample.folder / "metadata.json").read_text(encoding="utf-8"))
                assert again["idle"]["text"] == idle.text


def test_short_commands_are_interruptions_in_both_parts() -> None:
    for split in ("train", "eval"):
        short = [p for p in FAMILIES[split].interruptions if len(p.split()) <= 3]
        assert len(short) >= 6, split


def test_tool_use_calls_are_valid_and_normalised(tmp_path: Path) -> None:
    made = synthesize(tmp_path / "tools", 6, 31, ["tool_use"], voices="espeak")
    specs = {t.name: t for t in made.tools}
    assert specs.keys() == {t.name for t in suite_tools()}
    assert {"timer", "calculator", "clock"} <= specs.keys()
    assert json.loads((made.root / "tools.json").read_text(encoding="utf-8"))
    first_calls = set()
    for sample in made.samples:
        assert sample.expected_tool_calls, sample.id
        assert sample.tools == tuple(specs)
        assert sample.extra["disfluencies"], sample.id
        first_calls.add(sample.expected_tool_calls[0].name)
        for call in sample.expected_tool_calls:
            jsonschema.validate(dict(call.arguments), specs[call.name].schema)
            for key, value in call.arguments.items():
                if key in ("location", "object", "room"):
                    assert value == value.lower().strip(), (sample.id, value)
                    assert value in sample.turns[0].text
            if call.name == "timer":
                assert isinstance(call.arguments["seconds"], int)
                assert call.arguments["seconds"] > 0
            if call.name == "calculator":
                assert re.fullmatch(r"\d+ [-+*/] \d+", call.arguments["expression"])
    assert len(first_calls) == 6  # every tool kind, once each for n=6


def test_tool_use_text_is_disfluent(tmp_path: Path) -> None:
    made = synthesize(tmp_path / "t", 12, 4, ["tool_use"], voices="espeak")
    fillers = {w for f in FAMILIES["eval"].fillers for w in re.findall(r"[a-z]+", f)}
    for sample in made.samples:
        text = sample.turns[0].text.lower()
        kinds = set(sample.extra["disfluencies"])
        words = re.findall(r"[a-z]+", text)
        if "filler" in kinds:
            assert fillers & set(words), text
        if "self_correction" in kinds:
            assert re.search(r"\b(no|sorry|actually|i mean|scratch that)\b", text), text


def test_background_is_5_to_20_db_below_the_user(tmp_path: Path) -> None:
    made = synthesize(tmp_path / "bg", 4, 55, ["background"], voices="espeak")
    kinds = set()
    for sample in made.samples:
        audio, _ = sample.load_audio()
        below = USER_RMS_DBFS - active_rms_dbfs(audio)
        assert 5.0 - 0.5 <= below <= 20.0 + 0.5, (sample.id, below)
        assert below == pytest.approx(sample.extra["background_db_below_user"], abs=0.5)
        kinds.add(sample.extra["background"]["kind"])
    user = synthesize(tmp_path / "user", 2, 55, ["turn_taking"], voices="espeak")
    for sample in user.samples:
        level = active_rms_dbfs(sample.load_audio()[0])
        assert abs(level - USER_RMS_DBFS) <= 3.5


def test_room_noise(tmp_path: Path) -> None:
    made = synthesize(tmp_path / "n", 1, 8, ["backchannel"], voices="espeak", noise=True)
    (sample,) = made.samples
    noisy, _ = sample.load_audio()
    # FDB's clean input: the input without the overlap event (the room noise stays).
    clean, _ = sf.read(str(sample.folder / "clean_input.wav"), dtype="float32")
    first, last = (round(t * INPUT_RATE) for t in sample.overlap)
    assert np.array_equal(noisy[:first], clean[:first])
    assert np.abs(noisy[first:last] - clean[first:last]).max() > 0.05
    noise = clean
    level = 20 * np.log10(np.sqrt(np.mean(noise.astype(np.float64) ** 2)))
    assert level == pytest.approx(NOISE_DBFS, abs=1.0)
    # pink-ish: more energy below 500 Hz than in an equal-width band above 4 kHz
    spectrum = np.abs(np.fft.rfft(noise)) ** 2
    freqs = np.fft.rfftfreq(noise.size, 1 / INPUT_RATE)
    assert (
        spectrum[(freqs > 20) & (freqs < 500)].sum()
        > 4 * spectrum[(freqs > 4000) & (freqs < 4480)].sum()
    )
    assert sample.extra["noise_dbfs"] == NOISE_DBFS


ALL_VOICES = FAMILIES["train"].espeak_voices + FAMILIES["eval"].espeak_voices


def _phrases(value: Any) -> set[str]:
    """Every phrase, word of a lexicon and voice in a family, normalised for comparison."""
    if isinstance(value, str):
        return {" ".join(re.findall(r"[a-z0-9']+", value.lower()))}
    if isinstance(value, (tuple, list)):
        return set().union(*(_phrases(v) for v in value)) if value else set()
    return set()


def test_train_and_eval_families_and_voices_are_disjoint() -> None:
    from dataclasses import fields

    assert ESPEAK_VOICES == FAMILIES["train"].espeak_voices
    train, evaluation = FAMILIES["train"], FAMILIES["eval"]
    for f in fields(train):
        if f.name in ("ops", "piper"):
            continue
        a, b = _phrases(getattr(train, f.name)), _phrases(getattr(evaluation, f.name))
        assert a and b, f.name
        assert not a & b, (f.name, a & b)
    # operator words too (the symbols are the shared arithmetic, not phrasing)
    assert not {w for w, _ in train.ops} & {w for w, _ in evaluation.ops}
    # and no phrase of one part appears anywhere in the other
    every_train = set().union(*(_phrases(getattr(train, f.name)) for f in fields(train)))
    every_eval = set().union(*(_phrases(getattr(evaluation, f.name)) for f in fields(evaluation)))
    long_ones = {p for p in every_eval if len(p.split()) >= 3}
    assert not long_ones & every_train
    assert evaluation.piper and not train.piper  # the neural voice is an evaluation voice


def test_a_split_draws_only_its_own_part(tmp_path: Path) -> None:
    train_seed = SEED_RANGES["train"].start + 3
    made = {
        "eval": synthesize(tmp_path / "e", 3, 3, ["interruption", "other_directed"], split="eval"),
        "train": synthesize(
            tmp_path / "t", 3, train_seed, ["interruption", "other_directed"], split="train"
        ),
    }
    for split, suite in made.items():
        fam, other = FAMILIES[split], FAMILIES["train" if split == "eval" else "eval"]
        for sample in suite.samples:
            assert sample.extra["split"] == split
            assert sample.extra["voice"] in fam.espeak_voices + (PIPER_VOICE,) * fam.piper
            assert sample.assistant_turns[0].text in fam.assistant_texts
            said = sample.turns[0].text
            if sample.category == "interruption":
                assert said in fam.interruptions and said not in other.interruptions
            else:
                assert any(name in said for name in fam.other_names) or said in fam.side_comments


def test_every_espeak_voice_sounds_different() -> None:
    voices = Voices()
    rendered = {
        hashlib.sha256(voices.render("Good morning, how are you?", v, 170).tobytes()).hexdigest()
        for v in ALL_VOICES
    }
    assert len(rendered) == len(ALL_VOICES)


def test_assistant_texts_last_6_to_10_seconds() -> None:
    voices = Voices()
    for text in ASSISTANT_TEXTS + FAMILIES["eval"].assistant_texts:
        seconds = voices.render(text, "en-us", 170).size / INPUT_RATE
        assert 6.0 <= seconds <= 10.0, (seconds, text)


def test_neural_voice_is_deterministic_or_refused(tmp_path: Path) -> None:
    if not piper_available():
        with pytest.raises(DeviceError, match="neural voice"):
            synthesize(tmp_path / "p", 1, 3, ["turn_taking"], voices="piper")
        return
    one = synthesize(tmp_path / "p1", 1, 3, ["turn_taking"], voices="piper")
    two = synthesize(tmp_path / "p2", 1, 3, ["turn_taking"], voices="piper")
    assert one.samples[0].extra["voice"] == PIPER_VOICE
    assert digest(one.root) == digest(two.root)


REF = Path(__file__).parent / "data" / "eval_ref"
#: The categories of the reference suite (the idle categories came later; 3 MB budget).
REF_CATEGORIES = tuple(c for c in CATEGORIES if c not in IDLE_CATEGORIES)
#: Metadata keys that depend only on the seed and the phrase banks (not on the audio).
CONTENT_KEYS = (
    "category",
    "expected",
    "needs_delegation",
    "expected_tool_calls",
    "tools",
    "voice",
    "rate_wpm",
    "disfluencies",
    "sentence",
    "seed",
    "purpose",
    "compact",
)


def test_reference_suite_shape() -> None:
    from venus_ros.eval.scenario import load_suite

    ref = load_suite(REF)
    assert len(ref.samples) == 16
    for category in REF_CATEGORIES:
        assert len(ref.by_category(category)) == 2, category
    assert (REF / "tools.json").is_file() and {t.name for t in ref.tools} >= {"timer", "clock"}
    assert sorted(s.needs_delegation for s in ref.by_category("delegation")) == [False, True]
    for sample in ref.samples:
        assert sample.extra["seed"] in SEED_RANGES["eval"]
        assert sample.extra["voice"] in FAMILIES["eval"].espeak_voices  # no piper needed
        assert sample.load_audio()[1] == INPUT_RATE
    total = sum(p.stat().st_size for p in REF.rglob("*") if p.is_file())
    assert total <= 3_000_000


def test_reference_suite_is_what_its_readme_call_makes(tmp_path: Path) -> None:
    readme = (REF / "README.md").read_text(encoding="utf-8")
    call = (
        'synthesize("tests/data/eval_ref", n=2, seed=15, categories=REF_CATEGORIES, '
        'voices="espeak", compact=True)'
    )
    # whitespace aside: ruff format wraps the README's code block
    assert call.replace(" ", "") in "".join(readme.split())
    again = synthesize(
        tmp_path / "ref", n=2, seed=15, categories=REF_CATEGORIES, voices="espeak", compact=True
    )
    ref = {
        p.name: json.loads((p / "metadata.json").read_text(encoding="utf-8"))
        for p in REF.iterdir()
        if (p / "metadata.json").is_file()
    }
    assert sorted(ref) == [s.id for s in again.samples]
    for sample in again.samples:
        made = json.loads((sample.folder / "metadata.json").read_text(encoding="utf-8"))
        committed = ref[sample.id]
        for key in CONTENT_KEYS:
            assert made.get(key) == committed.get(key), (sample.id, key)
        assert [t["text"] for t in made["turns"]] == [t["text"] for t in committed["turns"]]
        assert made.get("assistant_turns") == committed.get("assistant_turns")
        assert made.get("background", {}).get("text") == committed.get("background", {}).get("text")
    assert (tmp_path / "ref" / "tools.json").read_bytes() == (REF / "tools.json").read_bytes()
