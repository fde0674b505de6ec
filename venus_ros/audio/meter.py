"""Real-time accounting: how much compute each component spends per second of audio."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


@dataclass(frozen=True)
class MeterReading:
    """Totals of one component.

    Attributes:
        name: the component.
        compute_s: processing time spent.
        audio_s: audio processed (or produced, for TTS).
        calls: how many times it ran.
    """

    name: str
    compute_s: float
    audio_s: float
    calls: int

    @property
    def rtf(self) -> float:
        """Real-time factor: compute seconds per second of audio (below 1 keeps up)."""
        return self.compute_s / self.audio_s if self.audio_s > 0 else 0.0


class ComputeMeter:
    """Accumulates compute time against audio time; thread-safe.

    Usage::

        with meter.measure(audio_seconds=len(frame) / rate):
            process(frame)
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._compute = 0.0
        self._audio = 0.0
        self._calls = 0
        self._lock = threading.Lock()

    @contextmanager
    def measure(self, audio_seconds: float) -> Iterator[None]:
        """Time the body and charge it against ``audio_seconds`` of audio."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(time.perf_counter() - start, audio_seconds)

    def add(self, compute_s: float, audio_s: float) -> None:
        """Record compute spent on audio directly."""
        with self._lock:
            self._compute += compute_s
            self._audio += audio_s
            self._calls += 1

    def reading(self) -> MeterReading:
        """The totals so far."""
        with self._lock:
            return MeterReading(self.name, self._compute, self._audio, self._calls)
