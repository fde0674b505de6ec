"""``venus-ros bench core``: the runtime's own per-unit overhead, and the timeline's memory.

Overhead covers unit assembly, the duplex loop, span parsing, the timeline and playback
accounting (frontend compute excluded), over a long simulated session driven by a scripted
frontend that talks, delegates and speaks backend replies; the timeline's memory at the end
must be bounded by its time window.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import numpy as np

from venus_ros.core.clock import FakeClock
from venus_ros.core.session import SessionConfig, run_offline
from venus_ros.core.timeline import Timeline
from venus_ros.frontends.scripted import Reply, Script, ScriptedFrontend

OVERHEAD_P99_GOAL_MS = 2.0


def _user_audio(seconds: float, rate: int = 16000, chunk_ms: int = 20) -> Iterator[np.ndarray]:
    """A 12 s cycle: 2.5 s of speech-like noise bursts, then silence; 20 ms chunks."""
    rng = np.random.default_rng(7)
    step = rate * chunk_ms // 1000
    cycle = int(12 * rate / step)
    speech = int(2.5 * rate / step)
    for i in range(int(seconds * rate / step)):
        if i % cycle < speech:
            yield (0.1 * rng.standard_normal(step)).astype(np.float32)
        else:
            yield (0.001 * rng.standard_normal(step)).astype(np.float32)


def _script(units: int) -> Script:
    replies: list[Reply] = []
    for start in range(4, units, 12):
        replies.append(
            Reply(
                at_unit=start,
                text="Sure, let me look into that for you right now. "
                "<delegate>Find the opening hours of the museum near the station.</delegate> "
                "One moment.",
            )
        )
        replies.append(Reply(on_backend=True, text="Here is what I found: {backend}"))
    return Script(replies=replies)


def _deep_size(timeline: Timeline) -> int:
    view = timeline.snapshot()
    return sum(
        sys.getsizeof(r) + sys.getsizeof(r.payload_json) + sys.getsizeof(r.t) for r in view
    ) + sys.getsizeof(timeline._records)


def bench_core(minutes: float = 60.0) -> int:
    """Run the simulated session and print the figures; returns a process exit code."""
    seconds = minutes * 60.0
    clock = FakeClock()
    frontend = ScriptedFrontend(_script(int(seconds)), clock=clock)
    config = SessionConfig()
    session = run_offline(
        _user_audio(seconds),
        16000,
        frontend,
        clock=clock,
        config=config,
        on_delegate=lambda request: (3.0, "It opens at nine and closes at six."),
    )
    overhead = np.array(session.overhead_s) * 1000.0
    p50, p99 = np.percentile(overhead, [50, 99])
    timeline = session.timeline
    deep = _deep_size(timeline)
    speak = sum(r.decision.value == "speak" for r in session.results)
    print(
        f"bench core: {minutes:g} simulated minutes, {len(session.results)} units "
        f"({speak} speaking), {len(session.delegates)} delegations, "
        f"{timeline.last_seq} timeline records appended"
    )
    print(
        f"runtime overhead per unit (frontend excluded): p50 {p50:.3f} ms, "
        f"p99 {p99:.3f} ms, max {overhead.max():.3f} ms "
        f"(goal p99 <= {OVERHEAD_P99_GOAL_MS:g} ms: "
        f"{'met' if p99 <= OVERHEAD_P99_GOAL_MS else 'NOT met'})"
    )
    print(
        f"timeline after the session: {len(timeline)} records retained "
        f"(window {timeline.window_s:g} s, {timeline.evicted} evicted), "
        f"charged {timeline.size_bytes / 1e6:.2f} MB of {timeline.max_bytes / 1e6:.2f} MB bound, "
        f"measured {deep / 1e6:.2f} MB"
    )
    return 0
