"""Training phrases as the frontend's recogniser writes them when they are spoken.

The cascade's text models (the addressee head, the delegation router) never see text as it was
written: they read what Whisper tiny.en made of a voice, names it does not know turned into
other words, short words dropped, whole phrases garbled. :func:`recognised_forms` speaks each
phrase with seeded training voices of the synthesizer (espeak-ng at the training rates, half of
them with room noise) and writes down the final transcript the frontend would read
(:func:`frontend_reader`: while it is idle, the final beam for speech over
:data:`~venus_ros.audio.asr.EXPECT_MAX_S`); :func:`cached_forms` keeps the result in a JSON
file, so a model is retrained from the same forms without the recogniser (which may write
other words on another CPU). Each form is kept under a key that names how it was read
(:data:`READINGS`, :func:`form_key`).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from venus_ros.audio.asr import SegmentTranscriber, WhisperAsr

__all__ = [
    "NOISE_SHARE",
    "NOISE_SNR_DB",
    "READINGS",
    "cached_forms",
    "form_key",
    "frontend_reader",
    "recognised_forms",
]

NOISE_SHARE = 0.5
"""Share of the spoken phrases with room noise added."""
NOISE_SNR_DB: tuple[float, float] = (10.0, 25.0)
"""Range of the speech-to-noise ratio where noise is added."""
READINGS: tuple[str, ...] = ("idle-final", "greedy")
"""How :func:`recognised_forms` may read what it speaks (part of its cache keys, so forms read
one way are never taken for another): ``"idle-final"`` (the default) as the frontend reads a
final transcript while it is idle; ``"greedy"`` by the same recogniser decoding greedily
whatever the length, how the delegation router's committed forms were read
(:data:`~venus_ros.training.router.HEARD_READING`)."""


def form_key(text: str, count: int, *, seed: int = 0, reading: str = READINGS[0]) -> str:
    """The cache key of ``text`` spoken by ``count`` voices with ``seed``, read ``reading``."""
    return f"{seed}|{count}|{reading}|{text}"


def frontend_reader(
    *, over_turn: bool = False, asr: WhisperAsr | None = None
) -> SegmentTranscriber:
    """A :class:`~venus_ros.audio.asr.SegmentTranscriber` that reads speech as the cascade
    frontend does: its recogniser (tiny.en with the final beam, which the transcriber uses for
    finals over :data:`~venus_ros.audio.asr.EXPECT_MAX_S`) and the committed command probe;
    over the assistant's turn it also weighs readings against the phrases the floor policy
    expects (:attr:`~venus_ros.frontends.cascade.floor.TrainedFloorPolicy.expected_over_turn`;
    partials greedy and never re-run), while idle against none.

    Args:
        over_turn: Read as the frontend reads speech over the assistant's turn.
        asr: A :class:`~venus_ros.audio.asr.WhisperAsr` (default: tiny.en with the frontend's
            final beam, no word alignment, and the committed command probe).
    """
    from venus_ros.audio.asr import PhraseProbe, SegmentTranscriber, WhisperAsr
    from venus_ros.frontends.cascade.floor import TrainedFloorPolicy
    from venus_ros.frontends.policy import FINAL_BEAM_SIZE

    if asr is None:
        asr = WhisperAsr(beam_size=FINAL_BEAM_SIZE, word_timestamps=False)
        if TrainedFloorPolicy.expected_probe is not None:
            probe = PhraseProbe.load(TrainedFloorPolicy.expected_probe)
            if probe.model == asr.model_name:
                asr.use_probe(probe)
    reader = SegmentTranscriber(asr)
    if over_turn:
        reader.expect = tuple(TrainedFloorPolicy.expected_over_turn)
    return reader


def recognised_forms(
    phrases: Sequence[tuple[str, int]],
    *,
    seed: int = 0,
    reading: str = READINGS[0],
    asr: WhisperAsr | None = None,
    cache: dict[str, list[str]] | None = None,
    progress: bool = False,
) -> dict[str, list[str]]:
    """Every phrase spoken by seeded training voices (espeak-ng, the synthesizer's training
    voices and rates, half of them with room noise) and written down by the frontend's
    recogniser as it reads a final transcript while idle (:func:`frontend_reader`): how the
    frontend's text models really read it.

    Args:
        phrases: ``(text, voices)`` pairs: each text is spoken by that many distinct voices.
        seed: Fixes voices, rates and noise (each phrase from its own generator).
        reading: One of :data:`READINGS`.
        asr: The recogniser :func:`frontend_reader` reads with (default: the frontend's).
        cache: Recognised forms per key, read and filled in.
        progress: Print a line every 100 phrases.

    Returns:
        The recognised forms per phrase text.

    Raises:
        ValueError: An unknown ``reading``.
    """
    if reading not in READINGS:
        raise ValueError(f"reading: must be one of {READINGS}, got {reading!r}")
    cache = {} if cache is None else cache
    speaker: _Speaker | None = None
    out: dict[str, list[str]] = {}
    for i, (text, count) in enumerate(phrases):
        key = form_key(text, count, seed=seed, reading=reading)
        forms = cache.get(key)
        if forms is None:
            speaker = speaker or _Speaker(asr)
            # the voices, rates and noise are the spoken sample's, whatever the reading
            spoken = f"{seed}|{count}|{text}"
            rng = np.random.default_rng([seed, zlib.crc32(spoken.encode())])
            forms = cache[key] = speaker.heard(text, count, rng, reading)
        out[text] = forms
        if progress and i % 100 == 99:
            print(f"  {i + 1}/{len(phrases)} phrases spoken", flush=True)
    return out


def cached_forms(
    phrases: Sequence[tuple[str, int]],
    path: str | Path,
    *,
    seed: int = 0,
    reading: str = READINGS[0],
    fresh: bool = False,
    progress: bool = False,
) -> dict[str, list[str]]:
    """:func:`recognised_forms` through the JSON cache file ``path``: only phrases it does not
    hold yet are spoken, and the file is rewritten when any were.

    Args:
        phrases: As for :func:`recognised_forms`.
        path: The cache file (created with its folder when missing; an unreadable one is
            ignored and replaced).
        seed: As for :func:`recognised_forms`.
        reading: As for :func:`recognised_forms`.
        fresh: Recognise every phrase again, ignoring what the file holds.
        progress: As for :func:`recognised_forms`.
    """
    path = Path(path)
    known = {} if fresh else _read_json(path)
    size = len(known)
    heard = recognised_forms(phrases, seed=seed, reading=reading, cache=known, progress=progress)
    if len(known) > size:  # something was recognised: keep it for the next run
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(known, indent=0, sort_keys=True) + "\n", encoding="utf-8")
    return heard


class _Speaker:
    """Training voices and the recogniser, built on first use."""

    def __init__(self, asr: WhisperAsr | None = None) -> None:
        self._reader = frontend_reader(asr=asr)
        self._engines: dict[str, Any] = {}

    def heard(
        self, text: str, count: int, rng: np.random.Generator, reading: str = READINGS[0]
    ) -> list[str]:
        """What the recogniser writes for ``text`` spoken by ``count`` distinct voices, read
        ``reading`` (:data:`READINGS`)."""
        import soxr

        from venus_ros.audio.asr import SAMPLE_RATE
        from venus_ros.audio.tts import EspeakTts
        from venus_ros.eval.synth import FAMILIES, RATE_WPM, room_noise, trim

        voices = FAMILIES["train"].espeak_voices
        lead = np.zeros(SAMPLE_RATE // 5, np.float32)
        out = []
        for voice in rng.choice(voices, size=min(count, len(voices)), replace=False):
            engine = self._engines.get(str(voice))
            if engine is None:
                engine = self._engines[str(voice)] = EspeakTts(str(voice), output_rate=SAMPLE_RATE)
            engine.rate_wpm = int(rng.integers(RATE_WPM[0], RATE_WPM[1] + 1))
            audio, rate = engine.render(text.replace("-", " "))
            audio = np.asarray(audio, np.float32)
            if rate != SAMPLE_RATE:
                audio = soxr.resample(audio, rate, SAMPLE_RATE).astype(np.float32)
            audio = np.concatenate([lead, trim(audio), lead])
            if rng.random() < NOISE_SHARE:
                rms = max(float(np.sqrt(np.mean(audio**2))), 1e-4)
                snr = rng.uniform(*NOISE_SNR_DB)
                audio = audio + room_noise(rng, audio.size, 20 * np.log10(rms) - snr)
            audio = audio.astype(np.float32)
            if reading == "greedy":
                got = self._reader.asr.transcribe(audio, beam_size=1)
            else:
                got = self._reader.read(audio, "final")
            out.append(" ".join(got.text.split()))
        return out


def _read_json(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``; empty when it is missing, unreadable or not an object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
