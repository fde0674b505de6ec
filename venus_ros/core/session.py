"""Offline sessions: a recorded input played through the real foreground loop on a fake clock.

This is the path of ``venus-ros replay`` and of the evaluation runner. Audio is cut into
microphone-sized frames and fed to the same :class:`UnitAssembler` the live nodes use; every unit
boundary happens at its true session time; a :class:`PlaybackQueue` stands in for the speaker and
acknowledges what it played, so "heard" means the same as live. A frontend that hears audio as
it arrives (:attr:`~venus_ros.core.frontend.Frontend.hears_audio`) is given each microphone
frame's resampled samples at the session time they end, and when it stops the assistant there
the playback is flushed at that time, so the played audio stops where it would live. Because
time is data, the same input always gives the same timeline.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace

import numpy as np

from venus_ros.core.clock import FakeClock
from venus_ros.core.duplex import (
    BackendReply,
    DelegateRequest,
    DuplexConfig,
    DuplexLoop,
    UnitResult,
)
from venus_ros.core.frontend import Frontend
from venus_ros.core.playback import PlaybackQueue
from venus_ros.core.timeline import Kind, Timeline
from venus_ros.core.units import InputError, InputUnit, UnitAssembler, UnitConfig, VideoFrame

#: Answers a delegate offline: ``(delay_s, reply_text)``, or None for no answer.
DelegateHandler = Callable[[DelegateRequest], "tuple[float, str] | None"]


@dataclass(frozen=True)
class SessionConfig:
    """Settings of an offline session.

    Attributes:
        units: unit assembly settings.
        duplex: foreground loop settings.
        chunk_ms: microphone frame length fed to the assembler.
        timeline_window_s: timeline retention window.
        timeline_max_bytes: timeline byte bound.
        keep_played_audio: record what the speaker played (``playback.played_audio``, for
            an output WAV or an echo path). Off, a session's memory no longer grows with its
            length: unit results never hold audio (their speech keeps its text and sample
            count), and played audio is dropped once played.
    """

    units: UnitConfig = field(default_factory=UnitConfig)
    duplex: DuplexConfig = field(default_factory=DuplexConfig)
    chunk_ms: int = 20
    timeline_window_s: float = 600.0
    timeline_max_bytes: int = 32 << 20
    keep_played_audio: bool = True

    def __post_init__(self) -> None:
        if not 1 <= self.chunk_ms <= 1000:
            raise ValueError(f"session.chunk_ms must be in 1..1000, got {self.chunk_ms}")


@dataclass
class SessionResult:
    """What an offline session produced."""

    loop: DuplexLoop
    timeline: Timeline
    playback: PlaybackQueue
    assembler: UnitAssembler
    #: One per unit boundary, in order.
    results: list[UnitResult] = field(default_factory=list)
    #: Turns the frontend started between boundaries (:meth:`DuplexLoop.speak_now`).
    early_starts: list[UnitResult] = field(default_factory=list)
    delegates: list[DelegateRequest] = field(default_factory=list)
    input_errors: int = 0
    #: Wall time the runtime itself spent per unit (assembly, loop, playback), frontend excluded.
    overhead_s: list[float] = field(default_factory=list)
    #: Wall time the frontend itself spent per unit (``prefill`` + ``generate``, and ``hear``
    #: of the unit's audio before its boundary).
    frontend_s: list[float] = field(default_factory=list)


def iter_chunks(audio: np.ndarray, sample_rate: int, chunk_ms: int) -> Iterator[np.ndarray]:
    """Cut a recording into microphone-sized frames of ``chunk_ms``."""
    step = max(1, round(sample_rate * chunk_ms / 1000))
    for start in range(0, len(audio), step):
        yield audio[start : start + step]


def run_offline(
    audio: np.ndarray | Iterable[np.ndarray],
    sample_rate: int,
    frontend: Frontend,
    *,
    clock: FakeClock,
    frames: Iterable[VideoFrame] = (),
    config: SessionConfig | None = None,
    on_delegate: DelegateHandler | None = None,
    on_start: Callable[[SessionResult], None] | None = None,
) -> SessionResult:
    """Play ``audio`` (and ``frames``) through the foreground loop as if live.

    Args:
        audio: the user's microphone signal (any supported rate; validated per chunk), as one
            array or as an iterable of microphone frames.
        sample_rate: its rate in Hz.
        frontend: the model (its compute may advance ``clock``).
        clock: the session clock; must start at or before 0.
        frames: camera frames in time order.
        config: session settings.
        on_delegate: stands in for the harness: answers a delegate after a delay.
        on_start: called once with the session before the first microphone frame is read, so
            that a caller can watch it as it runs (the evaluation runner feeds the speaker's
            played audio back into a lazily produced microphone signal, and gives delegated
            tasks their evidence from the timeline).

    Returns:
        The loop, timeline, playback record and per-unit results.
    """
    config = config or SessionConfig()
    timeline = Timeline(clock, config.timeline_window_s, config.timeline_max_bytes)
    loop = DuplexLoop(frontend, timeline, clock, config.duplex)
    playback = PlaybackQueue(frontend.output_sample_rate, record=config.keep_played_audio)
    assembler = UnitAssembler(config.units)
    session = SessionResult(loop, timeline, playback, assembler)
    due_replies: list[tuple[float, int, BackendReply]] = []
    frame_iter = iter(frames)
    next_frame = next(frame_iter, None)
    shown: VideoFrame | None = None
    loop.prepare()
    if on_start is not None:
        on_start(session)

    pending_overhead = 0.0

    def send(result: UnitResult) -> UnitResult:
        """Play the result's speech from now and hand its delegates on; the result is
        returned with its audio's samples given to the playback queue (their count kept)."""
        if result.speech is not None:
            playback.enqueue(result.speech, clock.now())
            silent = np.broadcast_to(np.float32(0.0), (result.speech.samples,))
            result = replace(result, speech=replace(result.speech, audio=silent))
        for request in result.delegates:
            session.delegates.append(request)
            answer = on_delegate(request) if on_delegate else None
            if answer is not None:
                delay, text = answer
                reply = BackendReply(f"task-{len(session.delegates)}", text)
                heapq.heappush(due_replies, (clock.now() + delay, len(session.delegates), reply))
        return result

    def boundary(unit: InputUnit) -> None:
        nonlocal pending_overhead, next_frame, shown, heard
        wall = time.perf_counter()
        heard = 0
        # A unit shows the newest frame taken by its end: when the unit completes depends on
        # the microphone chunking and the resampler's latency, what it shows must not.
        while next_frame is not None and next_frame.t <= unit.end_s:
            if shown is None or next_frame.t >= shown.t:
                shown = next_frame
            next_frame = next(frame_iter, None)
        if shown is not None:
            unit = replace(unit, frame=shown)
        _advance_to(clock, unit.end_s)
        _acknowledge(loop, playback.advance(clock.now()))
        while due_replies and due_replies[0][0] <= clock.now():
            loop.offer_backend(heapq.heappop(due_replies)[2])
        step_wall = time.perf_counter()
        result = loop.step(unit)
        step_s = max(0.0, time.perf_counter() - step_wall - result.overhead_s)
        session.frontend_s.append(step_s + result.hear_s)
        if result.flush:
            _acknowledge(loop, playback.flush(clock.now()))
        session.results.append(send(result))
        frontend_wall = step_s
        session.overhead_s.append(pending_overhead + time.perf_counter() - wall - frontend_wall)
        pending_overhead = 0.0

    hears = loop.hears_audio
    heard = 0  # samples of the unit in progress already given to the loop

    def hear() -> None:
        """Give the loop the new audio of the unit in progress, at the time it ends."""
        nonlocal heard
        piece = assembler.partial(heard)
        if piece is None:
            return
        heard = piece.end
        _advance_to(clock, piece.end_s)
        if loop.hear(piece):  # stopped mid-unit: the speaker stops now
            _acknowledge(loop, playback.flush(clock.now()))
        started = loop.speak_now(piece)  # a turn taken mid-unit: it plays from now
        if started is not None:
            session.early_starts.append(send(started))

    chunks = (
        iter_chunks(audio, sample_rate, config.chunk_ms) if isinstance(audio, np.ndarray) else audio
    )
    for chunk in chunks:
        wall = time.perf_counter()
        try:
            assembler.push_audio(chunk, sample_rate)
        except InputError as exc:
            if exc.field == "audio.sample_rate":  # every chunk would fail alike: say it once
                raise
            session.input_errors += 1
            silence = exc.field == "audio.samples"  # keep time honest: the gap stays a gap
            if silence:
                try:
                    assembler.push_audio(np.zeros(len(chunk), np.float32), sample_rate)
                except InputError:
                    silence = False
            timeline.append(
                Kind.INPUT_ERROR,
                {"field": exc.field, "message": str(exc), "replaced_with_silence": silence},
            )
            continue
        finally:
            pending_overhead += time.perf_counter() - wall
        while (unit := assembler.pop_unit()) is not None:
            boundary(unit)
        if hears:
            hear()
    tail = assembler.flush()  # may also complete whole units, which come first
    while (unit := assembler.pop_unit()) is not None:
        boundary(unit)
    if tail is not None:
        boundary(tail)
    _advance_to(clock, playback.idle_at)
    _acknowledge(loop, playback.advance(clock.now()))
    return session


def _advance_to(clock: FakeClock, t: float) -> None:
    clock.advance(max(0.0, t - clock.now()))


def _acknowledge(loop: DuplexLoop, acks: Iterable) -> None:
    for ack in acks:
        loop.acknowledge(ack)


def summarize(session: SessionResult) -> list[str]:
    """A readable account of a session: decisions, what was said and heard, delegates, timing."""
    results = session.results
    view = session.timeline.snapshot()
    speak = sum(r.decision.value == "speak" for r in results)
    turns: dict[int, list[str]] = {}
    for record in view.of_kind(Kind.ASSISTANT_TEXT):
        payload = record.payload
        turns.setdefault(payload["turn"], []).append(payload["text"])
    compute = np.array([r.compute_s for r in results] or [0.0])
    overhead = np.array(session.overhead_s or [0.0]) * 1000
    lines = [
        f"units: {len(results)} (speak {speak}, listen {len(results) - speak}), "
        f"assistant turns: {session.loop.turn_id}, dropped units: "
        f"{session.assembler.dropped_units}, input errors: {session.input_errors}",
        f"frontend compute per unit: p50 {np.percentile(compute, 50) * 1000:.1f} ms, "
        f"max {compute.max() * 1000:.1f} ms; missed deadlines: {session.loop.missed_units}; "
        f"final real-time debt: {session.loop.debt_s:.3f} s",
        f"runtime overhead per unit: p50 {np.percentile(overhead, 50):.3f} ms, "
        f"p99 {np.percentile(overhead, 99):.3f} ms",
    ]
    for turn, pieces in sorted(turns.items()):
        lines.append(f"turn {turn} said:  {''.join(pieces).strip()!r}")
        lines.append(f"turn {turn} heard: {session.loop.heard_text(turn)!r}")
    for request in session.delegates:
        lines.append(
            f"delegate (unit {request.unit_index}, cutoff seq {request.cutoff_seq}): "
            f"{request.query!r}"
        )
    errors = view.of_kind(Kind.PROTOCOL_ERROR, Kind.FRONTEND_ERROR, Kind.INPUT_ERROR)
    lines.append(f"errors: {len(errors)}")
    lines.extend(f"  {r.kind.value} at seq {r.seq}: {r.payload_json}" for r in errors)
    lines.append(f"timeline: {len(view)} records, last seq {session.timeline.last_seq}")
    return lines
