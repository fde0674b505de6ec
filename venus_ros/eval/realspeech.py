"""A small suite of REAL human speech over the assistant, built at set-up or test time from
recordings that ship inside packages. Nothing of it is committed.

Sources (each read where its package put it; nothing is downloaded here):

* **pyannote-audio's sample call** (MIT, as shipped in the ``pyannote-audio`` wheel):
  ``pyannote/audio/sample/sample.wav`` (30 s, 16 kHz, two speakers on a phone line) with its
  ``.stm`` transcript and ``.rttm`` speaker turns. ``./dev.sh setup`` fetches the wheel with
  ``pip download --no-deps pyannote-audio==4.0.7`` into :func:`cache_dir` (it is never
  installed: it needs torch); an installed ``pyannote.audio`` is used too. It gives the
  **other-directed** remarks (the two women talking to each other: "Oh, hello. I didn't know you
  were there."), **background** conversation, and one real **backchannel** (Sheila's 0.44 s
  "mm" at 18.15 s, under Diane's speech, taken as recorded with Diane's words around it).
* **Debian's asterisk-core-sounds-en-wav** (CC-BY-SA-3.0: installed at set-up time by
  ``apt-get``, read from ``/usr/share/asterisk/sounds/en``, never committed): 364 prompts in one
  professional voice at 8 kHz with their transcripts (``core-sounds-en.txt.gz``, and the
  ``sounds/en`` link to the prompts, come with ``asterisk-core-sounds-en``). It gives
  **background** announcements (a phone or a TV in the room: "The conference is now muted."),
  spoken **interruptions** (requests and questions: "Please try again.", "Change to which
  folder?") and short **backchannel**-like acknowledgements ("Thank you.").
* CMU ARCTIC utterances (in the ``pysptk`` source distribution) would add another voice, but
  that sdist cannot be fetched with ``pip download`` without building it; not used.

Each sample is laid out like a synthesized overlap sample (:mod:`venus_ros.eval.synth`): the
assistant is scripted to speak one of the evaluation part's multi-sentence answers from
0.5-1.0 s, and 2-4 s into it the real recording plays (background 5-20 dB below the user
level). The recordings are resampled to 16 kHz and level-normalised; nothing else is changed.
"""

from __future__ import annotations

import gzip
import importlib.util
import io
import os
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from venus_ros.eval.scenario import INPUT_RATE, Suite, load_suite, write_sample
from venus_ros.eval.synth import (
    BACKGROUND_DB_BELOW,
    FAMILIES,
    NOISE_DBFS,
    PEAK_LIMIT,
    USER_RMS_DBFS,
    _prepare_out,
    at_level,
    room_noise,
    trim,
)
from venus_ros.eval.timing import to_16k

__all__ = [
    "ASTERISK_DIR",
    "PYANNOTE_VERSION",
    "Clip",
    "build_real_suite",
    "cache_dir",
    "clips",
    "sources",
]

#: The pyannote-audio wheel ``./dev.sh setup`` fetches.
PYANNOTE_VERSION = "4.0.7"
#: Where Debian installs the asterisk English prompts.
ASTERISK_DIR = Path("/usr/share/asterisk/sounds/en")
_ASTERISK_TEXT = Path("/usr/share/doc/asterisk-core-sounds-en/core-sounds-en.txt.gz")
_SAMPLE = "pyannote/audio/sample/sample"

#: Spans of the pyannote sample call (seconds, from its .stm/.rttm) and their use.
_PYANNOTE_SPANS: tuple[tuple[str, float, float, str], ...] = (
    ("other_directed", 8.40, 9.82, "Oh, hello. I didn't know you were there."),
    ("other_directed", 12.52, 14.20, "This is Diane in New Jersey."),
    ("other_directed", 9.82, 10.80, "Neither did I."),
    ("other_directed", 28.42, 30.00, "Oh, I don't hear that in New Jersey now."),
    ("background", 14.42, 17.78, "And I'm Sheila in Texas, originally from Chicago."),
    (
        "background",
        21.90,
        28.43,
        "Well, there isn't that much difference. At least you know, "
        "they all call me a Yankee down here, so what can I say?",
    ),
    (
        "background",
        17.78,
        21.48,
        "Oh, I'm originally from Chicago also. I'm in New Jersey now though.",
    ),
    ("backchannel", 18.10, 18.62, "mm"),
)
#: Asterisk prompts and their use.
_ASTERISK_USE: dict[str, tuple[str, ...]] = {
    "interruption": (
        "please-try-again",
        "vm-changeto",
        "one-moment-please",
        "please-try-call-later",
        "sorry-youre-having-problems",
    ),
    "backchannel": ("auth-thankyou", "hello"),
    "background": (
        "conf-now-muted",
        "conf-extended",
        "conf-waitforleader",
        "conf-onlyperson",
        "conf-placeintoconf",
        "agent-loggedoff",
    ),
    "other_directed": ("goodbye", "im-sorry"),
}
_EXPECTED = {"interruption": "respond"}


@dataclass(frozen=True)
class Clip:
    """One real recording: what it says, its 16 kHz audio, where it is from, its licence."""

    category: str
    text: str
    audio: np.ndarray
    source: str
    licence: str


def cache_dir() -> Path:
    """Where ``./dev.sh setup`` puts downloaded packages for this suite
    (``$VENUS_REALSPEECH_DIR``, else ``$XDG_CACHE_HOME/venus_ros/realspeech``)."""
    given = os.environ.get("VENUS_REALSPEECH_DIR")
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "venus_ros" / "realspeech"


def _pyannote_files() -> tuple[bytes, str] | None:
    """The sample call's wav bytes and where they came from, or None."""
    try:
        spec = importlib.util.find_spec("pyannote.audio")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        for folder in spec.submodule_search_locations:
            wav = Path(folder) / "sample" / "sample.wav"
            if wav.is_file():
                return wav.read_bytes(), str(wav)
    for wheel in sorted(cache_dir().glob("pyannote_audio-*.whl")):
        try:
            with zipfile.ZipFile(wheel) as archive:
                return archive.read(_SAMPLE + ".wav"), f"{wheel}!{_SAMPLE}.wav"
        except (zipfile.BadZipFile, KeyError, OSError):
            continue
    return None


def _asterisk_texts() -> dict[str, str]:
    if not _ASTERISK_TEXT.is_file():
        return {}
    texts = {}
    with gzip.open(_ASTERISK_TEXT, "rt", encoding="utf-8", errors="replace") as handle:
        for line in handle:
            name, sep, text = line.partition(":")
            if sep and not line.startswith(";") and text.strip():
                texts[name.strip()] = text.strip()
    return texts


def sources() -> dict[str, str]:
    """Each source's state: where it was found, or why it is missing (and how to get it)."""
    found = _pyannote_files()
    state = {
        "pyannote": found[1]
        if found
        else f"missing: pip download --no-deps pyannote-audio=={PYANNOTE_VERSION} -d "
        f"{cache_dir()} (./dev.sh setup does it)",
        "asterisk": str(ASTERISK_DIR)
        if (ASTERISK_DIR / "goodbye.wav").is_file() and _ASTERISK_TEXT.is_file()
        else "missing: apt-get install asterisk-core-sounds-en-wav asterisk-core-sounds-en "
        "(./dev.sh setup does it)",
    }
    return state


def clips() -> list[Clip]:
    """Every usable real recording from the sources that are present (possibly none)."""
    out: list[Clip] = []
    found = _pyannote_files()
    if found is not None:
        audio, rate = sf.read(io.BytesIO(found[0]), dtype="float32", always_2d=True)
        call = to_16k(audio[:, 0], int(rate))
        for category, start, end, text in _PYANNOTE_SPANS:
            piece = call[round(start * INPUT_RATE) : round(end * INPUT_RATE)]
            out.append(Clip(category, text, trim(piece), "pyannote-audio sample call", "MIT"))
    texts = _asterisk_texts()
    for category, names in _ASTERISK_USE.items():
        for name in names:
            path = ASTERISK_DIR / f"{name}.wav"
            if not path.is_file() or name not in texts:
                continue
            audio, rate = sf.read(str(path), dtype="float32", always_2d=True)
            out.append(
                Clip(
                    category,
                    texts[name],
                    trim(to_16k(audio[:, 0], int(rate))),
                    f"asterisk-core-sounds-en {name}",
                    "CC-BY-SA-3.0",
                )
            )
    return out


def build_real_suite(
    out: Path,
    n: int = 4,
    seed: int = 0,
    categories: Sequence[str] | None = None,
    *,
    noise: bool = False,
    overwrite: bool = False,
) -> Suite:
    """Write up to ``n`` samples per overlap category with real recordings over the assistant.

    A category gets ``min(n, number of its clips)`` samples, each clip at most once, in a
    seeded order. Sample ids are ``real_<category>_<index:03d>``; ``metadata.json`` records the
    clip's source and licence. With ``noise``, the synthesizer's room noise is added and
    ``clean_input.wav`` (the input without the recording, noise kept) is written.

    Raises:
        FileNotFoundError: no source is present (the message says how to get them).
        FileExistsError: ``out`` is not empty and ``overwrite`` is false.
    """
    available = clips()
    if not available:
        raise FileNotFoundError(
            "no real speech found: " + "; ".join(f"{k}: {v}" for k, v in sources().items())
        )
    wanted = tuple(categories or ("backchannel", "interruption", "other_directed", "background"))
    out = Path(out)
    _prepare_out(out, overwrite)
    out.mkdir(parents=True, exist_ok=True)
    answers = FAMILIES["eval"].assistant_texts
    for c_index, category in enumerate(wanted):
        pool = [c for c in available if c.category == category]
        rng = np.random.default_rng([seed, 7, c_index])
        order = [pool[int(i)] for i in rng.permutation(len(pool))][:n]
        for i, clip in enumerate(order):
            _write(out, f"real_{category}_{i:03d}", category, clip, answers, rng, noise)
    return load_suite(out)


def _write(
    out: Path,
    sample_id: str,
    category: str,
    clip: Clip,
    answers: Sequence[str],
    rng: np.random.Generator,
    noise: bool = False,
) -> None:
    a_start = round(float(rng.uniform(0.5, 1.0)), 3)
    u_start = a_start + float(rng.uniform(2.0, 4.0))
    if category == "background":
        level = USER_RMS_DBFS - float(rng.uniform(*BACKGROUND_DB_BELOW))
    else:
        level = USER_RMS_DBFS + float(rng.uniform(-3.0, 3.0))
    speech = at_level(clip.audio, level)
    first = round(u_start * INPUT_RATE)
    total = first + len(speech) + round(float(rng.uniform(3.0, 4.0)) * INPUT_RATE)
    audio = np.zeros(max(total, round(10.0 * INPUT_RATE)), np.float32)
    audio[first : first + len(speech)] = speech
    clean = None
    if noise:
        clean = room_noise(rng, len(audio))
        audio = audio + clean
    peak = float(np.max(np.abs(audio)))
    if peak > PEAK_LIMIT:
        audio *= PEAK_LIMIT / peak
        clean = None if clean is None else clean * (PEAK_LIMIT / peak)
    span = [round(first / INPUT_RATE, 6), round((first + len(speech)) / INPUT_RATE, 6)]
    meta: dict[str, Any] = {
        "category": category,
        "turns": []
        if category == "background"
        else [{"start": span[0], "end": span[1], "text": clip.text}],
        "overlap": span,
        "expected": _EXPECTED.get(category, "resume"),
        "assistant_turns": [{"start": a_start, "text": answers[int(rng.integers(len(answers)))]}],
        "real_speech": {"source": clip.source, "licence": clip.licence},
        "generator": "venus_ros.eval.realspeech",
    }
    if category == "background":
        meta["background"] = {"kind": "real", "text": clip.text, "start": span[0], "end": span[1]}
    if noise:
        meta["noise_dbfs"] = NOISE_DBFS
    write_sample(out, sample_id, audio, INPUT_RATE, meta, clean)
