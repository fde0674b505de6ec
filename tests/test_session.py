"""Tests for venus_ros.core.session: offline sessions through the real loop on a fake clock."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile

from venus_ros.core.clock import FakeClock
from venus_ros.core.duplex import DelegateRequest
from venus_ros.core.frontend import Decision, Frontend, UnitOutput
from venus_ros.core.session import SessionConfig, SessionResult, iter_chunks, run_offline, summarize
from venus_ros.core.timeline import Kind
from venus_ros.core.units import VideoFrame, resample
from venus_ros.frontends.scripted import Script, ScriptedFrontend, load_script

SAMPLE = Path(__file__).resolve().parents[1] / "venus_ros/samples/hello"
RATE = 16000


def replay_sample(chunk_ms: int = 20, frames: list[VideoFrame] | None = None) -> SessionResult:
    audio, rate = soundfile.read(str(SAMPLE / "input.wav"), dtype="float32")
    clock = FakeClock()
    frontend = ScriptedFrontend(load_script(SAMPLE / "script.yaml"), clock=clock)
    config = SessionConfig(chunk_ms=chunk_ms)
    return run_offline(audio, rate, frontend, clock=clock, frames=frames or (), config=config)


def records(session: SessionResult) -> list[str]:
    return [r.to_json() for r in session.timeline.snapshot()]


def payloads(session: SessionResult, kind: Kind) -> list[dict]:
    return [r.payload for r in session.timeline.snapshot().of_kind(kind)]


def talk(seconds: float, *spans: tuple[float, float], rate: int = RATE) -> np.ndarray:
    """A 16 kHz-style test signal: a voiced 200 Hz tone over each (start, end) span."""
    t = np.arange(round(seconds * rate)) / rate
    tone = 0.3 * np.sin(2 * np.pi * 200 * t) + 0.1 * np.sin(2 * np.pi * 400 * t)
    mask = np.zeros_like(t, dtype=bool)
    for start, end in spans:
        mask |= (t >= start) & (t < end)
    return np.where(mask, tone, 0.0).astype(np.float32)


def scripted(clock: FakeClock, **script: object) -> ScriptedFrontend:
    return ScriptedFrontend(Script.model_validate(script), clock=clock)


def run(audio, rate: int = RATE, frames=(), on_delegate=None, **script: object) -> SessionResult:
    clock = FakeClock()
    return run_offline(
        audio, rate, scripted(clock, **script), clock=clock, frames=frames, on_delegate=on_delegate
    )


def decisions(session: SessionResult) -> list[tuple[str, bool, bool]]:
    return [(r.decision.value, r.end_of_turn, r.flush) for r in session.results]


# ---------------------------------------------------------------------------- determinism


def test_replaying_the_sample_twice_exports_byte_identical_timelines(tmp_path: Path) -> None:
    first, second = replay_sample(), replay_sample()
    first.timeline.export_jsonl(tmp_path / "a.jsonl")
    second.timeline.export_jsonl(tmp_path / "b.jsonl")
    data = (tmp_path / "a.jsonl").read_bytes()
    assert data == (tmp_path / "b.jsonl").read_bytes()
    assert data.count(b"\n") == len(first.timeline) > 50


def test_the_sample_session_answers_delegates_and_yields_to_a_barge_in() -> None:
    session = replay_sample()
    assert len(session.results) == 16  # 15.2 s of 22.05 kHz audio
    assert session.loop.turn_id == 2
    (request,) = session.delegates
    assert request.query == "Look up today's weather forecast for Paris, France."
    assert session.loop.heard_text(1) == "Sure, let me check that for you. One moment please."
    # the second turn was interrupted: the user heard only the start of it
    assert session.loop.heard_text(2) == "While we wait,"
    assert len(payloads(session, Kind.FLUSH)) == 1
    assert session.input_errors == 0 and session.loop.missed_units == 0


@pytest.mark.parametrize("chunk_ms", [10, 37])
def test_streaming_in_any_chunk_size_gives_the_same_timeline(chunk_ms: int) -> None:
    reference = records(replay_sample(20))
    assert records(replay_sample(chunk_ms)) == reference


def test_irregular_microphone_frames_give_the_same_timeline_as_one_array() -> None:
    audio = talk(6.0, (0.3, 1.4), (4.1, 4.9))
    script = {"barge_in_ms": 400, "replies": [{"after_speech": True, "text": "a b c d e f g h"}]}
    whole = run(audio, **script)
    sizes = [1, 333, 160, 7, 1024, 2999]
    pieces, start, i = [], 0, 0
    while start < len(audio):
        pieces.append(audio[start : start + sizes[i % len(sizes)]])
        start += sizes[i % len(sizes)]
        i += 1
    assert records(run(iter(pieces), **script)) == records(whole)


@pytest.mark.parametrize("rate", [8000, 22050, 44100, 48000])
def test_other_input_rates_give_the_same_units_and_decisions(rate: int) -> None:
    # user asks (0.3-1.4 s), the assistant answers, the user barges in (5.2-6.0 s), then stops
    signal = talk(8.0, (0.3, 1.4), (5.2, 6.0))
    script = {
        "barge_in_ms": 400,
        "replies": [
            {"after_speech": True, "text": " ".join(f"w{i}" for i in range(15))},
            {"after_speech": True, "text": "Sorry, go on."},
        ],
    }
    reference = run(signal, **script)
    idle, answer = ("listen", False, False), ("speak", False, False)
    barge_in, sorry = ("listen", True, True), ("speak", True, False)
    assert decisions(reference) == [idle, *[answer] * 4, barge_in, sorry, idle]
    other = run(resample(signal, RATE, rate), rate, **script)
    assert len(other.results) == len(reference.results) == 8
    assert decisions(other) == decisions(reference)
    assert [r.index for r in other.results] == list(range(8))
    assert other.loop.heard_text() == reference.loop.heard_text()


# ---------------------------------------------------------------------------- bad input


def test_a_chunk_with_nan_is_rejected_once_and_the_session_goes_on() -> None:
    chunks = list(iter_chunks(talk(4.0, (0.2, 1.5)), RATE, 20))
    chunks[30] = chunks[30].copy()
    chunks[30][5] = np.nan
    session = run(iter(chunks), replies=[{"after_speech": True, "text": "I heard you."}])
    assert session.input_errors == 1
    (error,) = payloads(session, Kind.INPUT_ERROR)
    assert error["field"] == "audio.samples" and "NaN" in error["message"]
    assert [r.index for r in session.results] == [0, 1, 2, 3]
    assert session.loop.heard_text(1) == "I heard you."


def test_session_config_rejects_a_bad_chunk_length() -> None:
    with pytest.raises(ValueError, match=r"session\.chunk_ms"):
        SessionConfig(chunk_ms=0)


# ---------------------------------------------------------------------------- delegation


@pytest.mark.parametrize("delay_s", [0.0, 1.5])
def test_delegate_reply_is_inserted_after_the_turn_and_spoken(delay_s: float) -> None:
    seen: list[DelegateRequest] = []

    def harness(request: DelegateRequest) -> tuple[float, str]:
        seen.append(request)
        return delay_s, "It is sunny in Paris."

    session = run(
        talk(8.0, (0.2, 1.2)),
        on_delegate=harness,
        replies=[
            {
                "after_speech": True,
                "text": "Let me check. <delegate>weather in Paris</delegate> One moment.",
            },
            {"on_backend": True, "text": "{backend}"},
        ],
    )
    (request,) = seen
    assert session.delegates == [request]
    assert request.query == "weather in Paris"
    view = session.timeline.snapshot()
    (opened,) = view.of_kind(Kind.DELEGATE_OPEN)
    (closed,) = view.of_kind(Kind.DELEGATE_CLOSE)
    (inserted,) = view.of_kind(Kind.BACKEND_INSERT)
    assert request.cutoff_seq == opened.seq < closed.seq < inserted.seq
    # turn 1 speaks in units 1-3; the reply waits for the first listening boundary
    assert inserted.payload["unit"] == 4
    assert inserted.payload["task_id"] == "task-1"
    turn2 = [p["text"] for p in payloads(session, Kind.ASSISTANT_TEXT) if p["turn"] == 2]
    assert "".join(turn2) == "It is sunny in Paris."
    assert session.loop.heard_text(2) == "It is sunny in Paris."
    assert session.loop.heard_text(1) == "Let me check. One moment."


def test_a_delegate_without_a_harness_gets_no_reply() -> None:
    session = run(
        talk(6.0, (0.2, 1.2)),
        replies=[
            {"after_speech": True, "text": "<delegate>lights on</delegate> Okay."},
            {"on_backend": True, "text": "{backend}"},
        ],
    )
    assert [d.query for d in session.delegates] == ["lights on"]
    assert payloads(session, Kind.BACKEND_INSERT) == []
    assert session.loop.turn_id == 1


def test_summary_reports_turns_delegates_and_errors() -> None:
    session = run(
        talk(5.0, (0.2, 1.2)),
        on_delegate=lambda request: (0.0, "Done."),
        replies=[
            {"after_speech": True, "text": "Sure. <delegate>lights on</delegate>"},
            {"on_backend": True, "text": "{backend}"},
        ],
    )
    text = "\n".join(summarize(session))
    assert "units: 5 (speak 2, listen 3), assistant turns: 2" in text
    assert "turn 1 said:  'Sure.'" in text
    assert "turn 2 heard: 'Done.'" in text
    assert "delegate (unit 1, cutoff seq" in text and "'lights on'" in text
    assert "errors: 0" in text


# ---------------------------------------------------------------------------- video


def frames_at(fps: float, seconds: float) -> list[VideoFrame]:
    count = int(seconds * fps)
    return [VideoFrame(np.full((4, 6, 3), k % 256, np.uint8), k / fps, seq=k) for k in range(count)]


@pytest.mark.parametrize(("rate", "chunk_ms"), [(16000, 20), (16000, 37), (44100, 20)])
def test_each_unit_carries_the_newest_frame_at_its_end(rate: int, chunk_ms: int) -> None:
    signal = talk(4.0, (0.2, 1.0))
    audio = signal if rate == RATE else resample(signal, RATE, rate)
    clock = FakeClock()
    frames = frames_at(25.0, 4.0)  # t = 0, 0.04, ..., 3.96
    session = run_offline(
        audio,
        rate,
        scripted(clock, replies=[{"at_unit": 99, "text": "x"}]),
        clock=clock,
        frames=frames,
        config=SessionConfig(chunk_ms=chunk_ms),
    )
    units = {p["unit"]: p for p in payloads(session, Kind.USER_AUDIO)}
    shown = payloads(session, Kind.VIDEO_FRAME)
    assert [p["unit"] for p in shown] == [0, 1, 2, 3]
    ends = []
    for frame in shown:
        unit = units[frame["unit"]]
        end = (unit["start_sample"] + unit["samples"]) / RATE
        newest = max((f for f in frames if f.t <= end), key=lambda f: f.t)
        assert (frame["frame_seq"], frame["frame_t"]) == (newest.seq, newest.t)
        assert frame["frame_t"] <= end
        assert frame["shape"] == [4, 6, 3]
        ends.append(end)
    assert ends == [1.035, 2.035, 3.035, 4.035]  # the last unit is padded past the video


def test_video_frames_do_not_change_with_the_chunk_size() -> None:
    frames = frames_at(30.0, 15.2)
    assert records(replay_sample(37, frames)) == records(replay_sample(20, frames))


def test_decisions_are_unaffected_by_video() -> None:
    plain = replay_sample()
    with_video = replay_sample(frames=frames_at(10.0, 15.2))
    assert [r.decision for r in with_video.results] == [r.decision for r in plain.results]
    assert Decision.SPEAK in [r.decision for r in plain.results]


# ---------------------------------------------------------------------------- early stops


class StoppingFrontend(Frontend):
    """Speaks one word-numbered second of tone per unit from the first boundary; hears the
    microphone as it arrives and stops the turn once it has heard past ``stop_s``."""

    output_sample_rate = 24000
    hears_audio = True

    def __init__(self, stop_s: float | None) -> None:
        self.stop_s = stop_s
        self.units: list = []
        self.heard: dict[int, list[np.ndarray]] = {}
        self.heard_at: list[tuple[float, float]] = []  # (piece end, clock) per piece
        self.stopped = self.over = False
        self.clock: FakeClock | None = None

    def hear(self, piece) -> bool:
        self.heard.setdefault(piece.index, []).append(np.array(piece.audio))
        assert self.clock is not None
        self.heard_at.append((piece.end_s, self.clock.now()))
        if self.stop_s is None or self.stopped or piece.end_s < self.stop_s:
            return False
        self.stopped = True
        return True

    def prefill(self, unit) -> None:
        self.units.append(unit)

    def generate(self) -> UnitOutput:
        index = len(self.units) - 1
        if self.stopped:
            self.stopped, self.stop_s, self.over = False, None, True
            return UnitOutput(Decision.LISTEN, end_of_turn=True)
        if index > 2 or self.over:
            return UnitOutput(Decision.LISTEN)
        tone = 0.2 * np.sin(2 * np.pi * 220 * np.arange(24000) / 24000)
        words = " ".join(f"w{index}{k}" for k in range(10)) + " "
        return UnitOutput(
            Decision.SPEAK, text=words, audio=tone.astype(np.float32), end_of_turn=index == 2
        )


def run_stopping(stop_s: float | None, rate: int = 22050) -> tuple[SessionResult, StoppingFrontend]:
    clock = FakeClock()
    frontend = StoppingFrontend(stop_s)
    frontend.clock = clock
    audio = resample(talk(7.0, (2.0, 3.0)), RATE, rate)
    return run_offline(audio, rate, frontend, clock=clock), frontend


def test_an_early_stop_truncates_the_played_audio_there_and_heard_text_follows() -> None:
    full, _ = run_stopping(None)
    session, _ = run_stopping(2.4)
    (flush,) = payloads(session, Kind.FLUSH)
    assert flush["early"] and flush["unit"] == 2 and flush["turn"] == 1
    (record,) = session.timeline.snapshot().of_kind(Kind.FLUSH)
    assert 2.4 <= record.t < 2.4 + 0.03  # within a 20 ms microphone frame (and the resampler)
    # The played audio stops at the flush; without the stop it plays all three seconds.
    played = session.playback.played_audio
    end = max(t + a.size / 24000 for t, a in played)
    assert end == pytest.approx(record.t, abs=1 / 24000)
    full_end = max(t + a.size / 24000 for t, a in full.playback.played_audio)
    assert full_end == pytest.approx(1.035 + 3.0, abs=1e-3)
    # The user heard unit 0's words and the whole words of unit 1's played part.
    acks = payloads(session, Kind.PLAYBACK_ACK)
    (cut,) = [a for a in acks if a["flushed"]]
    assert cut["unit"] == 1 and abs(cut["samples_played"] - (record.t - 2.035) * 24000) <= 1
    words = int(40 * cut["samples_played"] / 24000 + 1) // 4  # 10 words of 4 characters
    assert 3 <= words <= 4
    expected = [f"w0{k}" for k in range(10)] + [f"w1{k}" for k in range(words)]
    assert session.loop.heard_text(1).split() == expected
    # One decision per boundary; the turn ends at the boundary after the stop, without a
    # second flush, and the stopped unit's speech never plays.
    decisions = payloads(session, Kind.DECISION)
    assert [d["unit"] for d in decisions] == list(range(len(session.results)))
    assert [
        (r.decision.value, r.end_of_turn, r.flush, r.early_flush) for r in session.results[:3]
    ] == [
        ("speak", False, False, False),
        ("speak", False, False, False),
        ("listen", True, False, True),
    ]


def test_the_heard_pieces_are_the_units_samples_at_their_session_times() -> None:
    _, frontend = run_stopping(None)
    for unit in frontend.units[:-1]:
        joined = np.concatenate(frontend.heard[unit.index])
        np.testing.assert_array_equal(joined, unit.audio[: joined.size])
        assert unit.audio.size - joined.size < 1000  # only the last burst came with the unit
    assert all(now == pytest.approx(end) for end, now in frontend.heard_at)
