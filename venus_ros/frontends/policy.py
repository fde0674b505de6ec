"""Floor-policy frontends: a speech stack around a pluggable "when to talk" policy.

:class:`PolicyFrontend` is a complete frontend built from the embedded speech components:

* **Perception**: the user channel goes through echo cancellation (optional; WebRTC AEC3 with
  the frontend's own output as reference), Silero VAD (one probability per 32 ms frame) and,
  optionally, Whisper on the utterances the VAD cuts out (final transcripts; partial ones on
  request). Each unit (and each sub-step of a unit) is summarised as a :class:`FloorObservation`
  (:class:`venus_ros.frontends.perception.Perception`).
* **Floor policy**: a :class:`FloorPolicy` maps observations to a :class:`FloorAction`
  (keep listening, start speaking, keep speaking, yield). This is the seam where the trained
  policy of the cascade frontend plugs in; :class:`VadBargeIn` and :class:`NeverYield` are the
  evaluation baselines.
* **Responder**: what to say when the policy takes the floor (:class:`Responder`): a
  ``<backend>`` reply that arrived in ``unit.texts`` is spoken; otherwise the user's request
  is either delegated (``"Let me check."`` and a private ``<delegate>transcript</delegate>``,
  decided by a :data:`Delegator`) or acknowledged with a short template.
* **Voice**: the turn player (:class:`venus_ros.frontends.cascade.turns.TurnPlayer`) with TTS
  (:func:`venus_ros.audio.tts.make_tts`, espeak-ng by default); a turn's audio is synthesised
  when the turn starts (a generated reply's phrases as they are generated) and handed out at
  most one second per unit, the visible text split across units in proportion to the audio
  (whole words; the private span travels with the words before it).
* **Session parts** (:class:`SessionPart`, ``session_parts=``): told of each observation and
  turn event, and asked before the user's speech becomes a request (they may hold it back);
  each keeps its own per-session state, reset by :meth:`PolicyFrontend.prepare`. The cascade
  frontend composes its overlap rule and addressee gate this way; the policy frontend knows
  nothing of what a part does.

Rules of the duplex loop it obeys: one decision per unit; once speaking it returns to listening
only with ``end_of_turn`` (a yield is ``LISTEN`` + ``end_of_turn`` with no speech, so the loop
flushes the speaker; a finished turn ends with its last audio); at most one ``<delegate>`` per
turn; nothing is produced in a listen unit.

Timing: the loop calls ``prefill``/``generate`` at the end of each unit (the *boundary*); audio
returned there starts playing at the boundary. Playback is therefore assumed to run from the
boundary, back to back with what the frontend emitted before, and to stop at the boundary of a
yield; the frontend's own record of that schedule gives the AEC reference and the "assistant
is playing" flags of the observation. Between boundaries the frontend hears the unit in
progress as its audio arrives (:meth:`PolicyFrontend.hear`) and takes in, observes and decides
each sub-step as soon as its audio is complete; a ``YIELD`` at a sub-step while the assistant
speaks stops the turn at that sub-step's end (the caller flushes the speaker then; playback is
assumed to stop there) and the boundary yields. The sub-steps are the same pieces however the
audio arrives, so the observations and decisions are too; driven by ``prefill`` alone, a
sub-step yield stops the frontend's turn at the same point and the speaker at the boundary.
With echo cancellation the VAD sees the user channel 18 ms late
(:attr:`venus_ros.audio.aec.EchoCanceller.latency_samples`); all times in an
observation are session times with that latency taken out.

Models are loaded once per process and shared: the Whisper recogniser and the TTS are
stateless and shared by every frontend; VAD and echo canceller carry stream state, so each
frontend borrows its own from a per-process pool and returns it when closed or garbage
collected (the evaluation runner's one frontend per sample reuses them).

Everything is deterministic given the same input: VAD, AEC3, greedy Whisper decoding and
espeak-ng are, and acknowledgements rotate in a fixed order from :meth:`PolicyFrontend.prepare`.
"""

from __future__ import annotations

import abc
import enum
import math
import re
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from venus_ros.core.frontend import Decision, Frontend, FrontendError, UnitOutput
from venus_ros.core.protocol import escape_tags, split_visible
from venus_ros.core.units import InputUnit, PartialUnit
from venus_ros.frontends.cascade.state import SessionState
from venus_ros.frontends.cascade.turns import Turn, TurnPlayer
from venus_ros.frontends.perception import (
    FRAME_S,
    SAMPLE_RATE,
    FloorObservation,
    Perception,
    UnitAccount,
    frame_pitch_hz,
    substep_cuts,
)
from venus_ros.text.speech import to_speech

if TYPE_CHECKING:
    from venus_ros.audio.aec import EchoCanceller
    from venus_ros.audio.asr import SegmentTranscriber, WhisperAsr
    from venus_ros.audio.tts import Tts
    from venus_ros.audio.vad import SileroVad

__all__ = [
    "ACKNOWLEDGEMENTS",
    "CHECK_PHRASE",
    "FRAME_S",
    "RESTART_GAP_S",
    "Delegator",
    "FloorAction",
    "FloorObservation",
    "FloorPolicy",
    "FloorStep",
    "NeverYield",
    "PolicyFrontend",
    "Responder",
    "Response",
    "SessionPart",
    "UserRequest",
    "VadBargeIn",
    "delegate_all",
    "frame_pitch_hz",
    "make_policy_frontend",
    "speakable",
]

CHECK_PHRASE = "Let me check."
"""What the assistant says when it delegates a request."""
ACKNOWLEDGEMENTS = ("Okay.", "Sure.", "I see.", "Got it.", "Alright.")
"""Acknowledgement templates, used in this order, round robin."""
RESTART_GAP_S = 0.6
"""After it stops for the user, the assistant keeps silent at least this long before it
speaks again: speech that resumes within about half a second of being cut off is heard as
the same turn going on, not as a stop and a reply (Full-Duplex-Bench's timing merges a
model's speech across gaps up to 0.5 s for the same reason). A short "Hold on." ends
about when the assistant stops, so its reply would otherwise follow the cut at once."""
FINAL_BEAM_SIZE = 5
"""Beam width of the user's final transcripts (partials, and finals of at most 1.5 s, stay
greedy: :class:`~venus_ros.audio.asr.SegmentTranscriber`). Measured on 120 training
interruptions cut from their recordings (tiny.en, int8, 2 cores): word error rate 0.154 greedy,
0.130 with 3, 0.126 with 5, for 71 -> 86 ms median per utterance (Whisper base greedy: 0.131 at
133 ms)."""

_BACKEND = re.compile(r"<backend>(.*?)</backend>", re.DOTALL)
_EPS = 1e-9


# ---------------------------------------------------------------------------------------------
# Observation, action, policy
# ---------------------------------------------------------------------------------------------


class FloorAction(str, enum.Enum):
    """What a floor policy wants at a boundary.

    ``START_SPEAKING`` only means something while listening and ``YIELD`` only while speaking;
    every other answer keeps the floor as it is (``KEEP_LISTENING`` while speaking, for
    example, is the same as ``KEEP_SPEAKING``: the loop never lets a turn end without
    ``end_of_turn``, and only ``YIELD`` writes one).
    """

    KEEP_LISTENING = "keep_listening"
    START_SPEAKING = "start_speaking"
    KEEP_SPEAKING = "keep_speaking"
    YIELD = "yield"


class FloorPolicy(abc.ABC):
    """Decides who holds the floor, from one :class:`FloorObservation` at a time.

    :meth:`decide` is called for every sub-step of every unit, in time order; the frontend
    acts on the answer for the boundary (``obs.is_boundary``). A policy that reacts at a finer
    grain keeps state between calls; :meth:`reset` clears it when a session starts.
    """

    #: A short name, for reports.
    name: str = "policy"
    #: Phrases the recogniser should weigh a short utterance over the assistant against
    #: (:attr:`~venus_ros.audio.asr.SegmentTranscriber.expect`): what this policy stops for.
    expected_over_turn: tuple[str, ...] = ()
    #: A :class:`~venus_ros.audio.asr.PhraseProbe` of ``expected_over_turn`` (its file), used
    #: when the recogniser is the probe's model (:meth:`~venus_ros.audio.asr.WhisperAsr.
    #: use_probe`).
    expected_probe: Path | None = None

    @abc.abstractmethod
    def decide(self, obs: FloorObservation) -> FloorAction:
        """The action wanted after this observation."""

    def reset(self) -> None:
        """Forget everything about the previous session. The default keeps no state."""


def _check_positive(name: str, value: float) -> float:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
        raise ValueError(f"{name}: must be a finite number >= 0, got {value!r}")
    return float(value)


class _TakesTurnAfterSilence(FloorPolicy):
    """The turn-taking rule both baselines share.

    While listening: start speaking once the user has spoken (at least ``min_user_speech_s``
    since the assistant last spoke) and has then been silent for ``take_turn_after_s``, or
    when a backend reply is waiting and the user has been silent that long.
    """

    def __init__(self, take_turn_after_s: float = 0.6, min_user_speech_s: float = 0.096) -> None:
        self.take_turn_after_s = _check_positive("take_turn_after_s", take_turn_after_s)
        self.min_user_speech_s = _check_positive("min_user_speech_s", min_user_speech_s)

    def _listening(self, obs: FloorObservation) -> FloorAction:
        quiet = obs.trailing_silence_s + _EPS >= self.take_turn_after_s
        wants = obs.user_turn_speech_s + _EPS >= self.min_user_speech_s or obs.backend_pending > 0
        return FloorAction.START_SPEAKING if quiet and wants else FloorAction.KEEP_LISTENING


class VadBargeIn(_TakesTurnAfterSilence):
    """Baseline "stop whenever the user speaks".

    While speaking it yields as soon as the VAD hears at least ``min_overlap_s`` of user speech
    over the assistant's audio in a unit (two 32 ms frames by default, so a single-frame click
    does not count); it cannot tell a backchannel, a remark to someone else or background
    talk from an interruption. While listening it takes the turn like every baseline (see
    :class:`_TakesTurnAfterSilence`: 0.6 s of silence after user speech).

    Args:
        min_overlap_s: Overlapping user speech within one unit that makes it yield.
        take_turn_after_s: Trailing silence after user speech before it takes the turn.
        min_user_speech_s: User speech needed before that silence counts.
    """

    name = "vad-bargein"

    def __init__(
        self,
        min_overlap_s: float = 0.064,
        take_turn_after_s: float = 0.6,
        min_user_speech_s: float = 0.096,
    ) -> None:
        super().__init__(take_turn_after_s, min_user_speech_s)
        self.min_overlap_s = _check_positive("min_overlap_s", min_overlap_s)

    def decide(self, obs: FloorObservation) -> FloorAction:
        """Yield on overlapping speech while speaking; take the turn after silence."""
        if obs.assistant_speaking:
            if obs.overlap_s + _EPS >= self.min_overlap_s:
                return FloorAction.YIELD
            return FloorAction.KEEP_SPEAKING
        return self._listening(obs)


class NeverYield(_TakesTurnAfterSilence):
    """Baseline that never gives up the floor: every turn is spoken to its end.

    While listening it takes the turn like :class:`VadBargeIn`. Speech the user made during
    the assistant's turn still counts as a request, answered once the turn has finished.
    """

    name = "never-yield"

    def decide(self, obs: FloorObservation) -> FloorAction:
        """Keep speaking while speaking; take the turn after silence."""
        if obs.assistant_speaking:
            return FloorAction.KEEP_SPEAKING
        return self._listening(obs)


# ---------------------------------------------------------------------------------------------
# Responder
# ---------------------------------------------------------------------------------------------

#: Decides whether a user request goes to the background harness: transcript -> delegate?
Delegator = Callable[[str], bool]


def delegate_all(transcript: str) -> bool:
    """The baselines' delegator: every request is delegated.

    A deliberate, documented baseline: recall 100% and specificity 0% on delegation by
    construction. The cascade passes its trained router instead.
    """
    return True


@dataclass(frozen=True)
class UserRequest:
    """The user's speech that a response answers.

    Attributes:
        transcript: Final transcripts joined (empty without ASR or when nothing was heard).
        start_s: Session time of its first voiced frame.
        end_s: Session time of its last voiced frame's end.
        speech_s: Voiced time in it.
        asr: Whether ASR ran (an empty transcript with ASR means nothing intelligible).
        aside: The assistant stopped for this speech, and its words, once made out, read as
            said to someone else (a session part's judgement): the cut-off turn may be taken
            up again instead of answering it.
        confidence: The recogniser's least confidence in one of its final transcripts (the
            mean of Whisper's word probabilities; None: unknown, e.g. no words or no ASR).
    """

    transcript: str
    start_s: float
    end_s: float
    speech_s: float
    asr: bool
    aside: bool = False
    confidence: float | None = None


@dataclass(frozen=True)
class Response:
    """One assistant turn to speak.

    Attributes:
        spoken: The words, plain text (spoken and shown).
        kind: ``"backend"`` (a harness reply), ``"delegate"``, ``"ack"`` or ``"reply"`` (a
            generated reply, streamed: its words come from ``stream``).
        query: The delegated request (``kind == "delegate"`` only), already escaped.
        stream: For ``"reply"``: where the words come from, phrase by phrase (an object with
            ``take(wait_s) -> (text, done)`` and ``cancel()``, e.g.
            :class:`venus_ros.frontends.cascade.responder.ReplyStream`).
    """

    spoken: str
    kind: Literal["backend", "delegate", "ack", "reply"]
    query: str = ""
    stream: Any = field(default=None, compare=False, repr=False)

    @property
    def text(self) -> str:
        """The turn's whole text as the model writes it (with its private span, if any)."""
        if self.kind == "delegate":
            return f"{self.spoken} <delegate>{self.query}</delegate>"
        return self.spoken


class Responder:
    """Chooses what to say when the policy takes the floor.

    Priority: a waiting backend reply (spoken as it came, cleaned of markup); else the
    user's request: delegated when ``delegator(transcript)`` says so (``"Let me check."`` and a
    ``<delegate>`` span holding the transcript), acknowledged otherwise. With ASR on, an
    empty transcript (nothing intelligible) is acknowledged without asking the delegator;
    without ASR the delegator gets ``""`` and a delegated query describes the request's time
    span instead (the harness has the audio as evidence).

    Args:
        delegator: transcript -> delegate?; :func:`delegate_all` by default.
        acknowledgements: Acknowledgement templates, used round robin.
        check_phrase: What to say when delegating.
        max_query_chars: Longest query; longer transcripts are cut at a word.
        query_of: Turns a transcript into the delegated query (e.g. removing fillers and
            false starts); the transcript as it is by default. The result is escaped.
    """

    def __init__(
        self,
        delegator: Delegator = delegate_all,
        acknowledgements: Sequence[str] = ACKNOWLEDGEMENTS,
        check_phrase: str = CHECK_PHRASE,
        max_query_chars: int = 4000,
        query_of: Callable[[str], str] | None = None,
    ) -> None:
        if not callable(delegator):
            raise TypeError(f"delegator: must be callable, got {type(delegator).__name__}")
        acks = tuple(a.strip() for a in acknowledgements)
        if not acks or not all(acks):
            raise ValueError("acknowledgements: need at least one, none empty")
        if not check_phrase.strip():
            raise ValueError("check_phrase: must not be empty")
        if max_query_chars < 16:
            raise ValueError(f"max_query_chars: must be >= 16, got {max_query_chars}")
        self.delegator = delegator
        self.acknowledgements = acks
        self.check_phrase = check_phrase.strip()
        self.max_query_chars = int(max_query_chars)
        self.query_of = query_of
        self._next_ack = 0

    def reset(self) -> None:
        """Start the acknowledgement rotation over."""
        self._next_ack = 0

    def heard(self, text: str, interrupted: bool, unheard: str = "") -> None:
        """An assistant turn ended; ``text`` is what was played of it (``interrupted``: the
        turn was given up before its end; ``unheard``: the words it still held, what the
        assistant was about to say). The default keeps no history."""

    def prepare(self, request: UserRequest) -> None:
        """A final transcript arrived while listening: a responder may start working on its
        reply before the turn is taken. The default does nothing."""

    def ready(self, request: UserRequest) -> bool:
        """Whether the response to ``request`` can be voiced at once, without waiting for it
        to be worked out (a turn taken between boundaries waits until it is). The default's
        responses are always ready."""
        return True

    def respond(self, request: UserRequest | None, backend: str | None = None) -> Response | None:
        """The response to a backend reply or a user request; None if there is neither."""
        if backend is not None:
            spoken = speakable(backend)
            if spoken:
                return Response(spoken, "backend")
        if request is None:
            return None
        transcript = " ".join(request.transcript.split())
        if (transcript or not request.asr) and self.delegator(transcript):
            return Response(self.check_phrase, "delegate", self._query(request, transcript))
        ack = self.acknowledgements[self._next_ack % len(self.acknowledgements)]
        self._next_ack += 1
        return Response(ack, "ack")

    def _query(self, request: UserRequest, transcript: str) -> str:
        """The delegated query: the cleaned transcript, cut at a word, escaped."""
        query = transcript
        if self.query_of is not None and transcript:
            query = self.query_of(transcript) or transcript
        query = escape_tags(_cut(" ".join(query.split()), self.max_query_chars))
        if not query:
            query = (
                f"the user's request from {request.start_s:.2f} s to "
                f"{request.end_s:.2f} s (no transcript)"
            )
        return query


def speakable(text: str) -> str:
    """``text`` as the words to speak (:func:`venus_ros.text.speech.to_speech`), tags escaped."""
    return escape_tags(to_speech(text))


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit + 1)
    return text[: cut if cut > 0 else limit]


# ---------------------------------------------------------------------------------------------
# Shared models
# ---------------------------------------------------------------------------------------------

_MODELS_LOCK = threading.Lock()
_SHARED: dict[tuple[Any, ...], Any] = {}
_IDLE: dict[tuple[Any, ...], list[Any]] = {}
_MAX_IDLE = 4


def _shared(key: tuple[Any, ...], factory: Callable[[], Any]) -> Any:
    """One instance per key per process, for stateless models (ASR, TTS)."""
    with _MODELS_LOCK:
        if key not in _SHARED:
            _SHARED[key] = factory()
        return _SHARED[key]


def _borrow(key: tuple[Any, ...], factory: Callable[[], Any]) -> Any:
    """An idle pooled instance (stream state reset by the borrower) or a new one."""
    with _MODELS_LOCK:
        idle = _IDLE.get(key)
        if idle:
            return idle.pop()
    return factory()


def _give_back(key: tuple[Any, ...], model: Any) -> None:
    with _MODELS_LOCK:
        idle = _IDLE.setdefault(key, [])
        if len(idle) < _MAX_IDLE and all(m is not model for m in idle):
            idle.append(model)


# ---------------------------------------------------------------------------------------------
# The frontend
# ---------------------------------------------------------------------------------------------


@dataclass
class _Hearing:
    """The unit in progress as taken in so far (by :meth:`PolicyFrontend.hear`, then
    :meth:`PolicyFrontend.prefill`).

    Attributes:
        start: Its first microphone sample.
        length: Its length in samples.
        cuts: Its sub-step cut points (:func:`~venus_ros.frontends.perception.substep_cuts`).
        audio: Its samples (the first ``filled`` are real).
        prepared: The final transcripts the responder last prepared a reply to (or had when
            the unit began): a new final transcript is prepared at the sub-step it arrives.
        filled: Samples heard.
        done: Sub-steps taken in, observed and decided.
        acc: The frames accounted so far.
        wall: Wall-clock seconds spent hearing it.
        broken: Hearing it failed (its prefill fails too).
        start_at: Where the turn the policy last took at a sub-step plays from: the end of the
            audio heard when it decided (None: it did not; :meth:`PolicyFrontend.speak_now`
            acts on it).
    """

    start: int
    length: int
    cuts: list[int]
    audio: np.ndarray
    prepared: tuple[str, ...]
    filled: int = 0
    done: int = 0
    acc: UnitAccount = field(default_factory=UnitAccount)
    wall: float = 0.0
    broken: bool = False
    start_at: int | None = None


@dataclass(frozen=True)
class FloorStep:
    """What the frontend did at one boundary (for tests, reports and debugging).

    Attributes:
        unit_index: The unit.
        action: The policy's answer for the boundary observation (``YIELD`` where a sub-step
            yield stopped the turn before the boundary).
        decision: The decision returned to the loop.
        end_of_turn: Whether the output ended the turn.
        started: What began at this boundary: ``"scheduled"``, a :class:`Response` kind, or
            ``""``.
        yielded: The turn was given up here (no speech, so the loop flushes).
        early: ``started`` began between the last boundary and this one
            (:meth:`PolicyFrontend.speak_now`).
    """

    unit_index: int
    action: FloorAction
    decision: Decision
    end_of_turn: bool
    started: str = ""
    yielded: bool = False
    early: bool = False


class SessionPart:
    """A part composed into a :class:`PolicyFrontend`: told what happens in a session, and
    asked before the user's speech becomes a request.

    The frontend calls every part's hooks in the order the parts were given, with itself as
    the first argument (read its public state: ``frontend.state``, ``frontend.user_speaking``,
    ``frontend.asr_enabled``). A part keeps what it learns of a session in its own state,
    which :meth:`reset` replaces; the frontend knows nothing of what a part does. Every hook
    of this base class does nothing (:meth:`admit_request` admits), so a part overrides only
    the events it needs.
    """

    def reset(self) -> None:
        """A session starts (:meth:`PolicyFrontend.prepare`): forget the previous one."""

    def on_observation(self, frontend: PolicyFrontend, obs: FloorObservation) -> None:
        """A sub-step was taken in, observed and decided (``frontend.state.action``)."""

    def admit_request(self, frontend: PolicyFrontend) -> bool:
        """Whether the user's pending speech may become a request now.

        Called each time the frontend builds a request (a final transcript arrived while
        listening, or the policy takes the turn). A part may edit the pending speech first
        (drop texts from ``frontend.state.user_texts`` in place, or forget the user's turn
        with ``frontend.state.forget_user_turn()``); False: no request now.
        """
        return True

    def on_turn_started(self, frontend: PolicyFrontend) -> None:
        """The assistant began a turn while it was listening (``frontend.state.turn``)."""

    def on_turn_finished(self, frontend: PolicyFrontend, turn: Turn) -> None:
        """``turn`` played out to its end (not a yield); its last audio was just emitted."""

    def on_turn_yielded(self, frontend: PolicyFrontend) -> None:
        """The assistant gives up its turn (a yield, at a boundary or at the sub-step where the
        policy stopped it; told once, before the turn is ended)."""

    def on_unit_taken_in(self, frontend: PolicyFrontend, unit: InputUnit) -> None:
        """``prefill`` took in ``unit`` (its sub-steps decided, any request prepared)."""


class PolicyFrontend(Frontend):
    """VAD (+AEC, +ASR) observations, a floor policy, a responder and TTS (module docstring).

    Args:
        policy: Who holds the floor.
        delegator: transcript -> delegate?; used by the default responder.
        responder: What to say; default ``Responder(delegator)``.
        asr: Transcribe user utterances (Whisper tiny.en), for delegate queries and
            ``user_text``.
        asr_partials: Also transcribe the utterance in progress (at boundaries, one Whisper run
            per second of speech; every 0.2 s while the assistant speaks); fills
            ``transcript``.
        aec: Cancel the frontend's own voice from the user channel
            (:class:`~venus_ros.audio.aec.EchoCanceller`, numpy engine). Turn it on wherever the
            microphone hears the speaker (live, ``eval run --echo``); with no echo in the
            microphone it passes the user through nearly unchanged.
        tts: TTS engine name for :func:`venus_ros.audio.tts.make_tts`.
        vad_threshold: Frame probability at or above which the user is speaking.
        substeps: Observations per unit (>= 1); see :class:`FloorObservation`.
        max_unit_audio_s: Most audio handed out per unit, in seconds (at most 1).
        asr_model: Whisper model name or folder.
        record_observations: Keep every observation (:attr:`observations`), e.g. to build
            training data for a learned policy.
        stream_wait_s: Longest a unit waits for a streamed reply's next phrase when nothing
            of the turn is left to play (bounded, so generation never stalls the loop).
        session_parts: Parts told of the session's events (:class:`SessionPart`), in order.

    Raises:
        TypeError: A policy or session part of the wrong type.
        ValueError: A parameter is out of range.
        venus_ros.audio.vad.ModelPackageMissing: A model package is not installed.
        venus_ros.core.errors.DeviceError: The TTS engine is not installed.
    """

    def __init__(
        self,
        policy: FloorPolicy,
        *,
        delegator: Delegator = delegate_all,
        responder: Responder | None = None,
        asr: bool = True,
        asr_partials: bool = False,
        aec: bool = False,
        tts: str = "espeak",
        vad_threshold: float = 0.5,
        substeps: int = 1,
        max_unit_audio_s: float = 1.0,
        asr_model: str = "tiny.en",
        record_observations: bool = False,
        stream_wait_s: float = 0.15,
        session_parts: Sequence[SessionPart] = (),
    ) -> None:
        if not isinstance(policy, FloorPolicy):
            raise TypeError(f"policy: must be a FloorPolicy, got {type(policy).__name__}")
        for part in session_parts:
            if not isinstance(part, SessionPart):
                raise TypeError(
                    f"session_parts: each must be a SessionPart, got {type(part).__name__}"
                )
        #: Told of the session's events, in order (:class:`SessionPart`).
        self.session_parts: tuple[SessionPart, ...] = tuple(session_parts)
        if not isinstance(substeps, int) or not 1 <= substeps <= 32:
            raise ValueError(f"substeps: must be an integer in 1..32, got {substeps!r}")
        if not 0.1 <= max_unit_audio_s <= 1.0:
            raise ValueError(f"max_unit_audio_s: must be in [0.1, 1.0], got {max_unit_audio_s}")
        if not 0.0 < vad_threshold < 1.0:
            raise ValueError(f"vad_threshold: must be in (0, 1), got {vad_threshold}")
        if asr_partials and not asr:
            raise ValueError("asr_partials: needs asr=True")
        if not 0.0 <= stream_wait_s <= 0.9:
            raise ValueError(f"stream_wait_s: must be in [0, 0.9], got {stream_wait_s}")
        self.stream_wait_s = float(stream_wait_s)
        self.policy = policy
        self.responder = responder if responder is not None else Responder(delegator)
        self.substeps = substeps
        self.max_unit_audio_s = float(max_unit_audio_s)
        self.asr_enabled = bool(asr)
        self.asr_partials = bool(asr_partials)
        self.aec_enabled = bool(aec)
        self.vad_threshold = float(vad_threshold)
        self.record_observations = bool(record_observations)

        from venus_ros.audio.tts import make_tts

        self._tts: Tts = _shared(("tts", tts), lambda: make_tts(tts))
        self.output_sample_rate = self._tts.output_rate
        self._player = TurnPlayer(self._tts, self.max_unit_audio_s, self.stream_wait_s)
        self._vad_key = ("vad", self.vad_threshold)
        self._vad: SileroVad = _borrow(self._vad_key, self._new_vad)
        self._finalizers = [weakref.finalize(self, _give_back, self._vad_key, self._vad)]
        self._aec: EchoCanceller | None = None
        if self.aec_enabled:
            from venus_ros.audio.aec import EchoCanceller

            self._aec = _borrow(("aec",), EchoCanceller)
            self._finalizers.append(weakref.finalize(self, _give_back, ("aec",), self._aec))
        self._transcriber: SegmentTranscriber | None = None
        if self.asr_enabled:
            from venus_ros.audio.asr import SegmentTranscriber

            recogniser: WhisperAsr = _shared(("asr", asr_model), lambda: _warm_asr(asr_model))
            if policy.expected_probe is not None:
                from venus_ros.audio.asr import PhraseProbe

                path = policy.expected_probe
                probe: PhraseProbe = _shared(("probe", str(path)), lambda: PhraseProbe.load(path))
                if probe.model == recogniser.model_name:  # (another model reads without it)
                    recogniser.use_probe(probe)
            self._transcriber = SegmentTranscriber(recogniser)
        self._perception = Perception(
            self._vad,
            self._aec,
            self._transcriber,
            vad_threshold=self.vad_threshold,
            asr_partials=self.asr_partials,
            expected_over_turn=policy.expected_over_turn,
        )
        self._schedule: tuple[tuple[float, str], ...] = ()
        self.prepare()

    def _new_vad(self) -> SileroVad:
        from venus_ros.audio.vad import SileroVad

        return SileroVad(threshold=self.vad_threshold)

    # -- public state --------------------------------------------------------------------------

    @property
    def steps(self) -> tuple[FloorStep, ...]:
        """What happened at every boundary since :meth:`prepare`."""
        return tuple(self.state.steps)

    @property
    def unit_compute_s(self) -> tuple[float, ...]:
        """Wall-clock seconds of ``prefill`` + ``generate`` per unit since :meth:`prepare`.

        The loop measures compute on the session clock, which an offline session's fake clock
        does not advance; this is the real cost on this machine.
        """
        return tuple(self.state.compute)

    @property
    def last_observation(self) -> FloorObservation | None:
        """The observation of the latest boundary (None before the first unit)."""
        return self.state.last_obs

    @property
    def observations(self) -> tuple[FloorObservation, ...]:
        """Every observation given to the policy since :meth:`prepare` (when recorded).

        Recorded only when :attr:`record_observations` is true (constructor argument).
        """
        return tuple(self.state.observations)

    @property
    def user_speaking(self) -> bool:
        """Whether the user is in the middle of an utterance (the VAD hears speech, or the
        recogniser has an utterance open)."""
        return self._vad.speaking or self._perception.in_utterance

    # -- the contract --------------------------------------------------------------------------

    def prepare(self, system_prompt: str = "", ref_audio: np.ndarray | None = None) -> None:
        """Start a session: stream state, policy, responder, session parts reset; the schedule
        is kept."""
        self.policy.reset()
        self.responder.reset()
        #: Everything this session has seen and done (replaced by every ``prepare``).
        self.state = SessionState(action=FloorAction.KEEP_LISTENING)
        self._perception.bind(self.state)
        self._hearing: _Hearing | None = None
        self._stop_pending = False
        self._began_early = ""  # what a turn begun since the last boundary began as
        for part in self.session_parts:
            part.reset()

    def schedule_turns(self, turns: Sequence[tuple[float, str]]) -> None:
        """Make the assistant speak ``text`` from the first boundary at or after ``start``.

        Each turn is ``(start, text)`` (objects with ``start`` and ``text`` attributes are also
        accepted). A scheduled turn starts (or, if the assistant is speaking, replaces the rest
        of the current turn) at the first unit boundary at or after ``start`` whatever the
        policy says there; from the next boundary on it is subject to the policy like any turn
        (a yield ends it). Where several fall due at one boundary the latest wins. It replaces
        any earlier schedule and is kept across :meth:`prepare`.

        Raises:
            ValueError: a start that is not a finite number >= 0 (before the first unit), a
                text that is empty or has nothing speakable; naming the turn.
            RuntimeError: called after the session's first unit.
        """
        if self.state.units_seen:
            raise RuntimeError(
                "schedule_turns: call it before the first unit of the session "
                f"({self.state.units_seen} units already taken in)"
            )
        parsed: list[tuple[float, str]] = []
        for i, turn in enumerate(turns):
            if hasattr(turn, "start") and hasattr(turn, "text"):
                start, text = turn.start, turn.text
            else:
                try:
                    start, text = turn
                except (TypeError, ValueError) as exc:
                    raise ValueError(
                        f"schedule_turns: turn {i} must be (start, text), got {turn!r}"
                    ) from exc
            if (
                isinstance(start, bool)
                or not isinstance(start, (int, float))
                or not math.isfinite(start)
                or start < 0
            ):
                raise ValueError(
                    f"schedule_turns: turn {i} starts at {start!r}: a start must be a finite "
                    "number of seconds >= 0 (the first unit begins at 0)"
                )
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"schedule_turns: turn {i} (start {start} s) has empty text")
            spoken = speakable(text)
            if not spoken:
                raise ValueError(
                    f"schedule_turns: turn {i} (start {start} s) has nothing speakable: {text!r}"
                )
            parsed.append((float(start), spoken))
        parsed.sort(key=lambda turn: turn[0])
        self._schedule = tuple(parsed)
        self.state.next_scheduled = 0

    #: Sub-step observations are taken as the unit's audio arrives (:meth:`hear`).
    hears_audio = True

    def hear(self, piece: PartialUnit) -> bool:
        """Take in the unit in progress as its audio arrives, one whole sub-step at a time.

        Each sub-step completed (except the unit's last, the boundary's) is run through
        perception, observed and given to the policy, exactly as :meth:`prefill` would have
        done with the whole unit; a ``YIELD`` there while the assistant speaks stops the turn
        at the sub-step's end (True: the caller flushes the speaker now, and the boundary
        yields). If it raises, the unit's ``prefill`` fails too (the loop then ends the turn
        and the streams restart).
        """
        started = time.perf_counter()
        hearing = self._hearing
        if hearing is not None and hearing.broken and hearing.start == piece.start_sample:
            return False
        try:
            return self._hear(piece)
        except Exception:
            if self._hearing is not None:
                self._hearing.broken = True
            raise
        finally:
            if self._hearing is not None:
                self._hearing.wall += time.perf_counter() - started

    def _hear(self, piece: PartialUnit) -> bool:
        if piece.sample_rate != SAMPLE_RATE:
            raise FrontendError(f"policy frontend: audio must be {SAMPLE_RATE} Hz mono")
        hearing = self._hearing
        if hearing is None or hearing.start != piece.start_sample:
            # (a unit heard in part and never prefilled was dropped: its streams just skip on)
            hearing = self._hearing = self._open_unit(piece.start_sample, piece.length)
        if piece.length != hearing.length:
            raise FrontendError(
                f"policy frontend: unit {piece.index} changed length "
                f"({hearing.length} -> {piece.length})"
            )
        if piece.end <= hearing.filled:
            return False
        if piece.offset > hearing.filled:
            raise FrontendError(
                f"policy frontend: unit {piece.index} heard with a gap "
                f"(samples {hearing.filled}..{piece.offset} missing)"
            )
        skip = hearing.filled - piece.offset
        hearing.audio[hearing.filled : piece.end] = piece.audio[skip:]
        hearing.filled = piece.end
        stopped = False
        last = self.substeps - 1
        while hearing.done < last and hearing.filled >= hearing.cuts[hearing.done + 1]:
            stopped |= self._substep(hearing, piece.index)
        return stopped

    def speak_now(self) -> UnitOutput | None:
        """Start the turn the policy took at the last sub-step heard, if its response can be
        voiced at once (:meth:`Responder.ready`; a reply still being worked out waits for a
        later sub-step or the boundary): the turn's first piece, playing from the end of the
        audio heard when the policy took it (where the caller starts the speaker). None
        otherwise. The boundary after it goes on with the turn.
        """
        hearing = self._hearing
        if hearing is None or hearing.start_at is None:
            return None
        at, hearing.start_at = hearing.start_at, None
        if self.state.turn is not None or self._stop_pending or hearing.broken:
            return None
        if not self._may_restart(at):
            return None
        if not self.state.backend:
            request = self._request()
            if request is None or not self.responder.ready(request):
                return None
        response = self._respond()
        if response is None:
            return None
        self._begin_response(response)
        self._began_early = response.kind
        return self._emit(at)

    def _open_unit(self, start: int, length: int) -> _Hearing:
        """Begin taking in the unit that starts at mic sample ``start``."""
        gap = start - self.state.mic_pos
        if gap < 0:
            raise FrontendError(
                f"policy frontend: a unit starts at sample {start}, before the end of the "
                f"previous one ({self.state.mic_pos})"
            )
        self.state.offset += gap  # dropped units: the streams skip them, the mic timeline does not
        self.state.mic_pos = start
        self.state.units_seen += 1
        return _Hearing(
            start=start,
            length=length,
            cuts=substep_cuts(length, self.substeps),
            audio=np.zeros(length, dtype=np.float32),
            prepared=tuple(self.state.user_texts),
        )

    def _substep(self, hearing: _Hearing, unit_index: int) -> bool:
        """Take in, observe and decide sub-step ``hearing.done``; True if it stopped the turn."""
        k = hearing.done
        a, b = hearing.cuts[k], hearing.cuts[k + 1]
        self._perception.take_in(hearing.audio[a:b], hearing.acc)
        obs = self._perception.observe(unit_index, k, self.substeps, hearing.acc)
        action = self.policy.decide(obs)
        if not isinstance(action, FloorAction):
            raise TypeError(
                f"{type(self.policy).__name__}.decide returned {action!r}, not a FloorAction"
            )
        if self.record_observations:
            self.state.observations.append(obs)
        hearing.done += 1
        self.state.last_obs = obs
        self.state.action = action
        stop = (
            action is FloorAction.YIELD
            and not obs.is_boundary
            and self.state.turn is not None
            and not self._stop_pending
        )
        # The caller stops or starts the speaker when the audio heard so far ends, which may
        # be past this sub-step's cut (audio comes in chunks): the turn's audio and the echo
        # canceller's reference must stop and start there too, to the sample, or the echo of
        # the next turn is misplaced against its reference and is not cancelled.
        now = hearing.start + hearing.filled
        if stop:  # the speaker stops now; the boundary yields
            self._stop_pending = True
            # The session parts learn of the yield now, before a final transcript of the same
            # unit is judged or answered (the speech stopped for is the assistant's to answer).
            self._give_up_turn(now)
        starts = action is FloorAction.START_SPEAKING and not obs.is_boundary
        hearing.start_at = now if starts and self.state.turn is None else None
        for part in self.session_parts:
            part.on_observation(self, obs)
        texts = tuple(self.state.user_texts)
        if texts and texts != hearing.prepared and self.state.turn is None:
            # a new final transcript: the reply is generated from now, not from the boundary
            request = self._request()  # (session parts may drop texts not said to us)
            hearing.prepared = tuple(self.state.user_texts)
            if request is not None:
                self.responder.prepare(request)
        return stop

    def prefill(self, unit: InputUnit) -> None:
        """Take in one unit: AEC, VAD, ASR per sub-step not heard yet; observe; ask the policy.

        If it raises, the loop records the failure and ends the turn for the frontend (a
        yield); the frontend's own turn is ended with it and its audio streams restart at the
        next unit, so both sides stay in step.
        """
        self.state.unit = None
        try:
            self._prefill(unit)
        except Exception:
            boundary = unit.start_sample + unit.audio.size
            self._hearing = None
            self._stop_pending = False
            self._abandon_turn(boundary)
            self._perception.restart(boundary)
            raise

    def _prefill(self, unit: InputUnit) -> None:
        started = time.perf_counter()
        if unit.sample_rate != SAMPLE_RATE:
            raise FrontendError(f"policy frontend: units must be {SAMPLE_RATE} Hz mono")
        hearing, self._hearing = self._hearing, None
        audio = np.asarray(unit.audio, dtype=np.float32)
        if hearing is not None and hearing.start == unit.start_sample:
            if hearing.broken:
                raise FrontendError(f"policy frontend: unit {unit.index} failed while it was heard")
            heard = hearing.filled
            if hearing.length != audio.size or not np.array_equal(
                hearing.audio[:heard], audio[:heard]
            ):
                raise FrontendError(
                    f"policy frontend: unit {unit.index} differs from the audio heard of it"
                )
        else:
            hearing = self._open_unit(unit.start_sample, audio.size)
        hearing.audio = audio
        self.state.unit = unit
        while hearing.done < self.substeps:
            if hearing.done == self.substeps - 1:  # texts come with the boundary
                for text in unit.texts:
                    self.state.backend.extend(
                        m.strip() for m in _BACKEND.findall(text) if m.strip()
                    )
            self._substep(hearing, unit.index)
        self.state.wall = hearing.wall + time.perf_counter() - started
        for part in self.session_parts:
            part.on_unit_taken_in(self, unit)

    def generate(self) -> UnitOutput:
        """Act on the policy's answer: start, continue or yield a turn, or listen."""
        unit = self.state.unit
        if unit is None:
            raise FrontendError("policy frontend: generate() called without a prefill() before")
        self.state.unit = None
        boundary = unit.start_sample + unit.audio.size  # mic samples
        try:
            return self._generate(unit, boundary)
        except Exception:
            self._abandon_turn(boundary)
            raise

    def _generate(self, unit: InputUnit, boundary: int) -> UnitOutput:
        started = time.perf_counter()
        action = self.state.action
        early, self._began_early = self._began_early, ""
        began = early
        if self._stop_pending:  # stopped mid-unit: the turn ends here with its yield
            self._stop_pending = False
            action = FloorAction.YIELD  # what was acted on (the boundary's answer came later)
            out = UnitOutput(Decision.LISTEN, end_of_turn=True)  # parts were told at the stop
        elif (due := self._due_scheduled(boundary / SAMPLE_RATE)) is not None:
            self._begin(due, forced=True, answers_user=True)
            began = "scheduled"
            out = self._emit(boundary)
        elif self.state.turn is not None:
            if action is FloorAction.YIELD:
                out = self._yield(boundary)
            else:
                out = self._emit(boundary)
        elif early:  # a turn begun since the last boundary, already played out
            out = UnitOutput(Decision.LISTEN)
        elif (
            action is FloorAction.START_SPEAKING
            and self._may_restart(boundary)
            and (response := self._respond()) is not None
        ):
            self._begin_response(response)
            began = response.kind
            out = self._emit(boundary)
        else:
            out = UnitOutput(Decision.LISTEN)
        self.state.mic_pos = boundary
        self.state.steps.append(
            FloorStep(
                unit.index,
                action,
                out.decision,
                out.end_of_turn,
                began,
                out.decision is Decision.LISTEN and out.end_of_turn,
                early=bool(early) and began == early,
            )
        )
        self.state.compute.append(self.state.wall + time.perf_counter() - started)
        return out

    def close(self) -> None:
        """Give the pooled VAD and echo canceller back (the frontend is unusable after)."""
        for finalizer in self._finalizers:
            finalizer()

    def _due_scheduled(self, boundary_s: float) -> str | None:
        due = None
        while (
            self.state.next_scheduled < len(self._schedule)
            and self._schedule[self.state.next_scheduled][0] <= boundary_s + _EPS
        ):
            due = self._schedule[self.state.next_scheduled][1]
            self.state.next_scheduled += 1
        return due

    def _request(self) -> UserRequest | None:
        """The user's speech since the assistant last took the floor (None if there is none,
        or a session part holds it back)."""
        if not all(part.admit_request(self) for part in self.session_parts):
            return None
        if not self.state.user_turn_speech or self.state.user_turn_start is None:
            return None
        end = self.state.last_voiced_end if self.state.last_voiced_end is not None else 0.0
        known = self.state.user_confidence
        sure = [known[t] for t in self.state.user_texts if t in known]
        return UserRequest(
            " ".join(self.state.user_texts),
            self.state.user_turn_start / SAMPLE_RATE,
            end / SAMPLE_RATE,
            self.state.user_turn_speech * FRAME_S,
            self.asr_enabled,
            self.state.user_turn_aside,
            min(sure) if sure else None,
        )

    def _respond(self) -> Response | None:
        backend = self.state.backend[0] if self.state.backend else None
        if self.state.user_turn_speech and self.state.user_turn_start is not None:
            self._perception.end_utterance()
        request = self._request()
        response = self.responder.respond(request, backend)
        if response is not None and response.kind == "backend":
            self.state.backend.popleft()
        return response

    def _begin_response(self, response: Response) -> None:
        """Start the turn that voices ``response`` (a backend reply leaves the user's newer
        speech waiting; anything else answers it)."""
        self._begin(
            response.text,
            forced=False,
            answers_user=response.kind != "backend",
            source=response.stream,
        )

    def _begin(self, text: str, *, forced: bool, answers_user: bool, source: Any = None) -> None:
        """Start a turn (or, while speaking, replace the rest of it) voicing ``text``.

        ``answers_user``: the turn answers what the user said so far, which is then forgotten
        (a backend reply does not: the user's newer speech still waits for its answer).
        ``source``: a reply stream whose phrases follow ``text`` as they are generated.
        """
        current = self.state.turn  # a scheduled turn continues the current one
        self.state.turn = self._player.start(text, forced=forced, source=source, current=current)
        if current is None:
            self.state.turn_overlap = 0
            for part in self.session_parts:
                part.on_turn_started(self)
        if not answers_user:
            return
        self.state.forget_user_turn()

    def _emit(self, boundary: int) -> UnitOutput:
        """The current turn's next piece, playing from mic sample ``boundary`` (or after
        what is still queued)."""
        turn = self.state.turn
        assert turn is not None
        text, audio, last = self._player.next_piece(turn)
        if audio.size:
            self._schedule_playback(boundary, audio, turn, text)
        if last:
            self.state.turn = None
            self._heard(turn, interrupted=False)
            for part in self.session_parts:
                part.on_turn_finished(self, turn)
        return UnitOutput(Decision.SPEAK, text=text, audio=audio, end_of_turn=last)

    def _heard(self, turn: Turn, *, interrupted: bool) -> None:
        """Tell the responder what was played of ``turn``."""
        self.responder.heard(turn.heard_text(), interrupted, turn.unheard_text())

    def _schedule_playback(self, boundary: int, audio: np.ndarray, turn: Turn, text: str) -> None:
        rate = self.output_sample_rate
        length = audio.size * SAMPLE_RATE / rate
        start = max(float(boundary), self.state.play_end)
        end = start + length
        visible = split_visible(text)[0].strip()
        if visible:
            self.state.said.append([start, end, visible])
        if self.state.intervals and abs(self.state.intervals[-1][1] - start) < 1.0:
            self.state.intervals[-1][1] = end
        else:
            self.state.intervals.append([start, end])
        if turn.intervals and abs(turn.intervals[-1][1] - start) < 1.0:
            turn.intervals[-1][1] = end
        else:
            turn.intervals.append([start, end])
        self.state.play_end = end
        if self._aec is not None:
            position = max(start - self.state.offset, self.state.ref_end)
            if position > self.state.ref_end + 1:
                self._aec.push_reference(audio, rate, math.ceil(position))
            else:
                self._aec.push_reference(audio, rate)
                position = self.state.ref_end
            self.state.ref_end = position + length

    def _yield(self, boundary: int) -> UnitOutput:
        """End the turn with no speech: the loop flushes the speaker at this boundary."""
        self._give_up_turn(boundary)
        return UnitOutput(Decision.LISTEN, end_of_turn=True)

    def _give_up_turn(self, position: int) -> None:
        """The yield: tell the session parts, then end the turn at mic sample ``position``."""
        for part in self.session_parts:
            part.on_turn_yielded(self)
        self._abandon_turn(position)
        self.state.stopped_at = float(position)

    def _may_restart(self, position: int) -> bool:
        """Whether a turn may start playing at mic sample ``position``: not within
        :data:`RESTART_GAP_S` of where the assistant last stopped for the user."""
        stopped = self.state.stopped_at
        return stopped is None or position - stopped >= RESTART_GAP_S * SAMPLE_RATE - _EPS

    def _abandon_turn(self, boundary: int) -> None:
        """Forget the current turn; its audio stops playing at ``boundary`` (the flush)."""
        if self.state.turn is None:
            return
        for interval in (*self.state.intervals, *self.state.turn.intervals, *self.state.said):
            interval[1] = min(interval[1], max(interval[0], float(boundary)))
        self.state.play_end = min(self.state.play_end, float(boundary))
        if self._aec is not None:  # the rest of the unit's audio was never played
            position = max(round(boundary - self.state.offset), 0)
            self._aec.cut_reference(position)
            self.state.ref_end = min(self.state.ref_end, float(position))
        turn, self.state.turn = self.state.turn, None
        if turn.source is not None:
            turn.source.cancel()
        self._heard(turn, interrupted=True)


def _warm_asr(model: str) -> WhisperAsr:
    """A recogniser that has run once (the first run is about twice as slow as later ones)."""
    from venus_ros.audio.asr import WhisperAsr

    asr = WhisperAsr(model, beam_size=FINAL_BEAM_SIZE)
    t = np.arange(SAMPLE_RATE // 2) / SAMPLE_RATE
    asr.transcribe((0.1 * np.sin(2 * np.pi * 220 * t)).astype(np.float32))
    return asr


# ---------------------------------------------------------------------------------------------
# Names for make_frontend
# ---------------------------------------------------------------------------------------------

_POLICIES: dict[str, Callable[[], FloorPolicy]] = {
    "vad-bargein": VadBargeIn,
    "never-yield": NeverYield,
}
#: Options every policy frontend takes: option -> (PolicyFrontend keyword, value).
FRONTEND_FLAGS: dict[str, tuple[str, bool]] = {
    "asr": ("asr", True),
    "noasr": ("asr", False),
    "aec": ("aec", True),
    "noaec": ("aec", False),
    "partials": ("asr_partials", True),
    "nopartials": ("asr_partials", False),
}


def parse_options(
    frontend: str,
    options: str,
    *,
    values: dict[str, Callable[[str], Any]] | None = None,
    flags: Sequence[str] = (),
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Read a policy frontend's ``OPTION[,OPTION...]``.

    Args:
        frontend: its name, for errors.
        options: the text after ``NAME:``.
        values: the frontend's own ``KEY=VALUE`` options, each with a converter that raises
            ValueError for a bad value.
        flags: the frontend's own bare options (set to True).

    Returns:
        The :class:`PolicyFrontend` keywords (:data:`FRONTEND_FLAGS`, ``tts=ENGINE``,
        ``substeps=N``) and the frontend's own options.

    Raises:
        FrontendError: an unknown option or a bad value, naming the options there are.
    """
    values = values or {}
    kwargs: dict[str, Any] = {}
    own: dict[str, Any] = {}
    for raw in filter(None, (o.strip() for o in options.split(","))):
        key, sep, value = raw.partition("=")
        try:
            if not sep and key in FRONTEND_FLAGS:
                keyword, flag = FRONTEND_FLAGS[key]
                kwargs[keyword] = flag
            elif not sep and key in flags:
                own[key] = True
            elif sep and key == "tts" and value:
                kwargs["tts"] = value
            elif sep and key == "substeps" and value.isdigit():
                kwargs["substeps"] = int(value)
            elif sep and key in values and value:
                own[key] = values[key](value)
            else:
                raise ValueError(raw)
        except ValueError:
            known = [*FRONTEND_FLAGS, *flags, "tts=ENGINE", "substeps=N"]
            known += [f"{k}=..." for k in values]
            raise FrontendError(
                f"frontend {frontend!r}: unknown option {raw!r}; options: {', '.join(known)}"
            ) from None
    if kwargs.get("asr_partials") and kwargs.get("asr") is False:
        raise FrontendError(f"frontend {frontend!r}: 'partials' needs ASR (drop 'noasr')")
    return kwargs, own


def make_policy_frontend(name: str, options: str = "") -> PolicyFrontend:
    """Build a baseline frontend from its name and ``OPTION[,OPTION...]``.

    Names: ``vad-bargein``, ``never-yield``. Options: ``asr``/``noasr`` (Whisper transcripts,
    on by default), ``aec``/``noaec`` (echo cancellation, off by default: turn it on where the
    microphone hears the speaker), ``partials``
    (partial transcripts every step), ``tts=ENGINE`` (``espeak`` by default, ``piper``,
    ``auto``), ``substeps=N``.

    Raises:
        FrontendError: an unknown name or option.
    """
    if name not in _POLICIES:
        raise FrontendError(f"unknown policy frontend {name!r}; choose one of {sorted(_POLICIES)}")
    kwargs, _ = parse_options(name, options)
    try:
        return PolicyFrontend(_POLICIES[name](), **kwargs)
    except ValueError as exc:
        raise FrontendError(f"frontend {name!r}: {exc}") from exc
