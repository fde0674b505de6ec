"""The floor-policy frontends (VAD barge-in, never-yield) through the real duplex loop.

Sessions use real models: espeak-ng speech as the user (a female British voice; the assistant
speaks with espeak-ng's default American voice), Silero VAD, Whisper tiny.en and, where echo is
simulated, WebRTC AEC3. Each session is played by :func:`venus_ros.core.session.run_offline` on
a fake clock, so unit boundaries fall at exact session times (unit k ends at 1.035 + k s).
The policies, the responder and the per-unit text split are also tested on hand-built inputs.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from speech import espeak_16k

from venus_ros.core.clock import FakeClock
from venus_ros.core.frontend import Decision, Frontend, FrontendError, UnitOutput
from venus_ros.core.session import SessionResult, run_offline
from venus_ros.core.timeline import Kind, TimelineView
from venus_ros.core.units import InputUnit, resample
from venus_ros.frontends import make_frontend
from venus_ros.frontends.cascade.turns import split_turn, trim_silence
from venus_ros.frontends.policy import (
    CHECK_PHRASE,
    FRAME_S,
    FloorAction,
    FloorObservation,
    NeverYield,
    PolicyFrontend,
    Responder,
    UserRequest,
    VadBargeIn,
    parse_options,
)

RATE = 16000
FIRST_UNIT_S = 1.035


def boundary_s(index: int) -> float:
    """Session time of unit ``index``'s boundary (its end)."""
    return FIRST_UNIT_S + index


STORY = (
    "Here is a long story about a robot who lived in a small house by the sea. "
    "Every morning it walked along the beach and counted the waves."
)
REQUEST = "Wait, what is the weather in Paris today?"
USER_VOICE = "en-gb+f3"
STORY_AT = 1.0  # the scheduled turn starts at the first boundary, 1.035 s
INTERRUPT_AT = 3.3  # mid unit 3, which covers [3.035, 4.035)
REQUEST_AT = 1.5


@pytest.fixture(scope="module")
def request_audio(tmp_path_factory: pytest.TempPathFactory) -> np.ndarray:
    folder = tmp_path_factory.mktemp("speech")
    return espeak_16k(REQUEST, folder / "request.wav", USER_VOICE)


def place(total_s: float, *items: tuple[float, np.ndarray]) -> np.ndarray:
    """``total_s`` of digital silence with each clip added at its start time."""
    out = np.zeros(round(total_s * RATE), np.float32)
    for start, clip in items:
        i = round(start * RATE)
        out[i : i + clip.size] += clip[: out.size - i]
    return out


def speech_span(clip: np.ndarray, start: float) -> tuple[float, float]:
    """Session times of a placed clip's first and last sample above -40 dB of its peak."""
    loud = np.flatnonzero(np.abs(clip) > np.abs(clip).max() * 0.01)
    return start + loud[0] / RATE, start + (loud[-1] + 1) / RATE


def run(
    frontend: Frontend, audio: np.ndarray | Iterator[np.ndarray], **kwargs: Any
) -> tuple[SessionResult, TimelineView]:
    """One offline session; fails on any protocol or frontend error (requirement e)."""
    session = run_offline(audio, RATE, frontend, clock=FakeClock(), **kwargs)
    view = session.timeline.snapshot()
    errors = view.of_kind(Kind.PROTOCOL_ERROR, Kind.FRONTEND_ERROR)
    assert not errors, [(r.kind.value, r.payload) for r in errors]
    for record in view.of_kind(Kind.ASSISTANT_AUDIO):  # at most one second of audio per unit
        assert record.payload["samples"] <= record.payload["sample_rate"]
    return session, view


def turn_text(view: TimelineView, turn: int) -> str:
    return "".join(
        r.payload["text"] for r in view.of_kind(Kind.ASSISTANT_TEXT) if r.payload["turn"] == turn
    )


def norm(text: str) -> str:
    return " ".join(text.split())


def started(frontend: PolicyFrontend) -> list[tuple[int, str]]:
    return [(s.unit_index, s.started) for s in frontend.steps if s.started]


# -- sessions through the real loop -------------------------------------------------------------


def test_vad_bargein_yields_within_one_unit_of_the_interruption_and_the_loop_flushes(
    request_audio: np.ndarray,
) -> None:
    frontend = PolicyFrontend(VadBargeIn(), asr=False)
    frontend.schedule_turns([(STORY_AT, STORY)])
    session, view = run(frontend, place(10.0, (INTERRUPT_AT, request_audio)))

    onset, _ = speech_span(request_audio, INTERRUPT_AT)
    onset_unit = math.floor(onset - FIRST_UNIT_S) + 1  # the unit whose audio holds the onset
    assert onset_unit == 3
    flushes = view.of_kind(Kind.FLUSH)
    assert [r.payload for r in flushes] == [{"unit": onset_unit, "turn": 1}]
    assert flushes[0].t - onset <= 1.0 + 2 * FRAME_S
    yielded = [s for s in frontend.steps if s.yielded]
    assert [(s.unit_index, s.action, s.decision) for s in yielded] == [
        (onset_unit, FloorAction.YIELD, Decision.LISTEN)
    ]
    assert session.results[onset_unit].flush and session.results[onset_unit].speech is None
    # The story was cut: what was said and heard is a strict prefix of it.
    said = norm(turn_text(view, 1))
    heard = session.loop.heard_text(1)
    assert said and STORY.startswith(said) and len(said) < len(STORY) // 2
    assert STORY.startswith(heard) and len(heard) <= len(said)
    # The scheduled turn started at the first boundary at or after its start.
    assert started(frontend)[0] == (0, "scheduled")
    first = view.of_kind(Kind.DECISION)[0].payload
    assert first["decision"] == "speak" and first["turn"] == 1


def test_never_yield_speaks_through_the_same_overlap_to_the_end(request_audio: np.ndarray) -> None:
    frontend = PolicyFrontend(NeverYield(), asr=False)
    frontend.schedule_turns([(STORY_AT, STORY)])
    session, view = run(frontend, place(14.0, (INTERRUPT_AT, request_audio)))

    assert view.of_kind(Kind.FLUSH) == []
    assert not any(s.yielded for s in frontend.steps)
    assert norm(turn_text(view, 1)) == STORY
    assert session.loop.heard_text(1) == STORY
    decisions = [r.payload for r in view.of_kind(Kind.DECISION) if r.payload["turn"] == 1]
    assert all(d["decision"] == "speak" for d in decisions)
    assert [d["end_of_turn"] for d in decisions] == [False] * (len(decisions) - 1) + [True]
    # The user's speech was heard over the assistant, and answered once the story was over.
    overlap = frontend.steps[3]  # the unit where the user started talking over it
    assert overlap.unit_index == 3 and overlap.action is FloorAction.KEEP_SPEAKING
    story_end = len(decisions) - 1
    assert started(frontend) == [(0, "scheduled"), (story_end + 1, "delegate")]


def test_a_finished_request_is_delegated_with_its_transcript(request_audio: np.ndarray) -> None:
    frontend = PolicyFrontend(VadBargeIn())  # ASR on
    session, view = run(frontend, place(7.0, (REQUEST_AT, request_audio)))

    closes = view.of_kind(Kind.DELEGATE_CLOSE)
    assert len(closes) == 1
    query = closes[0].payload["query"].lower()
    assert "weather" in query and "paris" in query
    assert [d.query for d in session.delegates] == [closes[0].payload["query"]]
    assert norm(turn_text(view, 1)) == CHECK_PHRASE
    # It answered at the first boundary with >= 0.6 s of silence after the request (VAD frames
    # lag the boundary by up to two frames), not before.
    _, end = speech_span(request_audio, REQUEST_AT)
    ((unit, kind),) = started(frontend)
    assert kind == "delegate"
    assert boundary_s(unit) - end >= 0.6
    assert boundary_s(unit - 1) - end < 0.6 + 2 * FRAME_S
    # The delegate is written in the turn's first unit, together with the words before it.
    assert closes[0].payload["unit"] == unit


def test_without_asr_the_delegate_names_the_request_by_its_time_span(
    request_audio: np.ndarray,
) -> None:
    frontend = make_frontend("vad-bargein:noasr")
    _, view = run(frontend, place(7.0, (REQUEST_AT, request_audio)))
    (close,) = view.of_kind(Kind.DELEGATE_CLOSE)
    assert close.payload["query"].startswith("the user's request from 1.")
    assert close.payload["query"].endswith("(no transcript)")


def test_a_backend_reply_is_spoken(request_audio: np.ndarray) -> None:
    frontend = PolicyFrontend(VadBargeIn())
    reply = "It is sunny in Paris, twenty degrees."
    session, view = run(
        frontend,
        place(10.0, (REQUEST_AT, request_audio)),
        on_delegate=lambda request: (1.0, reply),
    )
    (insert,) = [r for r in view.of_kind(Kind.BACKEND_INSERT) if r.payload["inserted"]]
    kinds = started(frontend)
    assert [kind for _, kind in kinds] == ["delegate", "backend"]
    # Spoken at the boundary where it was inserted: the user had long been quiet.
    assert kinds[1][0] == insert.payload["unit"]
    assert norm(turn_text(view, 2)) == reply
    assert session.loop.heard_text(2) == reply


def test_decisions_are_deterministic(request_audio: np.ndarray) -> None:
    audio = place(10.0, (INTERRUPT_AT, request_audio))

    def trace(frontend: PolicyFrontend) -> tuple[Any, ...]:
        _, view = run(frontend, audio)
        kinds = (Kind.DECISION, Kind.ASSISTANT_TEXT, Kind.FLUSH, Kind.DELEGATE_CLOSE)
        return frontend.steps, tuple((r.kind, r.payload_json) for r in view.of_kind(*kinds))

    frontends = [PolicyFrontend(VadBargeIn()) for _ in range(2)]
    for frontend in frontends:
        frontend.schedule_turns([(STORY_AT, STORY)])
    first = trace(frontends[0])
    assert any(s.yielded for s in first[0]) and any(s.started == "delegate" for s in first[0])
    assert trace(frontends[1]) == first
    assert trace(frontends[0]) == first  # the same frontend again: prepare() starts over


def test_substeps_observe_growing_prefixes_and_stop_at_the_substep(
    request_audio: np.ndarray,
) -> None:
    audio = place(6.0, (INTERRUPT_AT, request_audio))
    plain = PolicyFrontend(VadBargeIn(), asr=False)
    fine = PolicyFrontend(VadBargeIn(), asr=False, substeps=4, record_observations=True)
    runs = {}
    for frontend in (plain, fine):
        frontend.schedule_turns([(STORY_AT, STORY)])
        runs[frontend] = run(frontend, audio)
    # The same decisions at every boundary: the sub-step stop is the boundary's yield, earlier.
    assert fine.steps == plain.steps
    assert len(fine.observations) == 4 * len(fine.steps)
    unit3 = [o for o in fine.observations if o.unit_index == 3]
    assert [o.substep for o in unit3] == [0, 1, 2, 3] and unit3[-1].is_boundary
    assert [len(o.vad_probs) for o in unit3] == sorted(len(o.vad_probs) for o in unit3)
    assert len(unit3[-1].vad_probs) in (31, 32)
    assert unit3[-1].t == pytest.approx(boundary_s(3))
    assert unit3[0].overlap_s == 0.0 < unit3[-1].overlap_s  # the user starts at 3.3 s
    # The policy yielded at the first sub-step with enough overlap: the turn stopped there...
    (stop,) = [o for o in unit3 if o.assistant_speaking and o.overlap_s >= 2 * FRAME_S]
    assert stop.substep < 3 and stop.forced_turn
    assert stop.assistant_spoken_s == pytest.approx(stop.t - boundary_s(0), abs=0.01)
    assert stop.user_speech_s == stop.overlap_s == stop.turn_overlap_s > 0
    assert max(stop.vad_probs) > 0.9 and stop.user_turn_speech_s == stop.user_speech_s
    after = [o for o in unit3 if o.substep > stop.substep]
    assert after and not any(o.assistant_speaking for o in after)
    assert not any(after[-1].assistant_frames[-5:])  # the speaker stopped at the sub-step
    # ...the speaker was flushed then, and the played audio ends there.
    (session_plain, view_plain), (session_fine, view_fine) = runs[plain], runs[fine]
    (late,) = view_plain.of_kind(Kind.FLUSH)
    (early,) = view_fine.of_kind(Kind.FLUSH)
    assert late.t == pytest.approx(boundary_s(3)) and late.payload == {"unit": 3, "turn": 1}
    assert early.payload["early"] and early.payload["unit"] == 3
    assert early.t == pytest.approx(stop.t, abs=0.025) and early.t < late.t - 0.2
    for session, flush in ((session_plain, late), (session_fine, early)):
        end = max(
            t + len(a) / session.playback.sample_rate for t, a in session.playback.played_audio
        )
        assert end == pytest.approx(flush.t, abs=1e-3)
    results = session_fine.results
    assert results[3].early_flush and not results[3].flush and results[3].end_of_turn
    # Heard: what played up to the early flush, a strict prefix of what the late one heard.
    heard_fine, heard_plain = session_fine.loop.heard_text(1), session_plain.loop.heard_text(1)
    assert STORY.startswith(heard_fine) and len(heard_fine) < len(heard_plain)


class FailsOnce(VadBargeIn):
    """Raises at one boundary, as a buggy trained policy might."""

    def decide(self, obs: FloorObservation) -> FloorAction:
        if obs.unit_index == 3:
            raise RuntimeError("policy bug")
        return super().decide(obs)


def test_a_failing_unit_ends_the_turn_on_both_sides_and_the_session_goes_on(
    request_audio: np.ndarray,
) -> None:
    frontend = PolicyFrontend(FailsOnce(), asr=False)
    frontend.schedule_turns([(STORY_AT, STORY)])
    session = run_offline(
        place(9.0, (INTERRUPT_AT, request_audio)), RATE, frontend, clock=FakeClock()
    )
    view = session.timeline.snapshot()
    assert [r.payload["unit"] for r in view.of_kind(Kind.FRONTEND_ERROR)] == [3]
    assert view.of_kind(Kind.PROTOCOL_ERROR) == []
    assert [r.payload["unit"] for r in view.of_kind(Kind.FLUSH)] == [3]  # the loop's yield
    # The frontend did not carry on with the story; it answered the user once they stopped.
    assert norm(turn_text(view, 2)) == CHECK_PHRASE
    assert len(view.of_kind(Kind.DELEGATE_CLOSE)) == 1


class EchoRoom(Frontend):
    """Wraps a frontend and plays what it says back into the microphone (see ``mic``)."""

    def __init__(self, inner: PolicyFrontend, delay_s: float = 0.05, gain: float = 0.5) -> None:
        self.inner = inner
        self.output_sample_rate = inner.output_sample_rate
        self.delay = round(delay_s * RATE)
        self.gain = gain
        self.played = np.zeros(60 * RATE, np.float32)  # the speaker, on the mic timeline
        self._end = 0
        self._boundary = 0

    def prepare(self, system_prompt: str = "", ref_audio: np.ndarray | None = None) -> None:
        self.inner.prepare(system_prompt, ref_audio)

    def prefill(self, unit: InputUnit) -> None:
        self._boundary = unit.start_sample + unit.audio.size
        self.inner.prefill(unit)

    def generate(self) -> UnitOutput:
        out = self.inner.generate()
        if out.decision is Decision.LISTEN and out.end_of_turn:  # the speaker is flushed
            self.played[self._boundary :] = 0.0
            self._end = min(self._end, self._boundary)
        if out.audio.size:
            audio = resample(out.audio, self.output_sample_rate, RATE)
            start = max(self._boundary, self._end)
            self.played[start : start + audio.size] = audio
            self._end = start + audio.size
        return out

    def mic(self, user: np.ndarray, chunk: int = 320) -> Iterator[np.ndarray]:
        """The user plus the delayed, attenuated speaker, chunk by chunk as the session runs."""
        for i in range(0, user.size, chunk):
            n = min(chunk, user.size - i)
            j = i - self.delay
            echo = self.played[j : j + n] if j >= 0 else np.zeros(n, np.float32)
            yield (user[i : i + n] + self.gain * echo).astype(np.float32)


@pytest.mark.parametrize("aec", [False, True])
def test_echo_cancellation_keeps_barge_in_from_interrupting_itself(
    request_audio: np.ndarray, aec: bool
) -> None:
    frontend = PolicyFrontend(VadBargeIn(), asr=False, aec=aec)
    frontend.schedule_turns([(STORY_AT, STORY)])
    room = EchoRoom(frontend)
    run(room, room.mic(place(6.0)))
    yields = [s.unit_index for s in frontend.steps if s.yielded]
    if aec:
        assert yields == []
    else:  # it hears itself as a user barging in, right at its second unit
        assert yields[0] == 1


def test_with_echo_cancellation_the_user_still_interrupts(request_audio: np.ndarray) -> None:
    onset_at = 6.3  # after five seconds of echo: unit 6 covers [6.035, 7.035)
    frontend = PolicyFrontend(VadBargeIn(), aec=True)
    frontend.schedule_turns([(STORY_AT, STORY + " " + STORY)])
    room = EchoRoom(frontend)
    _, view = run(room, room.mic(place(11.0, (onset_at, request_audio))))
    assert [s.unit_index for s in frontend.steps if s.yielded] == [6]
    (close,) = view.of_kind(Kind.DELEGATE_CLOSE)
    assert "weather" in close.payload["query"].lower()


def test_schedule_turns_rejects_bad_turns_clearly() -> None:
    frontend = PolicyFrontend(VadBargeIn(), asr=False)
    with pytest.raises(ValueError, match=r"turn 0 starts at -0\.5.*>= 0"):
        frontend.schedule_turns([(-0.5, "Hello there.")])
    with pytest.raises(ValueError, match=r"turn 1 starts at nan"):
        frontend.schedule_turns([(1.0, "Hello."), (float("nan"), "Hi.")])
    with pytest.raises(ValueError, match=r"turn 0 \(start 2.0 s\) has empty text"):
        frontend.schedule_turns([(2.0, "")])
    with pytest.raises(ValueError, match=r"has empty text"):
        frontend.schedule_turns([(2.0, "   \n")])
    with pytest.raises(ValueError, match=r"nothing speakable"):
        frontend.schedule_turns([(2.0, "<delegate>secret</delegate>")])
    with pytest.raises(ValueError, match=r"must be \(start, text\)"):
        frontend.schedule_turns([(2.0,)])  # type: ignore[list-item]
    frontend.schedule_turns([(0.0, "Hello.")])  # a start at 0 is the first boundary
    frontend.prefill(InputUnit(0, 0, np.zeros(16560, np.float32)))
    out = frontend.generate()
    assert out.decision is Decision.SPEAK and out.text.strip() == "Hello." and out.end_of_turn
    with pytest.raises(RuntimeError, match="before the first unit"):
        frontend.schedule_turns([(5.0, "Too late.")])


def test_models_are_loaded_once_and_stream_state_is_not_shared() -> None:
    first = PolicyFrontend(VadBargeIn())
    second = PolicyFrontend(NeverYield())
    assert first._transcriber is not None and second._transcriber is not None
    assert first._transcriber.asr is second._transcriber.asr  # one Whisper per process
    assert first._tts is second._tts
    assert first._vad is not second._vad  # each live frontend has its own VAD stream
    vad = first._vad
    first.close()
    assert PolicyFrontend(VadBargeIn(), asr=False)._vad is vad  # closed: its VAD is reused
    # ... and a frontend that is simply dropped gives it back too (the runner's pattern).
    third = PolicyFrontend(VadBargeIn(), asr=False)
    vad = third._vad
    del third
    gc.collect()
    assert PolicyFrontend(VadBargeIn(), asr=False)._vad is vad


def test_make_frontend_builds_the_baselines() -> None:
    bargein = make_frontend("vad-bargein:noasr")
    assert isinstance(bargein, PolicyFrontend) and isinstance(bargein.policy, VadBargeIn)
    assert not bargein.asr_enabled and not bargein.aec_enabled
    never = make_frontend("never-yield:noasr,aec")
    assert isinstance(never, PolicyFrontend) and isinstance(never.policy, NeverYield)
    assert never.aec_enabled
    with pytest.raises(FrontendError, match="unknown option 'loud'"):
        make_frontend("vad-bargein:loud")
    with pytest.raises(FrontendError, match="'partials' needs ASR"):
        make_frontend("never-yield:noasr,partials")


def test_frontend_options_are_read_by_one_parser() -> None:
    kwargs, own = parse_options(
        "f", "noasr, aec,tts=piper,substeps=4,level=3,quiet", values={"level": int}, flags=["quiet"]
    )
    assert kwargs == {"asr": False, "aec": True, "tts": "piper", "substeps": 4}
    assert own == {"level": 3, "quiet": True}
    with pytest.raises(FrontendError, match=r"unknown option 'level=high'.*level=\.\.\."):
        parse_options("f", "level=high", values={"level": int})
    with pytest.raises(FrontendError, match="unknown option 'substeps=two'"):
        parse_options("f", "substeps=two")


# -- policies, responder and text split on hand-built inputs --------------------------------------


def observation(**changes: Any) -> FloorObservation:
    base = FloorObservation(
        unit_index=5,
        substep=0,
        substeps=1,
        t=6.035,
        frames_start_s=5.03,
        frames_end_s=6.014,
        vad_probs=(0.0,) * 31,
        frame_db=(-120.0,) * 31,
        assistant_frames=(False,) * 31,
        vad_threshold=0.5,
        user_speech_s=0.0,
        user_speech_db=-120.0,
        overlap_s=0.0,
        trailing_silence_s=3.0,
        user_speaking=False,
        user_turn_speech_s=0.0,
        user_text="",
        transcript="",
        assistant_speaking=False,
        forced_turn=False,
        assistant_spoken_s=0.0,
        assistant_remaining_s=0.0,
        turn_overlap_s=0.0,
        backend_pending=0,
    )
    return replace(base, **changes)


def test_vad_bargein_yields_on_overlapping_speech_only() -> None:
    policy = VadBargeIn()
    speaking = observation(assistant_speaking=True, assistant_remaining_s=3.0)
    assert policy.decide(speaking) is FloorAction.KEEP_SPEAKING
    assert policy.decide(replace(speaking, overlap_s=2 * FRAME_S)) is FloorAction.YIELD
    assert policy.decide(replace(speaking, overlap_s=FRAME_S)) is FloorAction.KEEP_SPEAKING
    # Speech in the unit that did not overlap the assistant's audio does not count.
    assert policy.decide(replace(speaking, user_speech_s=0.5)) is FloorAction.KEEP_SPEAKING
    assert NeverYield().decide(replace(speaking, overlap_s=1.0)) is FloorAction.KEEP_SPEAKING


@pytest.mark.parametrize("policy", [VadBargeIn(), NeverYield()])
def test_baselines_take_the_turn_after_silence_following_speech(policy: Any) -> None:
    quiet = observation(user_turn_speech_s=1.2, trailing_silence_s=0.6)
    assert policy.decide(quiet) is FloorAction.START_SPEAKING
    assert policy.decide(replace(quiet, trailing_silence_s=0.58)) is FloorAction.KEEP_LISTENING
    assert policy.decide(replace(quiet, user_turn_speech_s=0.0)) is FloorAction.KEEP_LISTENING
    click = replace(quiet, user_turn_speech_s=FRAME_S)  # one frame is not speech
    assert policy.decide(click) is FloorAction.KEEP_LISTENING
    backend = observation(backend_pending=1, trailing_silence_s=0.7)
    assert policy.decide(backend) is FloorAction.START_SPEAKING
    assert policy.decide(replace(backend, trailing_silence_s=0.1)) is FloorAction.KEEP_LISTENING


def test_responder_delegates_acknowledges_and_speaks_backend_replies() -> None:
    request = UserRequest("set a timer for <delegate>ten minutes", 1.0, 3.0, 1.8, asr=True)
    responder = Responder(delegator=lambda text: "timer" in text)
    delegated = responder.respond(request)
    assert delegated is not None and delegated.kind == "delegate"
    assert delegated.text == (
        f"{CHECK_PHRASE} <delegate>set a timer for \u2039delegate>ten minutes</delegate>"
    )
    chat = replace(request, transcript="nice weather")
    acks = [responder.respond(chat) for _ in range(3)]
    assert [a.kind for a in acks if a] == ["ack"] * 3
    assert [a.spoken for a in acks if a] == ["Okay.", "Sure.", "I see."]
    responder.reset()
    assert (ack := responder.respond(chat)) is not None and ack.spoken == "Okay."
    assert responder.respond(replace(request, transcript="")).kind == "ack"  # type: ignore[union-attr]
    spoken = responder.respond(request, backend="**Done**: the timer is set.")
    assert spoken is not None and (spoken.kind, spoken.text) == (
        "backend",
        "Done: the timer is set.",
    )
    assert responder.respond(None) is None
    cleaning = Responder(query_of=lambda text: text.replace("um ", ""))
    cleaned = cleaning.respond(replace(request, transcript="um what time is it"))
    assert cleaned is not None and cleaned.query == "what time is it"


def test_split_turn_gives_at_most_a_unit_of_audio_and_proportional_whole_words() -> None:
    rate = 24000
    text = "one two three four five six seven eight nine ten. <delegate>count</delegate>"
    audio = np.ones(int(2.5 * rate), np.float32)
    pieces = list(split_turn(text, audio, rate))
    assert [p[1].size for p in pieces] == [rate, rate, rate // 2]
    assert "".join(p[0] for p in pieces) == text
    texts = [p[0] for p in pieces]
    assert texts[0].startswith("one ") and texts[0].endswith(" ")
    assert 15 <= len(texts[0]) <= 25 and "<delegate>count</delegate>" in texts[2]
    single = list(split_turn(f"{CHECK_PHRASE} <delegate>q</delegate>", audio[: rate // 2], rate))
    assert [(t, a.size) for t, a in single] == [
        (f"{CHECK_PHRASE} <delegate>q</delegate>", rate // 2)
    ]


def test_trim_silence_keeps_short_margins() -> None:
    rate = 24000
    audio = np.concatenate([np.zeros(rate), np.full(rate, 0.5), np.zeros(rate)]).astype(np.float32)
    trimmed = trim_silence(audio, rate)
    assert trimmed.size == rate + round(0.01 * rate) + round(0.04 * rate)
    assert trim_silence(np.zeros(100, np.float32), rate).size == 0


class PreparingResponder(Responder):
    """The default responder that records, per prepare call, the observation it came after."""

    def __init__(self, frontend_ref: list[PolicyFrontend]) -> None:
        super().__init__()
        self.calls: list[tuple[float, int, str]] = []
        self._ref = frontend_ref

    def prepare(self, request: UserRequest) -> None:
        obs = self._ref[0].state.last_obs
        self.calls.append((obs.t, obs.substep, request.transcript))
        super().prepare(request)


def test_a_final_transcript_is_prepared_at_the_substep_it_arrives(
    request_audio: np.ndarray,
) -> None:
    ref: list[PolicyFrontend] = []
    frontend = PolicyFrontend(VadBargeIn(), substeps=5)
    frontend.responder = PreparingResponder(ref)
    ref.append(frontend)
    at = 1.1  # the request ends ~3.23 s: its final (300 ms later) comes mid unit 3
    run(frontend, place(7.0, (at, request_audio)))
    calls = frontend.responder.calls
    assert calls, "the request was never prepared"
    t, substep, transcript = calls[0]
    assert "paris" in transcript.lower()
    # prepared at the sub-step the final came in (the VAD's 300 ms hangover after the end),
    # not at the unit's boundary
    _, end = speech_span(request_audio, at)
    assert substep < 4 and end + 0.3 <= t <= end + 0.6, (t, end, substep)


class SlowResponder(Responder):
    """The default responder, whose replies are ready only from its ``ready_after + 1``-th
    :meth:`ready` call on."""

    def __init__(self, ready_after: int) -> None:
        super().__init__()
        self.ready_after = ready_after
        self.asked = 0

    def ready(self, request: UserRequest) -> bool:
        self.asked += 1
        return self.asked > self.ready_after


def test_a_turn_taken_at_a_substep_starts_there_once_its_reply_is_ready(
    request_audio: np.ndarray,
) -> None:
    starts = {}
    AT = 0.6  # the request ends ~2.73 s: 0.6 s of silence come early in unit 3
    for ready_after in (0, 1, 99):
        frontend = PolicyFrontend(VadBargeIn(), asr=False, substeps=5)
        frontend.responder = SlowResponder(ready_after)
        session, view = run(frontend, place(7.0, (AT, request_audio)))
        early = [r.t for r in view.of_kind(Kind.DECISION) if r.payload.get("early")]
        (step,) = [s for s in frontend.steps if s.started]
        first_voice = session.playback.played_audio[0][0]
        starts[ready_after] = first_voice
        if ready_after == 99:  # never ready between boundaries: the boundary takes the turn
            assert (
                early == []
                and not step.early
                and first_voice == pytest.approx(boundary_s(step.unit_index), abs=1e-6)
            )
        else:
            assert len(early) == 1 and step.early and step.started == "delegate", ready_after
            assert first_voice == pytest.approx(early[0], abs=0.02)
            assert frontend.responder.asked == ready_after + 1
    _, end = speech_span(request_audio, AT)
    # VadBargeIn takes the turn after 0.6 s of silence: at that sub-step when ready, one
    # sub-step (0.2 s) later when ready only then, at the next boundary when never
    assert end + 0.6 <= starts[0] <= end + 1.0  # (the VAD hears its end ~0.1 s late)
    assert starts[1] == pytest.approx(starts[0] + 0.2, abs=0.01)
    assert starts[99] > starts[1] and (starts[99] - FIRST_UNIT_S) % 1.0 == pytest.approx(0.0)
