"""Perception of the user channel: echo cancellation, VAD, ASR and frame accounting.

:class:`Perception` runs pieces of the microphone signal (16 kHz, the unit timeline) through the
echo canceller (optional; the assistant's own output as reference), Silero VAD (one probability
per 32 ms frame) and the segment transcriber (optional; final transcripts of the utterances the
VAD cuts out, partial ones on request), accounts every completed frame (energy, pitch, whether
the assistant's audio was playing, user speech and overlap) and summarises the unit so far as a
:class:`FloorObservation` for the floor policy.

It holds the stream models (each frontend borrows its own VAD and echo canceller) and works on
the frontend's one per-session state object (:class:`~venus_ros.frontends.cascade.state.
SessionState`: positions, frame counters, the user's turn, the assistant's playback schedule),
which :meth:`Perception.bind` attaches after every ``prepare``. Transcripts lose the
stretches that are the assistant's own words heard back (:func:`~venus_ros.text.echo.
strip_echo` against what played while their audio was heard: an echo canceller converging, or
none where the microphone hears the speaker), so the recogniser's reading of the assistant's
voice is not taken for the user's words. The same pieces in the same
order always give the same observations: a frontend that hears a unit as its audio arrives and
one that takes the unit whole at its boundary cut it at the same sub-step points.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from venus_ros.audio.vad import FRAME_SAMPLES, SAMPLE_RATE
from venus_ros.core.frontend import FrontendError
from venus_ros.text.commands import command_of
from venus_ros.text.echo import strip_echo

if TYPE_CHECKING:
    from venus_ros.audio.aec import EchoCanceller
    from venus_ros.audio.asr import SegmentTranscriber, Transcript
    from venus_ros.audio.vad import SileroVad
    from venus_ros.frontends.cascade.state import SessionState

__all__ = [
    "FRAME_S",
    "FRAME_SAMPLES",
    "OVERLAP_PARTIAL_BUDGET_S",
    "OVERLAP_PARTIAL_INTERVAL_S",
    "OVERLAP_PARTIAL_LATE_INTERVAL_S",
    "OVERLAP_PARTIAL_LATE_S",
    "OVERLAP_PARTIAL_MIN_S",
    "OVERLAP_PARTIAL_WINDOW_S",
    "SAMPLE_RATE",
    "SILENCE_DB",
    "UNSURE_MAX_WORDS",
    "UNSURE_WORD_P",
    "FloorObservation",
    "Perception",
    "PerceptionError",
    "UnitAccount",
    "frame_pitch_hz",
    "substep_cuts",
]

FRAME_S = FRAME_SAMPLES / SAMPLE_RATE
"""Length of one VAD frame, in seconds (0.032)."""
SILENCE_DB = -120.0
"""Energy reported where there is none to measure (no frame, digital silence)."""
OVERLAP_PARTIAL_INTERVAL_S = 0.2
"""While the assistant speaks, partial transcripts of a new utterance come this often ..."""
OVERLAP_PARTIAL_MIN_S = 0.25
"""... from this much of it on ..."""
OVERLAP_PARTIAL_WINDOW_S = 1.2
"""... for its first this many seconds, ..."""
OVERLAP_PARTIAL_LATE_INTERVAL_S = 0.4
"""... then this often ..."""
OVERLAP_PARTIAL_LATE_S = 2.0
"""... up to this many seconds of it (a cut-in that opens with "Hang on," asks its question
after its first second: :func:`~venus_ros.text.commands.command_then_question`), then at the
transcriber's own rate: whether speech over the assistant is an interruption is read from its
first words ..."""
OVERLAP_PARTIAL_BUDGET_S = 0.4
"""... as long as the unit's recognition so far plus the latest partial's cost stays within
this many seconds; a partial that does not fit waits for the next sub-step (the next unit
starts a new budget), and the policy reads the latest partial meanwhile. A unit that has run
no recognition yet always may (on a machine where one partial costs more than the budget, one
per unit). Recognition is the unit's dominant cost (a tiny.en partial 0.07-0.15 s on 2 cores,
five sub-steps per unit), and the unit must leave room for a final transcript and the rest of
its work. At 0.25 s a unit ran two partials at most, and a command heard at the third sub-step
("Okay, stop." after its "Okay.", "Let me stop you there.") waited for the next unit; at 0.4 s
(round 28, training suite 1002640) interruption stop p90 went 1.17 -> 1.01 s plain and 1.36 ->
0.96 s through the echo path (12 cut-ins stopped for sooner, none later), while
``venus-ros bench frontend --minutes 10 --frontend cascade:aec`` gave p99 343-346 ms against
295-397 ms at 0.25 s over two runs each (the goal is 400 ms)."""
ECHO_MARGIN_S = 0.5
"""A transcript is compared with the assistant's words played from this long before its audio
began (the echo's delay through the loudspeaker, the room and the capture buffers) to its end."""
SAID_KEPT_S = 30.0
"""The assistant's words are kept this long after they played, for that comparison."""
UNSURE_WORD_P = 0.1
"""A reading of at most :data:`UNSURE_MAX_WORDS` words heard wholly over the assistant's own
audio, one of whose words the recogniser gave a probability below this, is taken for its echo
misread (:meth:`Perception.misheard_echo`) unless it is a command: the recogniser makes words of
what the canceller leaves of the assistant's voice ("Thank you." at 0.03-0.07 for its first word,
five times at one moment of one answer, and "Okay." / "three" at 0.06-0.08 as a reply began, on
training suites 1002645 and 1002647 through the echo path), and they were answered or merged
into the user's cut-in. The user's own short words read that unsure there were back-channels
("Okay" at 0.10, "And then." at 0.08) and one "Stop." (0.02), a command."""
UNSURE_MAX_WORDS = 2
"""See :data:`UNSURE_WORD_P`."""


class PerceptionError(FrontendError):
    """The perception streams fell out of step (the frontend restarts them)."""


def substep_cuts(length: int, substeps: int) -> list[int]:
    """Where a unit of ``length`` samples is cut into ``substeps`` pieces: ``substeps + 1``
    positions from 0 to ``length`` (the same wherever the unit's audio comes from)."""
    return [int(c) for c in np.linspace(0, length, substeps + 1).round().astype(int)]


@dataclass(frozen=True)
class FloorObservation:
    """What the floor policy knows at one step: the unit so far and the conversation state.

    A unit is observed in ``substeps`` equal pieces (one by default); the observation of
    piece ``k`` covers the unit from its start to the end of that piece, and the last one
    (``is_boundary``) covers the whole unit: the frontend acts on the policy's answer to it,
    and on a ``YIELD`` at an earlier piece while the assistant speaks (it stops there).

    Per-frame fields cover the 32 ms VAD frames completed in this unit so far, in order, the
    first starting at ``frames_start_s``. A frame belongs to the unit whose audio completed it.

    Attributes:
        unit_index: The unit's index.
        substep: Which piece of the unit this is, ``0 .. substeps - 1``.
        substeps: Pieces per unit.
        t: Session time at the end of the audio taken in so far (the boundary, at the last
            substep), in seconds.
        frames_start_s: Session time of the first frame's start (``t`` when there is none).
        frames_end_s: Session time of the newest frame's end: how far the VAD has heard
            (echo cancellation and framing make it lag ``t`` by up to ~50 ms).
        vad_probs: Silero speech probability per frame of the (echo-cancelled) user channel.
        frame_db: Energy of each frame, dBFS (mean square, floor ``SILENCE_DB``).
        assistant_frames: Per frame, whether the assistant's own audio was playing then (from
            the frontend's playback schedule; with ``end_of_turn`` a finished turn's last audio
            still plays into the next unit).
        vad_threshold: Probability at or above which a frame counts as user speech.
        user_speech_s: User speech in the unit so far (voiced frames x 32 ms).
        user_speech_db: Mean energy of those voiced frames, dBFS (``SILENCE_DB`` if none).
        overlap_s: User speech in the unit so far while the assistant's audio was playing.
        trailing_silence_s: Time from the end of the user's last voiced frame to
            ``frames_end_s`` (from the session start if the user has not spoken).
        user_speaking: The VAD's own hysteresis state (a ``start`` without its ``end`` yet:
            speech continues through short pauses; ends need 300 ms of silence).
        user_turn_speech_s: User speech since the assistant last took the floor (or since the
            session start): what a response would answer.
        user_text: Final transcripts of that speech, joined (empty without ASR).
        transcript: Partial transcript of the utterance in progress (only with
            ``asr_partials``: at boundaries, and at sub-steps while the assistant speaks; empty
            otherwise).
        assistant_speaking: The assistant holds the floor (a turn started and not ended at an
            earlier boundary).
        forced_turn: That turn was scheduled (:meth:`PolicyFrontend.schedule_turns`).
        assistant_spoken_s: Seconds of that turn's audio played by ``t``.
        assistant_remaining_s: Seconds of that turn's audio not played by ``t`` (the whole
            turn is synthesised when it starts, so this is exact).
        turn_overlap_s: User speech while the assistant's audio played, since the turn began.
        backend_pending: Backend replies received and not yet spoken.
        frame_f0: Per frame, the user channel's pitch estimate in Hz (autocorrelation,
            60-400 Hz; 0.0 where the frame is unvoiced or no periodicity was found). Empty
            where an observation is built by hand without it.
    """

    unit_index: int
    substep: int
    substeps: int
    t: float
    frames_start_s: float
    frames_end_s: float
    vad_probs: tuple[float, ...]
    frame_db: tuple[float, ...]
    assistant_frames: tuple[bool, ...]
    vad_threshold: float
    user_speech_s: float
    user_speech_db: float
    overlap_s: float
    trailing_silence_s: float
    user_speaking: bool
    user_turn_speech_s: float
    user_text: str
    transcript: str
    assistant_speaking: bool
    forced_turn: bool
    assistant_spoken_s: float
    assistant_remaining_s: float
    turn_overlap_s: float
    backend_pending: int
    frame_f0: tuple[float, ...] = ()

    @property
    def is_boundary(self) -> bool:
        """Whether this is the unit's last piece, the one the frontend acts on."""
        return self.substep == self.substeps - 1


@dataclass
class UnitAccount:
    """The frames of the unit in progress so far: what an observation summarises."""

    probs: list[float] = field(default_factory=list)
    dbs: list[float] = field(default_factory=list)
    playing: list[bool] = field(default_factory=list)
    f0: list[float] = field(default_factory=list)
    speech: int = 0
    speech_energy: float = 0.0
    overlap: int = 0
    frames_start: float | None = None
    asr_s: float = 0.0  # recognition run for this unit, in seconds of compute


class Perception:
    """AEC, VAD and ASR of the user channel, and the accounting of its frames.

    Args:
        vad: The voice activity detector (stream state; reset by :meth:`reset`).
        aec: The echo canceller, or None for an echo-free microphone.
        transcriber: The segment transcriber, or None without ASR.
        vad_threshold: Frame probability at or above which the user is speaking.
        asr_partials: Transcribe the utterance in progress at every boundary (rate-limited by
            the transcriber), and at every sub-step while the assistant speaks (see
            :data:`OVERLAP_PARTIAL_INTERVAL_S`).
        expected_over_turn: Phrases a final transcript of speech over the assistant's turn is
            weighed against (the floor policy's :attr:`~venus_ros.frontends.policy.FloorPolicy.
            expected_over_turn`; :attr:`~venus_ros.audio.asr.SegmentTranscriber.expect`).
    """

    def __init__(
        self,
        vad: SileroVad,
        aec: EchoCanceller | None = None,
        transcriber: SegmentTranscriber | None = None,
        *,
        vad_threshold: float = 0.5,
        asr_partials: bool = False,
        expected_over_turn: Sequence[str] = (),
    ) -> None:
        if not 0.0 < vad_threshold < 1.0:
            raise ValueError(f"vad_threshold: must be in (0, 1), got {vad_threshold}")
        if asr_partials and transcriber is None:
            raise ValueError("asr_partials: needs a transcriber")
        self._vad = vad
        self._aec = aec
        self._transcriber = transcriber
        self.vad_threshold = float(vad_threshold)
        self.asr_partials = bool(asr_partials)
        self.expected_over_turn = tuple(expected_over_turn)
        #: Echo cancellation delays the VAD's view of the microphone by this many samples.
        self.latency = aec.latency_samples if aec is not None else 0
        self._state: SessionState | None = None

    @property
    def state(self) -> SessionState:
        """The session state it works on (:meth:`bind`)."""
        if self._state is None:
            raise RuntimeError("perception: bind() a session state before taking audio in")
        return self._state

    def bind(self, state: SessionState) -> None:
        """Start a session on ``state``: the streams start over."""
        self.reset()
        self._state = state

    def reset(self) -> None:
        """Reset the streams (VAD, AEC, ASR) without touching the session state."""
        self._vad.reset()
        if self._aec is not None:
            self._aec.reset()
        if self._transcriber is not None:
            self._transcriber.reset()

    def take_in(self, x: np.ndarray, acc: UnitAccount) -> None:
        """Run one piece of the unit through AEC, VAD and ASR; account its frames."""
        y = self._aec.process(x) if self._aec is not None else x
        events = self._vad.process(y)
        if self._transcriber is not None:
            spent = self._transcriber.compute_s
            talked_over = self.state.turn is not None
            self._transcriber.expect = self.expected_over_turn if talked_over else ()
            self._take_finals(self._transcriber.feed(y, events))
            acc.asr_s += self._transcriber.compute_s - spent
        self.state.mic_pos += x.size
        buf = np.concatenate((self.state.frame_buf, y)) if self.state.frame_buf.size else y
        count = buf.size // FRAME_SAMPLES
        if not count:
            self.state.frame_buf = buf.copy()
            return
        probs = self._vad.probabilities[-count:]
        first = self.state.frames_done * FRAME_SAMPLES
        if len(probs) != count or probs[0][0] != first:
            raise PerceptionError(
                f"policy frontend: VAD frames out of step (expected {count} from sample {first}, "
                f"got {[s for s, _ in probs[:2]]}...)"
            )
        frames = buf[: count * FRAME_SAMPLES].reshape(count, FRAME_SAMPLES)
        power = np.mean(np.square(frames, dtype=np.float64), axis=1)
        dbs = np.maximum(10.0 * np.log10(power + 1e-12), SILENCE_DB)
        f0s = frame_pitch_hz(frames)
        shift = self.state.offset - self.latency
        for (start, p), db, f0 in zip(probs, dbs.tolist(), f0s.tolist(), strict=True):
            begin = start + shift  # mic samples
            end = begin + FRAME_SAMPLES
            playing = self.playing(begin + FRAME_SAMPLES / 2)
            voiced = p >= self.vad_threshold
            if acc.frames_start is None:
                acc.frames_start = begin
            acc.probs.append(p)
            acc.dbs.append(db)
            acc.playing.append(playing)
            acc.f0.append(f0 if voiced else 0.0)
            if voiced:
                acc.speech += 1
                acc.speech_energy += 10.0 ** (db / 10.0)
                self.state.last_voiced_end = end
                self.state.user_turn_speech += 1
                if self.state.user_turn_start is None:
                    self.state.user_turn_start = begin
                if playing:
                    acc.overlap += 1
                    if self.state.turn is not None:
                        self.state.turn_overlap += 1
            self.state.frames_end = end
        self.state.frames_done += count
        self.state.frame_buf = buf[count * FRAME_SAMPLES :].copy()

    @property
    def in_utterance(self) -> bool:
        """Whether the recogniser has an utterance open (False without one)."""
        return self._transcriber is not None and self._transcriber.in_utterance

    def end_utterance(self) -> None:
        """End the utterance in progress now and take in its final transcript (the assistant
        takes the turn: the utterance's later VAD end is ignored)."""
        if self._transcriber is not None and self._transcriber.in_utterance:
            self._take_finals(self._transcriber.flush())

    def _take_finals(self, transcripts: Iterable[Transcript]) -> None:
        """Add the user's words of each final transcript to the user's turn, with the
        recogniser's confidence in them; a turn whose words were all the assistant's own voice
        is no turn of the user's."""
        for transcript in transcripts:
            if transcript.kind != "final" or not transcript.text:
                continue
            text = self.users_words(transcript)
            if text:
                self.state.user_texts.append(text)
                if transcript.words:
                    probabilities = [w.probability for w in transcript.words]
                    self.state.user_confidence[text] = sum(probabilities) / len(probabilities)
            elif not self.state.user_texts:
                self.state.forget_user_turn()

    def misheard_echo(self, transcript: Transcript) -> bool:
        """Whether ``transcript`` is most likely the assistant's own voice misread: it was heard
        wholly while the assistant's audio played, it has at most :data:`UNSURE_MAX_WORDS`
        words, one of them below :data:`UNSURE_WORD_P`, and it is no command to stop or wait
        (:func:`~venus_ros.text.commands.command_of`)."""
        words = transcript.words
        if not words or len(words) > UNSURE_MAX_WORDS:
            return False
        if min(w.probability for w in words) >= UNSURE_WORD_P:
            return False
        start, end = self._mic_span(transcript)
        if not (self.playing(start) and self.playing(end - 1)):
            return False
        return command_of(transcript.text) is None

    def users_words(self, transcript: Transcript) -> str:
        """``transcript``'s text without the assistant's own words heard back: those played
        from :data:`ECHO_MARGIN_S` before its audio began to its end; nothing when it is the
        assistant's own voice misread (:meth:`misheard_echo`)."""
        if self.misheard_echo(transcript):
            return ""
        if not transcript.text or not self.state.said:
            return transcript.text
        start, end = self._mic_span(transcript)
        self._forget_ended(self.state.said, SAID_KEPT_S)
        played = " ".join(
            text
            for begin, stop, text in self.state.said
            if begin < min(end, stop) and stop > start - ECHO_MARGIN_S * SAMPLE_RATE
        )
        return strip_echo(transcript.text, played)

    def _mic_span(self, transcript: Transcript) -> tuple[float, float]:
        """Microphone samples ``[start, end)`` of ``transcript``'s audio."""
        start = transcript.start * SAMPLE_RATE + self.state.offset - self.latency
        return start, start + transcript.audio_s * SAMPLE_RATE

    def playing(self, mic_sample: float) -> bool:
        """Whether the assistant's audio plays at microphone sample ``mic_sample``."""
        self._forget_ended(self.state.intervals, 4.0)
        return any(start <= mic_sample < end for start, end in self.state.intervals)

    def _forget_ended(self, entries: deque[list[Any]], kept_s: float) -> None:
        """Drop the ``[start, end, ...]`` entries, oldest first, that ended more than
        ``kept_s`` before the latest microphone sample."""
        while entries and entries[0][1] < self.state.mic_pos - kept_s * SAMPLE_RATE:
            entries.popleft()

    def observe(
        self, unit_index: int, substep: int, substeps: int, acc: UnitAccount
    ) -> FloorObservation:
        """The observation of the unit so far (``acc``), at piece ``substep`` of ``substeps``."""
        t = self.state.mic_pos / SAMPLE_RATE
        frames_end = self.state.frames_end / SAMPLE_RATE
        if self.state.last_voiced_end is None:
            silence = max(frames_end, 0.0)
        else:
            silence = max(frames_end - self.state.last_voiced_end / SAMPLE_RATE, 0.0)
        speech_db = (
            max(10.0 * math.log10(acc.speech_energy / acc.speech + 1e-12), SILENCE_DB)
            if acc.speech
            else SILENCE_DB
        )
        transcript = ""
        if self.asr_partials and self._transcriber is not None:
            asr = self._transcriber
            partial = None
            spent = asr.compute_s
            if self.state.turn is not None and 0.0 < asr.open_s <= OVERLAP_PARTIAL_LATE_S:
                # talked over: the words decide whether to stop, so they are wanted sooner
                early = asr.open_s <= OVERLAP_PARTIAL_WINDOW_S
                partial = asr.partial(
                    interval_s=(
                        OVERLAP_PARTIAL_INTERVAL_S if early else OVERLAP_PARTIAL_LATE_INTERVAL_S
                    ),
                    min_s=OVERLAP_PARTIAL_MIN_S,
                    compute=acc.asr_s <= 0.0
                    or acc.asr_s + asr.partial_cost_s <= OVERLAP_PARTIAL_BUDGET_S,
                )
            elif substep == substeps - 1:  # otherwise at the boundary, at the transcriber's rate
                partial = asr.partial()
            acc.asr_s += asr.compute_s - spent
            transcript = self.users_words(partial) if partial is not None else ""
        turn = self.state.turn
        spoken = remaining = 0.0
        if turn is not None:
            played = sum(max(0.0, min(e, self.state.mic_pos) - s) for s, e in turn.intervals)
            spoken = played / SAMPLE_RATE
            remaining = max(turn.total16 - played, 0.0) / SAMPLE_RATE
        return FloorObservation(
            unit_index=unit_index,
            substep=substep,
            substeps=substeps,
            t=t,
            frames_start_s=(acc.frames_start / SAMPLE_RATE) if acc.frames_start is not None else t,
            frames_end_s=frames_end,
            vad_probs=tuple(acc.probs),
            frame_db=tuple(acc.dbs),
            assistant_frames=tuple(acc.playing),
            vad_threshold=self.vad_threshold,
            user_speech_s=acc.speech * FRAME_S,
            user_speech_db=speech_db,
            overlap_s=acc.overlap * FRAME_S,
            trailing_silence_s=silence,
            user_speaking=self._vad.speaking,
            user_turn_speech_s=self.state.user_turn_speech * FRAME_S,
            user_text=" ".join(self.state.user_texts),
            transcript=transcript,
            assistant_speaking=turn is not None,
            forced_turn=turn is not None and turn.forced,
            assistant_spoken_s=spoken,
            assistant_remaining_s=remaining,
            turn_overlap_s=self.state.turn_overlap * FRAME_S if turn is not None else 0.0,
            backend_pending=len(self.state.backend),
            frame_f0=tuple(acc.f0),
        )

    def restart(self, boundary: int) -> None:
        """Start AEC, VAD and ASR over from mic sample ``boundary`` (after a failure)."""
        self.reset()
        self.state.frame_buf = np.zeros(0, dtype=np.float32)
        self.state.frames_done = 0
        self.state.offset = boundary
        self.state.mic_pos = boundary
        self.state.ref_end = 0.0


def frame_pitch_hz(
    frames: np.ndarray,
    rate: int = SAMPLE_RATE,
    fmin: float = 60.0,
    fmax: float = 400.0,
    min_clarity: float = 0.3,
) -> np.ndarray:
    """Pitch of each frame (rows of ``frames``) by normalised autocorrelation, in Hz.

    The autocorrelation (via FFT, normalised by overlap length) is searched between the lags
    of ``fmax`` and ``fmin`` for the shortest-lag local peak within 85% of the highest one
    (so sub-harmonics are not chosen); a frame whose peak is below ``min_clarity`` of the
    zero-lag value (aperiodic or silent) gets 0.0.

    Args:
        frames: ``[n, length]`` float samples.
        rate: Sample rate in Hz.
        fmin: Lowest pitch searched, Hz.
        fmax: Highest pitch searched, Hz.
        min_clarity: Least normalised autocorrelation peak that counts as voiced.

    Returns:
        float64 ``[n]`` pitch in Hz (0.0 for unvoiced frames).
    """
    frames = np.asarray(frames, dtype=np.float64)
    if frames.ndim != 2 or frames.shape[0] == 0:
        return np.zeros(frames.shape[0] if frames.ndim == 2 else 0)
    length = frames.shape[1]
    lo = max(1, int(rate / fmax))
    hi = min(length - 2, math.ceil(rate / fmin))
    if hi <= lo:
        return np.zeros(frames.shape[0])
    x = frames - frames.mean(axis=1, keepdims=True)
    spec = np.fft.rfft(x, n=2 * length, axis=1)
    ac = np.fft.irfft(spec.real**2 + spec.imag**2, axis=1)[:, :length]
    energy = ac[:, 0]
    # unbiased: divide by the overlap length so long lags are not penalised
    norm = ac[:, lo - 1 : hi + 2] / (length - np.arange(lo - 1, hi + 2)) * length
    inner = norm[:, 1:-1]
    local = (inner >= norm[:, :-2]) & (inner >= norm[:, 2:])
    # the shortest lag whose local peak comes close to the best one (avoids sub-harmonics)
    best = np.max(np.where(local, inner, -np.inf), axis=1, keepdims=True)
    lag = np.argmax(local & (inner >= 0.85 * best), axis=1)
    peak = inner[np.arange(len(lag)), lag]
    clarity = np.where(energy > 1e-10, peak / np.maximum(energy, 1e-12), 0.0)
    f0 = rate / (lag + lo)
    return np.where(clarity >= min_clarity, f0, 0.0)
