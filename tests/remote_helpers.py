"""Shared pieces of the remote-frontend and serve tests: scripts, units, a loop driver."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from venus_ros.core.clock import FakeClock, MonotonicClock
from venus_ros.core.duplex import DuplexLoop
from venus_ros.core.frontend import Frontend
from venus_ros.core.timeline import Kind, Timeline
from venus_ros.core.units import InputUnit, VideoFrame
from venus_ros.frontends.scripted import ScriptedFrontend, load_script

DELEGATING = """\
words_per_unit: 3
replies:
  - after_speech: true
    text: "Sure, let me check. <delegate>weather in Paris today</delegate> One moment please."
  - on_backend: true
    text: "{backend}"
"""


def write_script(tmp_path: Path, text: str = DELEGATING, name: str = "script.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def scripted_factory(path: Path, real_time: bool = False) -> Callable[[], Frontend]:
    """A factory of fresh scripted frontends (``real_time``: compute_ms really sleeps)."""
    script = load_script(path)
    return lambda: ScriptedFrontend(script, clock=MonotonicClock() if real_time else None)


def units(pattern: str, with_frame: bool = False) -> list[InputUnit]:
    """One unit per character: ``s`` speech (a loud tone), ``.`` silence."""
    out, start = [], 0
    for i, c in enumerate(pattern):
        n = 16560 if i == 0 else 16000
        t = np.arange(n) / 16000
        audio = (0.2 * np.sin(2 * np.pi * 200 * t) if c == "s" else np.zeros(n)).astype(np.float32)
        frame = None
        if with_frame:
            image = np.full((48, 64, 3), 40 * (i % 6), dtype=np.uint8)
            frame = VideoFrame(image, t=(start + n) / 16000, seq=i)
        out.append(InputUnit(index=i, start_sample=start, audio=audio, frame=frame))
        start += n
    return out


@dataclass
class Run:
    """What a session through the duplex loop produced."""

    decisions: list[tuple[str, bool]] = field(default_factory=list)
    delegates: list[str] = field(default_factory=list)
    spoken: list[str] = field(default_factory=list)
    audio_samples: int = 0
    flushes: int = 0
    missed: int = 0
    protocol_errors: list[str] = field(default_factory=list)
    frontend_errors: int = 0
    step_s: list[float] = field(default_factory=list)
    loop: DuplexLoop | None = None


def drive(
    frontend: Frontend,
    inputs: Iterable[InputUnit],
    on_unit: Callable[[int, DuplexLoop], None] | None = None,
    clock: FakeClock | MonotonicClock | None = None,
) -> Run:
    """Play ``inputs`` through a real :class:`DuplexLoop` (on a fake clock unless given one)."""
    clock = clock or FakeClock()
    timeline = Timeline(clock)
    loop = DuplexLoop(frontend, timeline, clock)
    loop.prepare()
    run = Run(loop=loop)
    for unit in inputs:
        if on_unit is not None:
            on_unit(unit.index, loop)
        t0 = time.monotonic()
        result = loop.step(unit)
        run.step_s.append(time.monotonic() - t0)
        run.decisions.append((result.decision.value, result.end_of_turn))
        run.delegates.extend(d.query for d in result.delegates)
        run.flushes += result.flush
        run.missed += result.missed
        if result.speech is not None:
            run.spoken.append(result.speech.text)
            run.audio_samples += result.speech.samples
        if isinstance(clock, FakeClock):
            clock.advance(unit.duration_s)
    for record in timeline.snapshot(timeline.last_seq):
        if record.kind is Kind.PROTOCOL_ERROR:
            run.protocol_errors.append(record.payload["code"])
        elif record.kind is Kind.FRONTEND_ERROR:
            run.frontend_errors += 1
    return run


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll ``condition`` until true or ``timeout`` (bounded; no fixed sleeps as sync)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


class FakeServer:
    """A WebSocket server on 127.0.0.1 running ``handler`` on its own loop thread."""

    def __init__(self, handler: Callable, port: int = 0) -> None:
        self.handler = handler
        self.port = port
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fake-server")
        self._server = None

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def __enter__(self) -> FakeServer:
        from websockets.asyncio.server import serve

        self._thread.start()

        async def start():
            return await serve(self.handler, "127.0.0.1", self.port, close_timeout=1)

        self._server = asyncio.run_coroutine_threadsafe(start(), self._loop).result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop():
            self._server.close()
            await self._server.wait_closed()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (just released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
