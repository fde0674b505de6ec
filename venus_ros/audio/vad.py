"""Streaming voice activity detection: Silero VAD run with ONNX Runtime and numpy only.

The model is the ``data/silero_vad.onnx`` file that the ``silero-vad`` pip package ships. The
package itself is never imported (importing it needs torch and changes torch's thread count
process-wide); the file is located with :func:`importlib.util.find_spec`. Install it without its
torch dependency: ``pip install --no-deps silero-vad``.

Model contract (Silero VAD v5/v6, 16 kHz), as used here:

* ``input``: float32 ``(1, 64 + 512)``: the last 64 samples of the previous frame (zeros at the
  start of a stream) followed by one 512-sample frame (32 ms).
* ``state``: float32 ``(2, 1, 128)`` recurrent state, zeros at the start, fed back from ``stateN``.
* ``sr``: int64 scalar, 16000.
* ``output``: float32 ``(1, 1)``: probability that the frame holds speech.

Decision policy (hysteresis; all positions in samples at 16 kHz since the last :meth:`reset`):

* Frame ``k`` covers samples ``[512 k, 512 k + 512)``; its probability is recorded in
  :attr:`SileroVad.probabilities` as ``(512 k, p)`` (the newest ``max_probabilities`` frames).
* A *candidate* start opens at the first frame with ``p >= threshold``. Frames with
  ``p >= neg_threshold`` (default ``threshold - 0.15``, at least 0.01) count as voiced; a dip
  below ``neg_threshold`` longer than 100 ms drops the candidate. Once ``min_speech_ms`` of voiced
  frames have accumulated, a ``start`` event is emitted at ``candidate - speech_pad_ms`` (never
  before 0 nor before the previous ``end``). Clicks shorter than ``min_speech_ms`` emit nothing.
* While in speech, the first frame below ``neg_threshold`` sets a tentative end (reported,
  pad included, by :attr:`SileroVad.pending_end`) at the first frame of the current run below
  ``threshold``; a frame at or above ``threshold`` cancels it. The model's probability stays
  high for one to three frames after speech stops (the network has memory), so the tentative
  end is moved back by energy: to the end of the last 8 ms sub-block, at most
  ``end_refine_ms`` earlier, whose energy is within 35 dB of the utterance's peak and 6 dB
  above the noise floor (the 10th percentile of the last ~4 s); where no sub-block in that
  window is loud enough, to the window's start; where the energy history does not reach back
  that far, the model's end stands. Once the silence since the tentative end reaches
  ``min_silence_ms``, an ``end`` event is emitted at ``tentative end + speech_pad_ms``.
* Measured on 24 espeak-ng utterances: starts within -29..+30 ms and ends within +20..+39 ms
  of the speech's energy extent (the pad included); ends are decided 300-330 ms after speech
  stops. In white noise at 0.01 RMS the ends stay within ~60 ms.
* Events are returned by the :meth:`SileroVad.process` call whose audio completed the deciding
  frame; ``VadEvent.decided_sample`` is the end of that frame, so ``decided_sample - sample`` is
  the decision latency.
* Framing is internal: samples that do not fill a frame wait for the next call, so any chunking
  of the same signal gives exactly the same probabilities and events as one call on the whole.
* :meth:`SileroVad.flush` ends a stream: speech still in progress gets its ``end``.

Input handling (defined behaviour for bad input):

* float32/float64 in [-1, 1] or int16 (scaled by 1/32768), 1-D or ``(n, 1)``; anything else
  raises ``ValueError``. The audio must already be 16 kHz mono: resample first with
  :func:`venus_ros.core.units.resample`.
* Values outside [-1, 1] (clipped or over-driven audio) are clipped to [-1, 1]; NaN becomes 0 and
  +/-inf becomes +/-1. The model still sees clipped speech as speech.
* A constant DC offset is removed by a one-pole DC blocker (high-pass, ~13 Hz corner) before the
  model, so an offset neither creates nor hides speech and leaves the boundaries where they are
  without it. The blocker's state lives across calls and is cleared by :meth:`SileroVad.reset`;
  it starts at the first sample's value, so a stream that starts with an offset has no step.
* Low-level white noise (up to 0.1 RMS measured) gives no events; moderately clipped speech (4x
  over full scale) keeps its boundaries; extremely clipped speech (20x, nearly a square wave)
  is still one segment with its end in place, but its start may come up to ~350 ms late.
"""

from __future__ import annotations

import importlib.util
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from venus_ros.audio.meter import ComputeMeter

__all__ = [
    "CONTEXT_SAMPLES",
    "FRAME_SAMPLES",
    "SAMPLE_RATE",
    "ModelPackageMissing",
    "SileroVad",
    "VadEvent",
    "as_float32_mono",
    "silero_model_path",
]

SAMPLE_RATE = 16000
"""The only rate the VAD accepts, in Hz."""
FRAME_SAMPLES = 512
"""Samples per model frame (32 ms at 16 kHz)."""
CONTEXT_SAMPLES = 64
"""Samples of the previous frame prepended to each frame (v5/v6 model contract)."""

_CANDIDATE_GAP_SAMPLES = 1600  # a candidate start survives silent dips up to 100 ms
_SUB_SAMPLES = 128  # energy sub-blocks (8 ms) used to refine ends
_END_DROP_DB = 35.0  # speech energy ends where it falls this far below the utterance's peak
_FLOOR_MARGIN_DB = 6.0  # ... and this far above the noise floor
_DC_POLE = 0.995  # one-pole DC blocker: corner ~ (1 - 0.995) * 16000 / (2 pi) ~ 13 Hz


class ModelPackageMissing(RuntimeError):
    """A model whose weights come from a pip package is not installed.

    Attributes:
        package: The pip distribution that carries the weights.
        install: The command that installs it.
    """

    def __init__(self, package: str, install: str, detail: str = "") -> None:
        message = f"model package {package!r} is not installed; install it with: {install}"
        super().__init__(f"{message} ({detail})" if detail else message)
        self.package = package
        self.install = install


@dataclass(frozen=True)
class VadEvent:
    """A speech boundary.

    Attributes:
        kind: ``"start"`` or ``"end"`` of speech.
        sample: Position of the boundary, in samples at 16 kHz since the last reset.
        t: The same position in seconds (``sample / 16000``).
        decided_sample: Stream position (samples) at which the event was decided, i.e. the end of
            the frame that confirmed it; ``-1`` when unknown (events built by hand).
    """

    kind: Literal["start", "end"]
    sample: int
    t: float
    decided_sample: int = -1


def silero_model_path() -> Path:
    """Locates ``silero_vad/data/silero_vad.onnx`` in the installed package without importing it.

    Raises:
        ModelPackageMissing: The package (or its ONNX file) is not installed.
    """
    install = "pip install --no-deps silero-vad"
    try:
        spec = importlib.util.find_spec("silero_vad")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise ModelPackageMissing("silero-vad", install)
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "data" / "silero_vad.onnx"
        if candidate.is_file():
            return candidate
    raise ModelPackageMissing("silero-vad", install, "data/silero_vad.onnx not found in it")


def as_float32_mono(samples: Any) -> npt.NDArray[np.float32]:
    """Validates audio and returns 1-D float32 in [-1, 1] (int16 scaled; NaN -> 0; clipped).

    Raises:
        ValueError: Not a 1-D / ``(n, 1)`` array of float32, float64 or int16.
    """
    x = np.asarray(samples)
    if x.ndim == 2 and x.shape[1] == 1:
        x = x[:, 0]
    if x.ndim != 1:
        raise ValueError(f"samples: expected mono 1-D or (n, 1) audio, got shape {x.shape}")
    if x.dtype == np.int16:
        return x.astype(np.float32) * np.float32(1.0 / 32768.0)
    if x.dtype not in (np.float32, np.float64):
        raise ValueError(f"samples: expected float32, float64 or int16, got {x.dtype}")
    x = x.astype(np.float32, copy=True)
    if not np.isfinite(x).all():
        np.nan_to_num(x, copy=False, nan=0.0, posinf=1.0, neginf=-1.0)
    np.clip(x, -1.0, 1.0, out=x)
    return x


def _session_options(threads: int) -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.add_session_config_entry("session.inter_op.allow_spinning", "0")
    opts.log_severity_level = 3
    return opts


class SileroVad:
    """Streaming Silero VAD (see the module docstring for the model contract and the policy).

    Thread-safe: :meth:`process`, :meth:`flush` and :meth:`reset` hold one lock.

    Args:
        threshold: Probability at or above which a frame counts as speech.
        min_silence_ms: Silence needed after speech before an ``end`` is emitted.
        min_speech_ms: Speech needed before a ``start`` is emitted (shorter blips are ignored).
        speech_pad_ms: Padding added before starts and after ends.
        threads: ONNX Runtime intra-op threads (inter-op is 1, sequential execution).
        neg_threshold: Probability below which a frame counts as silence; default
            ``max(threshold - 0.15, 0.01)``.
        max_probabilities: How many per-frame probabilities :attr:`probabilities` keeps.
        model_path: The ONNX file; default: the one in the installed ``silero-vad`` package.
        dc_block: Remove DC offset before the model (see the module docstring).
        end_refine_ms: How far before the model's tentative end the energy refinement may move
            an end (see the module docstring); 0 disables it.

    Raises:
        ModelPackageMissing: ``silero-vad`` is not installed (and no ``model_path`` given).
        ValueError: A parameter is out of range.
    """

    def __init__(
        self,
        threshold: float = 0.5,
        min_silence_ms: int = 300,
        min_speech_ms: int = 120,
        speech_pad_ms: int = 30,
        threads: int = 1,
        *,
        neg_threshold: float | None = None,
        max_probabilities: int = 1000,
        model_path: str | Path | None = None,
        dc_block: bool = True,
        end_refine_ms: int = 96,
    ) -> None:
        if not 0.0 < threshold < 1.0:
            raise ValueError(f"threshold: must be in (0, 1), got {threshold!r}")
        neg = max(threshold - 0.15, 0.01) if neg_threshold is None else float(neg_threshold)
        if not 0.0 < neg <= threshold:
            raise ValueError(f"neg_threshold: must be in (0, threshold], got {neg!r}")
        for name, value in (
            ("min_silence_ms", min_silence_ms),
            ("min_speech_ms", min_speech_ms),
            ("speech_pad_ms", speech_pad_ms),
            ("end_refine_ms", end_refine_ms),
        ):
            if value < 0:
                raise ValueError(f"{name}: must be >= 0, got {value!r}")
        if speech_pad_ms > min_silence_ms:
            raise ValueError("speech_pad_ms: must not exceed min_silence_ms")
        if threads < 1 or max_probabilities < 1:
            raise ValueError("threads and max_probabilities: must be >= 1")
        self.threshold = float(threshold)
        self.neg_threshold = neg
        self.min_silence_samples = round(min_silence_ms * SAMPLE_RATE / 1000)
        self.min_speech_samples = round(min_speech_ms * SAMPLE_RATE / 1000)
        self.pad_samples = round(speech_pad_ms * SAMPLE_RATE / 1000)
        self.refine_samples = round(end_refine_ms * SAMPLE_RATE / 1000)
        self.threads = int(threads)
        self.dc_block = bool(dc_block)
        self.model_path = Path(model_path) if model_path is not None else silero_model_path()
        self.meter = ComputeMeter("vad")

        import onnxruntime as ort

        self._session = ort.InferenceSession(
            str(self.model_path),
            sess_options=_session_options(self.threads),
            providers=["CPUExecutionProvider"],
        )
        self._sr = np.array(SAMPLE_RATE, dtype=np.int64)
        self._dc_pow = _DC_POLE ** np.arange(FRAME_SAMPLES, dtype=np.float64)
        self._dc_inv = 1.0 / self._dc_pow
        self._lock = threading.Lock()
        self._probs: deque[tuple[int, float]] = deque(maxlen=int(max_probabilities))
        # Sub-block energies kept for the end refinement and the peak: ~4 s.
        self._energy_len = 4 * SAMPLE_RATE // _SUB_SAMPLES
        self._reset_locked()

    # -- state -----------------------------------------------------------------------------

    def _reset_locked(self) -> None:
        self._state = np.zeros((2, 1, 128), dtype=np.float32)
        self._input = np.zeros((1, CONTEXT_SAMPLES + FRAME_SAMPLES), dtype=np.float32)
        self._pending = np.zeros(0, dtype=np.float32)
        self._frames = 0  # frames run since reset
        self._received = 0  # samples received since reset
        self._dc_x: float | None = None
        self._dc_y = 0.0
        self._triggered = False
        self._candidate: int | None = None
        self._voiced = 0  # candidate samples at or above neg_threshold
        self._gap = 0  # current run of candidate samples below neg_threshold
        self._below_since: int | None = None  # first sample of the current run below threshold
        self._start_sample = 0
        self._energy: deque[tuple[int, float]] = deque(maxlen=self._energy_len)
        self._peak_db = -200.0
        self._temp_end: int | None = None
        self._last_end = 0
        self._probs.clear()

    def reset(self) -> None:
        """Starts a new stream: clears model state, context, framing, policy and probabilities."""
        with self._lock:
            self._reset_locked()

    @property
    def position(self) -> int:
        """Samples received since the last reset."""
        return self._received

    @property
    def speaking(self) -> bool:
        """Whether a ``start`` has been emitted without its ``end`` yet."""
        return self._triggered

    @property
    def pending_end(self) -> int | None:
        """The sample an ``end`` event will carry if the current silence lasts ``min_silence_ms``
        (tentative end + pad), or None; lets a recogniser start early (speculation)."""
        with self._lock:
            if not self._triggered or self._temp_end is None:
                return None
            return min(self._temp_end + self.pad_samples, self._received)

    @property
    def probabilities(self) -> list[tuple[int, float]]:
        """``(frame_start_sample, p)`` of the newest frames (at most ``max_probabilities``)."""
        with self._lock:
            return list(self._probs)

    # -- processing ------------------------------------------------------------------------

    def _dc_block(self, frame: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """y[n] = x[n] - x[n-1] + a y[n-1] over one frame, state carried across frames.

        Run per whole frame (never per call), so the result does not depend on the chunking.
        """
        x = frame.astype(np.float64)
        if self._dc_x is None:
            self._dc_x = float(x[0])
        diff = np.empty_like(x)
        diff[0] = x[0] - self._dc_x
        diff[1:] = x[1:] - x[:-1]
        # Closed form of the one-pole recurrence within the frame:
        # y[n] = a^n (a y[-1] + sum_{k<=n} diff[k] a^-k); 0.995^-512 ~ 13 keeps it well conditioned.
        y = self._dc_pow * (np.cumsum(diff * self._dc_inv) + _DC_POLE * self._dc_y)
        self._dc_x = float(x[-1])
        self._dc_y = float(y[-1])
        return y.astype(np.float32)

    def _run_frame(self, frame: npt.NDArray[np.float32]) -> float:
        self._input[0, CONTEXT_SAMPLES:] = frame
        out, state = self._session.run(
            None, {"input": self._input, "state": self._state, "sr": self._sr}
        )
        self._state = state
        self._input[0, :CONTEXT_SAMPLES] = frame[-CONTEXT_SAMPLES:]
        return float(out[0, 0])

    def _decide(self, start: int, p: float, frame_db: float) -> list[VadEvent]:
        end = start + FRAME_SAMPLES
        events: list[VadEvent] = []
        if p >= self.threshold:
            self._below_since = None
        elif self._below_since is None:
            self._below_since = start
        if not self._triggered:
            if p >= self.threshold and self._candidate is None:
                self._candidate = start
                self._voiced = 0
            if self._candidate is None:
                return events
            if p >= self.neg_threshold:
                self._voiced += FRAME_SAMPLES
                self._gap = 0
            else:
                self._gap += FRAME_SAMPLES
                if self._gap > _CANDIDATE_GAP_SAMPLES:
                    self._candidate = None
                    return events
            if self._voiced >= max(self.min_speech_samples, 1):
                sample = max(self._candidate - self.pad_samples, self._last_end, 0)
                events.append(VadEvent("start", sample, sample / SAMPLE_RATE, end))
                self._start_sample = sample
                self._peak_db = max(
                    (db for pos, db in self._energy if pos >= self._candidate), default=-200.0
                )
                self._triggered = True
                self._candidate = None
                self._temp_end = None
            return events
        self._peak_db = max(self._peak_db, frame_db)
        if p >= self.threshold:
            self._temp_end = None
        elif p < self.neg_threshold and self._temp_end is None:
            # The end is where the probability first fell below threshold in this low run,
            # refined by energy; silence is counted from there.
            low = self._below_since if self._below_since is not None else start
            self._temp_end = self._refined_end(low)
        if self._temp_end is not None and end - self._temp_end >= self.min_silence_samples:
            sample = min(self._temp_end + self.pad_samples, end)
            events.append(VadEvent("end", sample, sample / SAMPLE_RATE, end))
            self._triggered = False
            self._temp_end = None
            self._last_end = sample
        return events

    def _refined_end(self, tentative: int) -> int:
        """Moves a tentative end back to where the speech energy stopped (module docstring)."""
        if self.refine_samples <= 0:
            return tentative
        lo = max(tentative - self.refine_samples, self._start_sample + 1)
        if lo >= tentative:
            return tentative
        # Within 35 dB of the peak, and clearly (6 dB) above the noise floor: the 10th
        # percentile of the last ~4 s of sub-block energies.
        floor = float(np.percentile([db for _, db in self._energy], 10))
        level = max(self._peak_db - _END_DROP_DB, floor + _FLOOR_MARGIN_DB)
        refined: int | None = None
        seen = False
        for pos, db in self._energy:
            if lo <= pos + _SUB_SAMPLES <= tentative:
                seen = True
                if db > level:
                    refined = pos + _SUB_SAMPLES
        if not seen:
            return tentative
        return lo if refined is None else refined

    def process(self, samples16k: Any) -> list[VadEvent]:
        """Feeds audio (any length, 16 kHz mono) and returns the events it completed.

        Raises:
            ValueError: Malformed samples (see :func:`as_float32_mono`).
        """
        x = as_float32_mono(samples16k)
        events: list[VadEvent] = []
        with self._lock, self.meter.measure(audio_seconds=x.size / SAMPLE_RATE):
            self._received += x.size
            buf = np.concatenate([self._pending, x]) if self._pending.size else x
            n = buf.size // FRAME_SAMPLES
            for k in range(n):
                frame = buf[k * FRAME_SAMPLES : (k + 1) * FRAME_SAMPLES]
                start = self._frames * FRAME_SAMPLES
                if self.dc_block:
                    frame = self._dc_block(frame)
                p = self._run_frame(frame)
                power = np.mean(np.square(frame.reshape(-1, _SUB_SAMPLES), dtype=np.float64), 1)
                dbs = 10.0 * np.log10(power + 1e-12)
                for j, db in enumerate(dbs.tolist()):
                    self._energy.append((start + j * _SUB_SAMPLES, db))
                self._frames += 1
                self._probs.append((start, p))
                events.extend(self._decide(start, p, float(dbs.max())))
            self._pending = buf[n * FRAME_SAMPLES :].copy()
        return events

    def flush(self) -> list[VadEvent]:
        """Ends the stream: emits an ``end`` for speech still in progress (at its tentative end
        plus pad, or at the last received sample). Samples short of a whole frame are not run.
        The model state is kept; call :meth:`reset` before an unrelated stream."""
        with self._lock:
            if not self._triggered:
                self._candidate = None
                return []
            sample = self._received
            if self._temp_end is not None:
                sample = min(self._temp_end + self.pad_samples, self._received)
            self._triggered = False
            self._temp_end = None
            self._candidate = None
            self._last_end = sample
            return [VadEvent("end", sample, sample / SAMPLE_RATE, self._received)]
