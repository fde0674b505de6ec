"""``venus-ros serve``: any of our frontends behind the MiniCPM-o Realtime V1 protocol.

The wire protocol is the one the ``openbmb-realtime`` SDK speaks (read from its
``protocol.py`` and ``session.py``): WebSocket at ``/v1/realtime?mode=audio|video&model=M``,
subprotocol ``map.realtime``, ``Authorization: Bearer`` auth. Per connection::

    server: session.queued {position, queue_length, estimated_wait_s}   (while the pool is full)
    server: session.queue_done                                          (a slot is free)
    client: session.init {payload: {system_prompt, config, voice}}
    server: session.created {session_id, venus: {...}}
    client: input.append {input: {audio: b64 f32 16 kHz, video_frames: [b64 JPEG]}}  (per unit)
    server: response.listen                                 | response.output_text.delta {text,
            end_of_turn} + response.output_audio.delta {audio: b64 f32} [+ response.done]
    client: session.close {reason}          server: session.closed {reason}

Our extensions are extra event types a plain SDK client ignores (its parser maps unknown types
to "other"): before each unit's answer ``venus.unit`` carries the unit index, the decision, the
raw text with private spans, the audio length and the compute time; ``venus.private`` carries
each private span; the client may send ``venus.input.text`` (text injected into the next unit,
how a robot hands ``<backend>`` replies to the model). ``session.created`` advertises them
under ``venus``. Malformed client frames get an ``error`` event and the session goes on (the
SDK itself treats any ``error`` as fatal, so a well-behaved client never provokes one).

This module is the one place where sockets meet a frontend: the frontend runs on its own
thread per session (never on the event loop), built by a factory per connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
import ssl
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

import numpy as np
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from venus_ros.core.frontend import Decision, Frontend, UnitOutput
from venus_ros.core.protocol import PrivateSpan, SpanParser, VisibleText
from venus_ros.core.secrets import scrub
from venus_ros.core.units import InputUnit, VideoFrame
from venus_ros.frontends.remote.codec import WireError, decode_f32, decode_jpeg, encode_f32
from venus_ros.frontends.remote.link import MAX_SAMPLES
from venus_ros.frontends.remote.redact import install as _redact_headers

log = logging.getLogger("venus_ros.serve")
_redact_headers()

#: Version of our extension events, announced in ``session.created``.
EXTENSION_VERSION = 1
#: Input audio rate of the protocol.
INPUT_RATE = 16000
#: Longest injected text accepted in one ``venus.input.text``.
MAX_TEXT_CHARS = 4000


@dataclass(frozen=True)
class ServeConfig:
    """Settings of a :class:`RealtimeServer`.

    Attributes:
        host: interface to bind; loopback unless told otherwise.
        port: TCP port (0: any free port, see :attr:`RealtimeServer.port`).
        max_sessions: sessions served at once (one frontend each); more connections queue.
        max_queue: connections allowed to wait; beyond it a connection is refused
            (``error`` ``server_busy``).
        token_env: environment variable holding the bearer token; when it is set and non-empty
            every connection must present it (compared in constant time, never logged).
        certfile: TLS certificate chain (PEM); with ``keyfile``, the server speaks ``wss``.
        keyfile: TLS private key (PEM).
        max_frame_bytes: largest WebSocket message accepted; a bigger one closes the connection
            with 1009 (message too big).
        init_timeout_s: how long a client may take to send ``session.init``.
        max_backlog: units waiting for the frontend in one session; beyond it (a frontend slower
            than real time) a unit is answered without running the frontend (``listen``, or
            "nothing new" mid-turn), flagged ``skipped`` in ``venus.unit``.
        extensions: send our ``venus.*`` events (off: a plain MiniCPM-o Realtime server).
        reuse: build ``max_sessions`` frontends once at start and hand them to sessions in
            turn (``prepare`` starts each session afresh), instead of one new frontend per
            connection: what a GPU box wants, where loading a checkpoint takes minutes.
        session_wait_s: estimated session length, for ``estimated_wait_s`` in ``session.queued``.
    """

    host: str = "127.0.0.1"
    port: int = 8765
    max_sessions: int = 1
    max_queue: int = 8
    token_env: str = "VENUS_SERVE_TOKEN"
    certfile: str | None = None
    keyfile: str | None = None
    max_frame_bytes: int = 1 << 20
    init_timeout_s: float = 10.0
    max_backlog: int = 32
    extensions: bool = True
    reuse: bool = False
    session_wait_s: float = 60.0

    def __post_init__(self) -> None:
        if self.max_sessions < 1 or self.max_queue < 0 or self.max_backlog < 1:
            raise ValueError("serve: max_sessions and max_backlog must be >= 1, max_queue >= 0")
        if (self.certfile is None) != (self.keyfile is None):
            raise ValueError("serve: give both a certificate and its key for TLS, or neither")


@dataclass
class ServeStats:
    """Counters of one server, for tests, benchmarks and logs."""

    connections: int = 0
    refused_auth: int = 0
    refused_busy: int = 0
    sessions: int = 0
    units: int = 0
    skipped_units: int = 0
    bad_frames: int = 0
    frontend_errors: int = 0
    queued_max: int = 0
    active: int = 0
    compute_s: deque[float] = field(default_factory=lambda: deque(maxlen=MAX_SAMPLES))


class _Pool:
    """A bounded set of session slots with a FIFO of waiters that can report their position."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.active = 0
        self.waiters: deque[asyncio.Future[None]] = deque()

    def try_acquire(self) -> bool:
        if self.active < self.size and not self.waiters:
            self.active += 1
            return True
        return False

    def enqueue(self) -> asyncio.Future[None]:
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiters.append(waiter)
        return waiter

    def position(self, waiter: asyncio.Future[None]) -> int:
        return self.waiters.index(waiter) + 1 if waiter in self.waiters else 0

    def leave(self, waiter: asyncio.Future[None]) -> None:
        if waiter in self.waiters:
            self.waiters.remove(waiter)
        elif waiter.done() and not waiter.cancelled():
            self.release()  # it was granted a slot it will not use

    def release(self) -> None:
        self.active -= 1
        while self.waiters and self.active < self.size:
            waiter = self.waiters.popleft()
            if not waiter.done():
                self.active += 1
                waiter.set_result(None)


def _select_subprotocol(ws: ServerConnection, offered: Any) -> Any:
    """``map.realtime`` when the client offers it (the SDK does); clients offering none pass."""
    return "map.realtime" if "map.realtime" in offered else None


def _error(code: str, message: str) -> str:
    """An ``error`` event; its message is scrubbed (exception text may quote a secret)."""
    return json.dumps({"type": "error", "error": {"code": code, "message": scrub(message)}})


class _Session:
    """One connection's frontend session: decodes frames, runs units in order, answers."""

    def __init__(self, server: RealtimeServer, ws: ServerConnection, frontend: Frontend) -> None:
        self.server = server
        self.ws = ws
        self.frontend = frontend
        self.id = f"venus-{uuid.uuid4().hex[:12]}"
        self.parser = SpanParser()
        self.speaking = False
        self.texts: list[str] = []
        self.next_index = 0
        self.next_sample = 0
        self.backlog: asyncio.Queue[tuple[InputUnit, float] | None] = asyncio.Queue()
        self.executor = ThreadPoolExecutor(1, thread_name_prefix=f"serve-{self.id}")

    async def run_frontend(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    async def send(self, event: dict[str, Any]) -> None:
        await self.ws.send(json.dumps(event, separators=(",", ":")))

    async def reject(self, code: str, message: str) -> None:
        self.server.stats.bad_frames += 1
        await self.ws.send(_error(code, message))

    # ----------------------------------------------------------------- inbound
    async def read(self) -> None:
        """Read client frames until ``session.close`` or disconnect."""
        async for message in self.ws:
            if isinstance(message, bytes):
                await self.reject("bad_frame", "binary frames are not part of the protocol")
                continue
            try:
                event = json.loads(message)
            except json.JSONDecodeError:
                await self.reject("bad_json", "frame is not JSON")
                continue
            if not isinstance(event, dict) or not isinstance(event.get("type"), str):
                await self.reject("bad_event", "frame must be a JSON object with a string type")
                continue
            kind = event["type"]
            if kind == "input.append":
                await self.append(event)
            elif kind == "venus.input.text":
                text = event.get("text")
                if not isinstance(text, str) or not text or len(text) > MAX_TEXT_CHARS:
                    await self.reject("bad_text", f"text must be 1..{MAX_TEXT_CHARS} characters")
                else:
                    self.texts.append(text)
            elif kind == "session.close":
                reason = event.get("reason")
                await self.send(
                    {"type": "session.closed", "reason": reason if isinstance(reason, str) else ""}
                )
                return
            elif kind in ("venus.playback.ack", "session.init"):
                continue  # acks are accepted and not used yet; a repeated init is ignored
            else:
                await self.reject("unknown_event", f"unknown event type {kind[:64]!r}")

    async def append(self, event: dict[str, Any]) -> None:
        payload = event.get("input")
        if not isinstance(payload, dict):
            await self.reject("bad_event", "input.append needs an input object")
            return
        try:
            audio = decode_f32(payload.get("audio"), INPUT_RATE, "input.audio")
            if audio.size == 0:
                raise WireError("input.audio: empty")
            frame = None
            frames = payload.get("video_frames")
            if frames is not None:
                if not isinstance(frames, list) or len(frames) > 4:
                    raise WireError("input.video_frames: expected a list of at most 4 images")
                if frames:
                    image = await asyncio.to_thread(decode_jpeg, frames[-1])
                    frame = VideoFrame(image, t=(self.next_sample + audio.size) / INPUT_RATE)
        except (WireError, ValueError) as exc:
            await self.reject("bad_input", str(exc))
            return
        unit = InputUnit(
            index=self.next_index,
            start_sample=self.next_sample,
            audio=audio,
            frame=frame,
            texts=tuple(self.texts),
        )
        self.texts.clear()
        self.next_index += 1
        self.next_sample += audio.size
        await self.backlog.put((unit, time.perf_counter()))

    # ---------------------------------------------------------------- outbound
    async def work(self) -> None:
        """Run queued units through the frontend in order and send each answer."""
        while (item := await self.backlog.get()) is not None:
            unit, arrived = item
            skipped = self.backlog.qsize() >= self.server.config.max_backlog
            compute = 0.0
            if skipped:  # the frontend is behind real time: answer this one without it
                self.server.stats.skipped_units += 1
                out = UnitOutput(Decision.SPEAK if self.speaking else Decision.LISTEN)
            else:
                t0 = time.perf_counter()
                try:
                    out = await self.run_frontend(self._step, unit)
                except Exception as exc:  # a failing frontend must not end the session
                    self.server.stats.frontend_errors += 1
                    log.warning(
                        "session %s: frontend failed on unit %d: %s", self.id, unit.index, exc
                    )
                    out = UnitOutput(Decision.LISTEN, end_of_turn=self.speaking)
                compute = time.perf_counter() - t0
                self.server.stats.compute_s.append(compute)
            self.server.stats.units += 1
            await self.answer(unit, out, compute, time.perf_counter() - arrived - compute, skipped)

    def _step(self, unit: InputUnit) -> UnitOutput:
        self.frontend.prefill(unit)
        return self.frontend.generate()

    async def answer(
        self, unit: InputUnit, out: UnitOutput, compute: float, queued: float, skipped: bool
    ) -> None:
        speak = out.decision is Decision.SPEAK
        audio = np.asarray(out.audio, dtype=np.float32) if speak else np.zeros(0, np.float32)
        if audio.ndim != 1 or not np.all(np.isfinite(audio)):
            audio = np.zeros(0, np.float32)
        eot = bool(out.end_of_turn) and (speak or self.speaking)
        rate = self.frontend.output_sample_rate
        if self.server.config.extensions:
            await self.send(
                {
                    "type": "venus.unit",
                    "unit": unit.index,
                    "decision": out.decision.value,
                    "end_of_turn": eot,
                    "text": out.text if speak else "",
                    "audio_samples": int(audio.size),
                    "sample_rate_hz": rate,
                    "compute_ms": round(compute * 1000, 2),
                    "queue_ms": round(max(queued, 0.0) * 1000, 2),
                    "skipped": skipped,
                }
            )
        if not speak:
            if self.speaking:
                self.parser.end_turn()
            self.speaking = False
            await self.send({"type": "response.listen"})
            return
        self.speaking = not eot
        events = self.parser.feed(out.text) + (self.parser.end_turn() if eot else [])
        visible = "".join(e.text for e in events if isinstance(e, VisibleText))
        if self.server.config.extensions:
            for e in events:
                if isinstance(e, PrivateSpan):
                    await self.send(
                        {"type": "venus.private", "channel": e.channel.value, "text": e.text}
                    )
        if visible or eot:
            await self.send(
                {"type": "response.output_text.delta", "text": visible, "end_of_turn": eot}
            )
        if audio.size:
            await self.send(
                {
                    "type": "response.output_audio.delta",
                    "audio": encode_f32(audio),
                    "sample_rate_hz": rate,
                    "format": "pcm_f32le",
                }
            )
        if eot:
            await self.send({"type": "response.done", "response": {"status": "completed"}})

    async def close(self, keep_frontend: bool) -> None:
        """Stop the session's thread (after the unit it may be running); close or keep the model."""
        await asyncio.to_thread(self.executor.shutdown, True)
        if not keep_frontend:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self.frontend.close)


class RealtimeServer:
    """The MiniCPM-o Realtime protocol in front of a frontend factory (one frontend per session).

    Args:
        frontend_factory: builds a fresh frontend for each session (called on a worker thread).
        config: server settings.
    """

    def __init__(
        self, frontend_factory: Callable[[], Frontend], config: ServeConfig | None = None
    ) -> None:
        self.factory = frontend_factory
        self.config = config or ServeConfig()
        self.stats = ServeStats()
        self._pool = _Pool(self.config.max_sessions)
        self._server: Server | None = None
        self._token = os.environ.get(self.config.token_env, "") if self.config.token_env else ""
        self._idle: list[Frontend] = []

    @property
    def port(self) -> int:
        """The bound TCP port (useful with ``port=0``)."""
        if self._server is None:
            raise RuntimeError("serve: not started")
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        """``ws://`` (or ``wss://``) base URL of the running server."""
        scheme = "wss" if self.config.certfile else "ws"
        return f"{scheme}://{self.config.host}:{self.port}"

    async def start(self) -> None:
        """Build the frontends (with ``reuse``), bind and start accepting connections."""
        loop = asyncio.get_running_loop()
        if self.config.reuse and not self._idle:
            for _ in range(self.config.max_sessions):  # one after the other: GPU memory
                self._idle.append(await loop.run_in_executor(None, self.factory))
        tls = None
        if self.config.certfile:
            tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            tls.load_cert_chain(self.config.certfile, self.config.keyfile)
        self._server = await serve(
            self._handle,
            self.config.host,
            self.config.port,
            subprotocols=["map.realtime"],  # type: ignore[list-item]
            select_subprotocol=_select_subprotocol,
            process_request=self._check_request,
            max_size=self.config.max_frame_bytes,
            ssl=tls,
            compression=None,
            close_timeout=2.0,
            logger=logging.getLogger("venus_ros.serve.ws"),
        )
        log.info(
            "serving the MiniCPM-o Realtime protocol on %s (%d session(s), auth %s)",
            self.url,
            self.config.max_sessions,
            "on" if self._token else "off",
        )

    async def stop(self) -> None:
        """Close every connection, stop listening and close the kept frontends."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        idle, self._idle = self._idle, []
        for frontend in idle:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(frontend.close)

    async def serve_forever(self) -> None:
        """Start and serve until cancelled."""
        await self.start()
        try:
            await asyncio.Future()
        finally:
            await self.stop()

    def _check_request(self, ws: ServerConnection, request: Request) -> Response | None:
        self.stats.connections += 1
        path = request.path.partition("?")[0].rstrip("/")
        if path not in ("/v1/realtime", "/realtime"):
            return ws.respond(HTTPStatus.NOT_FOUND, "no such endpoint; use /v1/realtime\n")
        if self._token:
            header = request.headers.get("Authorization", "")
            scheme, _, given = header.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(
                given.strip().encode(), self._token.encode()
            ):
                self.stats.refused_auth += 1
                log.warning("refused a connection from %s: bad or missing token", ws.remote_address)
                return ws.respond(HTTPStatus.UNAUTHORIZED, "missing or wrong bearer token\n")
        return None

    async def _handle(self, ws: ServerConnection) -> None:
        try:
            if not await self._admit(ws):
                return
            try:  # the slot is ours from here: every way out releases it
                self.stats.active = self._pool.active
                await ws.send(json.dumps({"type": "session.queue_done"}))
                await self._serve_session(ws)
            finally:
                self._pool.release()
                self.stats.active = self._pool.active
        except ConnectionClosed:
            pass

    async def _admit(self, ws: ServerConnection) -> bool:
        """Wait for a session slot, telling the client its place in the queue.

        Returns:
            True with a slot held (the caller releases it), False without one.
        """
        if self._pool.try_acquire():
            return True
        if len(self._pool.waiters) >= self.config.max_queue:
            self.stats.refused_busy += 1
            await ws.send(_error("server_busy", "all sessions busy and the queue is full"))
            await ws.close(1013, "server busy")
            return False
        waiter = self._pool.enqueue()
        self.stats.queued_max = max(self.stats.queued_max, len(self._pool.waiters))
        closed = asyncio.ensure_future(ws.wait_closed())
        try:
            last = -1
            while not waiter.done():
                position = self._pool.position(waiter)
                if position != last:
                    last = position
                    await ws.send(
                        json.dumps(
                            {
                                "type": "session.queued",
                                "position": position,
                                "queue_length": len(self._pool.waiters),
                                "estimated_wait_s": position * self.config.session_wait_s,
                            }
                        )
                    )
                await asyncio.wait({waiter, closed}, timeout=1.0, return_when="FIRST_COMPLETED")
                if closed.done():  # the client left the queue
                    self._pool.leave(waiter)
                    return False
        except BaseException:
            self._pool.leave(waiter)  # also gives back a slot granted meanwhile
            raise
        finally:
            closed.cancel()
        return True

    async def _serve_session(self, ws: ServerConnection) -> None:
        try:
            init = await asyncio.wait_for(self._wait_init(ws), self.config.init_timeout_s)
        except TimeoutError:
            await ws.send(_error("init_timeout", "no session.init received"))
            return
        if init is None:
            return
        loop = asyncio.get_running_loop()
        try:
            if self.config.reuse:
                frontend = self._idle.pop()  # the pool slot guarantees one is free
            else:
                frontend = await loop.run_in_executor(None, self.factory)
        except Exception as exc:
            log.error("serve: cannot build the frontend: %s", scrub(str(exc)))
            await ws.send(_error("frontend_unavailable", f"cannot build the frontend: {exc}"))
            return
        session = _Session(self, ws, frontend)
        self.stats.sessions += 1
        prompt = init.get("system_prompt") if isinstance(init.get("system_prompt"), str) else ""
        try:
            await session.run_frontend(frontend.prepare, prompt)
        except Exception as exc:
            await ws.send(_error("frontend_unavailable", f"frontend prepare failed: {exc}"))
            await self._end(session)
            return
        created: dict[str, Any] = {"type": "session.created", "session_id": session.id}
        if self.config.extensions:
            created["venus"] = {
                "version": EXTENSION_VERSION,
                "events": ["venus.unit", "venus.private"],
                "client_events": ["venus.input.text", "venus.playback.ack"],
                "output_sample_rate": frontend.output_sample_rate,
            }
        await session.send(created)
        log.info("session %s started", session.id)
        worker = asyncio.create_task(session.work(), name=f"serve-work-{session.id}")
        try:
            await session.read()
        finally:
            await session.backlog.put(None)
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(worker, 5.0)
            worker.cancel()
            await self._end(session)
            log.info("session %s ended", session.id)

    async def _end(self, session: _Session) -> None:
        await session.close(keep_frontend=self.config.reuse)
        if self.config.reuse:
            self._idle.append(session.frontend)

    async def _wait_init(self, ws: ServerConnection) -> dict[str, Any] | None:
        async for message in ws:
            try:
                event = json.loads(message)
            except (json.JSONDecodeError, TypeError):
                self.stats.bad_frames += 1
                await ws.send(_error("bad_json", "frame is not JSON"))
                continue
            if isinstance(event, dict) and event.get("type") == "session.init":
                payload = event.get("payload")
                return payload if isinstance(payload, dict) else {}
            if isinstance(event, dict) and event.get("type") == "session.close":
                await ws.send(json.dumps({"type": "session.closed", "reason": "client"}))
                return None
            self.stats.bad_frames += 1
            await ws.send(_error("not_initialized", "send session.init first"))
        return None


class ServerThread:
    """A :class:`RealtimeServer` on its own event-loop thread (tests, benchmarks, embedding).

    Use as a context manager; :attr:`url` is valid inside it.
    """

    def __init__(
        self, frontend_factory: Callable[[], Frontend], config: ServeConfig | None = None
    ) -> None:
        self.server = RealtimeServer(frontend_factory, config or ServeConfig(port=0))
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="venus-serve")

    @property
    def url(self) -> str:
        """Base URL of the server."""
        return self.server.url

    def __enter__(self) -> ServerThread:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
