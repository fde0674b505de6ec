"""Assembly of fixed-length input units for the Realtime-Venus frontend.

Every unit (1 s by default, the first one 1035 ms) carries mono 16 kHz float32 audio, the newest
camera frame at the moment the unit completed, and any text injected since the previous unit.

Audio arrives from microphones in frames of arbitrary length at one of several sample rates.
:class:`UnitAssembler` validates each push, resamples it to the output rate with a
``soxr.ResampleStream`` (one stream per input rate) and cuts the resulting timeline into units.

Resampler latency (python-soxr 1.1, quality ``"HQ"``):

* A stream withholds output until it has seen enough input to fill its filter; e.g. 44.1 kHz
  input pushed in 10 ms frames yields nothing for the first ~50 ms of input (~120 ms at 8 kHz)
  and afterwards lags the ideal output by roughly 100-900 output samples (up to ~1850 at 8 kHz),
  delivered in bursts. Units therefore complete up to ~0.12 s later than the audio would allow,
  but their *content* is unaffected. ``ResampleStream.delay()`` reports 0.0 and is not used.
* ``resample_chunk(..., last=True)`` drains the withheld tail. After that, a stream has produced
  ``round(n_in * out_rate / in_rate)`` samples (±1 where the exact value ends in .5), and the
  concatenated streaming output is bit-identical to ``soxr.resample`` on the whole signal, for any
  chunking. The assembler drains the old stream when the input rate changes and in
  :meth:`UnitAssembler.flush`.
* Input already at the output rate bypasses soxr (soxr would pass it through unchanged anyway).
"""

from __future__ import annotations

import math
import numbers
import threading
from collections import deque
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt
import soxr

from venus_ros.core.protocol import clean_text, escape_tags

__all__ = [
    "InputError",
    "InputUnit",
    "PartialUnit",
    "UnitAssembler",
    "UnitConfig",
    "VideoFrame",
    "resample",
]

MAX_FRAME_SIDE = 4096
"""Largest accepted image height or width, in pixels."""

_INT16_SCALE = 1.0 / 32768.0


class InputError(ValueError):
    """A rejected input, naming the offending field.

    Attributes:
        field: Dotted name of the rejected field, one of ``audio.samples``, ``audio.dtype``,
            ``audio.channels``, ``audio.sample_rate``, ``frame``, ``frame.image``, ``frame.t``,
            ``frame.seq`` or ``text``.
        reason: The explanation without the field prefix.
    """

    def __init__(self, field: str, reason: str) -> None:
        """Creates the error; ``str(error)`` is ``"<field>: <reason>"``.

        Args:
            field: Dotted name of the rejected field.
            reason: Human-readable explanation.
        """
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def _is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


@dataclass(frozen=True)
class UnitConfig:
    """Sizing of input units.

    Attributes:
        sample_rate: Output sample rate of unit audio, in Hz.
        first_unit_ms: Duration of the first unit, in ms.
        unit_ms: Duration of every later unit, in ms.
        max_pending_units: Most complete units kept waiting for the consumer; older ones are
            dropped beyond that (backpressure).
        supported_rates: Input sample rates accepted by :meth:`UnitAssembler.push_audio`.
    """

    sample_rate: int = 16000
    first_unit_ms: int = 1035
    unit_ms: int = 1000
    max_pending_units: int = 2
    supported_rates: tuple[int, ...] = (8000, 16000, 22050, 24000, 32000, 44100, 48000)

    def __post_init__(self) -> None:
        """Validates the configuration.

        Raises:
            ValueError: A field is out of range; the message starts with the field name.
        """
        for name in ("sample_rate", "first_unit_ms", "unit_ms", "max_pending_units"):
            value = getattr(self, name)
            if not _is_int(value) or value < 1:
                raise ValueError(f"{name}: must be a positive integer, got {value!r}")
        for name in ("first_unit_ms", "unit_ms"):
            if (self.sample_rate * getattr(self, name)) % 1000:
                raise ValueError(
                    f"{name}: {getattr(self, name)} ms is not a whole number of samples at "
                    f"{self.sample_rate} Hz"
                )
        rates = self.supported_rates
        if not isinstance(rates, tuple) or not rates:
            raise ValueError(f"supported_rates: must be a non-empty tuple, got {rates!r}")
        if not all(_is_int(r) and r > 0 for r in rates):
            raise ValueError(f"supported_rates: must hold positive integers, got {rates!r}")

    @property
    def first_unit_samples(self) -> int:
        """Length of the first unit, in output samples (16560 by default)."""
        return self.sample_rate * self.first_unit_ms // 1000

    @property
    def unit_samples(self) -> int:
        """Length of every later unit, in output samples (16000 by default)."""
        return self.sample_rate * self.unit_ms // 1000

    def unit_length(self, index: int) -> int:
        """Returns the length in samples of the unit with the given index."""
        return self.first_unit_samples if index == 0 else self.unit_samples

    def unit_start(self, index: int) -> int:
        """Returns the first sample of the unit with the given index on the output timeline."""
        if index == 0:
            return 0
        return self.first_unit_samples + (index - 1) * self.unit_samples


@dataclass(frozen=True)
class VideoFrame:
    """One camera frame.

    The image array is stored as a read-only view without copying; the producer must not modify
    the underlying buffer afterwards.

    Attributes:
        image: ``(H, W, 3)`` RGB or ``(H, W)`` grayscale ``uint8`` image, each side in
            ``1..4096`` px.
        t: Session time of the frame, in seconds (finite).
        seq: Producer sequence number (non-negative).
    """

    image: np.ndarray
    t: float
    seq: int = 0

    def __post_init__(self) -> None:
        """Validates the frame.

        Raises:
            InputError: With field ``frame.image``, ``frame.t`` or ``frame.seq``.
        """
        image = self.image
        if not isinstance(image, np.ndarray):
            raise InputError("frame.image", f"expected a numpy.ndarray, got {type(image).__name__}")
        if image.dtype != np.uint8:
            raise InputError("frame.image", f"expected dtype uint8, got {image.dtype}")
        if not (image.ndim == 2 or (image.ndim == 3 and image.shape[2] == 3)):
            raise InputError(
                "frame.image",
                f"expected shape (H, W, 3) or (H, W), got {image.ndim}-D shape {image.shape}",
            )
        height, width = image.shape[:2]
        if height == 0 or width == 0:
            raise InputError("frame.image", f"image is empty (shape {image.shape})")
        if height > MAX_FRAME_SIDE or width > MAX_FRAME_SIDE:
            raise InputError(
                "frame.image",
                f"image {width}x{height} px exceeds the {MAX_FRAME_SIDE} px limit per side",
            )
        t = self.t
        if not isinstance(t, numbers.Real) or isinstance(t, bool) or not math.isfinite(t):
            raise InputError("frame.t", f"expected a finite number of seconds, got {t!r}")
        if not _is_int(self.seq) or self.seq < 0:
            raise InputError("frame.seq", f"expected a non-negative integer, got {self.seq!r}")
        view = image.view()
        view.flags.writeable = False
        object.__setattr__(self, "image", view)
        object.__setattr__(self, "t", float(t))
        object.__setattr__(self, "seq", int(self.seq))


def _read_only_1d(samples: np.ndarray) -> npt.NDArray[np.float32]:
    """``samples`` as a read-only 1-D float32 array (a view where no conversion is needed)."""
    audio = np.asarray(samples, dtype=np.float32)
    if audio.ndim != 1:
        raise ValueError(f"audio: expected a 1-D array, got shape {audio.shape}")
    if audio.flags.writeable:
        audio = audio.view()
        audio.flags.writeable = False
    return audio


@dataclass(frozen=True)
class InputUnit:
    """One assembled input unit.

    Attributes:
        index: Unit number; the first unit of a session is 0. Indices of dropped units are
            skipped, never reused.
        start_sample: Position of ``audio[0]`` on the output timeline.
        audio: Mono float32 audio, read-only.
        frame: Newest camera frame when the unit completed, if any.
        texts: Injected texts, in arrival order.
        valid_samples: Number of real samples at the start of ``audio``; the rest is zero
            padding (only the unit returned by :meth:`UnitAssembler.flush` is padded). ``None``
            at construction means "all of them" and is replaced by ``len(audio)``.
        sample_rate: Sample rate of ``audio``, in Hz.
    """

    index: int
    start_sample: int
    audio: npt.NDArray[np.float32]
    frame: VideoFrame | None = None
    texts: tuple[str, ...] = ()
    valid_samples: int | None = None
    sample_rate: int = 16000

    def __post_init__(self) -> None:
        """Normalises and checks the fields.

        Raises:
            ValueError: If a field is inconsistent (a programming error, not bad sensor input).
        """
        audio = _read_only_1d(self.audio)
        object.__setattr__(self, "audio", audio)
        texts = tuple(self.texts)
        if not all(isinstance(t, str) for t in texts):
            raise ValueError("texts: expected a sequence of str")
        object.__setattr__(self, "texts", texts)
        valid = len(audio) if self.valid_samples is None else self.valid_samples
        if not _is_int(valid) or not 0 <= valid <= len(audio):
            raise ValueError(f"valid_samples: must be in 0..{len(audio)}, got {valid!r}")
        object.__setattr__(self, "valid_samples", int(valid))
        if not _is_int(self.index) or self.index < 0:
            raise ValueError(f"index: must be a non-negative integer, got {self.index!r}")
        if not _is_int(self.start_sample) or self.start_sample < 0:
            raise ValueError(f"start_sample: must be non-negative, got {self.start_sample!r}")
        if not _is_int(self.sample_rate) or self.sample_rate < 1:
            raise ValueError(f"sample_rate: must be positive, got {self.sample_rate!r}")

    @property
    def duration_s(self) -> float:
        """Length of ``audio`` (padding included), in seconds."""
        return len(self.audio) / self.sample_rate

    @property
    def start_s(self) -> float:
        """Session time of the first sample, in seconds."""
        return self.start_sample / self.sample_rate

    @property
    def end_s(self) -> float:
        """Session time just after the last sample (padding included), in seconds."""
        return (self.start_sample + len(self.audio)) / self.sample_rate

    @property
    def is_padded(self) -> bool:
        """Whether the unit ends with zero padding (``valid_samples < len(audio)``)."""
        return self.valid_samples != len(self.audio)


@dataclass(frozen=True)
class PartialUnit:
    """The unit in progress: audio taken towards it so far (:meth:`UnitAssembler.partial`).

    What a frontend that hears audio as it arrives (:meth:`~venus_ros.core.frontend.Frontend.
    hear`) is given between boundaries; the samples are exactly those the completed unit will
    hold at the same positions.

    Attributes:
        index: The index the unit will have.
        start_sample: Its first sample on the output timeline.
        length: Its full length in samples (when it completes).
        offset: Position of ``audio[0]`` within the unit.
        audio: Mono float32 samples ``[offset, offset + len(audio))`` of the unit, read-only.
        sample_rate: Sample rate of ``audio``, in Hz.
    """

    index: int
    start_sample: int
    length: int
    offset: int
    audio: npt.NDArray[np.float32]
    sample_rate: int = 16000

    def __post_init__(self) -> None:
        """Checks the fields.

        Raises:
            ValueError: The piece does not fit in its unit (a programming error).
        """
        audio = _read_only_1d(self.audio)
        object.__setattr__(self, "audio", audio)
        if not (
            _is_int(self.offset) and 0 <= self.offset and self.offset + audio.size <= self.length
        ):
            raise ValueError(
                f"offset: samples {self.offset}..{self.offset + audio.size} do not fit in a unit "
                f"of {self.length}"
            )

    @property
    def end(self) -> int:
        """Position within the unit just past the last sample."""
        return self.offset + int(self.audio.size)

    @property
    def end_s(self) -> float:
        """Session time just after the last sample, in seconds."""
        return (self.start_sample + self.end) / self.sample_rate


def _as_mono_float32(samples: np.ndarray) -> npt.NDArray[np.float32]:
    """Validates mono audio and returns it as a fresh, contiguous 1-D float32 array.

    Raises:
        InputError: With field ``audio.dtype``, ``audio.channels`` or ``audio.samples``.
    """
    if not isinstance(samples, np.ndarray):
        raise InputError("audio.dtype", f"expected a numpy.ndarray, got {type(samples).__name__}")
    dtype = samples.dtype
    is_float = dtype.kind == "f" and dtype.itemsize in (4, 8)
    is_int16 = dtype.kind == "i" and dtype.itemsize == 2
    if not (is_float or is_int16):
        raise InputError("audio.dtype", f"expected float32, float64 or int16 samples, got {dtype}")
    if samples.ndim == 2:
        if samples.shape[1] != 1:
            raise InputError(
                "audio.channels",
                f"expected mono audio of shape (n,) or (n, 1), got {samples.shape[1]} channels "
                f"(shape {samples.shape})",
            )
    elif samples.ndim != 1:
        raise InputError(
            "audio.channels",
            f"expected mono audio of shape (n,) or (n, 1), got a {samples.ndim}-D array "
            f"(shape {samples.shape})",
        )
    flat = samples.reshape(-1)
    if is_int16:
        return flat.astype(np.float32) * np.float32(_INT16_SCALE)
    bad = flat.size - int(np.count_nonzero(np.isfinite(flat)))
    if bad:
        raise InputError("audio.samples", f"contains NaN or inf ({bad} of {flat.size} values)")
    with np.errstate(over="ignore"):
        out = flat.astype(np.float32)  # always a fresh, native-order, contiguous copy
    if dtype.itemsize == 8:
        overflow = out.size - int(np.count_nonzero(np.isfinite(out)))
        if overflow:
            raise InputError(
                "audio.samples",
                f"values exceed the float32 range ({overflow} of {out.size} values)",
            )
    return out


def _check_rate(rate: int, supported: tuple[int, ...] | None) -> int:
    if not _is_int(rate) or int(rate) < 1:
        raise InputError("audio.sample_rate", f"expected a positive integer in Hz, got {rate!r}")
    value = int(rate)
    if supported is not None and value not in supported:
        listed = ", ".join(str(r) for r in supported)
        raise InputError(
            "audio.sample_rate", f"{value} Hz is not supported; supported rates: {listed}"
        )
    return value


def resample(samples: np.ndarray, from_rate: int, to_rate: int = 16000) -> npt.NDArray[np.float32]:
    """Resamples a whole mono signal at once (offline counterpart of the assembler).

    Accepts the same inputs as :meth:`UnitAssembler.push_audio` (any positive rates). The result
    equals what a ``soxr.ResampleStream`` produces for the same signal, drained with
    ``last=True``, whatever the chunking.

    Args:
        samples: 1-D or ``(n, 1)`` float32/float64 (or int16, scaled by 1/32768) samples.
        from_rate: Input sample rate, in Hz.
        to_rate: Output sample rate, in Hz.

    Returns:
        1-D float32 array of about ``round(len(samples) * to_rate / from_rate)`` samples.

    Raises:
        InputError: On invalid samples or rates.
    """
    x = _as_mono_float32(samples)
    src = _check_rate(from_rate, None)
    dst = _check_rate(to_rate, None)
    if src == dst or x.size == 0:
        return x if src == dst else np.zeros(0, dtype=np.float32)
    return np.ascontiguousarray(soxr.resample(x, src, dst), dtype=np.float32)


@dataclass
class _Counters:
    units_emitted: int = 0
    dropped_units: int = 0
    dropped_samples: int = 0
    stale_frames: int = 0
    samples_in: int = 0


@dataclass
class _State:
    stream: soxr.ResampleStream | None = None
    stream_rate: int | None = None
    buffer: npt.NDArray[np.float32] = field(default_factory=lambda: np.zeros(0, np.float32))
    next_index: int = 0
    queue: deque[InputUnit] = field(default_factory=deque)
    frame: VideoFrame | None = None
    texts: list[str] = field(default_factory=list)
    counters: _Counters = field(default_factory=_Counters)


class UnitAssembler:
    """Cuts streaming audio, frames and injected text into :class:`InputUnit` objects.

    Every input is validated before any state changes, so a rejected push (an
    :class:`InputError`) loses nothing and applies nothing. All methods are thread-safe.

    Units complete as soon as enough resampled audio is buffered and wait in a queue for
    :meth:`pop_unit`. When more than ``config.max_pending_units`` units wait, the oldest whole
    units are dropped; their indices are skipped (``start_sample`` stays on the true timeline)
    and their texts move to the next unit.

    Args:
        config: Unit sizing; defaults to :class:`UnitConfig()`.
    """

    def __init__(self, config: UnitConfig | None = None) -> None:
        self._config = UnitConfig() if config is None else config
        if not isinstance(self._config, UnitConfig):
            raise TypeError(f"config: expected UnitConfig, got {type(config).__name__}")
        self._lock = threading.RLock()
        self._state = _State()

    @property
    def config(self) -> UnitConfig:
        """The unit configuration."""
        return self._config

    # ------------------------------------------------------------------ inputs

    def push_audio(self, samples: np.ndarray, sample_rate: int) -> None:
        """Appends microphone audio.

        Args:
            samples: 1-D or ``(n, 1)`` float32/float64 samples in ``[-1, 1]`` (not clipped), or
                int16 samples (scaled by 1/32768). An empty array is a no-op.
            sample_rate: Rate of ``samples``; one of ``config.supported_rates``. It may change
                between pushes; the previous rate's resampler is then drained first.

        Raises:
            InputError: With field ``audio.dtype``, ``audio.channels``, ``audio.sample_rate``
                or ``audio.samples``; the assembler is left unchanged.
        """
        x = _as_mono_float32(samples)
        rate = _check_rate(sample_rate, self._config.supported_rates)
        if x.size == 0:
            return
        with self._lock:
            st = self._state
            if st.stream_rate != rate:
                self._drain_stream()
                st.stream_rate = rate
                st.stream = (
                    None
                    if rate == self._config.sample_rate
                    else soxr.ResampleStream(rate, self._config.sample_rate, 1, dtype="float32")
                )
            out = x if st.stream is None else st.stream.resample_chunk(x)
            self._append(out)

    def push_frame(self, frame: VideoFrame) -> None:
        """Offers a camera frame; only the newest one (by ``t``) is kept.

        A frame older than the current one is ignored and counted in :attr:`stale_frames`; a
        frame with the same ``t`` replaces it.

        Args:
            frame: The frame (validated on construction).

        Raises:
            InputError: With field ``frame`` if ``frame`` is not a :class:`VideoFrame`.
        """
        if not isinstance(frame, VideoFrame):
            raise InputError("frame", f"expected a VideoFrame, got {type(frame).__name__}")
        with self._lock:
            st = self._state
            if st.frame is not None and frame.t < st.frame.t:
                st.counters.stale_frames += 1
                return
            st.frame = frame

    def push_text(self, text: str) -> None:
        """Queues injected text for the next unit that completes.

        Protocol tags in it are escaped (:func:`~venus_ros.core.protocol.escape_tags`) and lone
        surrogates replaced: injected text comes from outside.

        Args:
            text: The text; must not contain NUL characters.

        Raises:
            InputError: With field ``text`` if ``text`` is not a str or contains NUL.
        """
        if not isinstance(text, str):
            raise InputError("text", f"expected str, got {type(text).__name__}")
        if "\x00" in text:
            raise InputError("text", f"contains a NUL character at offset {text.index(chr(0))}")
        # Outside text must not be able to open a private span (a forged <backend> reply) or
        # form a special token for the model.
        text = escape_tags(clean_text(text))
        with self._lock:
            self._state.texts.append(text)

    # ----------------------------------------------------------------- outputs

    def pop_unit(self) -> InputUnit | None:
        """Returns the oldest complete unit, or ``None`` if none is waiting."""
        with self._lock:
            st = self._state
            if not st.queue:
                return None
            st.counters.units_emitted += 1
            return st.queue.popleft()

    def partial(self, since: int = 0) -> PartialUnit | None:
        """The unit in progress: the samples taken towards it so far, from ``since`` on.

        Only meaningful once complete units have been collected (:meth:`pop_unit`); audio still
        held by the resampler is not included.

        Args:
            since: Position within the unit from which to return samples (those before it were
                read already).

        Returns:
            A copy of samples ``[since, buffered)`` of the next unit to complete, or ``None`` if
            there are none.
        """
        with self._lock:
            st = self._state
            since = max(int(since), 0)
            if st.buffer.size <= since:
                return None
            return PartialUnit(
                index=st.next_index,
                start_sample=self._config.unit_start(st.next_index),
                length=self._config.unit_length(st.next_index),
                offset=since,
                audio=st.buffer[since:].copy(),
                sample_rate=self._config.sample_rate,
            )

    def flush(self) -> InputUnit | None:
        """Ends the stream: drains the resampler and returns the final partial unit.

        Full units completed by the drain are queued as usual (collect them with
        :meth:`pop_unit`; they precede the returned unit). The remaining audio is returned as
        one unit zero-padded to full length, with ``valid_samples`` real samples. If no audio
        remains but texts are pending, an all-zero unit with ``valid_samples == 0`` carries
        them. The timeline continues after the padded unit, so pushing may resume.

        Returns:
            The padded final unit, or ``None`` if nothing remained.
        """
        with self._lock:
            self._drain_stream()
            st = self._state
            st.stream = None
            st.stream_rate = None
            valid = len(st.buffer)
            if valid == 0 and not st.texts:
                return None
            length = self._config.unit_length(st.next_index)
            audio = np.zeros(length, dtype=np.float32)
            audio[:valid] = st.buffer
            unit = self._make_unit(audio, valid)
            st.buffer = np.zeros(0, dtype=np.float32)
            st.counters.units_emitted += 1
            return unit

    def reset(self) -> None:
        """Forgets all audio, frames, texts, queued units and counters."""
        with self._lock:
            self._state = _State()

    # ---------------------------------------------------------------- counters

    @property
    def units_emitted(self) -> int:
        """Units handed to the consumer by :meth:`pop_unit` and :meth:`flush`."""
        return self._state.counters.units_emitted

    @property
    def dropped_units(self) -> int:
        """Complete units dropped because the consumer fell behind."""
        return self._state.counters.dropped_units

    @property
    def dropped_samples(self) -> int:
        """Output samples in dropped units."""
        return self._state.counters.dropped_samples

    @property
    def stale_frames(self) -> int:
        """Frames ignored because a newer one was already held."""
        return self._state.counters.stale_frames

    @property
    def samples_in(self) -> int:
        """Output-rate samples produced so far by the resampler (padding excluded)."""
        return self._state.counters.samples_in

    @property
    def pending_units(self) -> int:
        """Complete units waiting for :meth:`pop_unit`."""
        return len(self._state.queue)

    @property
    def buffered_samples(self) -> int:
        """Output-rate samples buffered towards the next unit (resampler backlog excluded)."""
        return len(self._state.buffer)

    # --------------------------------------------------------------- internals

    def _drain_stream(self) -> None:
        st = self._state
        if st.stream is not None:
            tail = st.stream.resample_chunk(np.zeros(0, dtype=np.float32), last=True)
            self._append(tail)
        st.stream = None
        st.stream_rate = None

    def _append(self, out: np.ndarray) -> None:
        st = self._state
        out = np.asarray(out, dtype=np.float32).reshape(-1)
        if out.size == 0:
            return
        st.counters.samples_in += int(out.size)
        buf = np.concatenate((st.buffer, out)) if st.buffer.size else out
        pos = 0
        while buf.size - pos >= (length := self._config.unit_length(st.next_index)):
            self._enqueue(self._make_unit(buf[pos : pos + length].copy(), length))
            pos += length
        st.buffer = buf[pos:].copy()

    def _make_unit(self, audio: npt.NDArray[np.float32], valid: int) -> InputUnit:
        st = self._state
        unit = InputUnit(
            index=st.next_index,
            start_sample=self._config.unit_start(st.next_index),
            audio=audio,
            frame=st.frame,
            texts=tuple(st.texts),
            valid_samples=valid,
            sample_rate=self._config.sample_rate,
        )
        st.texts.clear()
        st.next_index += 1
        return unit

    def _enqueue(self, unit: InputUnit) -> None:
        st = self._state
        st.queue.append(unit)
        while len(st.queue) > self._config.max_pending_units:
            dropped = st.queue.popleft()
            st.counters.dropped_units += 1
            st.counters.dropped_samples += dropped.valid_samples or 0
            if dropped.texts:
                nxt = st.queue[0]
                st.queue[0] = replace(nxt, texts=dropped.texts + nxt.texts)
