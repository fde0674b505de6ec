"""Real speech for tests, spoken by espeak-ng (installed by ./dev.sh) into files."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import soundfile as sf

from venus_ros.core.units import resample


def espeak(text: str, path: Path, voice: str = "en-us", wpm: int = 175) -> tuple[np.ndarray, int]:
    """Speak ``text`` into ``path``; the samples (float32 mono) and their rate (22.05 kHz)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["espeak-ng", "-v", voice, "-s", str(wpm), "-w", str(path), text],
        check=True,
        capture_output=True,
        timeout=30,
    )
    samples, rate = sf.read(str(path), dtype="float32")
    return samples, int(rate)


def espeak_16k(text: str, path: Path, voice: str = "en-us", wpm: int = 175) -> np.ndarray:
    """Speak ``text`` and resample to the 16 kHz of the microphone units."""
    samples, rate = espeak(text, path, voice, wpm)
    return resample(samples, rate, 16000)
