"""``venus-ros bench serve``: what one ``venus-ros serve`` process holds, on loopback.

For each session count N, a fresh server process (``python -m venus_ros.serve``, the frontend
given by ``--frontend``, N session slots, its N frontends built before measuring) is started, and
N robots (threads of this process,
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

from venus_ros.audio.meter import usable_cores
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
    deadline = time.monotonic() + 600  # with reuse, every frontend is built first
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
        f"deadline {deadline_ms:g} ms, {usable_cores()} CPU(s)"
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


def bench_parity(suite: str, spec: str = "cascade", deadline_ms: float = 5000.0) -> int:
    """Decisions and delegations of ``spec`` in process (twice) and behind ``serve``, per sample.

    Each sample's ``input.wav`` (+5 s of silence) is played through the duplex loop on a fake
    clock: twice with the frontend in process (the second run shows its own run-to-run
    variation), once through ``frontends/remote`` against a ``serve`` thread running the same
    spec (a generous deadline: timing aside). Printed: per sample the units whose decision
    differs and whether the delegate queries match.
    """
    from pathlib import Path

    import soundfile

    from venus_ros.core.clock import FakeClock
    from venus_ros.core.units import resample
    from venus_ros.frontends import make_frontend
    from venus_ros.serve import ServeConfig, ServerThread

    def play(frontend: object, audio: np.ndarray) -> tuple[list[str], list[str]]:
        clock = FakeClock()
        loop = DuplexLoop(frontend, Timeline(clock), clock)  # type: ignore[arg-type]
        loop.prepare()
        config, decisions, delegates, index = UnitConfig(), [], [], 0
        while config.unit_start(index) + config.unit_length(index) <= audio.size:
            first, length = config.unit_start(index), config.unit_length(index)
            result = loop.step(InputUnit(index, first, audio[first : first + length]))
            decisions.append(result.decision.value + ("/eot" if result.end_of_turn else ""))
            delegates += [d.query for d in result.delegates]
            clock.advance(length / 16000)
            index += 1
        return decisions, delegates

    local = make_frontend(spec)
    served = make_frontend(spec)
    samples = sorted(p.parent for p in Path(suite).glob("*/input.wav"))
    print(f"{spec}: in process (A, A') vs behind venus-ros serve (R), {len(samples)} samples")
    print("sample                  units  A≠A'  A≠R  A'≠R  delegates A | A' | R")
    totals = [0, 0, 0, 0]
    config = ServeConfig(port=0, max_sessions=1)
    with ServerThread(lambda: served, config) as server:
        for sample in samples:
            audio, rate = soundfile.read(sample / "input.wav", dtype="float32", always_2d=False)
            audio = np.concatenate([resample(audio, rate, 16000), np.zeros(5 * 16000, np.float32)])
            a, da = play(local, audio)
            a2, da2 = play(local, audio)
            remote = RemoteFrontend(parse_options(f"{server.url},deadline_ms={deadline_ms:g}"))
            try:
                r, dr = play(remote, audio)
            finally:
                remote.close()
            counts = (
                len(a),
                sum(x != y for x, y in zip(a, a2, strict=True)),
                sum(x != y for x, y in zip(a, r, strict=True)),
                sum(x != y for x, y in zip(a2, r, strict=True)),
            )
            totals = [t + c for t, c in zip(totals, counts, strict=True)]
            print(
                f"{sample.name:22s} {counts[0]:6d} {counts[1]:5d} {counts[2]:4d} {counts[3]:5d}  "
                f"{len(da)} | {len(da2)} | {len(dr)}{'' if da == dr else '  (queries differ)'}"
            )
    print(f"all                    {totals[0]:6d} {totals[1]:5d} {totals[2]:4d} {totals[3]:5d}")
    return 0
