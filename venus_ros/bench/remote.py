"""``venus-ros bench serve``: what one ``venus-ros serve`` process holds, on loopback.

For each session count N, a fresh server process (``python -m venus_ros.serve``, the frontend
given by ``--frontend``, N session slots) is started, and N robots (threads of this process,
each the real duplex loop around ``frontends/remote``) stream the bundled sample speech to it at
real-time pace (one unit per second). Printed per N: the per-unit round trip (unit sent →
complete answer back) p50/p99, the foreground's wait per unit p50/p99, dropped units (answered
locally because the answer missed its deadline), late and lost answers, missed local deadlines,
answered units per second, and the server's CPU time per session (psutil: the server process and
its finished children, e.g. espeak-ng).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

import numpy as np
import psutil

from venus_ros.core.clock import MonotonicClock
from venus_ros.core.duplex import DuplexLoop
from venus_ros.core.timeline import Timeline
from venus_ros.core.units import InputUnit, UnitConfig
from venus_ros.frontends.remote import RemoteFrontend, parse_options
from venus_ros.paths import sample_path


@dataclass
class SessionResult:
    """One robot's figures."""

    units: int = 0
    dropped: int = 0
    late: int = 0
    lost: int = 0
    missed: int = 0
    rtt_s: list[float] = field(default_factory=list)
    wait_s: list[float] = field(default_factory=list)
    error: str = ""


def _speech() -> np.ndarray:
    import soundfile

    from venus_ros.core.units import resample

    audio, rate = soundfile.read(sample_path("input.wav"), dtype="float32", always_2d=False)
    if audio.ndim > 1:
        audio = audio.mean(axis=1)
    return resample(audio, rate, 16000)


def _robot(
    url: str,
    deadline_ms: float,
    seconds: float,
    speech: np.ndarray,
    offset: int,
    out: SessionResult,
) -> None:
    """One robot: real-time units of looped sample speech through the duplex loop."""
    options = parse_options(f"{url},deadline_ms={deadline_ms:g},video=0,connect_timeout_s=30")
    frontend = RemoteFrontend(options)
    clock = MonotonicClock()
    loop = DuplexLoop(frontend, Timeline(clock), clock)
    config = UnitConfig()
    try:
        loop.prepare()
        if frontend.link is None or not frontend.link.connected:
            out.error = f"no session: {frontend.link.last_error if frontend.link else '?'}"
            return
        start = time.monotonic()
        index = 0
        while True:
            first = config.unit_start(index)
            length = config.unit_length(index)
            due = start + (first + length) / 16000
            if due - start > seconds:
                break
            time.sleep(max(0.0, due - time.monotonic()))
            pos = (offset + first) % max(1, speech.size - length)
            unit = InputUnit(index=index, start_sample=first, audio=speech[pos : pos + length])
            loop.step(unit)
            index += 1
        out.units = frontend.stats.units
        out.dropped = frontend.stats.dropped
        out.late = frontend.stats.late
        out.missed = loop.missed_units
        out.wait_s = list(frontend.stats.wait_s)
        if frontend.link is not None:
            out.lost = frontend.link.stats.lost
            out.rtt_s = list(frontend.link.stats.rtt_s)
    except Exception as exc:  # a bench reports, it does not crash
        out.error = f"{type(exc).__name__}: {exc}"
    finally:
        frontend.close()


def _start_server(spec: str, sessions: int) -> tuple[subprocess.Popen[str], str]:
    cmd = [
        sys.executable,
        "-m",
        "venus_ros.serve",
        "--port",
        "0",
        "--sessions",
        str(sessions),
        "--max-queue",
        "0",
        "--token-env",
        "",
    ]
    if spec:
        cmd += ["--frontend", spec]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith("serving "):
            return proc, line.split()[1]
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise RuntimeError(f"venus-ros serve did not start (exit {proc.poll()})")


def _cpu(proc: psutil.Process) -> float:
    """CPU seconds of the server and its finished children (espeak-ng runs as a child)."""
    times = proc.cpu_times()
    return times.user + times.system + times.children_user + times.children_system


def _pct(values: list[float], q: float) -> str:
    return f"{np.percentile(values, q) * 1000:7.1f}" if values else "      -"


def bench_serve(
    sessions: tuple[int, ...] = (1, 4, 8),
    spec: str = "cascade",
    seconds: float = 20.0,
    deadline_ms: float = 600.0,
) -> int:
    """Measure and print; returns 0 (1 if a session could not be opened)."""
    speech = _speech()
    print(
        f"venus-ros serve on loopback, frontend {spec or 'cascade'}, {seconds:g} s per row, "
        f"deadline {deadline_ms:g} ms, {psutil.cpu_count()} CPU(s)"
    )
    print(
        " N | rtt p50  p99 ms | wait p50  p99 ms | units dropped late lost missed | "
        "units/s | server CPU/session"
    )
    status = 0
    for n in sessions:
        proc, url = _start_server(spec, n)
        try:
            server = psutil.Process(proc.pid)
            results = [SessionResult() for _ in range(n)]
            threads = [
                threading.Thread(
                    target=_robot, args=(url, deadline_ms, seconds, speech, i * 37_000, results[i])
                )
                for i in range(n)
            ]
            cpu0 = _cpu(server)
            t0 = time.monotonic()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.monotonic() - t0
            cpu = _cpu(server) - cpu0
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
        failed = [r.error for r in results if r.error]
        if failed:
            print(f"{n:2d} | failed: {failed[0]}")
            status = 1
            continue
        rtt = [x for r in results for x in r.rtt_s]
        wait = [x for r in results for x in r.wait_s]
        units = sum(r.units for r in results)
        dropped = sum(r.dropped for r in results)
        print(
            f"{n:2d} | {_pct(rtt, 50)} {_pct(rtt, 99)} | {_pct(wait, 50)} {_pct(wait, 99)} | "
            f"{units:5d} {dropped:7d} {sum(r.late for r in results):4d} "
            f"{sum(r.lost for r in results):4d} {sum(r.missed for r in results):6d} | "
            f"{(units - dropped) / wall:7.2f} | {100 * cpu / wall / n:5.1f} % of a core"
        )
    return status
