"""How a running tool reports progress: a context variable that the runner sets per task.

A tool's ``run(args, evidence)`` has no progress parameter; instead, whoever starts the tool's
asyncio task sets a callback with :func:`progress_to`, and the tool calls :func:`report_progress`
(or fetches the callback with :func:`current_progress` to call it later from its own loop
callbacks). asyncio copies the context into every task it creates, so each tool task sees the
callback that was current when it was created, and tasks never see each other's.

Outside such a context, reporting is a no-op: tools work the same with or without a listener.
Call the callback on the loop the tool runs on (a tool that hears progress on another thread
hands it over with ``loop.call_soon_threadsafe``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

#: ``progress(fraction, message)``: fraction done (0.0 to 1.0) and a short human-readable note.
ProgressFn = Callable[[float, str], None]

_current: ContextVar[ProgressFn | None] = ContextVar("venus_tool_progress", default=None)


def current_progress() -> ProgressFn | None:
    """The progress callback of the running tool task, or None when nobody listens."""
    return _current.get()


def report_progress(fraction: float, message: str = "") -> None:
    """Report how far the running tool has got; ``fraction`` is clamped to 0.0..1.0."""
    callback = _current.get()
    if callback is not None:
        callback(clamp_fraction(fraction), message)


def clamp_fraction(fraction: float) -> float:
    """``fraction`` as a float within 0.0..1.0 (NaN counts as 0.0)."""
    value = float(fraction)
    return 0.0 if math.isnan(value) else min(max(value, 0.0), 1.0)


@contextmanager
def progress_to(callback: ProgressFn | None) -> Iterator[None]:
    """Within the block (and in asyncio tasks created within it), progress goes to ``callback``."""
    token = _current.set(callback)
    try:
        yield
    finally:
        _current.reset(token)
