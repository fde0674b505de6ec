"""Acoustic echo cancellation with the played assistant audio as reference. No ROS.

The microphone hears the robot's own speech. :class:`EchoCanceller` removes it, using as
reference exactly what the speaker played, so that the assistant neither transcribes nor
interrupts itself, while the user's own voice reaches VAD and ASR as it would without echo
(the downstream models were trained on echo-free audio).

Two engines (``engine=``):

* ``"numpy"`` (default; numpy only, here): in 10 ms frames (160 samples),

  1. *delay estimation*: smoothed cross-spectra of the mic with the reference at each lag of
     10 ms up to ``max_delay_ms`` (default 500); the lag of highest summed coherence, confirmed
     twice (every 100 ms), places the adaptive filter's window 20 ms before it, and the filter
     taps are moved with the window so that nothing re-converges; while double talk is
     detected (step 3) a lag that wins moves a known delay only once it has won ten times in a
     row (a second): a user louder than the echo swamps the cross-spectra, and the lags they
     point to moved the window a filter's length away, wiping both filters;
  2. *linear cancellation*: a partitioned-block frequency-domain adaptive filter (overlap-save,
     FFT 320, ``filter_ms`` long, default 160 ms after the delay) on pre-emphasised signals
     (``1 - 0.9 z^-1``, whiter than speech: faster convergence), normalised per bin by the
     reference power in the window plus 0.3 times its mean over bins (regularisation that
     keeps weak bins stable). Two copies (two-path): a *background* filter adapts, the
     *foreground* filter produces the output and takes the background's taps only when it has
     cancelled 1.5 dB better than the foreground, and 3 dB better than nothing, for three
     frames in a row; a background 6 dB worse for 250 ms is pulled back;
  3. *double-talk-aware adaptation*: the share of the mic's power that the foreground's echo
     estimate explains (normalised cross-correlation) is tracked against its recent peak
     (decaying 4 dB/s); a drop below 0.3 of it means the user is talking, and for the next
     100 ms the background adapts at 5% of its step, so that double talk does not drag the
     filter off the echo path; not before the foreground has once cancelled 6 dB, and again
     after a delay move wipes the filters (the share of a filter still converging swings on its
     own: slowed by it, the first second of some sentences leaked through as words, and a
     wiped filter took seconds to converge again);
  4. *residual echo suppression* (a post-filter) on a 20 ms sqrt-Hann analysis, hop 10 ms:
     where the cancelled signal carries more energy than the mic (a reference that was not
     played, a filter not yet converged) the mic is kept; the residual echo is estimated per
     band (10 bands) as the larger of two leakages times the echo estimate's power and times
     the delayed reference's power, each leakage the lowest output-to-estimate power ratio
     (200 ms smoothing) seen where that estimate is strong (minimum statistics: the user's
     voice only raises the ratio), rising 2 dB/s, and taken as 1 over the first 500 ms of
     reference (the echo comes after its reference; until the delay is confirmed every lag up
     to ``max_delay_ms`` counts as the delayed reference): a session's first half second of
     assistant speech is suppressed whole, the user's voice with it; gain
     ``max(floor, 1 - over * residual / output)`` per bin (``over_suppress`` 12,
     ``suppress_floor_db`` -40), ``over`` a third of that while the double-talk detector
     (step 3) holds, once a second of reference has played: the user's voice masks what residue
     is left, and over-subtraction ate into it (through a robot-like room path, Whisper's word
     error rate on the user under double talk 46 -> 39 %; the first second is left at full
     strength, where a converging filter's swings read as double talk and the residue leaked).
     No high-pass, no comfort noise: where there is no echo the mic passes unchanged.

  When no reference has reached the filters' window for a while (``max_delay_ms`` plus
  ``filter_ms`` plus 20 ms of exact zeros), the mic passes through without any FFT (the
  overlap-add at unit gain; the filters and leakage estimates are kept for the next playback).
  ``out[n]`` is the mic sample ``n - 320``: one frame of framing plus one of overlap-add.
  Echo paths longer than ``filter_ms`` after the delay leave their tail to the suppressor.
* ``"webrtc"``: WebRTC's audio processing module (APM) with its echo canceller, AEC3 (linear
  adaptive filter, delay estimator, residual echo suppressor), as built into the ``livekit``
  package's native library (``livekit.rtc.AudioProcessingModule``; Apache-2.0, WebRTC itself
  BSD-3-Clause; prebuilt wheels for Linux x86_64 and aarch64; the native library also carries
  the rest of libwebrtc, including Chromium's LGPL build of FFmpeg, listed in the wheel's
  LICENSE.md). Only echo cancellation is enabled: no noise suppression, no gain control.
  ``livekit`` is imported when a canceller with this engine is built, never at module import;
  loading it costs ~0.3 s and ~45 MB of RSS. Its suppressor attenuates the user heavily under
  double talk (below), and ``livekit`` exposes no AEC3 tuning; kept for comparison.

Timeline and alignment (all positions in samples at 16 kHz):

* The *mic timeline* counts the samples given to :meth:`EchoCanceller.process` since the
  canceller was built or :meth:`EchoCanceller.reset`. The canceller works in 10 ms frames;
  frame ``k`` covers mic samples ``[160 k, 160 k + 160)`` and is processed together with the
  reference samples at the same positions.
* A reference sample at position ``p`` means: the speaker played it when the microphone was
  capturing mic sample ``p`` (as far as the caller knows: the speaker's acknowledgement time
  mapped onto the mic's sample clock). AEC3 estimates the rest of the delay (sound card
  buffers, air, the room), measured here from 0 up to about 500 ms (560 ms failed). The
  reference may therefore be *early* by up to ~500 ms, never late: the echo must come after
  its reference on the mic timeline.
* :meth:`EchoCanceller.push_reference` places samples at ``position`` (a sample index on the
  mic timeline, at 16 kHz whatever the reference's own rate), or right after the previous
  reference when ``position`` is None. Feed the reference exactly as played: every played
  sample, back to back. Give a position only when playback (re)starts after an idle gap or a
  flush; within a stretch of back-to-back playback pass None, so that timing jitter cannot
  insert gaps or overlaps. Positions between stretches are silence (zeros). A position that
  overlaps reference already given raises. Alternatively feed one continuous reference stream
  (zeros while idle) from mic sample 0 on and never pass a position. When the speaker is
  flushed, :meth:`EchoCanceller.cut_reference` drops the reference given beyond the flush.
* The reference for a frame must be pushed before that frame is processed. Reference that
  arrives for a frame already processed is dropped and counted
  (:attr:`AecStats.late_reference_samples`); a frame whose reference has not arrived is
  processed against silence, so its echo is not removed. In a graph the speaker acknowledges
  played audio before the sound reaches the air, and the microphone delivers a chunk only after
  capturing it, so processing mic chunks as they arrive and pushing acknowledged audio as it
  arrives keeps the reference ahead; :attr:`EchoCanceller.reference_end` tells how far it
  reaches.
* A reference at another rate is resampled with soxr in streaming mode, quality ``"QQ"`` by
  default: it emits within 0.1 ms of its input for 24 and 48 kHz (5.5 ms for 22.05 kHz),
  where the ``"HQ"`` filter holds back up to 40 ms, which the reference would have to lead the
  microphone by; the measured ERLE is the same within 2 dB for all qualities. Samples still
  inside the resampler when playback stops are emitted by :meth:`flush_reference`, which
  :meth:`push_reference` also does itself on a gap, a position jump or a rate change.

Output: :meth:`EchoCanceller.process` returns exactly as many samples as it is given.
``out[n]`` is the echo-cancelled mic sample ``n - latency_samples`` (zeros before the start):
320 (20 ms) with the numpy engine; with ``"webrtc"`` one frame (160 samples) of framing plus
the APM's own 128-sample (8 ms) delay, 288 (18 ms). Any chunking of the same input gives the
same output as one call with all of it (both engines are deterministic given the same frames).
With no reference the microphone passes through unchanged apart from that delay (numpy: exactly,
to float rounding; webrtc: through the APM's fixed high-pass filter, which AEC3 enforces: it
removes DC and shifts the phase below ~500 Hz).

Double talk (webrtc engine): AEC3's residual echo suppressor attenuates the user while the
assistant's echo is loud. Measured on espeak-ng voices (male assistant, female user) through a
0.3 s synthetic room, echo and user both at -6 dB, delays 20-200 ms: during double talk the
output correlates 0.58-0.77 with the user alone (as the canceller passes it) and carries 3.6-6.2
dB less energy; echo alone is reduced by about 42 dB once converged (25-33 dB over the first 2
s); after the assistant stops the user passes unchanged (correlation 1.000). The user's words
survive double talk, but quieter and with gaps: 11-37% of the 100 ms stretches where the user
speaks are suppressed by 20 dB or more (the median stretch by 3-17 dB).
``livekit`` exposes no AEC3 tuning (its suppressor is the stock one). The numpy engine in the
same setting: correlation 0.991-0.996, 0.2-0.4 dB less energy, every 100 ms stretch kept within
20 dB; echo alone reduced by 32-38 dB after 2 s (28-39 dB over the first 2 s).

Measured against the clean user channel (``scripts/aec_measure.py``; 30 train-split samples,
interruption/backchannel/other-directed, the assistant's turns spoken by espeak-ng, echo as
``venus-ros eval run --echo`` makes it: 60 ms, -12 dB), numpy vs webrtc:

=========================================================  =========  =========
figure                                                     numpy      webrtc
=========================================================  =========  =========
ERLE once converged (median over samples)                  37.6 dB    59.7 dB
residual level, user silent (p90 of 10 ms frames)          -72 dBFS   -91 dBFS
VAD speech in the residue (after the first second)         1.3%       0.7%
VAD speech in the residue (first second of echo)           1.6%       0.0%
VAD misses of the user under double talk                   0.8%       7.4%
mean abs VAD probability error under double talk           0.019      0.077
user-to-distortion ratio under double talk                 19.0 dB    1.5 dB
Whisper tiny.en WER of the user's turns (clean: 29.9%)     33.3%      59.2%
=========================================================  =========  =========

In a robot-like room instead (``--condition room``: 0.25 s synthetic room, 30 ms, -6 dB, a
softly saturating speaker), numpy vs webrtc: ERLE 30.7 vs 44.3 dB, VAD speech in the residue
1.5% vs 0.5% (first second 2.0% vs 0%), VAD misses under double talk 2.1% vs 22.8%, user SDR
13.2 vs 1.1 dB, WER 42.2% vs 82.3%.

Input handling: mic and reference are mono (1-D or ``(n, 1)``), float in [-1, 1] or int16
(scaled by 1/32768); values beyond full scale are clipped.
Stereo, other dtypes, NaN/inf, a wrong rate or a bad position raise
:class:`venus_ros.core.units.InputError` (a ``ValueError``) naming the field:
``audio.samples``/``audio.dtype``/``audio.channels`` for the mic,
``reference.samples``/``reference.dtype``/``reference.channels``/``reference.sample_rate``/
``reference.position`` for the reference. Nothing changes state on a rejected call.

Real-time accounting: :attr:`EchoCanceller.meter` (``ComputeMeter("aec")``) charges the engine's
work in :meth:`process` against the mic audio processed, and the reference resampling against no
audio, so its RTF is the canceller's whole cost per second of mic audio: numpy measured
0.022-0.028 CPU (0.02-0.06 wall on 2 busy cores), ~0.25 ms per 10 ms frame; webrtc 0.011-0.013
(CPU 0.013-0.014 with a 24 kHz reference) on 2 cores. Both run in the calling thread;
``livekit``'s runtime starts a few idle helper threads when first loaded.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from venus_ros.audio.meter import ComputeMeter
from venus_ros.core.units import InputError

__all__ = [
    "APM_LATENCY_SAMPLES",
    "FRAME_SAMPLES",
    "SAMPLE_RATE",
    "AecBackendMissing",
    "AecStats",
    "EchoCanceller",
]

SAMPLE_RATE = 16000
"""The canceller's rate (the mic's), Hz."""
FRAME_MS = 10
"""The APM's frame length, ms."""
FRAME_SAMPLES = SAMPLE_RATE * FRAME_MS // 1000
"""Samples per frame (160)."""
APM_LATENCY_SAMPLES = 128
"""Delay of the APM's capture path with AEC3 on at 16 kHz (measured; checked by the tests)."""
REFERENCE_RATES = (8000, 192000)
"""Accepted reference rates, Hz (inclusive)."""
RESAMPLE_QUALITIES = ("QQ", "LQ", "MQ", "HQ", "VHQ")
ENGINES = ("numpy", "webrtc")

_INT16_SCALE = 32768.0
_BACKEND_INSTALL = "pip install 'livekit>=1.2,<2'"


class AecBackendMissing(ImportError):
    """The package that carries the echo canceller (``livekit``) is not installed."""

    def __init__(self, detail: str = "") -> None:
        message = (
            f"echo cancellation needs the 'livekit' package; install it with: {_BACKEND_INSTALL}"
        )
        super().__init__(f"{message} ({detail})" if detail else message)
        self.package = "livekit"
        self.install = _BACKEND_INSTALL


@dataclass(frozen=True)
class AecStats:
    """Counters since the last reset.

    Attributes:
        frames: 10 ms mic frames processed.
        reference_frames: frames processed with a non-silent reference.
        late_reference_samples: reference samples (at 16 kHz) dropped because the mic frames at
            their positions had already been processed.
        reference_end: mic-timeline position just past the last reference sample emitted.
        mic_samples: mic samples received.
    """

    frames: int
    reference_frames: int
    late_reference_samples: int
    reference_end: int
    mic_samples: int


def _load_apm() -> tuple[Any, Any]:
    try:
        from livekit import rtc
        from livekit.rtc.apm import AudioProcessingModule
    except ImportError as exc:
        raise AecBackendMissing(str(exc)) from exc
    return rtc, AudioProcessingModule


def _mono_samples(samples: Any, prefix: str) -> np.ndarray:
    """Validated mono float32 samples clipped to [-1, 1]; raises InputError naming the field."""
    array = np.asarray(samples)
    if array.ndim == 2 and array.shape[1] == 1:
        array = array[:, 0]
    if array.ndim != 1:
        raise InputError(
            f"{prefix}.channels", f"expected mono samples (1-D or (n, 1)), got shape {array.shape}"
        )
    if array.dtype == np.int16:
        return (array.astype(np.float32) / _INT16_SCALE).astype(np.float32)
    if not np.issubdtype(array.dtype, np.floating):
        raise InputError(
            f"{prefix}.dtype", f"expected float samples in [-1, 1] or int16, got {array.dtype}"
        )
    if not np.all(np.isfinite(array)):
        raise InputError(f"{prefix}.samples", "contains NaN or infinite samples")
    return np.clip(array, -1.0, 1.0).astype(np.float32)


class _Segment:
    """One stretch of back-to-back reference at one rate, resampled in streaming mode."""

    def __init__(self, start: int, rate: int, quality: str) -> None:
        self.start = start
        self.rate = rate
        self.consumed = 0  # input samples at ``rate``
        self.emitted = 0  # output samples at 16 kHz
        self.stream: Any = None
        if rate != SAMPLE_RATE:
            import soxr

            self.stream = soxr.ResampleStream(
                rate, SAMPLE_RATE, 1, dtype="float32", quality=quality
            )

    @property
    def expected_end(self) -> int:
        """Mic-timeline position just past this segment's input so far."""
        return self.start + round(self.consumed * SAMPLE_RATE / self.rate)

    def feed(self, samples: np.ndarray) -> np.ndarray:
        self.consumed += samples.size
        if self.stream is None:
            return samples
        return np.asarray(self.stream.resample_chunk(samples), dtype=np.float32)

    def finish(self) -> np.ndarray:
        if self.stream is None:
            return np.zeros(0, np.float32)
        tail = self.stream.resample_chunk(np.zeros(0, np.float32), last=True)
        return np.asarray(tail, dtype=np.float32)


class EchoCanceller:
    """Streaming echo canceller for 16 kHz mono mic audio; see the module notes.

    Args:
        sample_rate: the mic's rate; must be 16000.
        frame_ms: the frame length; must be 10 (the APM's fixed frame).
        resample_quality: soxr quality for references at other rates (``"QQ"`` .. ``"VHQ"``).
        max_reference_ahead_s: a reference position further than this beyond the mic is
            rejected (it would fill that much silence; a unit mistake, usually).
        engine: ``"numpy"`` (default) or ``"webrtc"`` (AEC3, needs ``livekit``).
        filter_ms: numpy engine: the adaptive filter's span after the estimated delay.
        max_delay_ms: numpy engine: the longest echo delay looked for.
        step: numpy engine: the adaptive filter's normalised step size, (0, 1].
        suppress_floor_db: numpy engine: the suppressor's lowest gain, -80..0 dB.
        over_suppress: numpy engine: the suppressor's over-subtraction factor, 0..100
            (0: no residual echo suppression; a third of it while double talk is detected).

    Raises:
        ValueError: for an unsupported rate, frame length, quality, limit or engine setting.
        AecBackendMissing: if the webrtc engine is asked for and ``livekit`` is not installed.
    """

    def __init__(
        self,
        sample_rate: int = SAMPLE_RATE,
        frame_ms: int = FRAME_MS,
        *,
        resample_quality: str = "QQ",
        max_reference_ahead_s: float = 60.0,
        engine: str = "numpy",
        filter_ms: int = 160,
        max_delay_ms: int = 500,
        step: float = 1.0,
        suppress_floor_db: float = -40.0,
        over_suppress: float = 12.0,
    ) -> None:
        if sample_rate != SAMPLE_RATE:
            raise InputError(
                "audio.sample_rate",
                f"the echo canceller runs at {SAMPLE_RATE} Hz, got {sample_rate}: resample the "
                "mic first",
            )
        if frame_ms != FRAME_MS:
            raise ValueError(f"frame_ms must be {FRAME_MS} (the APM's frame), got {frame_ms}")
        if resample_quality not in RESAMPLE_QUALITIES:
            raise ValueError(
                f"resample_quality must be one of {RESAMPLE_QUALITIES}, got {resample_quality!r}"
            )
        if not max_reference_ahead_s > 0:
            raise ValueError(f"max_reference_ahead_s must be > 0, got {max_reference_ahead_s}")
        self.sample_rate = sample_rate
        self.frame_ms = frame_ms
        self.resample_quality = resample_quality
        self.max_reference_ahead = round(max_reference_ahead_s * SAMPLE_RATE)
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
        if not 10 <= filter_ms <= 2000 or filter_ms % FRAME_MS:
            raise ValueError(f"filter_ms must be a multiple of 10 in 10..2000, got {filter_ms}")
        if not 0 <= max_delay_ms <= 2000 or max_delay_ms % FRAME_MS:
            raise ValueError(
                f"max_delay_ms must be a multiple of 10 in 0..2000, got {max_delay_ms}"
            )
        if not 0.0 < step <= 1.0:
            raise ValueError(f"step must be in (0, 1], got {step}")
        if not -80.0 <= suppress_floor_db <= 0.0:
            raise ValueError(f"suppress_floor_db must be in -80..0, got {suppress_floor_db}")
        if not 0.0 <= over_suppress <= 100.0:
            raise ValueError(f"over_suppress must be in 0..100, got {over_suppress}")
        self.engine = engine
        self.filter_ms = int(filter_ms)
        self.max_delay_ms = int(max_delay_ms)
        self.step = float(step)
        self.suppress_floor_db = float(suppress_floor_db)
        self.over_suppress = float(over_suppress)
        self._rtc: Any = None
        self._apm_type: Any = None
        if engine == "webrtc":
            self._rtc, self._apm_type = _load_apm()
        self._meter = ComputeMeter("aec")
        self._lock = threading.Lock()
        # Frame buffers shared with the native library (processed in place).
        self._ref_bytes = bytearray(FRAME_SAMPLES * 2)
        self._mic_bytes = bytearray(FRAME_SAMPLES * 2)
        self._ref_view = np.frombuffer(self._ref_bytes, dtype=np.int16)
        self._mic_view = np.frombuffer(self._mic_bytes, dtype=np.int16)
        if self._rtc is not None:
            self._ref_frame = self._rtc.AudioFrame(self._ref_bytes, SAMPLE_RATE, 1, FRAME_SAMPLES)
            self._mic_frame = self._rtc.AudioFrame(self._mic_bytes, SAMPLE_RATE, 1, FRAME_SAMPLES)
        self._reset_locked()

    # -- properties ---------------------------------------------------------------------------

    @property
    def meter(self) -> ComputeMeter:
        """Compute spent per second of mic audio (``meter.reading().rtf``)."""
        return self._meter

    @property
    def latency_samples(self) -> int:
        """``out[n]`` of :meth:`process` is the cancelled mic sample ``n - latency_samples``."""
        if self.engine == "webrtc":
            return FRAME_SAMPLES + APM_LATENCY_SAMPLES
        return 2 * FRAME_SAMPLES

    @property
    def frontier(self) -> int:
        """Mic-timeline position up to which frames have been processed (a multiple of 160)."""
        with self._lock:
            return self._frontier

    @property
    def reference_end(self) -> int:
        """Mic-timeline position just past the last reference sample emitted so far."""
        with self._lock:
            return self._ref_end

    @property
    def stats(self) -> AecStats:
        """Counters since the last reset."""
        with self._lock:
            return AecStats(
                frames=self._frames,
                reference_frames=self._reference_frames,
                late_reference_samples=self._late,
                reference_end=self._ref_end,
                mic_samples=self._mic_samples,
            )

    # -- API ----------------------------------------------------------------------------------

    def reset(self) -> None:
        """Start over: a fresh AEC3 (re-converges), empty buffers, mic timeline back to 0.

        The meter keeps its totals.
        """
        with self._lock:
            self._reset_locked()

    def push_reference(
        self, samples: np.ndarray, sample_rate: int, position: int | None = None
    ) -> None:
        """Add played assistant audio to the reference.

        Args:
            samples: mono samples exactly as played (float in [-1, 1] or int16).
            sample_rate: their rate, 8000..192000 Hz (resampled to 16 kHz here).
            position: mic-timeline position (16 kHz samples) of the first sample; None to
                continue right after the previous reference (from 0 for the first).

        Raises:
            InputError: for bad samples, rate or position (``reference.*``).
        """
        ref = _mono_samples(samples, "reference")
        if isinstance(sample_rate, bool) or not isinstance(sample_rate, (int, np.integer)):
            raise InputError(
                "reference.sample_rate", f"expected an integer rate in Hz, got {sample_rate!r}"
            )
        rate = int(sample_rate)
        if not REFERENCE_RATES[0] <= rate <= REFERENCE_RATES[1]:
            raise InputError(
                "reference.sample_rate",
                f"must be in {REFERENCE_RATES[0]}..{REFERENCE_RATES[1]} Hz, got {rate}",
            )
        if position is not None and (
            isinstance(position, bool) or not isinstance(position, (int, np.integer))
        ):
            raise InputError("reference.position", f"expected an integer, got {position!r}")
        with self._lock:
            segment = self._segment
            expected = segment.expected_end if segment is not None else self._next_position
            if position is None:
                start = expected
                contiguous = segment is not None and segment.rate == rate
            else:
                start = int(position)
                if start < 0:
                    raise InputError("reference.position", f"must be >= 0, got {start}")
                if start < expected - 1:
                    raise InputError(
                        "reference.position",
                        f"{start} overlaps the reference already given up to {expected}; "
                        "pass None to continue back to back",
                    )
                if start > self._frontier + self.max_reference_ahead:
                    raise InputError(
                        "reference.position",
                        f"{start} is more than {self.max_reference_ahead} samples beyond the mic "
                        f"({self._frontier}); positions are 16 kHz mic samples",
                    )
                contiguous = segment is not None and segment.rate == rate and start <= expected + 1
            with self._meter.measure(0.0):
                if not contiguous:
                    self._close_segment_locked()
                    self._segment = _Segment(start, rate, self.resample_quality)
                assert self._segment is not None
                self._emit_locked(self._segment.feed(ref))

    def flush_reference(self) -> None:
        """Emit what the resampler still holds (call when playback stops or is flushed)."""
        with self._lock, self._meter.measure(0.0):
            self._close_segment_locked()

    def cut_reference(self, position: int) -> None:
        """The speaker stopped at mic-timeline ``position`` (a flush): the reference given for
        later samples was never played and is dropped, so that the filter does not adapt to
        an echo that never came and the suppressor does not take the user's voice (who has
        just cut in) for it. Reference may be given again from ``position`` on.

        Raises:
            InputError: a position that is not a non-negative integer (``reference.position``).
        """
        if isinstance(position, bool) or not isinstance(position, (int, np.integer)):
            raise InputError("reference.position", f"expected an integer, got {position!r}")
        if position < 0:
            raise InputError("reference.position", f"must be >= 0, got {position}")
        with self._lock, self._meter.measure(0.0):
            self._close_segment_locked()
            cut = max(int(position), self._frontier)
            self._ref = self._ref[: cut - self._frontier].copy()
            self._ref_end = min(self._ref_end, cut)
            self._next_position = min(self._next_position, cut)

    def process(self, mic: np.ndarray) -> np.ndarray:
        """Cancel the echo in the next mic samples (16 kHz mono).

        Returns:
            float32, as many samples as given, delayed by :attr:`latency_samples`.

        Raises:
            InputError: for bad samples (``audio.*``).
        """
        samples = _mono_samples(mic, "audio")
        with self._lock, self._meter.measure(samples.size / SAMPLE_RATE):
            self._mic_samples += samples.size
            pending = np.concatenate((self._pending, samples)) if self._pending.size else samples
            count = pending.size // FRAME_SAMPLES
            processed = [self._out]
            for k in range(count):
                frame = pending[k * FRAME_SAMPLES : (k + 1) * FRAME_SAMPLES]
                processed.append(self._process_frame_locked(frame))
            self._pending = pending[count * FRAME_SAMPLES :].copy()
            out = np.concatenate(processed) if count else self._out
            result = out[: samples.size].copy()
            self._out = out[samples.size :].copy()
            return result

    # -- internals ----------------------------------------------------------------------------

    def _new_apm(self) -> Any:
        apm = self._apm_type(echo_cancellation=True)
        apm.set_stream_delay_ms(0)  # reference and mic frames are paired on one timeline
        return apm

    def _reset_locked(self) -> None:
        if self.engine == "webrtc":
            self._apm = self._new_apm()
            self._fdaf = None
        else:
            self._fdaf = _Fdaf(
                self.filter_ms // FRAME_MS,
                self.max_delay_ms // FRAME_MS,
                self.step,
                self.suppress_floor_db,
                self.over_suppress,
            )
        self._frontier = 0
        self._mic_samples = 0
        self._pending = np.zeros(0, np.float32)
        self._out = np.zeros(FRAME_SAMPLES, np.float32)
        self._ref = np.zeros(0, np.float32)  # reference at [frontier, frontier + len)
        self._ref_end = 0
        self._next_position = 0
        self._segment: _Segment | None = None
        self._frames = 0
        self._reference_frames = 0
        self._late = 0

    def _close_segment_locked(self) -> None:
        segment = self._segment
        if segment is None:
            return
        self._emit_locked(segment.finish())
        self._next_position = max(segment.expected_end, segment.start + segment.emitted)
        self._segment = None

    def _emit_locked(self, samples: np.ndarray) -> None:
        """Place resampled reference samples after the current segment's previous output."""
        segment = self._segment
        assert segment is not None
        position = segment.start + segment.emitted
        segment.emitted += samples.size
        if samples.size == 0:
            return
        end = position + samples.size
        self._ref_end = max(self._ref_end, end)
        if end <= self._frontier:
            self._late += samples.size
            return
        if position < self._frontier:
            self._late += self._frontier - position
            samples = samples[self._frontier - position :]
            position = self._frontier
        offset = position - self._frontier
        needed = offset + samples.size
        if self._ref.size < needed:
            self._ref = np.concatenate((self._ref, np.zeros(needed - self._ref.size, np.float32)))
        self._ref[offset:needed] = samples

    def _process_frame_locked(self, frame: np.ndarray) -> np.ndarray:
        ref = self._ref[:FRAME_SAMPLES]
        self._ref_view[:] = 0
        if ref.size:
            self._ref_view[: ref.size] = _to_int16(ref)
        self._ref = self._ref[FRAME_SAMPLES:]
        if np.any(self._ref_view):
            self._reference_frames += 1
        self._frontier += FRAME_SAMPLES
        self._frames += 1
        if self._fdaf is not None:
            reference = np.zeros(FRAME_SAMPLES)
            reference[: ref.size] = ref
            out = self._fdaf.frame(frame.astype(np.float64), reference)
            return np.clip(out, -1.0, 1.0).astype(np.float32)
        self._mic_view[:] = _to_int16(frame)
        self._apm.process_reverse_stream(self._ref_frame)
        self._apm.process_stream(self._mic_frame)
        return self._mic_view.astype(np.float32) / _INT16_SCALE


def _to_int16(samples: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(samples * _INT16_SCALE), -32768, 32767).astype(np.int16)


class _Fdaf:
    """The numpy engine: a delay estimator, a two-path partitioned-block frequency-domain
    adaptive filter and a coherence-based residual echo suppressor (see the module notes).

    Args:
        partitions: the adaptive filter's length in 10 ms frames (partitions).
        max_delay: the longest bulk delay looked for, in frames.
        step: the background filter's normalised step size.
        floor_db: the suppressor's lowest gain.
        over: the suppressor's over-subtraction factor.
    """

    def __init__(
        self, partitions: int, max_delay: int, step: float, floor_db: float, over: float
    ) -> None:
        n, m = FRAME_SAMPLES, 2 * FRAME_SAMPLES
        k = m // 2 + 1
        self.partitions = partitions
        self.max_delay = max_delay
        self.step = step
        self.floor = 10.0 ** (floor_db / 20.0)
        self.over = over
        self.window = np.sqrt(0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(m) / m))
        self.x_hist = np.zeros((max_delay + partitions, k), np.complex128)  # newest first
        self.delay = 0  # frames: the filter covers x_hist[delay : delay + partitions]
        self.w_fore = np.zeros((partitions, k), np.complex128)
        self.w_back = np.zeros((partitions, k), np.complex128)
        self.cross = np.zeros((max_delay + 1, k), np.complex128)  # E[D conj(X_lag)]
        self.s_xx = np.zeros(k)
        self.s_dd_long = np.zeros(k)
        self.delay_votes = 0
        self.delay_candidate = 0
        self.delay_contested = False  # the candidate won a vote under double talk
        self.delay_known = False
        self.silent = 0
        self.frames = 0
        self.x_prev = np.zeros(n)
        self.dp_prev = np.zeros(n)
        self.x_last = self.d_last = self.y_last = 0.0
        self.deemph_pow = _PREEMPH ** np.arange(n, dtype=np.float64)
        self.deemph_inv = 1.0 / self.deemph_pow
        self.d_prev = np.zeros(n)
        self.e_prev = np.zeros(n)
        self.y_prev = np.zeros(n)
        self.ola = np.zeros(n)
        self.s_zz = np.zeros(k)
        self.s_dd = np.zeros(k)
        self.s_yy = np.zeros(k)
        self.s_xx_lag = np.zeros(k)
        self.dt_cross = 0.0
        self.dt_power = 0.0
        self.dt_peak = 0.0
        self.dt_hold = 0
        self.leak_y = _Leakage()
        self.leak_x = _Leakage()
        self.e_fore = 0.0
        self.e_back = 0.0
        self.e_mic = 0.0
        self.cancelled_once = False
        self.active_frames = 0  # frames with reference playing since the canceller started
        self.better = 0
        self.worse = 0
        self.zeros = np.zeros(n)

    def frame(self, d: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Cancel one frame: mic ``d`` and reference ``x`` (160 samples each, float64);
        returns the output of the previous frame (the suppressor's overlap-add)."""
        n = FRAME_SAMPLES
        self.frames += 1
        self.silent = self.silent + 1 if not np.any(x) else 0
        if self.silent > self.x_hist.shape[0] + 1:
            return self._pass(d)
        # The filters work on pre-emphasised signals (whiter than speech: faster convergence).
        xp = x - _PREEMPH * np.concatenate(([self.x_last], x[:-1]))
        dp = d - _PREEMPH * np.concatenate(([self.d_last], d[:-1]))
        self.x_last, self.d_last = float(x[-1]), float(d[-1])
        hist = self.x_hist
        hist[1:] = hist[:-1]
        hist[0] = np.fft.rfft(np.concatenate((self.x_prev, xp)))
        self.x_prev = xp
        d_spec = np.fft.rfft(np.concatenate((self.dp_prev, dp)))
        self.dp_prev = dp
        active = float(x @ x) > _ACTIVE_POWER
        if active:
            self.active_frames += 1
            self._track_delay(d_spec)
        window = hist[self.delay : self.delay + self.partitions]
        yp_fore = np.fft.irfft(np.einsum("pk,pk->k", self.w_fore, window))[n:]
        y_back = np.fft.irfft(np.einsum("pk,pk->k", self.w_back, window))[n:]
        e_back = dp - y_back
        y_fore = self._deemphasise(yp_fore)
        e_fore = d - y_fore
        if active:
            power = np.einsum("pk,pk->k", window.real, window.real) + np.einsum(
                "pk,pk->k", window.imag, window.imag
            )
            power += _REGULARISE + _REL_REG * power.mean()
            err = np.fft.rfft(np.concatenate((self.zeros, e_back)))
            gain = err * (self.step * self._double_talk_scale(dp, yp_fore) / power)
            grad = np.fft.irfft(np.conj(window) * gain, axis=1)
            grad[:, n:] = 0.0
            self.w_back += np.fft.rfft(grad, axis=1)
        ep_fore = dp - yp_fore
        self._choose(float(ep_fore @ ep_fore), float(e_back @ e_back), float(dp @ dp))
        return self._suppress(d, e_fore, y_fore)

    def _double_talk_scale(self, dp: np.ndarray, yp: np.ndarray) -> float:
        """Step scale from a double-talk detector: the share of the mic that the foreground's
        echo estimate explains (normalised cross-correlation), against its recent peak; a drop
        means near-end speech, and the background then adapts slowly for a while."""
        a = _DT_SMOOTH
        self.dt_cross += a * (float(dp @ yp) - self.dt_cross)
        self.dt_power += a * (float(dp @ dp) - self.dt_power)
        share = max(self.dt_cross, 0.0) / (self.dt_power + _TINY)
        self.dt_peak = max(share, self.dt_peak * _DT_DECAY)
        if share < _DT_DROP * self.dt_peak:
            self.dt_hold = _DT_HOLD
        elif self.dt_hold:
            self.dt_hold -= 1
        return _DT_STEP if self._double_talk() else 1.0

    def _double_talk(self) -> bool:
        """Whether the detector holds double talk (:meth:`_double_talk_scale`); before the
        foreground has ever cancelled 6 dB its share says nothing of the user."""
        return bool(self.dt_hold) and self.cancelled_once

    def _pass(self, d: np.ndarray) -> np.ndarray:
        """No reference anywhere in the filters' reach: the mic passes (the overlap-add with
        unit gain, no FFT), and the suppressor's short-term statistics start over."""
        n = FRAME_SAMPLES
        if self.silent == self.x_hist.shape[0] + 2:  # just entered: clear what is left
            self.x_hist[:] = 0.0
            self.x_prev = np.zeros(n)
            self.x_last = self.y_last = 0.0
            for stat in (self.s_zz, self.s_dd, self.s_yy, self.s_xx_lag):
                stat[:] = 0.0
            self.dt_cross = self.dt_power = self.dt_peak = 0.0
            self.dt_hold = 0
        squared = self.window**2
        result = self.ola + squared[:n] * self.d_prev
        self.ola = squared[n:] * d
        self.dp_prev = d - _PREEMPH * np.concatenate(([self.d_last], d[:-1]))
        self.d_last = float(d[-1])
        self.e_prev = self.d_prev = d
        self.y_prev = np.zeros(n)
        return result

    def _deemphasise(self, yp: np.ndarray) -> np.ndarray:
        """Undo the pre-emphasis: ``y[n] = yp[n] + a y[n-1]`` in closed form."""
        y = self.deemph_pow * (np.cumsum(yp * self.deemph_inv) + _PREEMPH * self.y_last)
        self.y_last = float(y[-1])
        return y

    def _track_delay(self, d_spec: np.ndarray) -> None:
        """Smoothed cross-spectra of the mic with each lag of the reference; every
        :data:`_DELAY_EVERY` frames the lag of highest coherence, held twice in a row (or
        :data:`_DT_DELAY_VOTES` times where it won under double talk), moves the filter's
        window."""
        a = _DELAY_SMOOTH
        lags = self.x_hist[: self.max_delay + 1]
        self.cross += a * (d_spec[None, :] * np.conj(lags) - self.cross)
        x0 = self.x_hist[0]
        self.s_xx += a * (x0.real**2 + x0.imag**2 - self.s_xx)
        self.s_dd_long += a * (d_spec.real**2 + d_spec.imag**2 - self.s_dd_long)
        if self.frames % _DELAY_EVERY:
            return
        norm = 1.0 / (self.s_xx * self.s_dd_long + _TINY)
        score = (self.cross.real**2 + self.cross.imag**2) @ norm
        best = int(np.argmax(score))
        if score[best] < 2.0 * float(np.median(score)):
            return
        target = max(0, min(best - _DELAY_MARGIN, self.max_delay))
        if target == self.delay:
            self.delay_votes = 0
            self.delay_known = True
            return
        if target != self.delay_candidate:
            self.delay_candidate, self.delay_votes = target, 0
            self.delay_contested = False
        self.delay_votes += 1
        # Near-end speech swamps the cross-spectra: a lag that won a vote under double talk
        # moves a known delay only once it has won for a second.
        self.delay_contested |= self.delay_known and self.dt_hold > 0
        if self.delay_votes >= (_DT_DELAY_VOTES if self.delay_contested else 2):
            self._shift(target - self.delay)
            self.delay = target
            self.delay_votes = 0
            self.delay_known = True

    def _shift(self, frames: int) -> None:
        """Keep the filters' absolute taps when the window moves ``frames`` later.

        A move of a filter's length or more wipes them, and they converge again from zero:
        the double-talk detector starts over too (until the foreground has cancelled 6 dB it
        does not slow them, and its best share is the new filter's). Its state belonged to the
        wiped filter: kept, it held them at 5 % of their step, and after the echo path's delay
        jumped from 20 to 300 ms they cancelled 0-4 dB for 4 s."""
        if abs(frames) >= self.partitions:
            self.w_fore[:] = 0.0
            self.w_back[:] = 0.0
            self.cancelled_once = False
            self.e_fore = self.e_back = self.e_mic = 0.0
            self.dt_peak = 0.0
            self.dt_hold = 0
            return
        for w in (self.w_fore, self.w_back):
            if frames > 0:
                w[: self.partitions - frames] = w[frames:].copy()
                w[self.partitions - frames :] = 0.0
            else:
                w[-frames:] = w[: self.partitions + frames].copy()
                w[:-frames] = 0.0

    def _suppress(self, d: np.ndarray, e_fore: np.ndarray, y_fore: np.ndarray) -> np.ndarray:
        """Residual echo suppression on a 20 ms sqrt-Hann analysis window, hop 10 ms."""
        n = FRAME_SAMPLES
        win = self.window
        z = np.fft.rfft(win * np.concatenate((self.e_prev, e_fore)))
        dd = np.fft.rfft(win * np.concatenate((self.d_prev, d)))
        yy = np.fft.rfft(win * np.concatenate((self.y_prev, y_fore)))
        self.e_prev, self.d_prev, self.y_prev = e_fore, d, y_fore
        a = _SMOOTH
        self.s_zz += a * (z.real**2 + z.imag**2 - self.s_zz)
        self.s_dd += a * (dd.real**2 + dd.imag**2 - self.s_dd)
        worse = self.s_zz > self.s_dd  # the canceller adds energy here: keep the microphone
        if np.any(worse):
            z = np.where(worse, dd, z)
            self.s_zz = np.where(worse, self.s_dd, self.s_zz)
        p_y = yy.real**2 + yy.imag**2
        self.s_yy += a * (p_y - self.s_yy)
        # The reference frames that the echo in this frame comes from (the filter's window),
        # their loudest per bin: an upper bound on the echo wherever in the window it lies.
        # Until the delay is known, any lag may carry the echo.
        if self.delay_known:
            lag = self.x_hist[self.delay : self.delay + self.partitions]
        else:
            lag = self.x_hist
        p_x = np.max(lag.real**2 + lag.imag**2, axis=0) * 0.5  # sqrt-Hann window: half power
        self.s_xx_lag += np.where(p_x > self.s_xx_lag, _SMOOTH, _RELEASE) * (p_x - self.s_xx_lag)
        residual_x = self.leak_x.update(self.s_zz, self.s_xx_lag) * self.s_xx_lag
        residual = np.maximum(self.leak_y.update(self.s_zz, self.s_yy) * self.s_yy, residual_x)
        over = self.over
        if self._double_talk() and self.active_frames >= _DT_SUPPRESS_AFTER:
            over *= _DT_OVER_SHARE  # the user is talking: the residue is masked, keep them
        g = np.clip(1.0 - over * residual / (self.s_zz + _TINY), self.floor, 1.0)
        out = np.fft.irfft(g * z) * win
        result = self.ola + out[:n]
        self.ola = out[n:]
        return result

    def _choose(self, fore: float, back: float, mic: float) -> None:
        """Copy the background filter into the foreground when it has cancelled clearly better
        for a while; pull a diverged background back to the foreground."""
        a = _TWO_PATH_SMOOTH
        self.e_fore += a * (fore - self.e_fore)
        self.e_back += a * (back - self.e_back)
        self.e_mic += a * (mic - self.e_mic)
        self.cancelled_once = self.cancelled_once or self.e_mic > 4.0 * self.e_fore > 0.0
        if self.e_back < _COPY_GAIN * self.e_fore and self.e_back < 0.5 * self.e_mic:
            self.better += 1
            self.worse = 0
            if self.better >= 3:
                self.w_fore[:] = self.w_back
                self.e_fore = self.e_back
                self.better = 0
        elif self.e_back > 4.0 * self.e_fore:
            self.worse += 1
            self.better = 0
            if self.worse >= 25:
                self.w_back[:] = self.w_fore
                self.e_back = self.e_fore
                self.worse = 0
        else:
            self.better = self.worse = 0


class _Leakage:
    """Per-bin leakage of an echo estimate into the output (residual echo power over the
    estimate's power): per band, the lowest ratio of the output's power to the estimate's,
    both smoothed over ~200 ms of frames where the estimate is strong (minimum statistics:
    near-end speech only raises the ratio), let rise by 2 dB/s so that it follows a worse echo
    path; 1 (all echo) until a band has had 500 ms of strong frames (the echo arrives after its
    reference: the first ratios are too low); interpolated from bands to bins."""

    def __init__(self) -> None:
        self.leak = np.ones(_BAND_EDGES.size)
        self.l_z = np.zeros(_BAND_EDGES.size)
        self.l_y = np.zeros(_BAND_EDGES.size)
        self.count = np.zeros(_BAND_EDGES.size, np.int64)

    def update(self, p_z: np.ndarray, p_y: np.ndarray) -> np.ndarray:
        """Take one frame's output power ``p_z`` and estimate power ``p_y`` (per bin)."""
        bz = np.add.reduceat(p_z, _BAND_EDGES)
        by = np.add.reduceat(p_y, _BAND_EDGES)
        strong = by > _LEAK_STRONG * float(by.max()) + _ACTIVE_POWER
        a = np.where(strong, _LEAK_SMOOTH, 0.0)
        self.l_z += a * (bz - self.l_z)
        self.l_y += a * (by - self.l_y)
        self.count += strong
        track = strong & (self.count > _LEAK_WARMUP)
        leak = self.leak
        leak[track] *= _LEAK_RISE
        np.minimum(leak, np.where(track, self.l_z / (self.l_y + _TINY), 1.0), out=leak)
        np.clip(leak, _LEAK_MIN, 1.0, out=leak)
        return leak[_BIN_BAND]


_DELAY_SMOOTH = 0.02
_DELAY_EVERY = 10
_RELEASE = 0.1
_BAND_EDGES = np.array([0, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128])
_BIN_BAND = np.searchsorted(_BAND_EDGES, np.arange(2 * FRAME_SAMPLES // 2 + 1), "right") - 1
_LEAK_MIN = 1e-5
_LEAK_SMOOTH = 0.05
_LEAK_WARMUP = 50
_COPY_GAIN = 0.7
_LEAK_STRONG = 0.01
_LEAK_RISE = 10.0 ** (0.2 / 100)  # 2 dB per second
_DELAY_MARGIN = 2
_REL_REG = 0.3
_PREEMPH = 0.9
_DT_SMOOTH = 0.5
_DT_DECAY = 0.99
_DT_DROP = 0.3
_DT_HOLD = 10
_DT_STEP = 0.05
_DT_DELAY_VOTES = 10
_DT_OVER_SHARE = 1 / 3
_DT_SUPPRESS_AFTER = 100
_ACTIVE_POWER = 2 * FRAME_SAMPLES * 1e-8
_REGULARISE = 2 * FRAME_SAMPLES * 1e-6
_SMOOTH = 0.35
_TWO_PATH_SMOOTH = 0.3
_TINY = 1e-20
