"""Tests for venus_ros.frontends.scripted: script validation and the scripted assistant's turns.

Behaviour is checked through the real :class:`DuplexLoop` on a :class:`FakeClock`, with
microphone units built in the test (noise bursts where the user talks, silence elsewhere).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from venus_ros.core.clock import FakeClock
from venus_ros.core.duplex import BackendReply, DuplexLoop, UnitResult
from venus_ros.core.frontend import Decision, FrontendError
from venus_ros.core.timeline import Kind, Timeline
from venus_ros.core.units import InputUnit
from venus_ros.frontends import make_frontend
from venus_ros.frontends.scripted import Script, ScriptedFrontend, load_script

RATE = 16000
SAMPLE_SCRIPT = Path(__file__).resolve().parents[1] / "venus_ros/samples/hello/script.yaml"


def mic(index: int, *talk: tuple[float, float]) -> InputUnit:
    """A one-second unit, silent except for noise bursts over the given (start_s, end_s) spans."""
    audio = np.zeros(RATE, np.float32)
    rng = np.random.default_rng(index)
    for start, end in talk:
        a, b = int(start * RATE), int(end * RATE)
        audio[a:b] = rng.uniform(-0.2, 0.2, b - a)
    return InputUnit(index, index * RATE, audio)


QUIET: tuple[tuple[float, float], ...] = ()
TALK = ((0.0, 1.0),)


class Rig:
    def __init__(self, **script: object) -> None:
        self.clock = FakeClock()
        self.timeline = Timeline(self.clock)
        self.frontend = ScriptedFrontend(Script.model_validate(script), clock=self.clock)
        self.loop = DuplexLoop(self.frontend, self.timeline, self.clock)
        self.loop.prepare()
        self.results: list[UnitResult] = []

    def step(self, *talk: tuple[float, float]) -> UnitResult:
        result = self.loop.step(mic(len(self.results), *talk))
        self.results.append(result)
        return result

    def steps(self, *units: tuple[tuple[float, float], ...]) -> list[UnitResult]:
        return [self.step(*talk) for talk in units]

    def decisions(self) -> str:
        """One letter per unit: L(isten), S(peak), E (speak, end of turn), Y(ield)."""
        letters = []
        for r in self.results:
            if r.decision is Decision.SPEAK:
                letters.append("E" if r.end_of_turn else "S")
            else:
                letters.append("Y" if r.end_of_turn else "L")
        return "".join(letters)


# ---------------------------------------------------------------------------- load_script


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "script.yaml"
    path.write_text(text, encoding="utf-8")
    return path


BAD_SCRIPTS = {
    "unknown_top_key": ("speach_rms: 0.1\nreplies: [{at_unit: 0, text: hi}]\n", ["speach_rms"]),
    "unknown_reply_key": (
        "replies: [{at_unit: 0, txt: hi}]\n",
        ["replies.0.txt", "replies.0.text"],
    ),
    "two_triggers": (
        "replies: [{at_unit: 0, text: a}, {at_unit: 1, after_speech: true, text: b}]\n",
        ["replies.1", "exactly one of after_speech, at_unit, on_backend"],
    ),
    "no_trigger": ("replies: [{text: a}]\n", ["replies.0", "exactly one"]),
    "missing_replies": ("barge_in_ms: 400\n", ["replies"]),
    "empty_replies": ("replies: []\n", ["replies"]),
    "audio_longer_than_a_unit": (
        "words_per_unit: 4\nword_ms: 300\nreplies: [{at_unit: 0, text: hi}]\n",
        ["words_per_unit * word_ms must be <= 1000"],
    ),
    "negative_unit": ("replies: [{at_unit: -1, text: hi}]\n", ["replies.0.at_unit"]),
    "not_a_mapping": ("- at_unit: 0\n", ["(top)"]),
    "empty_file": ("", ["(top)"]),
    "invalid_yaml": ("replies: [\n", ["not valid YAML"]),
}


@pytest.mark.parametrize(("text", "expected"), BAD_SCRIPTS.values(), ids=BAD_SCRIPTS.keys())
def test_load_script_errors_name_the_file_and_the_bad_key(
    tmp_path: Path, text: str, expected: list[str]
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(FrontendError) as caught:
        load_script(path)
    message = str(caught.value)
    assert str(path) in message
    for part in expected:
        assert part in message


def test_load_script_of_a_missing_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(FrontendError, match=r"no script file .*nope\.yaml"):
        load_script(tmp_path / "nope.yaml")


def test_the_bundled_sample_script_loads() -> None:
    script = load_script(SAMPLE_SCRIPT)
    assert script.barge_in_ms == 400
    assert [r.after_speech for r in script.replies] == [True, False]
    assert script.replies[1].at_unit == 8


def test_make_frontend_builds_a_scripted_frontend_and_rejects_bad_specs() -> None:
    assert isinstance(make_frontend(f"scripted:{SAMPLE_SCRIPT}"), ScriptedFrontend)
    with pytest.raises(FrontendError, match="needs a script file"):
        make_frontend("scripted")
    with pytest.raises(FrontendError, match="unknown frontend 'magic'"):
        make_frontend("magic:x")


# ---------------------------------------------------------------------------- turn triggers


def test_after_speech_waits_for_the_user_to_stop_talking() -> None:
    rig = Rig(replies=[{"after_speech": True, "text": "Yes?"}])
    rig.steps(QUIET, QUIET, TALK, TALK, ((0.0, 0.8),), ((0.0, 0.3),), QUIET)
    # silent units: nothing to answer; talking, or still talking in the last 400 ms: wait;
    # talk that stopped early in the unit: answer at once
    assert rig.decisions() == "LLLLLEL"
    assert rig.results[5].speech.text == "Yes?"


def test_at_unit_speaks_at_that_unit_even_in_silence() -> None:
    rig = Rig(replies=[{"at_unit": 2, "text": "Hello."}])
    rig.steps(QUIET, QUIET, QUIET, QUIET)
    assert rig.decisions() == "LLEL"


def test_replies_are_consumed_in_order_one_turn_each() -> None:
    rig = Rig(
        replies=[{"at_unit": 0, "text": "First."}, {"at_unit": 0, "text": "Second."}],
    )
    rig.steps(QUIET, QUIET, QUIET)
    assert rig.decisions() == "EEL"
    assert [r.speech.turn_id for r in rig.results[:2]] == [1, 2]
    assert [r.speech.text for r in rig.results[:2]] == ["First.", "Second."]


def test_words_per_unit_and_word_ms_shape_text_and_audio() -> None:
    rig = Rig(
        words_per_unit=2,
        word_ms=200,
        output_sample_rate=16000,
        replies=[{"at_unit": 0, "text": "one two three four five"}],
    )
    results = rig.steps(QUIET, QUIET, QUIET, QUIET)
    assert rig.decisions() == "SSEL"
    assert [r.speech.text for r in results[:3]] == ["one two ", "three four ", "five"]
    assert [r.speech.samples for r in results[:3]] == [6400, 6400, 3200]
    assert {r.speech.sample_rate for r in results[:3]} == {16000}
    assert all(np.abs(r.speech.audio).max() > 0.05 for r in results[:3])


def test_private_span_tokens_make_no_sound_and_become_a_delegate() -> None:
    rig = Rig(replies=[{"at_unit": 0, "text": "Okay <delegate>check the weather</delegate> done"}])
    first, second = rig.steps(QUIET, QUIET)
    # tokens: "Okay ", "<delegate>check ", "the ", "weather</delegate> ", "done"
    assert first.speech.text == "Okay "
    assert first.speech.samples == 7200  # one 300 ms word at 24 kHz
    assert second.speech.text == " done"
    assert second.speech.samples == 7200
    assert [d.query for d in second.delegates] == ["check the weather"]


def test_barge_in_yields_and_flushes_but_a_short_backchannel_does_not() -> None:
    long_text = " ".join(f"word{i}" for i in range(15))
    rig = Rig(barge_in_ms=400, replies=[{"at_unit": 0, "text": long_text}])
    rig.steps(QUIET, ((0.2, 0.4),), ((0.3, 0.8),))
    assert rig.decisions() == "SSY"
    assert rig.results[2].flush
    assert len(rig.timeline.snapshot().of_kind(Kind.FLUSH)) == 1
    assert rig.step().decision is Decision.LISTEN  # the rest of the reply was dropped


def test_without_barge_in_the_assistant_talks_over_the_user() -> None:
    rig = Rig(replies=[{"at_unit": 0, "text": "a b c d e f"}])
    rig.steps(QUIET, TALK, QUIET)
    assert rig.decisions() == "SEL"


def test_after_a_barge_in_the_next_reply_answers_when_the_user_stops() -> None:
    long_text = " ".join(f"word{i}" for i in range(15))
    rig = Rig(
        barge_in_ms=400,
        replies=[{"at_unit": 0, "text": long_text}, {"after_speech": True, "text": "Sorry?"}],
    )
    rig.steps(QUIET, TALK, QUIET)
    assert rig.decisions() == "SYE"
    assert rig.results[2].speech.text == "Sorry?"


def test_on_backend_speaks_the_inserted_backend_text() -> None:
    rig = Rig(replies=[{"on_backend": True, "text": "Good news: {backend}"}])
    rig.steps(QUIET, QUIET)
    assert rig.decisions() == "LL"
    rig.loop.offer_backend(BackendReply("task-1", "It is sunny in Paris."))
    rig.steps(QUIET, QUIET, QUIET, QUIET)
    assert rig.decisions() == "LLSSEL"
    said = "".join(r.speech.text for r in rig.results if r.speech)
    assert said == "Good news: It is sunny in Paris."


def test_simulated_compute_spends_session_time() -> None:
    rig = Rig(compute_ms=100, slow_units={1: 1500}, replies=[{"at_unit": 9, "text": "x"}])
    results = rig.steps(QUIET, QUIET, QUIET)
    assert [r.compute_s for r in results] == pytest.approx([0.1, 1.5, 0.1])
    assert [r.missed for r in results] == [False, True, False]
    assert rig.clock.now() == pytest.approx(1.7)


def test_prepare_starts_the_script_over() -> None:
    rig = Rig(replies=[{"at_unit": 0, "text": "Hi."}])
    rig.steps(QUIET, QUIET)
    assert rig.decisions() == "EL"
    rig.loop.prepare()
    rig.steps(QUIET)
    assert rig.decisions() == "ELE"


def test_generate_before_prefill_is_a_frontend_error() -> None:
    frontend = ScriptedFrontend(Script.model_validate({"replies": [{"at_unit": 0, "text": "x"}]}))
    with pytest.raises(FrontendError, match="before prefill"):
        frontend.generate()
