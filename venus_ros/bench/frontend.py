"""``venus-ros bench frontend``: the cascade frontend's real compute over a long session.

The bundled demo session (greetings, local answers, back-channels, a remark to someone else,
TV speech, a robot request, an interruption) is looped to ``minutes`` of microphone audio and
played through :func:`venus_ros.core.session.run_offline` with the cascade frontend. The offline
session runs on a fake clock, so the loop itself never waits; the frontend's own wall-clock
time per unit (``prefill`` + ``generate``, :attr:`PolicyFrontend.unit_compute_s`) is what is
measured. A unit whose compute exceeds the unit's length misses its deadline (live, the next
unit would start late). Delegations are answered after 2 s by a stand-in harness, so backend
replies are synthesised and spoken as in the live system. The process's resident memory is
sampled every 0.2 s; the peak is reported.

Goals (issue 6): compute p99 <= 400 ms per unit, no missed deadline, resident memory <= 1.5 GB.
"""

from __future__ import annotations

import sys
import threading
import time

import numpy as np
import psutil

from venus_ros.audio.meter import usable_cores
from venus_ros.bench import figures, goal

COMPUTE_GOAL_MS = 400.0
MEMORY_GOAL_MB = 1536.0
RATE = 16000


def _progress(message: str) -> None:
    print(f"[bench frontend] {message}", file=sys.stderr, flush=True)


def bench_frontend(minutes: float = 10.0, spec: str = "cascade") -> int:
    """Run the benchmark and print its figures; exit status 0 (figures, not a test)."""
    import soundfile

    from venus_ros.core.clock import FakeClock
    from venus_ros.core.session import SessionConfig, run_offline
    from venus_ros.demo import SESSION_DIR
    from venus_ros.frontends import make_frontend

    if minutes <= 0:
        raise ValueError(f"--minutes must be > 0, got {minutes}")
    process = psutil.Process()
    peak = {"rss": process.memory_info().rss}
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.2):
            peak["rss"] = max(peak["rss"], process.memory_info().rss)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    session, rate = soundfile.read(str(SESSION_DIR / "input.wav"), dtype="float32")
    if rate != RATE:
        raise ValueError(f"{SESSION_DIR / 'input.wav'}: expected {RATE} Hz, got {rate}")
    total = round(minutes * 60 * RATE)
    audio = np.resize(session, total)  # the session, looped
    _progress(f"loading {spec} (speech stack, floor policy, router)")
    started = time.perf_counter()
    frontend = make_frontend(spec, clock=FakeClock())
    load_s = time.perf_counter() - started
    parts = getattr(frontend, "parts", None)
    delegated: list[str] = []

    def on_delegate(request: object) -> tuple[float, str]:
        delegated.append(getattr(request, "query", ""))
        return 2.0, "Done, that is taken care of."

    minute = {"next": 1}

    def chunks() -> object:
        step = RATE // 10
        for i in range(0, total, step):
            if i >= minute["next"] * 60 * RATE:
                elapsed = time.perf_counter() - started
                _progress(f"{minute['next']} of {minutes:g} min of audio done ({elapsed:.0f} s)")
                minute["next"] += 1
            yield audio[i : i + step]

    _progress(f"playing {minutes:g} min of the looped demo session")
    run_start = time.perf_counter()
    run_offline(
        chunks(),  # type: ignore[arg-type]
        RATE,
        frontend,
        clock=FakeClock(),
        on_delegate=on_delegate,
        config=SessionConfig(timeline_window_s=120.0),
    )
    wall = time.perf_counter() - run_start
    done.set()
    sampler.join()
    peak["rss"] = max(peak["rss"], process.memory_info().rss)
    compute_ms = [c * 1000.0 for c in frontend.unit_compute_s]  # type: ignore[attr-defined]
    missed = sum(c > 1000.0 for c in compute_ms)
    cores = usable_cores()
    steps = getattr(frontend, "steps", ())
    turns = sum(1 for s in steps if s.started)
    yields = sum(1 for s in steps if s.yielded)
    rss_mb = peak["rss"] / 2**20
    print(f"frontend {spec} on {cores} CPU cores: {minutes:g} min of audio in {wall:.1f} s")
    if parts is not None:
        print(
            f"  floor policy: {parts.policy_name}; router: {parts.router_name}"
            + (f"; fallbacks: {len(parts.fallbacks)}" if parts.fallbacks else "")
        )
    print(f"  model load {load_s:.1f} s; units {len(compute_ms)}; turns started {turns}, yields "
          f"{yields}, delegations {len(delegated)}")  # fmt: skip
    print(f"  compute per unit: {figures(compute_ms)}; {goal(compute_ms, COMPUTE_GOAL_MS)}")
    print(
        f"  missed deadlines (compute > 1 s unit): {missed} of {len(compute_ms)}; "
        f"goal 0: {'met' if missed == 0 else 'NOT met'}"
    )
    print(
        f"  resident memory peak: {rss_mb:.0f} MB; goal <= {MEMORY_GOAL_MB:.0f} MB: "
        f"{'met' if rss_mb <= MEMORY_GOAL_MB else 'NOT met'}"
    )
    return 0
