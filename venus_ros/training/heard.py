"""Training phrases as the frontend's recogniser writes them when they are spoken.

The cascade's text models (the addressee head, the delegation router) never see text as it was
written: they read what Whisper tiny.en made of a voice, names it does not know turned into
other words, short words dropped, whole phrases garbled. :func:`recognised_forms` speaks each
phrase with seeded training voices of the synthesizer (espeak-ng at the training rates, half of
them with room noise) and writes down what the recogniser hears; :func:`cached_forms` keeps
the result in a JSON file, so a model is retrained from the same forms without the recogniser
(which may write other words on another CPU).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "NOISE_SHARE",
    "NOISE_SNR_DB",
    "cached_forms",
    "recognised_forms",
]

NOISE_SHARE = 0.5
"""Share of the spoken phrases with room noise added."""
NOISE_SNR_DB: tuple[float, float] = (10.0, 25.0)
"""Range of the speech-to-noise ratio where noise is added."""


def recognised_forms(
    phrases: Sequence[tuple[str, int]],
    *,
    seed: int = 0,
    asr: Any = None,
    cache: dict[str, list[str]] | None = None,
    progress: bool = False,
) -> dict[str, list[str]]:
    """Every phrase spoken by seeded training voices (espeak-ng, the synthesizer's training
    voices and rates, half of them with room noise) and written down by the frontend's
    recogniser (Whisper tiny.en): how the frontend's text models really read it.

    Args:
        phrases: ``(text, voices)`` pairs: each text is spoken by that many distinct voices.
        seed: Fixes voices, rates and noise (each phrase from its own generator).
        asr: A :class:`~venus_ros.audio.asr.WhisperAsr` (default: tiny.en).
        cache: Recognised forms per key, read and filled in.
        progress: Print a line every 100 phrases.

    Returns:
        The recognised forms per phrase text.
    """
    cache = {} if cache is None else cache
    speaker: _Speaker | None = None
    out: dict[str, list[str]] = {}
    for i, (text, count) in enumerate(phrases):
        key = f"{seed}|{count}|{text}"
        forms = cache.get(key)
        if forms is None:
            speaker = speaker or _Speaker(asr)
            rng = np.random.default_rng([seed, zlib.crc32(key.encode())])
            forms = cache[key] = speaker.heard(text, count, rng)
        out[text] = forms
        if progress and i % 100 == 99:
            print(f"  {i + 1}/{len(phrases)} phrases spoken", flush=True)
    return out


def cached_forms(
    phrases: Sequence[tuple[str, int]],
    path: str | Path,
    *,
    seed: int = 0,
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
        fresh: Recognise every phrase again, ignoring what the file holds.
        progress: As for :func:`recognised_forms`.
    """
    path = Path(path)
    known = {} if fresh else _read_json(path)
    size = len(known)
    heard = recognised_forms(phrases, seed=seed, cache=known, progress=progress)
    if len(known) > size:  # something was recognised: keep it for the next run
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(known, indent=0, sort_keys=True) + "\n", encoding="utf-8")
    return heard


class _Speaker:
    """Training voices and the recogniser, built on first use."""

    def __init__(self, asr: Any = None) -> None:
        from venus_ros.audio.asr import WhisperAsr

        self._asr = asr if asr is not None else WhisperAsr(word_timestamps=False)
        self._engines: dict[str, Any] = {}

    def heard(self, text: str, count: int, rng: np.random.Generator) -> list[str]:
        """What the recogniser writes for ``text`` spoken by ``count`` distinct voices."""
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
            out.append(" ".join(self._asr.transcribe(audio.astype(np.float32)).text.split()))
        return out


def _read_json(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``; empty when it is missing, unreadable or not an object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
