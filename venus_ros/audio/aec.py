"""Acoustic echo cancellation: WebRTC AEC3 with the played assistant audio as reference. No ROS.

The microphone hears the robot's own speech. :class:`EchoCanceller` removes it, using as
reference exactly what the speaker played, so that the assistant neither transcribes nor
interrupts itself.

Engine: WebRTC's audio processing module (APM) with its echo canceller, AEC3 (linear adaptive
filter, delay estimator, residual echo suppressor), as built into the ``livekit`` package's
native library (``livekit.rtc.AudioProcessingModule``; Apache-2.0, WebRTC itself BSD-3-Clause;
prebuilt wheels for Linux x86_64 and aarch64; the native library also carries the rest of
libwebrtc, including Chromium's LGPL build of FFmpeg, listed in the wheel's LICENSE.md). Only
echo cancellation is enabled: no noise suppression, no gain control. ``livekit`` is imported
when a canceller is built, never at module import; loading it costs ~0.3 s and ~45 MB of RSS.

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
  (zeros while idle) from mic sample 0 on and never pass a position.
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
one frame (160 samples) of framing plus the APM's own 128-sample (8 ms) delay, so
:attr:`EchoCanceller.latency_samples` is 288 (18 ms). Any chunking of the same input gives the
same output as one call with all of it (AEC3 is deterministic given the same frames). With no
reference the microphone passes through unchanged apart from that delay and the APM's fixed
high-pass filter (AEC3 enforces it: it removes DC and shifts the phase below ~500 Hz).

Double talk: AEC3's residual echo suppressor attenuates the user while the assistant's echo is
loud. Measured on espeak-ng voices (male assistant, female user) through a 0.3 s synthetic room,
echo and user both at -6 dB, delays 20-200 ms: during double talk the output correlates
0.58-0.77 with the user alone (as the canceller passes it) and carries 3.6-6.2 dB less energy;
echo alone is reduced by about 42 dB once converged (25-33 dB over the first 2 s); after the
assistant stops the user passes unchanged (correlation 1.000). The user's words survive double
talk, but quieter and with gaps: 11-37% of the 100 ms stretches where the user speaks are
suppressed by 20 dB or more (the median stretch by 3-17 dB).
``livekit`` exposes no AEC3 tuning (its suppressor is the stock one).

Input handling: mic and reference are mono (1-D or ``(n, 1)``), float in [-1, 1] or int16
(scaled by 1/32768); values beyond full scale are clipped (the APM works on 16-bit samples).
Stereo, other dtypes, NaN/inf, a wrong rate or a bad position raise
:class:`venus_ros.core.units.InputError` (a ``ValueError``) naming the field:
``audio.samples``/``audio.dtype``/``audio.channels`` for the mic,
``reference.samples``/``reference.dtype``/``reference.channels``/``reference.sample_rate``/
``reference.position`` for the reference. Nothing changes state on a rejected call.

Real-time accounting: :attr:`EchoCanceller.meter` (``ComputeMeter("aec")``) charges the APM
work in :meth:`process` against the mic audio processed, and the reference resampling against
no audio, so its RTF is the canceller's whole cost per second of mic audio: measured 0.011-0.013
(CPU 0.013-0.014 with a 24 kHz reference) on 2 cores. The APM runs in the calling thread;
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

    Raises:
        ValueError: for an unsupported rate, frame length, quality or limit.
        AecBackendMissing: if ``livekit`` is not installed.
    """

    def __init__(
        self,
        sample_rate: int = SAMPLE_RATE,
        frame_ms: int = FRAME_MS,
        *,
        resample_quality: str = "QQ",
        max_reference_ahead_s: float = 60.0,
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
        self._rtc, self._apm_type = _load_apm()
        self._meter = ComputeMeter("aec")
        self._lock = threading.Lock()
        # Frame buffers shared with the native library (processed in place).
        self._ref_bytes = bytearray(FRAME_SAMPLES * 2)
        self._mic_bytes = bytearray(FRAME_SAMPLES * 2)
        self._ref_view = np.frombuffer(self._ref_bytes, dtype=np.int16)
        self._mic_view = np.frombuffer(self._mic_bytes, dtype=np.int16)
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
        return FRAME_SAMPLES + APM_LATENCY_SAMPLES

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
        self._apm = self._new_apm()
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
        self._mic_view[:] = _to_int16(frame)
        self._apm.process_reverse_stream(self._ref_frame)
        self._apm.process_stream(self._mic_frame)
        self._frontier += FRAME_SAMPLES
        self._frames += 1
        return self._mic_view.astype(np.float32) / _INT16_SCALE


def _to_int16(samples: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(samples * _INT16_SCALE), -32768, 32767).astype(np.int16)
