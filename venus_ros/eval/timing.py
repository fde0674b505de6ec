"""Speech timing the way Full-Duplex-Bench measures it: VAD segments, merging, double talk.

Definitions (learnt from ``v1_v1.5/evaluation/get_timing.py`` of Full-Duplex-Bench; this is our
own code):

* **Speech segments** come from a voice activity detector run on a whole channel at 16 kHz.
  ``"silero"`` is the packaged Silero VAD (ONNX Runtime, :class:`venus_ros.audio.vad.SileroVad`)
  with the thresholds of Silero's offline ``get_speech_timestamps`` that FDB calls (threshold
  0.5, at least 250 ms of speech, 100 ms of silence ends a segment, 30 ms padding);
  ``"energy"`` is a 10 ms frame RMS gate (-45 dBFS), exact on clean synthetic tones, for tests.
* **Merging** (:func:`merge_segments`): a segment that starts at most ``gap`` seconds after the
  previous one ended joins it (FDB: 0.5 s for the model channel, 0.6 s for the user channel).
* **Double talk** (:func:`double_talk`, FDB's ``latency_stop_list``): the intervals where a
  user segment and a model segment overlap, one per distinct end time (ms), the shortest kept.
* **Response gaps** (:func:`response_gaps`, FDB's ``latency_resp_list``): for each user segment,
  ``[user end, start of the first model segment starting after it]``; when several user segments
  lead to the same model start, the one that ended last is kept.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "DETECTORS",
    "Segment",
    "double_talk",
    "energy_segments",
    "merge_segments",
    "response_gaps",
    "speech_segments",
    "to_16k",
]

#: A ``(start_s, end_s)`` pair.
Segment = tuple[float, float]
#: Voice activity detectors :func:`speech_segments` knows.
DETECTORS = ("silero", "energy")
_RATE = 16000
_EPS = 1e-9
_silero_lock = threading.Lock()
_silero: Any = None


def energy_segments(
    audio: np.ndarray,
    rate: int,
    *,
    frame_s: float = 0.010,
    threshold_dbfs: float = -45.0,
    min_segment_s: float = 0.05,
) -> list[Segment]:
    """Runs of frames whose RMS reaches ``threshold_dbfs`` (no merging; short runs dropped).

    Frames of ``frame_s`` run from sample 0; the last, partial frame is measured over its own
    samples. A run spans from its first frame's start to its last frame's end.
    """
    x = np.asarray(audio, dtype=np.float64)
    n = x.shape[0]
    if n == 0:
        return []
    hop = max(1, round(rate * frame_s))
    frames = -(-n // hop)
    energy = np.zeros(frames * hop)
    energy[:n] = np.square(np.nan_to_num(x))
    counts = np.full(frames, hop, dtype=np.float64)
    counts[-1] = n - (frames - 1) * hop
    rms = np.sqrt(energy.reshape(frames, hop).sum(axis=1) / counts)
    active = rms >= 10.0 ** (threshold_dbfs / 20.0)
    edges = np.diff(np.concatenate(([0], active.astype(np.int8), [0])))
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1)
    out = []
    for s, e in zip(starts, ends, strict=True):
        a, b = int(s) * hop / rate, min(int(e) * hop, n) / rate
        if b - a >= min_segment_s - _EPS:
            out.append((a, b))
    return out


def _silero_vad() -> Any:
    global _silero
    if _silero is None:
        from venus_ros.audio.vad import SileroVad

        _silero = SileroVad(threshold=0.5, min_silence_ms=100, min_speech_ms=250, speech_pad_ms=30)
    return _silero


def to_16k(audio: np.ndarray, rate: int) -> np.ndarray:
    """``audio`` resampled to 16 kHz (soxr, high quality); unchanged when already 16 kHz."""
    x = np.asarray(audio, dtype=np.float32)
    if rate == _RATE:
        return x
    import soxr

    return soxr.resample(x, rate, _RATE, quality="HQ").astype(np.float32)


def speech_segments(audio: np.ndarray, rate: int, detector: str = "silero") -> list[Segment]:
    """Speech segments of one channel, unmerged (see the module docstring).

    Args:
        audio: 1-D float samples.
        rate: their sample rate (resampled to 16 kHz for Silero).
        detector: ``"silero"`` or ``"energy"``.

    Raises:
        ValueError: an unknown detector, audio that is not 1-D or a rate that is not positive.
    """
    x = np.asarray(audio)
    if x.ndim != 1:
        raise ValueError(f"speech_segments: need 1-D mono audio, got shape {x.shape}")
    if isinstance(rate, bool) or not isinstance(rate, (int, np.integer)) or rate <= 0:
        raise ValueError(f"speech_segments: rate must be a positive int, got {rate!r}")
    if detector == "energy":
        return energy_segments(x, int(rate))
    if detector != "silero":
        raise ValueError(f"detector must be one of {', '.join(DETECTORS)}, got {detector!r}")
    if x.size == 0:
        return []
    x16 = to_16k(np.nan_to_num(x.astype(np.float32)), int(rate))
    with _silero_lock:
        vad = _silero_vad()
        vad.reset()
        events = vad.process(x16) + vad.flush()
    out: list[Segment] = []
    start: float | None = None
    for event in events:
        if event.kind == "start":
            start = event.t
        elif start is not None:
            out.append((start, event.t))
            start = None
    return out


def merge_segments(segments: Sequence[Segment], gap: float) -> list[Segment]:
    """Joins segments separated by at most ``gap`` seconds (sorted first)."""
    merged: list[list[float]] = []
    for s, e in sorted(segments):
        if merged and s - merged[-1][1] <= gap + _EPS:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return [(a, b) for a, b in merged]


def double_talk(user: Sequence[Segment], model: Sequence[Segment]) -> list[Segment]:
    """FDB's ``latency_stop_list``: overlaps of user and model segments (sorted, merged lists)."""
    raw = []
    i = j = 0
    while i < len(user) and j < len(model):
        start = max(user[i][0], model[j][0])
        end = min(user[i][1], model[j][1])
        if end > start:
            raw.append((start, end))
        if user[i][1] < model[j][1]:
            i += 1
        else:
            j += 1
    shortest: dict[int, Segment] = {}
    for start, end in raw:
        key = round(end * 1000)
        if key not in shortest or end - start < shortest[key][1] - shortest[key][0]:
            shortest[key] = (start, end)
    return [(round(a, 3), round(b, 3)) for a, b in sorted(shortest.values(), key=lambda s: s[1])]


def response_gaps(user: Sequence[Segment], model: Sequence[Segment]) -> list[Segment]:
    """FDB's ``latency_resp_list``: ``[user end, next model start]`` per model start."""
    chosen: dict[int, Segment] = {}
    for _, user_end in user:
        following = next((s for s, _ in model if s > user_end), None)
        if following is None:
            continue
        key = round(following * 1000)
        if key not in chosen or user_end > chosen[key][0]:
            chosen[key] = (round(user_end, 3), round(following, 3))
    return [chosen[k] for k in sorted(chosen, key=lambda k: chosen[k][1])]
