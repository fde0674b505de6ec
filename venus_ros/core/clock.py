"""Session clocks: a real monotonic clock and a fake clock for tests and offline replay.

Every core component takes a :class:`Clock`; nothing in ``core/`` reads wall time directly.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    """A source of session time in seconds."""

    def now(self) -> float:
        """Return the current session time in seconds."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait for ``seconds`` of session time."""
        ...


class MonotonicClock:
    """Real time from :func:`time.monotonic`, with zero at construction."""

    def __init__(self) -> None:
        self._origin = time.monotonic()

    def now(self) -> float:
        """Seconds since this clock was created."""
        return time.monotonic() - self._origin

    def sleep(self, seconds: float) -> None:
        """Block the calling thread for ``seconds`` (no-op when not positive)."""
        if seconds > 0:
            time.sleep(seconds)


class FakeClock:
    """A clock that only moves when told to; ``sleep`` advances it instantly.

    Thread-safe, so a background thread may read it while the test advances it.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)
        self._lock = threading.Lock()

    def now(self) -> float:
        """The current fake time."""
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> float:
        """Move time forward by ``seconds`` and return the new time.

        Raises:
            ValueError: if ``seconds`` is negative (time never runs backwards).
        """
        if seconds < 0:
            raise ValueError(f"FakeClock.advance: seconds must be >= 0, got {seconds}")
        with self._lock:
            self._now += seconds
            return self._now

    def sleep(self, seconds: float) -> None:
        """Advance by ``seconds`` without blocking."""
        if seconds > 0:
            self.advance(seconds)
