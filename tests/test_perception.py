"""Perception (AEC, VAD, ASR, frame accounting) alone, and sub-step observations as audio arrives.

Real models: espeak-ng speech, Silero VAD, Whisper tiny.en with partial transcripts. The floor
model consumes these observations, so the same audio must give the same observations and
decisions whether a unit comes whole at its boundary or in pieces as it arrives.
"""

from __future__ import annotations

from collections import deque
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from speech import espeak_16k
from test_policy_frontend import place

from venus_ros.audio.asr import SegmentTranscriber, Transcript, WhisperAsr, Word
from venus_ros.audio.vad import SileroVad
from venus_ros.core.clock import FakeClock
from venus_ros.core.duplex import DuplexLoop
from venus_ros.core.session import SessionConfig, run_offline
from venus_ros.core.timeline import Kind, Timeline
from venus_ros.core.units import InputUnit, PartialUnit, UnitAssembler
from venus_ros.frontends.cascade.state import SessionState
from venus_ros.frontends.cascade.turns import Turn
from venus_ros.frontends.perception import (
    FRAME_S,
    FRAME_SAMPLES,
    OVERLAP_PARTIAL_BUDGET_S,
    OVERLAP_PARTIAL_LATE_INTERVAL_S,
    OVERLAP_PARTIAL_LATE_S,
    OVERLAP_PARTIAL_MIN_S,
    OVERLAP_PARTIAL_WINDOW_S,
    UNSURE_WORD_P,
    Perception,
    UnitAccount,
    substep_cuts,
)
from venus_ros.frontends.policy import (
    RESTART_GAP_S,
    FloorAction,
    FloorObservation,
    FloorPolicy,
    NeverYield,
    PolicyFrontend,
    VadBargeIn,
)

RATE = 16000
STORY = (
    "Here is a long story about a robot who lived in a small house by the sea. "
    "Every morning it walked along the beach and counted the waves."
)


@pytest.fixture(scope="module")
def interruption(tmp_path_factory: pytest.TempPathFactory) -> np.ndarray:
    return espeak_16k(
        "Wait, stop, what time is it?", tmp_path_factory.mktemp("s") / "i.wav", "en-gb+f3"
    )


@pytest.fixture(scope="module")
def backchannel(tmp_path_factory: pytest.TempPathFactory) -> np.ndarray:
    return espeak_16k("uh huh", tmp_path_factory.mktemp("s") / "b.wav", "en-gb+f3")


# -- perception alone --------------------------------------------------------------------------


def test_perception_accounts_frames_and_speech_whatever_the_piece_sizes(
    interruption: np.ndarray,
) -> None:
    audio = place(2.0, (0.5, interruption))[:RATE]  # one second: silence, then speech

    def observe(sizes: list[int]) -> FloorObservation:
        perception = Perception(SileroVad())
        state = SessionState(action=None)
        state.intervals.append([0.0, 0.25 * RATE])  # the assistant played the first 250 ms
        perception.bind(state)
        acc, start = UnitAccount(), 0
        for size in sizes:
            perception.take_in(audio[start : start + size], acc)
            start += size
        assert start == audio.size
        return perception.observe(0, 0, 1, acc)

    whole = observe([audio.size])
    assert len(whole.vad_probs) == audio.size // FRAME_SAMPLES == 31
    assert whole.frames_start_s == 0.0 and whole.t == pytest.approx(1.0)
    assert whole.frames_end_s == pytest.approx(31 * FRAME_S)
    assert 0.2 < whole.user_speech_s < 0.5 and whole.user_speech_db > -40.0
    assert whole.overlap_s == 0.0  # the speech began after the assistant's audio
    assert sum(whole.assistant_frames) == round(0.25 / FRAME_S)
    assert not any(whole.vad_probs[i] >= 0.5 for i in range(10))  # 320 ms of silence first
    assert observe([1000, 7, 5000, 333, audio.size - 6340]) == whole


@pytest.mark.parametrize("cost_s", [0.01, 0.15, 0.5])
def test_partials_over_the_assistant_keep_within_the_units_recognition_budget(
    interruption: np.ndarray, cost_s: float
) -> None:
    """Talked over, a partial is due every sub-step, but a unit runs one only while its
    recognition so far plus the latest partial's cost fits the budget (or it has run none: a
    slow machine still gets one per unit); the policy reads the latest partial meanwhile.
    Recognition costs are data here (a fake clock for compute)."""
    asr = WhisperAsr()
    transcribe = asr.transcribe
    runs: list[tuple[int, str]] = []  # (unit, "partial" | "final") of each recognition
    unit = 0

    def metered(audio: np.ndarray, **kwargs: Any) -> Transcript:
        runs.append((unit, "partial" if kwargs.get("words") is False else "final"))
        return replace(transcribe(audio, **kwargs), compute_s=cost_s)

    asr.transcribe = metered  # type: ignore[method-assign]
    transcriber = SegmentTranscriber(asr)
    perception = Perception(SileroVad(), transcriber=transcriber, asr_partials=True)
    state = SessionState(action=None)
    audio = place(6.0, (0.3, interruption), (2.9, interruption))
    state.turn = Turn(deque(), forced=True, total16=audio.size, intervals=[[0.0, audio.size]])
    perception.bind(state)
    cuts = substep_cuts(RATE, 5)
    previous = ""
    for unit in range(6):
        acc = UnitAccount()
        for k in range(5):
            before = len(runs)
            perception.take_in(audio[unit * RATE + cuts[k] : unit * RATE + cuts[k + 1]], acc)
            finals = len(runs)
            obs = perception.observe(unit, k, 5, acc)
            talked_over = OVERLAP_PARTIAL_MIN_S + 0.2 <= transcriber.open_s
            if talked_over and transcriber.open_s <= OVERLAP_PARTIAL_WINDOW_S:
                if finals == before and len(runs) == finals:
                    assert obs.transcript == previous  # no partial run: the latest one stands
            previous = obs.transcript
        assert acc.asr_s == pytest.approx(cost_s * sum(u == unit for u, _ in runs))
    per_unit = [sum(u == i and kind == "partial" for u, kind in runs) for i in range(6)]
    if cost_s <= 0.01:
        assert max(per_unit) >= 4, per_unit  # every sub-step of the overlap's first 1.2 s
    elif cost_s < OVERLAP_PARTIAL_BUDGET_S:
        # as many as fit: two of 0.15 s in the 0.4 s budget, not three
        fit = int(OVERLAP_PARTIAL_BUDGET_S // cost_s)
        assert max(per_unit) == fit >= 2 and sum(per_unit) >= 2 * fit, per_unit
    else:
        assert max(per_unit) == 1 and sum(per_unit) >= 3, per_unit  # the first of each unit
    assert [kind for _, kind in runs].count("final") == 2, runs
    print(f"partials per unit at {cost_s} s each: {per_unit}")
    assert transcriber.partial_cost_s == cost_s


def test_finals_over_the_assistant_are_weighed_against_the_phrases_the_policy_expects(
    interruption: np.ndarray,
) -> None:
    """A final transcript of speech over the assistant's turn is recognised with the phrases
    the floor policy expects there (its commands); one after the turn, without."""
    asr = WhisperAsr()
    transcribe = asr.transcribe
    finals: list[tuple[str, ...]] = []

    def spy(audio: np.ndarray, **kwargs: Any) -> Transcript:
        if kwargs.get("words") is not False:
            finals.append(tuple(kwargs.get("expect", ())))
        return transcribe(audio, **kwargs)

    asr.transcribe = spy  # type: ignore[method-assign]
    perception = Perception(
        SileroVad(), transcriber=SegmentTranscriber(asr), expected_over_turn=("Stop.",)
    )
    state = SessionState(action=None)
    audio = place(6.0, (0.3, interruption), (3.3, interruption))
    state.turn = Turn(deque(), forced=True, total16=3 * RATE, intervals=[[0.0, 3.0 * RATE]])
    perception.bind(state)
    for unit in range(6):
        if unit == 3:
            state.turn = None  # the turn ended at 3 s
        perception.take_in(audio[unit * RATE : (unit + 1) * RATE], UnitAccount())
    assert finals == [("Stop.",), ()]


def test_the_assistants_own_voice_heard_back_is_not_taken_for_the_users_words(
    interruption: np.ndarray, tmp_path: Path
) -> None:
    """With no echo canceller the microphone hears the speaker: the recogniser writes the
    assistant's sentence. Against what played while it was heard it is the assistant's own
    voice, in the partials (a garbled word or two at the end of one may stay: the word being
    heard) and the final: no words, and no turn of the user's to answer. The user's cut-in
    after it keeps its words; the same sentence heard when nothing like it was playing is the
    user's (someone repeating it)."""
    echo = espeak_16k(STORY.split(". ")[0] + ".", tmp_path / "echo.wav", "en-us") * 0.5
    length = echo.size / RATE
    audio = place(12.0, (0.5, echo), (length + 2.0, interruption))

    def hear(said_at_s: float) -> tuple[SessionState, list[str]]:
        perception = Perception(
            SileroVad(), transcriber=SegmentTranscriber(WhisperAsr()), asr_partials=True
        )
        state = SessionState(action=None)
        perception.bind(state)
        state.said.append([said_at_s * RATE, (said_at_s + length) * RATE, STORY])
        partials = []
        for unit in range(12):
            acc = UnitAccount()
            perception.take_in(audio[unit * RATE : (unit + 1) * RATE], acc)
            if unit < length:
                partials.append(perception.observe(unit, 0, 1, acc).transcript)
        return state, partials

    state, partials = hear(0.5)
    assert all(len(p.split()) <= 2 for p in partials), partials
    assert len(state.user_texts) == 1 and "time" in state.user_texts[0].lower(), state.user_texts
    state, partials = hear(9.0)  # played later than it was heard: not its echo
    assert "robot" in state.user_texts[0].lower(), state.user_texts
    assert max(len(p.split()) for p in partials) >= 5, partials


def test_an_utterance_ended_early_is_read_as_its_vad_end_would_read_it(
    interruption: np.ndarray, tmp_path: Path
) -> None:
    """When the assistant takes the turn before the VAD ends the utterance, the final of what
    was heard is taken in like any other: the user's words join the user's turn, and a turn that
    was all the assistant's own voice heard back is no turn of the user's."""
    echo = espeak_16k(STORY.split(". ")[0] + ".", tmp_path / "echo.wav", "en-us") * 0.5

    def ended_early(clip: np.ndarray, played: bool) -> SessionState:
        perception = Perception(SileroVad(), transcriber=SegmentTranscriber(WhisperAsr()))
        state = SessionState(action=None)
        perception.bind(state)
        length = clip.size / RATE
        if played:
            state.said.append([0.5 * RATE, (0.5 + length) * RATE, STORY])
        audio = place(length + 2.0, (0.5, clip))
        voiced_end = 0.5 + np.flatnonzero(np.abs(clip) > 0.01)[-1] / RATE
        heard = int((voiced_end + 0.05) * RATE)  # all of it, not yet the VAD's end
        for start in range(0, heard, RATE // 10):  # as sub-steps bring it
            perception.take_in(audio[start : min(start + RATE // 10, heard)], UnitAccount())
        assert state.user_turn_speech > 0 and perception.in_utterance
        perception.end_utterance()
        assert not perception.in_utterance
        perception.end_utterance()  # nothing open any more: no second final
        return state

    state = ended_early(interruption, played=False)
    assert "time" in " ".join(state.user_texts).lower(), state.user_texts
    assert state.user_turn_speech > 0
    # with the recogniser's confidence in the words, which the user's request carries
    assert 0.3 < state.user_confidence[state.user_texts[0]] <= 1.0, state.user_confidence
    state = ended_early(echo, played=True)
    assert state.user_texts == [] and state.user_turn_speech == 0 and state.user_turn_start is None
    assert state.user_confidence == {}


def test_a_short_unsure_reading_over_the_assistants_audio_is_taken_for_its_echo() -> None:
    """At most two words, one of them read below UNSURE_WORD_P, heard wholly while the
    assistant's audio played: its own voice misread ("Thank you."), not the user's words; a
    command, a surer reading, a longer one, or one heard partly in silence, is the user's."""
    perception = Perception(SileroVad())
    state = SessionState(action=None)
    perception.bind(state)
    state.intervals.append([1.0 * RATE, 5.0 * RATE])  # the assistant plays from 1 s to 5 s

    def reading(text: str, probabilities: list[float], start: float = 2.0) -> Transcript:
        words = [
            Word(w, start + 0.1 * i, start + 0.1 * (i + 1), p)
            for i, (w, p) in enumerate(zip(text.split(), probabilities, strict=True))
        ]
        return Transcript(text, words, audio_s=0.5, start=start)

    low = UNSURE_WORD_P / 2
    assert perception.misheard_echo(reading("Thank you.", [low, 0.99]))
    assert not perception.misheard_echo(reading("Stop.", [low]))  # a command
    assert not perception.misheard_echo(reading("Thank you.", [0.5, 0.99]))
    assert not perception.misheard_echo(reading("Thank you so much.", [low, 0.9, 0.9, 0.9]))
    assert not perception.misheard_echo(reading("Thank you.", [low, 0.99], start=4.8))
    assert not perception.misheard_echo(Transcript(""))
    perception._take_finals([reading("Thank you.", [low, 0.99]), reading("Sure.", [0.9])])
    assert state.user_texts == ["Sure."]


def test_the_users_request_carries_the_least_confidence_of_its_words() -> None:
    """A request of several final transcripts is as sure as its least sure one; texts with no
    words the recogniser weighed leave it unknown; forgetting the turn forgets them."""
    frontend = PolicyFrontend(NeverYield())
    state = frontend.state
    state.user_turn_speech, state.user_turn_start = 40, 0.0
    state.user_texts = ["Stop.", "What time is it?"]
    state.user_confidence = {"Stop.": 0.8, "What time is it?": 0.35, "earlier": 0.1}
    request = frontend._request()
    assert request is not None and request.confidence == 0.35
    state.user_confidence = {}
    request = frontend._request()
    assert request is not None and request.confidence is None
    state.user_confidence = {"Stop.": 0.8}
    state.forget_user_turn()
    assert state.user_confidence == {} and frontend._request() is None


def test_a_long_cut_in_is_read_every_sub_step_then_more_sparsely_then_at_boundaries(
    tmp_path: Path,
) -> None:
    """Talked over, a partial is due every sub-step (0.2 s) for the utterance's first
    OVERLAP_PARTIAL_WINDOW_S, every OVERLAP_PARTIAL_LATE_INTERVAL_S after that up to
    OVERLAP_PARTIAL_LATE_S ("Hang on," then the question), then only at unit boundaries."""
    speech = espeak_16k(
        "Hang on, can I walk the whole way there without a car, or do I need to take the bus?",
        tmp_path / "long.wav",
        "en-gb+f3",
    )
    assert speech.size > 3.5 * RATE
    asr = WhisperAsr()
    transcribe = asr.transcribe
    at: list[tuple[float, int]] = []  # (open seconds, sub-step) of each partial

    def metered(audio: np.ndarray, **kwargs: Any) -> Transcript:
        if kwargs.get("words") is False:
            at.append((transcriber.open_s, k))
        return replace(transcribe(audio, **kwargs), compute_s=0.01)

    asr.transcribe = metered  # type: ignore[method-assign]
    transcriber = SegmentTranscriber(asr)
    perception = Perception(SileroVad(), transcriber=transcriber, asr_partials=True)
    state = SessionState(action=None)
    audio = place(6.0, (0.3, speech))
    state.turn = Turn(deque(), forced=True, total16=audio.size, intervals=[[0.0, audio.size]])
    perception.bind(state)
    cuts = substep_cuts(RATE, 5)
    for unit in range(6):
        acc = UnitAccount()
        for k in range(5):
            perception.take_in(audio[unit * RATE + cuts[k] : unit * RATE + cuts[k + 1]], acc)
            perception.observe(unit, k, 5, acc)
    opens = [o for o, _ in at]
    early = [o for o in opens if o <= OVERLAP_PARTIAL_WINDOW_S]
    late = [o for o in opens if OVERLAP_PARTIAL_WINDOW_S < o <= OVERLAP_PARTIAL_LATE_S + 0.05]
    after = [(o, k) for o, k in at if o > OVERLAP_PARTIAL_LATE_S + 0.05]
    assert len(early) >= 4 and max(np.diff(early)) <= 0.25, opens
    gaps = np.diff([early[-1], *late])
    assert len(late) == 2 and min(gaps) >= OVERLAP_PARTIAL_LATE_INTERVAL_S - 0.05, opens
    assert after and all(k == 4 for _, k in after), at  # the boundary's, at its own rate


def test_substep_cuts_split_a_unit_evenly_to_the_sample() -> None:
    assert substep_cuts(16000, 5) == [0, 3200, 6400, 9600, 12800, 16000]
    assert substep_cuts(16560, 5) == [0, 3312, 6624, 9936, 13248, 16560]
    assert substep_cuts(16000, 1) == [0, 16000]


# -- whole units vs. pieces as they arrive -----------------------------------------------------


def units_of(audio: np.ndarray) -> list[InputUnit]:
    assembler, units = UnitAssembler(), []
    for start in range(0, audio.size, 320):
        assembler.push_audio(audio[start : start + 320], RATE)
        while (unit := assembler.pop_unit()) is not None:
            units.append(unit)
    return units


def drive(frontend: PolicyFrontend, units: list[InputUnit], pieces: int) -> list[Any]:
    """Step ``frontend`` through ``units``; with ``pieces`` > 1 each unit is first heard in that
    many irregular pieces (cut off the sub-step points). Returns the loop's records."""
    clock = FakeClock()
    timeline = Timeline(clock)
    loop = DuplexLoop(frontend, timeline, clock)
    loop.prepare()
    rng = np.random.default_rng(5)
    for unit in units:
        if pieces > 1:
            cuts = np.sort(rng.choice(np.arange(1, unit.audio.size), pieces - 1, replace=False))
            for a, b in zip([0, *cuts], [*cuts, unit.audio.size], strict=True):
                loop.hear(
                    PartialUnit(
                        unit.index, unit.start_sample, unit.audio.size, int(a), unit.audio[a:b]
                    )
                )
        loop.step(unit)
    kinds = (Kind.DECISION, Kind.FLUSH, Kind.ASSISTANT_TEXT, Kind.PROTOCOL_ERROR)
    drop = ("early", "at_sample")  # an early flush says so; a boundary one has no such keys
    return sorted(
        (r.kind.value, sorted((k, v) for k, v in r.payload.items() if k not in drop))
        for r in timeline.snapshot().of_kind(*kinds)
    )


def fine(policy: FloorPolicy, **kwargs: Any) -> PolicyFrontend:
    frontend = PolicyFrontend(policy, substeps=5, record_observations=True, **kwargs)
    frontend.schedule_turns([(1.0, STORY)])
    return frontend


def test_a_unit_heard_in_five_pieces_gives_the_observations_and_decisions_of_the_whole(
    interruption: np.ndarray,
) -> None:
    units = units_of(place(6.0, (3.3, interruption)))
    whole = fine(VadBargeIn(), asr=True, asr_partials=True)
    heard = fine(VadBargeIn(), asr=True, asr_partials=True)
    records_whole = drive(whole, units, pieces=1)
    records_heard = drive(heard, units, pieces=5)
    # The same observations up to the stop; after it they differ only in where the speaker
    # stopped: where the audio heard ended, mid-unit in pieces and at the boundary whole.
    stopped = next(
        i
        for i, o in enumerate(whole.observations)
        if o.assistant_speaking and o.overlap_s >= 2 * FRAME_S
    )
    assert heard.observations[: stopped + 1] == whole.observations[: stopped + 1]
    assert len(whole.observations) == 5 * len(units)
    assert heard.steps == whole.steps
    assert records_heard == records_whole  # the same decisions and one flush, early or not
    assert [k for k, _ in records_whole].count("flush") == 1
    # The policy yielded at a sub-step of unit 3, and both stopped the turn there.
    yields = [o for o in whole.observations if o.assistant_speaking and o.overlap_s >= 2 * FRAME_S]
    assert [(o.unit_index, o.substep < 4) for o in yields] == [(3, True)]
    assert any(o.transcript for o in whole.observations)  # partials ran at the sub-steps


def test_the_session_path_hears_as_audio_arrives_and_stops_early(interruption: np.ndarray) -> None:
    audio = place(6.0, (3.3, interruption))
    whole, heard = fine(VadBargeIn(), asr=False), fine(VadBargeIn(), asr=False)
    whole.hears_audio = False  # this one takes each unit whole at its boundary
    sessions = [run_offline(audio, RATE, f, clock=FakeClock()) for f in (whole, heard)]
    late, early = (s.timeline.snapshot().of_kind(Kind.FLUSH) for s in sessions)
    assert [r.payload.get("early", False) for r in (*late, *early)] == [False, True]
    (stop,) = [o for o in heard.observations if o.assistant_speaking and o.overlap_s >= 2 * FRAME_S]
    assert early[0].t == pytest.approx(stop.t, abs=0.03) and early[0].t < late[0].t - 0.2
    # The reply: taken at a boundary by the one, at the sub-step the policy asked by the other
    # (the same observations and decisions up to there).
    (start,) = [
        r for r in sessions[1].timeline.snapshot().of_kind(Kind.DECISION) if "early" in r.payload
    ]
    assert not any("early" in r.payload for r in sessions[0].timeline.snapshot())
    seen = sum(o.t <= start.t + 1e-6 for o in heard.observations)
    assert heard.observations[:seen] == whole.observations[:seen]
    asked = heard.observations[seen - 1]
    assert not asked.is_boundary and heard.policy.decide(asked) is FloorAction.START_SPEAKING
    rate = sessions[1].playback.sample_rate
    spans = [[(t, t + a.size / rate) for t, a in s.playback.played_audio] for s in sessions]
    # Nothing plays from the early flush until the reply, which plays from the sub-step on.
    before = [end for begin, end in spans[1] if begin < early[0].t]
    assert max(before) == pytest.approx(early[0].t, abs=1e-3)
    (reply, *_) = [begin for begin, _ in spans[1] if begin >= early[0].t]
    (reply_whole, *_) = [begin for begin, _ in spans[0] if begin >= late[0].t - 1e-6]
    assert reply == pytest.approx(asked.t, abs=0.03) and reply < reply_whole - 0.1
    assert sessions[1].early_starts and sessions[1].early_starts[0].speech is not None


def test_the_echo_reference_starts_and_stops_where_the_speaker_does(
    interruption: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunks of 30 ms end past the 200 ms sub-step cuts: the speaker stops and starts at the
    end of the audio heard, and the echo canceller's reference must follow it to the sample,
    or the next turn's echo is not cancelled."""
    audio = place(6.0, (3.3, interruption))
    frontend = fine(VadBargeIn(), asr=False, aec=True)
    pushed: list[tuple[int | None, int]] = []
    push = frontend._aec.push_reference

    def spy(samples: np.ndarray, rate: int, position: int | None = None) -> None:
        pushed.append((position, round(samples.size * RATE / rate)))
        push(samples, rate, position)

    monkeypatch.setattr(frontend._aec, "push_reference", spy)  # the canceller may be shared
    session = run_offline(
        audio, RATE, frontend, clock=FakeClock(), config=SessionConfig(chunk_ms=30)
    )
    (flush,) = session.timeline.snapshot().of_kind(Kind.FLUSH)
    assert flush.payload.get("early") and flush.payload["at_sample"] % 3200  # past a cut
    starts = [round(t * RATE) for t, _ in session.playback.played_audio]
    placed = [p for p, _ in pushed if p is not None]
    reply = [s for s in starts if s > round(flush.t * RATE)]
    assert reply and reply[0] in placed  # the reply's reference lies where it plays
    assert all(p in starts for p in placed)


class StopsAtTheWordsAndAnswersAtOnce(FloorPolicy):
    """Yields at the boundary after a final transcript of speech over the turn is in;
    answers it at once."""

    def decide(self, obs: FloorObservation) -> FloorAction:
        if obs.assistant_speaking:
            yields = obs.user_text and obs.is_boundary
            return FloorAction.YIELD if yields else FloorAction.KEEP_SPEAKING
        return FloorAction.START_SPEAKING if obs.user_text else FloorAction.KEEP_LISTENING


def test_after_stopping_for_the_user_the_assistant_keeps_silent_before_it_speaks_again(
    interruption: np.ndarray,
) -> None:
    """A stop read from the user's whole words comes when they have ended; a policy that
    would answer at the next sub-step still waits RESTART_GAP_S after the stop (resumed within
    half a second, speech is heard as the same turn going on)."""
    audio = place(7.0, (2.3, interruption))
    frontend = fine(StopsAtTheWordsAndAnswersAtOnce(), asr=True)
    session = run_offline(audio, RATE, frontend, clock=FakeClock())
    (stop,) = session.timeline.snapshot().of_kind(Kind.FLUSH)
    assert "early" not in stop.payload  # at a boundary
    (reply, *_) = [t for t, _ in session.playback.played_audio if t > stop.t]
    asked = [o for o in frontend.observations if o.t > stop.t and not o.assistant_speaking]
    wanted = next(o.t for o in asked if frontend.policy.decide(o) is FloorAction.START_SPEAKING)
    assert wanted < stop.t + RESTART_GAP_S - 0.1  # it would have spoken sooner
    assert stop.t + RESTART_GAP_S - 1e-3 <= reply <= stop.t + RESTART_GAP_S + 0.2 + 1e-3


class KeepsThroughShortBursts(NeverYield):
    """Yields only to overlapping speech that lasts a whole unit's worth of sub-steps."""

    def decide(self, obs: FloorObservation) -> FloorAction:
        if obs.assistant_speaking and obs.overlap_s >= 0.6:
            return FloorAction.YIELD
        return super().decide(obs)


def test_a_short_backchannel_does_not_stop_a_policy_that_keeps_the_floor(
    backchannel: np.ndarray,
) -> None:
    audio = place(6.0, (3.3, backchannel))
    frontend = fine(KeepsThroughShortBursts(), asr=False)
    session = run_offline(audio, RATE, frontend, clock=FakeClock())
    assert any(o.overlap_s > 0 for o in frontend.observations)  # it was heard, over the turn
    assert session.timeline.snapshot().of_kind(Kind.FLUSH) == []
    assert not any(r.early_flush or r.flush for r in session.results)
    assert STORY.startswith(session.loop.heard_text(1)) and len(session.loop.heard_text(1)) > 40


def test_a_unit_that_differs_from_what_was_heard_fails_and_the_streams_restart() -> None:
    units = units_of(np.zeros(4 * RATE, np.float32))
    frontend = fine(NeverYield(), asr=False)
    clock = FakeClock()
    timeline = Timeline(clock)
    loop = DuplexLoop(frontend, timeline, clock)
    loop.prepare()
    loop.step(units[0])
    unit = units[1]
    loop.hear(
        PartialUnit(unit.index, unit.start_sample, unit.audio.size, 0, unit.audio[:5000] + 0.5)
    )
    loop.step(unit)
    (error,) = timeline.snapshot().of_kind(Kind.FRONTEND_ERROR)
    assert "differs from the audio heard" in error.payload["message"]
    loop.step(units[2])  # the next unit is taken in from a fresh start
    assert len(timeline.snapshot().of_kind(Kind.FRONTEND_ERROR)) == 1
    assert frontend.observations[-1].unit_index == 2
