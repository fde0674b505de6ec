"""Audio sources and sinks: WAV files and sound cards (PyAudio), mono only. No ROS.

Sources hand out consecutive :class:`AudioBlock` chunks whose ``first_sample`` counts samples
from the start of the stream, so a consumer can check that nothing was lost or reordered.

Pacing: a source never sleeps. :meth:`WavSource.read` returns the next chunk at once (a file
can be read as fast as the caller likes); the mic node calls it from a timer at the chunk
period to play a file in real time. :class:`PyAudioCapture` is paced by the sound card:
PortAudio calls ``on_chunk`` from its own thread once per chunk.

With no sound card, PortAudio's ALSA and JACK back ends print dozens of lines to file
descriptor 2 while probing. Opening and closing a device therefore runs with fd 2 pointed at
``/dev/null`` (:func:`quiet_stderr`), and every failure becomes a single :class:`DeviceError`
that says what is wrong and how to run without the device (a file source or sink, or a
virtual device).

PyAudio is imported only when a device is opened.
"""

from __future__ import annotations

import os
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

import numpy as np
import soundfile as sf

from venus_ros.core.errors import DeviceError

#: What :class:`WavSource` does when the file ends.
AFTER_END = ("silence", "stop")
#: Sample types a source can produce.
SOURCE_DTYPES = ("int16", "float32")
#: WAV sample formats :class:`WavSink` writes (FLOAT keeps the played samples exact).
SINK_SUBTYPES = ("PCM_16", "FLOAT")

_INT16_SCALE = 32767.0


class AudioBlock(NamedTuple):
    """One chunk of mono audio.

    Attributes:
        first_sample: index of ``samples[0]`` in the stream, counted from 0.
        samples: 1-D int16 or float32 samples.
    """

    first_sample: int
    samples: np.ndarray


def chunk_samples(sample_rate: int, chunk_ms: int) -> int:
    """Samples in a chunk of ``chunk_ms`` milliseconds at ``sample_rate`` (rounded, >= 1).

    Raises:
        ValueError: if the rate or duration is not positive.
    """
    if sample_rate <= 0:
        raise ValueError(f"sample_rate must be > 0, got {sample_rate}")
    if chunk_ms <= 0:
        raise ValueError(f"chunk_ms must be > 0, got {chunk_ms}")
    return max(1, round(sample_rate * chunk_ms / 1000))


def device_fix(param: str) -> str:
    """How to run without a sound card, for the node parameter ``param`` (source or sink)."""
    return (
        f"To run without it, use a file {param} (`--ros-args -p {param}:=file:PATH`, or "
        f"`{param}: file:PATH` in the parameter file), or a virtual device (a PulseAudio null "
        f"sink or an ALSA file plugin; see README, audio devices)."
    )


# --- files -----------------------------------------------------------------------------------


class WavSource:
    """A mono sound file as a stream of fixed-size chunks.

    Reads anything libsndfile reads (WAV, FLAC, OGG...), block by block, so long files are not
    loaded whole. If ``sample_rate`` differs from the file's rate the audio is resampled with
    soxr on the fly. Not thread-safe: one caller reads.

    Args:
        path: the file.
        chunk_ms: chunk duration.
        after_end: ``"silence"``: after the file, keep returning chunks of zeros, like a
            microphone in a quiet room (the last partial chunk is zero-padded); ``"stop"``:
            return the last partial chunk as it is, then ``None``.
        dtype: ``"int16"`` or ``"float32"`` samples.
        sample_rate: rate of the chunks; ``None`` keeps the file's rate.

    Raises:
        DeviceError: the file is missing, unreadable or not mono (the message names the file).
        ValueError: a bad ``chunk_ms``, ``after_end``, ``dtype`` or ``sample_rate``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        chunk_ms: int,
        after_end: str = "silence",
        dtype: str = "int16",
        sample_rate: int | None = None,
    ) -> None:
        if after_end not in AFTER_END:
            raise ValueError(f"after_end must be one of {', '.join(AFTER_END)}, got {after_end!r}")
        if dtype not in SOURCE_DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(SOURCE_DTYPES)}, got {dtype!r}")
        self.path = Path(path)
        self.after_end = after_end
        self.dtype = np.dtype(dtype)
        try:
            self._file = sf.SoundFile(str(self.path))
        except (sf.SoundFileError, OSError) as exc:
            raise DeviceError(f"cannot read audio file {self.path}: {exc}") from exc
        if self._file.channels != 1:
            channels = self._file.channels
            self._file.close()
            raise DeviceError(
                f"audio file {self.path} has {channels} channels; the file source needs mono "
                f"(1 channel) audio (convert it, e.g. `sox IN.wav -c 1 OUT.wav`)"
            )
        #: The file's own sample rate.
        self.file_rate = int(self._file.samplerate)
        #: The rate of the chunks.
        self.sample_rate = int(sample_rate) if sample_rate is not None else self.file_rate
        #: Samples per chunk.
        self.chunk_samples = chunk_samples(self.sample_rate, chunk_ms)
        self._resampler: Any = None
        if self.sample_rate != self.file_rate:
            import soxr

            self._resampler = soxr.ResampleStream(
                self.file_rate, self.sample_rate, 1, dtype="float32"
            )
        self._read_frames = max(self.chunk_samples, 4096)
        self._pending = np.zeros(0, dtype=self.dtype)
        self._file_done = False
        self._next_sample = 0
        self._file_samples: int | None = None

    @property
    def ended(self) -> bool:
        """All of the file's samples have been handed out."""
        return self._file_samples is not None and self._next_sample >= self._file_samples

    @property
    def file_samples(self) -> int | None:
        """Samples the file gives at :attr:`sample_rate`, known once it has been read through."""
        return self._file_samples

    def read(self) -> AudioBlock | None:
        """The next chunk, or ``None`` once a ``"stop"`` source is exhausted.

        Raises:
            DeviceError: the file cannot be read any more.
        """
        n = self.chunk_samples
        while self._pending.shape[0] < n and not self._file_done:
            self._pull()
        if self._pending.shape[0] >= n:
            samples, self._pending = self._pending[:n], self._pending[n:]
        elif self._pending.shape[0] > 0:
            samples, self._pending = self._pending, self._pending[:0]
            if self.after_end == "silence":
                samples = np.concatenate([samples, np.zeros(n - samples.shape[0], self.dtype)])
        elif self.after_end == "silence":
            samples = np.zeros(n, dtype=self.dtype)
        else:
            return None
        block = AudioBlock(self._next_sample, np.ascontiguousarray(samples))
        self._next_sample += samples.shape[0]
        return block

    def __iter__(self) -> Iterator[AudioBlock]:
        """Chunks until the source stops (never, with ``after_end="silence"``)."""
        while (block := self.read()) is not None:
            yield block

    def close(self) -> None:
        """Close the file (idempotent)."""
        self._file.close()

    def __enter__(self) -> WavSource:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _pull(self) -> None:
        """Read one block from the file (resampled, converted) onto the pending samples."""
        read_dtype = "float32" if self._resampler is not None else self.dtype.name
        try:
            data = self._file.read(self._read_frames, dtype=read_dtype, always_2d=False)
        except (sf.SoundFileError, OSError) as exc:
            raise DeviceError(f"cannot read audio file {self.path}: {exc}") from exc
        eof = data.shape[0] < self._read_frames
        if self._resampler is not None:
            data = self._resampler.resample_chunk(data, last=eof)
            if self.dtype == np.int16:
                data = np.clip(np.round(data * _INT16_SCALE), -32768, 32767).astype(np.int16)
        if data.shape[0]:
            self._pending = np.concatenate([self._pending, data.astype(self.dtype, copy=False)])
        if eof:
            self._file_done = True
            self._file_samples = self._next_sample + self._pending.shape[0]


class WavSink:
    """Appends mono float32 samples to a WAV file.

    The WAV header carries the final length only after :meth:`close`; :meth:`flush` pushes the
    samples to disk.

    Args:
        path: the file (its folder is created; an existing file is replaced).
        sample_rate: the file's rate.
        subtype: ``"FLOAT"`` (exact) or ``"PCM_16"``.

    Raises:
        DeviceError: the file cannot be created (the message names it).
    """

    def __init__(
        self, path: str | os.PathLike[str], sample_rate: int, subtype: str = "FLOAT"
    ) -> None:
        if subtype not in SINK_SUBTYPES:
            raise ValueError(f"subtype must be one of {', '.join(SINK_SUBTYPES)}, got {subtype!r}")
        if sample_rate <= 0:
            raise ValueError(f"sample_rate must be > 0, got {sample_rate}")
        self.path = Path(path)
        self.sample_rate = int(sample_rate)
        #: Samples written so far.
        self.samples_written = 0
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = sf.SoundFile(
                str(self.path),
                "w",
                samplerate=self.sample_rate,
                channels=1,
                subtype=subtype,
                format="WAV",
            )
        except (sf.SoundFileError, OSError) as exc:
            raise DeviceError(f"cannot write audio file {self.path}: {exc}") from exc

    @property
    def closed(self) -> bool:
        """The file has been closed."""
        return bool(self._file.closed)

    def write(self, samples: np.ndarray) -> None:
        """Append 1-D float samples (nominally in [-1, 1]).

        Raises:
            ValueError: the samples are not 1-D.
            DeviceError: the write failed (disk full...).
        """
        samples = np.asarray(samples, dtype=np.float32)
        if samples.ndim != 1:
            raise ValueError(f"expected 1-D mono samples, got shape {samples.shape}")
        if samples.shape[0] == 0:
            return
        try:
            self._file.write(samples)
        except (sf.SoundFileError, OSError) as exc:
            raise DeviceError(f"cannot write audio file {self.path}: {exc}") from exc
        self.samples_written += int(samples.shape[0])

    def flush(self) -> None:
        """Push written samples to disk."""
        if not self._file.closed:
            self._file.flush()

    def close(self) -> None:
        """Finish the header and close the file (idempotent)."""
        self._file.close()

    def __enter__(self) -> WavSink:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


# --- sound cards -----------------------------------------------------------------------------

_STDERR_LOCK = threading.Lock()


@contextmanager
def quiet_stderr() -> Iterator[None]:
    """Point file descriptor 2 at ``/dev/null`` for the duration, then restore it.

    Silences C libraries (ALSA, JACK) that print to fd 2 directly. Anything another thread
    writes to stderr meanwhile is lost too, so keep the block short.
    """
    with _STDERR_LOCK:
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, 2)
            finally:
                os.close(devnull)
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def _import_pyaudio(what: str, param: str) -> ModuleType:
    try:
        import pyaudio
    except ImportError as exc:
        raise DeviceError(
            f"{what}: PyAudio is not installed ({exc}; `pip install pyaudio` needs "
            f"portaudio19-dev). {device_fix(param)}"
        ) from exc
    return pyaudio


def _find_device(pa: Any, device: str, direction: str) -> int | None:
    """The PortAudio index for ``device`` ("" = the default, None), checked to exist.

    Raises:
        DeviceError: no such device, or it has no channels in ``direction``; the message
            lists the devices that do.
    """
    key = "maxInputChannels" if direction == "input" else "maxOutputChannels"
    infos = []
    for index in range(pa.get_device_count()):
        info = pa.get_device_info_by_index(index)
        if int(info.get(key, 0)) > 0:
            infos.append((index, str(info.get("name", ""))))
    listing = ", ".join(f"{i} {name!r}" for i, name in infos) or "none"
    spec = device.strip()
    if not spec:
        try:
            if direction == "input":
                pa.get_default_input_device_info()
            else:
                pa.get_default_output_device_info()
        except OSError as exc:
            raise DeviceError(
                f"no default audio {direction} device ({exc}; {direction} devices: {listing})"
            ) from exc
        return None
    if spec.isdigit():
        matches = [i for i, _ in infos if i == int(spec)]
    else:
        matches = [i for i, name in infos if spec.lower() in name.lower()]
    if not matches:
        raise DeviceError(
            f"no audio {direction} device {device!r} ({direction} devices: {listing})"
        )
    return matches[0]


class _PyAudioStream:
    """Shared open/close of one PyAudio stream with stderr noise suppressed."""

    _direction = "input"
    _param = "source"

    def __init__(self, device: str, sample_rate: int) -> None:
        if sample_rate <= 0:
            raise ValueError(f"sample_rate must be > 0, got {sample_rate}")
        self.device = device
        self.sample_rate = int(sample_rate)
        self._pa: Any = None
        self._stream: Any = None
        self._pyaudio: Any = None

    def _open(self, fmt_name: str, frames_per_buffer: int, callback: Callable[..., Any]) -> None:
        if self.device.strip():
            label = f"audio {self._direction} device {self.device!r}"
        else:
            label = f"the default audio {self._direction} device"
        self._pyaudio = _import_pyaudio(label, self._param)
        pyaudio = self._pyaudio
        try:
            with quiet_stderr():
                self._pa = pyaudio.PyAudio()
                index = _find_device(self._pa, self.device, self._direction)
                kwargs: dict[str, Any] = {
                    "format": getattr(pyaudio, fmt_name),
                    "channels": 1,
                    "rate": self.sample_rate,
                    "frames_per_buffer": frames_per_buffer,
                    "stream_callback": callback,
                    self._direction: True,
                    f"{self._direction}_device_index": index,
                }
                self._stream = self._pa.open(**kwargs)
        except DeviceError as exc:
            self.close()
            raise DeviceError(f"cannot open {label}: {exc}. {device_fix(self._param)}") from exc
        except (OSError, ValueError) as exc:
            self.close()
            raise DeviceError(
                f"cannot open {label} at {self.sample_rate} Hz mono: {exc}. "
                f"{device_fix(self._param)}"
            ) from exc

    @property
    def active(self) -> bool:
        """The stream is open and running."""
        stream = self._stream
        try:
            return stream is not None and bool(stream.is_active())
        except OSError:
            return False

    def close(self) -> None:
        """Stop and close the stream and PortAudio (idempotent)."""
        stream, pa = self._stream, self._pa
        self._stream = self._pa = None
        with quiet_stderr():
            if stream is not None:
                try:
                    stream.stop_stream()
                except OSError:
                    pass
                stream.close()
            if pa is not None:
                pa.terminate()


class PyAudioCapture(_PyAudioStream):
    """A microphone: int16 mono chunks delivered from PortAudio's callback thread.

    Args:
        device: ``""`` for the default input, a device index, or part of a device name.
        sample_rate: capture rate.
        chunk_ms: chunk duration (the sound card paces the chunks).
        on_chunk: called with each :class:`AudioBlock` on PortAudio's thread; it must return
            quickly. If it raises, capture stops and the exception is kept in :attr:`error`.
    """

    _direction = "input"
    _param = "source"

    def __init__(
        self,
        device: str,
        sample_rate: int,
        chunk_ms: int,
        on_chunk: Callable[[AudioBlock], None],
    ) -> None:
        super().__init__(device, sample_rate)
        self.chunk_samples = chunk_samples(self.sample_rate, chunk_ms)
        self.on_chunk = on_chunk
        #: Callbacks in which the sound card reported lost input.
        self.overflows = 0
        #: What ``on_chunk`` raised, if it did.
        self.error: BaseException | None = None
        self._next_sample = 0

    def start(self) -> None:
        """Open the device and start capturing.

        Raises:
            DeviceError: no such device, or it cannot capture at this rate (with the fixes).
        """
        self._open("paInt16", self.chunk_samples, self._callback)

    def _callback(
        self, in_data: bytes | None, frame_count: int, time_info: Any, status: int
    ) -> tuple[None, int]:
        pyaudio = self._pyaudio
        if status & pyaudio.paInputOverflow:
            self.overflows += 1
        samples = np.frombuffer(in_data or b"", dtype="<i2").astype(np.int16)
        block = AudioBlock(self._next_sample, samples)
        self._next_sample += int(samples.shape[0])
        try:
            self.on_chunk(block)
        except Exception as exc:  # kept for the owner: PortAudio would only print it
            self.error = exc
            return None, pyaudio.paComplete
        return None, pyaudio.paContinue


class PyAudioPlayback(_PyAudioStream):
    """A loudspeaker: :meth:`write` queues float32 samples, PortAudio's thread plays them.

    ``write`` never blocks. When the queue runs dry the card plays silence; when more than
    ``max_buffer_ms`` is queued the oldest samples are dropped (counted in
    :attr:`dropped_samples`).

    Args:
        device: ``""`` for the default output, a device index, or part of a device name.
        sample_rate: playback rate.
        max_buffer_ms: most audio held before the oldest is dropped.
    """

    _direction = "output"
    _param = "sink"

    def __init__(self, device: str, sample_rate: int, max_buffer_ms: int = 500) -> None:
        super().__init__(device, sample_rate)
        self.max_buffer_samples = chunk_samples(self.sample_rate, max_buffer_ms)
        #: Callbacks that found some queued audio but not enough to fill the buffer.
        self.underruns = 0
        #: Samples dropped because the queue was over ``max_buffer_ms``.
        self.dropped_samples = 0
        self._lock = threading.Lock()
        self._queue: deque[np.ndarray] = deque()
        self._queued = 0

    def start(self) -> None:
        """Open the device and start playing (silence until something is written).

        Raises:
            DeviceError: no such device, or it cannot play at this rate (with the fixes).
        """
        self._open("paFloat32", chunk_samples(self.sample_rate, 10), self._callback)

    def write(self, samples: np.ndarray) -> None:
        """Queue 1-D float samples for playback."""
        samples = np.ascontiguousarray(samples, dtype=np.float32).reshape(-1)
        if samples.shape[0] == 0:
            return
        with self._lock:
            self._queue.append(samples)
            self._queued += samples.shape[0]
            excess = self._queued - self.max_buffer_samples
            while excess > 0:
                head = self._queue[0]
                take = min(excess, head.shape[0])
                if take == head.shape[0]:
                    self._queue.popleft()
                else:
                    self._queue[0] = head[take:]
                self._queued -= take
                self.dropped_samples += take
                excess -= take

    @property
    def queued_samples(self) -> int:
        """Samples written and not yet handed to the card."""
        with self._lock:
            return self._queued

    def _callback(
        self, in_data: bytes | None, frame_count: int, time_info: Any, status: int
    ) -> tuple[bytes, int]:
        out = np.zeros(frame_count, dtype=np.float32)
        filled = 0
        with self._lock:
            had_audio = self._queued > 0
            while filled < frame_count and self._queue:
                head = self._queue[0]
                take = min(frame_count - filled, head.shape[0])
                out[filled : filled + take] = head[:take]
                if take == head.shape[0]:
                    self._queue.popleft()
                else:
                    self._queue[0] = head[take:]
                filled += take
                self._queued -= take
        if had_audio and filled < frame_count:
            self.underruns += 1
        return out.tobytes(), self._pyaudio.paContinue
