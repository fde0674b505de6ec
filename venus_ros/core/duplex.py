"""The foreground loop: one decision per one-second unit, never pausing.

:class:`DuplexLoop` drives a :class:`~venus_ros.core.frontend.Frontend` unit by unit and enforces
the rules of the floor:

* exactly one decision (listen or speak) per unit boundary;
* once speaking, the assistant may not return to listening until ``<|turn_eos|>``; a frontend
  that tries is recorded as a protocol error and its turn is ended for it;
* a turn that ends with no speech in its last unit is a *yield*: the speaker is told to flush,
  so the stop is audible at once; a turn that ends with speech *finishes* and drains;
* between boundaries a frontend that hears audio as it arrives (:meth:`DuplexLoop.hear`) may
  stop the assistant at once: the speaker is flushed then (an *early* flush, recorded at that
  time), and the turn ends at the next boundary with a yield whatever the frontend says there;
  that boundary's decision is still the unit's only one;
* likewise, while listening, it may start a turn at once (:meth:`DuplexLoop.speak_now`): the
  last boundary's ``listen`` is then revised to ``speak`` (an *early* decision, recorded at
  that time), the turn's first audio goes out as that boundary's speech, and the turn goes on
  at the next boundary;
* private spans never reach the speaker; a ``<delegate>`` fixes its evidence cutoff at the
  timeline sequence number of the moment it opened;
* only text whose audio the speaker acknowledged counts as heard;
* backend replies are inserted as ``<backend>`` spans only at an eligible boundary (while
  listening, which includes the boundary right after a turn ends), only while fresh, and count
  as delivered only once playback acknowledged the turn that voiced them
  (:mod:`venus_ros.core.delivery` has the rules for interrupted and stale replies);
* every unit's compute time, real-time debt and deadline miss is measured and recorded.

A failing frontend never stops the loop: the failure is recorded and the unit is treated as a
yield.
"""

from __future__ import annotations

import enum
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from venus_ros.core.clock import Clock
from venus_ros.core.delivery import (
    BackendReply,
    DeliveryOutcome,
    DeliveryRules,
    DeliveryTracker,
)
from venus_ros.core.frontend import Decision, Frontend, UnitOutput
from venus_ros.core.playback import PlaybackAck, SpeechChunk
from venus_ros.core.protocol import (
    TURN_EOS,
    Channel,
    ControlToken,
    PrivateSpan,
    ProtocolError,
    SpanOpened,
    SpanParser,
    VisibleText,
    clean_text,
    escape_tags,
)
from venus_ros.core.secrets import scrub
from venus_ros.core.timeline import Kind, Timeline
from venus_ros.core.units import InputUnit, PartialUnit

#: Speech chunks kept for acknowledgement; older unacknowledged ones are given up on.
MAX_UNACKED_CHUNKS = 64
#: What :meth:`DuplexLoop.heard_text` keeps: the last this-many turns...
MAX_HEARD_TURNS = 64
#: ... and at most this many characters of each (a live session must not grow without bound).
MAX_HEARD_CHARS = 8000


class FloorState(str, enum.Enum):
    """Who holds the floor between two boundaries."""

    LISTENING = "listening"
    SPEAKING = "speaking"


@dataclass(frozen=True)
class DuplexConfig:
    """Settings of the foreground loop.

    Attributes:
        deadline_fraction: a unit misses its deadline when its compute, plus the debt carried in,
            exceeds this fraction of the unit's duration.
        max_query_chars: length cap of a ``<delegate>`` query.
        max_pending_replies: backend replies waiting for a boundary; the oldest is dropped
            (and recorded) beyond this.
        delivery: when an interrupted reply counts as delivered, is offered again, or is
            dropped, and when a waiting reply is too old to speak.
    """

    deadline_fraction: float = 1.0
    max_query_chars: int = 4000
    max_pending_replies: int = 8
    delivery: DeliveryRules = field(default_factory=DeliveryRules)

    def __post_init__(self) -> None:
        if not 0 < self.deadline_fraction <= 4:
            raise ValueError(
                f"duplex.deadline_fraction must be in (0, 4], got {self.deadline_fraction}"
            )
        if self.max_query_chars < 1:
            raise ValueError(f"duplex.max_query_chars must be >= 1, got {self.max_query_chars}")
        if self.max_pending_replies < 1:
            raise ValueError(
                f"duplex.max_pending_replies must be >= 1, got {self.max_pending_replies}"
            )


@dataclass(frozen=True)
class DelegateRequest:
    """A closed ``<delegate>`` span: work for the harness.

    Attributes:
        query: the request in words.
        cutoff_seq: the evidence cutoff (the timeline seq of the span's opening).
        turn_id: the assistant turn that wrote it.
        unit_index: the unit in which the span closed.
    """

    query: str
    cutoff_seq: int
    turn_id: int
    unit_index: int


@dataclass(frozen=True)
class UnitResult:
    """Everything one boundary produced, for the speaker, the harness and the monitors.

    Attributes:
        index: the unit index.
        decision: the decision taken at this boundary.
        end_of_turn: the assistant's turn ended in this unit.
        flush: the speaker must discard its queue now (a yield).
        speech: audio and visible text for the speaker, or None.
        delegates: delegate requests that closed in this unit.
        compute_s: frontend time for the unit (on the session clock).
        debt_s: real-time debt after this unit.
        missed: the unit missed its deadline.
        overhead_s: the loop's own processing time (wall clock, excluding the frontend).
        early_flush: the speaker was already flushed during this unit (:meth:`DuplexLoop.hear`
            returned True); ``flush`` is then False, as there is nothing left to discard.
        hear_s: wall time the frontend spent hearing this unit's audio before its boundary
            (:meth:`DuplexLoop.hear`; part of the unit's work, not of its boundary's latency).
    """

    index: int
    decision: Decision
    end_of_turn: bool
    flush: bool
    speech: SpeechChunk | None
    delegates: tuple[DelegateRequest, ...]
    compute_s: float
    debt_s: float
    missed: bool
    overhead_s: float = 0.0
    early_flush: bool = False
    hear_s: float = 0.0


class DuplexLoop:
    """The foreground listen/speak state machine around one frontend.

    ``step`` runs on the foreground thread; ``offer_backend`` and ``acknowledge`` may be called
    from any thread.

    Args:
        frontend: the model.
        timeline: where every event is recorded.
        clock: the session clock (compute time is measured on it).
        config: loop settings.
        on_delivery: called with each backend reply's delivery outcome (on the thread that
            decided it: the foreground or the acknowledging one; must be quick).
    """

    def __init__(
        self,
        frontend: Frontend,
        timeline: Timeline,
        clock: Clock,
        config: DuplexConfig | None = None,
        on_delivery: Callable[[DeliveryOutcome], None] | None = None,
    ) -> None:
        self.frontend = frontend
        self.timeline = timeline
        self.clock = clock
        self.config = config or DuplexConfig()
        self.state = FloorState.LISTENING
        self.turn_id = 0
        self.debt_s = 0.0
        self.missed_units = 0
        self._parser = SpanParser(max_query_chars=self.config.max_query_chars)
        self._open_cutoff: int | None = None
        self._next_index = 0
        self._out_samples = 0
        self._lock = threading.Lock()
        self._delivery = DeliveryTracker(timeline, self.config.delivery)
        self._on_delivery = on_delivery
        self._chunks: dict[int, SpeechChunk] = {}
        self._heard_samples: dict[int, int] = {}
        self._heard: dict[int, str] = {}
        self._early_flush = False
        self._hear_index = -1
        self._hear_upto = 0
        self._hear_compute = 0.0
        self._hear_wall = 0.0

    # ------------------------------------------------------------------ other threads
    def offer_backend(self, reply: BackendReply) -> None:
        """Queue a backend reply for insertion at the next eligible boundary.

        A reply whose task is already queued, being voiced or done is ignored (recorded); one
        withdrawn before it arrived is refused.
        """
        with self._lock:
            self._delivery.offer(reply, self.clock.now(), self.config.max_pending_replies)
        self._report()

    def withdraw_backend(self, task_id: str, reason: str) -> bool:
        """Take back a reply that is no longer fresh (cancelled or superseded).

        Returns:
            True if it will never be inserted; False if it is already being voiced or done.
        """
        with self._lock:
            withdrawn = self._delivery.withdraw(task_id, reason)
        self._report()
        return withdrawn

    @property
    def pending_replies(self) -> int:
        """Backend replies waiting for a boundary."""
        with self._lock:
            return self._delivery.pending

    def acknowledge(self, ack: PlaybackAck) -> bool:
        """Record the speaker's progress on a chunk; returns False (and records why) if invalid.

        The visible text of a chunk counts as heard in proportion to its acknowledged samples,
        whole words only.
        """
        with self._lock:
            chunk = self._chunks.get(ack.unit_index)
            problem = _ack_problem(ack, chunk)
            if problem or chunk is None:
                self.timeline.append(
                    Kind.INPUT_ERROR,
                    {"field": "playback_ack", "unit": ack.unit_index, "message": problem},
                )
                return False
            before = self._heard_samples.get(ack.unit_index, 0)
            played = max(before, ack.samples_played)
            self._heard_samples[ack.unit_index] = played
            heard = _heard_prefix(chunk.text, played / chunk.samples)
            previous = _heard_prefix(chunk.text, before / chunk.samples)
            newly_heard = heard[len(previous) :]
            if newly_heard:
                self._note_heard(chunk.turn_id, newly_heard)
            if ack.complete:
                del self._chunks[ack.unit_index]
                del self._heard_samples[ack.unit_index]
            self._delivery.acknowledged(
                chunk.turn_id, ack.unit_index, len(newly_heard), ack.complete, ack.flushed
            )
            self.timeline.append(
                Kind.PLAYBACK_ACK,
                {
                    "unit": ack.unit_index,
                    "turn": chunk.turn_id,
                    "samples_played": played,
                    "samples_total": chunk.samples,
                    "flushed": ack.flushed,
                    "heard_chars": len(heard),
                    "heard": newly_heard,
                },
            )
        self._report()
        return True

    def _note_heard(self, turn_id: int, text: str) -> None:
        """Keep ``text`` as heard in ``turn_id``, within the per-turn and turn-count bounds."""
        if turn_id not in self._heard:
            self._heard[turn_id] = ""
            while len(self._heard) > MAX_HEARD_TURNS:
                del self._heard[min(self._heard)]
        kept = self._heard[turn_id]
        self._heard[turn_id] = kept + text[: max(0, MAX_HEARD_CHARS - len(kept))]

    def heard_text(self, turn_id: int | None = None) -> str:
        """What the user has heard of one turn (or of all turns, joined), by playback acks.

        Only the last :data:`MAX_HEARD_TURNS` turns are kept, each up to about
        :data:`MAX_HEARD_CHARS` characters.
        """
        with self._lock:
            turns = [turn_id] if turn_id is not None else sorted(self._heard)
            return " ".join(self._heard.get(t, "").strip() for t in turns).strip()

    # ------------------------------------------------------------------ foreground
    def prepare(self, system_prompt: str = "", ref_audio: np.ndarray | None = None) -> None:
        """Start the frontend's session."""
        self.frontend.prepare(system_prompt=system_prompt, ref_audio=ref_audio)

    @property
    def hears_audio(self) -> bool:
        """Whether the frontend takes audio between boundaries (:meth:`hear` does anything)."""
        return bool(getattr(self.frontend, "hears_audio", False))

    def hear(self, piece: PartialUnit) -> bool:
        """Give the frontend the audio of the unit in progress taken so far; True: stop now.

        Call it on the foreground thread between boundaries, as often as audio arrives, with
        what :meth:`~venus_ros.core.units.UnitAssembler.partial` returns (pieces may overlap
        what was given before; only the new samples are passed on). When the frontend asks to
        stop while the assistant speaks, a ``flush`` (``early``) is recorded now and True is
        returned: the caller must flush the speaker at once (and acknowledge what it played);
        the turn then ends at the next boundary. Never raises because of the frontend.
        """
        if not self.hears_audio:
            return False
        if piece.index != self._hear_index:
            self._hear_index, self._hear_upto = piece.index, 0
        if piece.end <= self._hear_upto:
            return False
        if piece.offset < self._hear_upto:
            skip = self._hear_upto - piece.offset
            piece = replace(piece, offset=self._hear_upto, audio=piece.audio[skip:])
        self._hear_upto = piece.end
        t0 = self.clock.now()
        w0 = time.perf_counter()
        try:
            stop = bool(self.frontend.hear(piece))
        except Exception as exc:  # the loop must survive any frontend failure
            self._frontend_error(piece.index, exc, "hear")
            stop = False
        self._hear_wall += time.perf_counter() - w0
        self._hear_compute += max(self.clock.now() - t0, 0.0)
        if not stop or self.state is not FloorState.SPEAKING or self._early_flush:
            return False
        self._early_flush = True
        self.timeline.append(
            Kind.FLUSH,
            {"unit": piece.index, "turn": self.turn_id, "early": True, "at_sample": piece.end},
        )
        return True

    def speak_now(self, piece: PartialUnit) -> UnitResult | None:
        """Let the frontend start a turn now, between boundaries (call it after :meth:`hear`).

        Asked only while listening, of a frontend that hears audio, in the unit right after
        the last boundary, and only when that boundary gave the speaker nothing: a ``SPEAK``
        output then revises the boundary's decision, recorded now as its ``early`` decision
        (with ``at_sample``: where in the unit in progress, as for an early flush). The result
        carries the turn's first speech chunk (under the last boundary's unit index) and any
        delegate requests, for the caller to play and send at once; the turn goes on at the
        next boundary. None when no turn started. Never raises because of the frontend.
        """
        if not self.hears_audio or self.state is not FloorState.LISTENING:
            return None
        slot = piece.index - 1  # the last boundary's unit
        if slot < 0 or slot != self._next_index - 1 or slot in self._chunks:
            return None  # no boundary yet, or its speech (a finished turn's end) still plays
        t0 = self.clock.now()
        w0 = time.perf_counter()
        out: UnitOutput | None = None
        try:
            out = self.frontend.speak_now()
            if out is not None:
                _check_output(out)
        except Exception as exc:  # the loop must survive any frontend failure
            self._frontend_error(piece.index, exc, "speak_now")
            out = None
        self._hear_wall += time.perf_counter() - w0
        self._hear_compute += max(self.clock.now() - t0, 0.0)
        if out is None or out.decision is not Decision.SPEAK:
            return None
        self._start_turn()
        end_of_turn, said, delegates = self._turn_text(slot, out.text, bool(out.end_of_turn))
        speech = self._speech(slot, out, said)
        self.timeline.append(
            Kind.DECISION,
            {
                "unit": slot,
                "decision": Decision.SPEAK.value,
                "end_of_turn": end_of_turn,
                "turn": self.turn_id,
                "early": True,
                "at_sample": piece.end,
            },
        )
        if end_of_turn:  # a turn of one piece: it drains (or, with no audio, says nothing)
            with self._lock:
                self._delivery.turn_ended(self.turn_id, slot)
            self.state = FloorState.LISTENING
        self._report()
        # (its compute is the unit in progress's, accounted at that unit's boundary)
        return UnitResult(
            slot,
            Decision.SPEAK,
            end_of_turn,
            False,
            speech,
            tuple(delegates),
            0.0,
            self.debt_s,
            False,
        )

    def step(self, unit: InputUnit) -> UnitResult:
        """Take the decision for one unit boundary. Never raises because of the frontend."""
        wall0 = time.perf_counter()
        unit = self._record_inputs(unit)
        frontend_wall = 0.0
        t0 = self.clock.now()
        out: UnitOutput | None = None
        try:
            w0 = time.perf_counter()
            self.frontend.prefill(unit)
            out = self.frontend.generate()
            frontend_wall = time.perf_counter() - w0
            _check_output(out)
        except Exception as exc:  # the loop must survive any frontend failure
            frontend_wall = time.perf_counter() - w0
            self._frontend_error(unit.index, exc)
            out = UnitOutput(Decision.LISTEN, end_of_turn=self.state is FloorState.SPEAKING)
        compute = max(self.clock.now() - t0, 0.0) + self._hear_compute
        early, hear_wall = self._early_flush, self._hear_wall
        self._early_flush = False
        self._hear_compute = self._hear_wall = 0.0
        result = self._apply(unit, out, compute, early)
        self._report()
        overhead = time.perf_counter() - wall0 - frontend_wall
        return replace(result, overhead_s=overhead, early_flush=early, hear_s=hear_wall)

    def _frontend_error(self, index: int, exc: Exception, during: str = "") -> None:
        payload: dict = {
            "unit": index,
            "error": type(exc).__name__,
            "message": scrub(clean_text(str(exc)))[:500],  # a remote's error may hold a key
        }
        if during:
            payload["during"] = during
        self.timeline.append(Kind.FRONTEND_ERROR, payload)

    def _record_inputs(self, unit: InputUnit) -> InputUnit:
        dropped = unit.index - self._next_index
        self._next_index = unit.index + 1
        audio = unit.audio
        rms = float(np.sqrt(np.mean(np.square(audio, dtype=np.float64)))) if audio.size else 0.0
        self.timeline.append(
            Kind.USER_AUDIO,
            {
                "unit": unit.index,
                "start_sample": unit.start_sample,
                "samples": int(audio.shape[0]),
                "rms": round(rms, 6),
                "dropped_before": max(dropped, 0),
            },
        )
        if unit.frame is not None:
            frame = unit.frame
            self.timeline.append(
                Kind.VIDEO_FRAME,
                {
                    "unit": unit.index,
                    "frame_seq": frame.seq,
                    "frame_t": frame.t,
                    "shape": list(frame.image.shape),
                },
            )
        for text in unit.texts:
            self.timeline.append(Kind.USER_TEXT, {"unit": unit.index, "text": text})
        reply = self._take_reply(unit.index)
        if reply is None:
            return unit
        span = f"<backend>{escape_tags(reply.text)}</backend>"
        self.timeline.append(
            Kind.BACKEND_INSERT,
            {
                "unit": unit.index,
                "task_id": reply.task_id,
                "inserted": True,
                "chars": len(reply.text),
                "attempt": reply.attempt,
            },
        )
        return replace(unit, texts=(*unit.texts, span))

    def _take_reply(self, unit_index: int) -> BackendReply | None:
        with self._lock:
            self._delivery.boundary(unit_index)
            if self.state is not FloorState.LISTENING:
                return None
            return self._delivery.take(unit_index, self.clock.now())

    def _report(self) -> None:
        """Hand delivery outcomes decided so far to the listener (outside the lock)."""
        with self._lock:
            outcomes, self._delivery.outcomes = self._delivery.outcomes, []
        if self._on_delivery is not None:
            for outcome in outcomes:
                self._on_delivery(outcome)

    def _apply(
        self, unit: InputUnit, out: UnitOutput, compute: float, early: bool = False
    ) -> UnitResult:
        was_speaking = self.state is FloorState.SPEAKING
        if early and was_speaking and out.decision is Decision.SPEAK:
            # The speaker was flushed mid-unit: the turn ends here, as the yield it was.
            self._protocol_error(
                unit.index,
                "speak_after_stop",
                "the frontend kept speaking after it stopped the turn early; the unit's "
                "output was discarded and the turn ended",
            )
            out = UnitOutput(Decision.LISTEN, end_of_turn=True)
        end_of_turn = bool(out.end_of_turn)
        decision = out.decision
        if not was_speaking and decision is Decision.LISTEN:
            end_of_turn = False
            if out.text or out.audio.size:
                self._protocol_error(
                    unit.index,
                    "output_while_listening",
                    "text or audio generated in a listen unit was discarded",
                )
        if was_speaking and decision is Decision.LISTEN and not end_of_turn:
            self._protocol_error(
                unit.index,
                "listen_mid_turn",
                "the frontend returned to listening without <|turn_eos|>",
            )
            end_of_turn = True
        if decision is Decision.SPEAK and not was_speaking:
            self._start_turn()
        text = out.text if decision is Decision.SPEAK else ""
        end_of_turn, said, delegates = self._turn_text(unit.index, text, end_of_turn)
        speech = self._speech(unit.index, out, said) if decision is Decision.SPEAK else None
        # A yield (no speech in the ending unit) stops playback at once; a finish drains.
        # Only visible text counts: a unit holding just "<|turn_eos|>" (or a private span) yields.
        yielded = decision is Decision.LISTEN or (not said and speech is None)
        flush = end_of_turn and self.state is FloorState.SPEAKING and yielded and not early
        self.timeline.append(
            Kind.DECISION,
            {
                "unit": unit.index,
                "decision": decision.value,
                "end_of_turn": end_of_turn,
                "turn": self.turn_id if self.state is FloorState.SPEAKING else None,
            },
        )
        if flush:
            self.timeline.append(Kind.FLUSH, {"unit": unit.index, "turn": self.turn_id})
        if end_of_turn and self.state is FloorState.SPEAKING:
            with self._lock:
                self._delivery.turn_ended(self.turn_id, unit.index)
        if end_of_turn:
            self.state = FloorState.LISTENING
        return self._account(unit, decision, end_of_turn, flush, speech, delegates, compute)

    def _start_turn(self) -> None:
        """A new assistant turn takes the floor."""
        self.turn_id += 1
        self.state = FloorState.SPEAKING
        with self._lock:
            self._delivery.turn_started(self.turn_id)

    def _turn_text(
        self, index: int, text: str, end_of_turn: bool
    ) -> tuple[bool, str, list[DelegateRequest]]:
        """Parse a unit's text of the turn; closes the turn's spans when it ends there.

        Returns whether the turn ends in the unit (``end_of_turn`` or a ``<|turn_eos|>`` in the
        text), its visible text and the delegate requests that closed.
        """
        visible: list[str] = []
        delegates: list[DelegateRequest] = []
        if text:
            end_of_turn |= self._parse(index, self._parser.feed(text), visible, delegates)
        if end_of_turn and self.state is FloorState.SPEAKING:
            self._parse(index, self._parser.end_turn(), visible, delegates)
            self._open_cutoff = None
        return end_of_turn, "".join(visible), delegates

    def _parse(
        self, index: int, events: list, visible: list[str], delegates: list[DelegateRequest]
    ) -> bool:
        """Route parser events; returns True if a ``<|turn_eos|>`` token appeared in the text."""
        saw_eos = False
        for event in events:
            if isinstance(event, VisibleText):
                visible.append(event.text)
            elif isinstance(event, SpanOpened) and event.channel is Channel.DELEGATE:
                record = self.timeline.append(
                    Kind.DELEGATE_OPEN, {"unit": index, "turn": self.turn_id}
                )
                self._open_cutoff = record.seq
            elif isinstance(event, PrivateSpan):
                self._close_span(index, event, delegates)
            elif isinstance(event, ControlToken):
                saw_eos |= event.token == TURN_EOS
            elif isinstance(event, ProtocolError):
                self._protocol_error(index, event.code, event.detail)
        return saw_eos

    def _close_span(self, index: int, span: PrivateSpan, delegates: list[DelegateRequest]) -> None:
        cutoff = self._open_cutoff if self._open_cutoff is not None else self.timeline.last_seq
        self._open_cutoff = None
        if span.channel is not Channel.DELEGATE:
            self._protocol_error(
                index,
                "backend_from_model",
                "the frontend wrote a <backend> span; it was not spoken",
            )
            return
        request = DelegateRequest(span.text.strip(), cutoff, self.turn_id, index)
        self.timeline.append(
            Kind.DELEGATE_CLOSE,
            {"unit": index, "turn": self.turn_id, "cutoff_seq": cutoff, "query": request.query},
        )
        delegates.append(request)

    def _protocol_error(self, index: int, code: str, detail: str) -> None:
        self.timeline.append(Kind.PROTOCOL_ERROR, {"unit": index, "code": code, "detail": detail})

    def _speech(self, index: int, out: UnitOutput, text: str) -> SpeechChunk | None:
        audio = np.asarray(out.audio)
        if audio.ndim != 1 or audio.dtype != np.float32 or not np.all(np.isfinite(audio)):
            self._protocol_error(
                index,
                "bad_audio",
                f"frontend audio must be finite mono float32, got "
                f"{audio.dtype} {audio.shape}; the unit's audio was dropped",
            )
            audio = np.zeros(0, dtype=np.float32)
        if text:
            self.timeline.append(
                Kind.ASSISTANT_TEXT, {"unit": index, "turn": self.turn_id, "text": text}
            )
        if audio.size == 0:
            return None
        chunk = SpeechChunk(
            index, self.turn_id, self._out_samples, audio, self.frontend.output_sample_rate, text
        )
        self._out_samples += chunk.samples
        with self._lock:
            self._chunks[index] = chunk
            self._delivery.spoke(self.turn_id, index, text, has_audio=True)
            while len(self._chunks) > MAX_UNACKED_CHUNKS:  # a speaker that never acknowledges
                stale = min(self._chunks)
                self._delivery.given_up(self._chunks.pop(stale).turn_id, stale)
                self._heard_samples.pop(stale, None)
                self.timeline.append(
                    Kind.INPUT_ERROR,
                    {"field": "playback_ack", "unit": stale, "message": "never acknowledged"},
                )
        self.timeline.append(
            Kind.ASSISTANT_AUDIO,
            {
                "unit": index,
                "turn": self.turn_id,
                "first_sample": chunk.first_sample,
                "samples": chunk.samples,
                "sample_rate": chunk.sample_rate,
            },
        )
        return chunk

    def _account(
        self,
        unit: InputUnit,
        decision: Decision,
        end_of_turn: bool,
        flush: bool,
        speech: SpeechChunk | None,
        delegates: list[DelegateRequest],
        compute: float,
    ) -> UnitResult:
        duration = unit.duration_s
        missed = compute + self.debt_s > duration * self.config.deadline_fraction
        self.debt_s = max(0.0, self.debt_s + compute - duration)
        self.missed_units += int(missed)
        self.timeline.append(
            Kind.UNIT_STATS,
            {
                "unit": unit.index,
                "compute_s": round(compute, 6),
                "debt_s": round(self.debt_s, 6),
                "missed": missed,
                "unit_s": round(duration, 6),
            },
        )
        return UnitResult(
            unit.index,
            decision,
            end_of_turn,
            flush,
            speech,
            tuple(delegates),
            compute,
            self.debt_s,
            missed,
        )


def _check_output(out: object) -> None:
    """Raise TypeError unless ``out`` is a UnitOutput whose fields have the contract's types."""
    if not isinstance(out, UnitOutput):
        raise TypeError(f"generate() returned {type(out).__name__}, not UnitOutput")
    if not isinstance(out.decision, Decision):
        raise TypeError(f"UnitOutput.decision must be a Decision, got {out.decision!r}")
    if not isinstance(out.text, str):
        raise TypeError(f"UnitOutput.text must be a str, got {type(out.text).__name__}")
    if not isinstance(out.audio, np.ndarray):
        raise TypeError(f"UnitOutput.audio must be a numpy array, got {type(out.audio).__name__}")


def _ack_problem(ack: PlaybackAck, chunk: SpeechChunk | None) -> str:
    if chunk is None:
        return f"no speech chunk for unit {ack.unit_index} is awaiting playback"
    if ack.samples_total != chunk.samples:
        return f"samples_total {ack.samples_total} does not match the chunk's {chunk.samples}"
    if not 0 <= ack.samples_played <= chunk.samples:
        return f"samples_played {ack.samples_played} outside 0..{chunk.samples}"
    return ""


def _heard_prefix(text: str, fraction: float) -> str:
    """The whole words of ``text`` spoken by the time ``fraction`` of its audio has played."""
    if fraction >= 1.0 or math.isclose(fraction, 1.0):
        return text
    limit = int(len(text) * max(fraction, 0.0))
    cut = text.rfind(" ", 0, limit + 1)
    return text[: cut + 1] if cut >= 0 else ""
