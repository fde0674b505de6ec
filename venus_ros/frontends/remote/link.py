"""The network side of the remote frontend: one background event loop per frontend.

A :class:`Link` owns a thread running an asyncio loop that connects to the model server,
reconnects with exponential backoff, sends units in order and turns what comes back into
:class:`Answer` values, one per unit sent. The foreground thread only calls :meth:`Link.submit`
(never blocks) and :meth:`Link.take` (blocks at most until the unit's deadline). Protocols are
subclasses that implement :meth:`Link._open`, :meth:`Link._send_unit`, :meth:`Link._read` and
:meth:`Link._close`.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
import os
import ssl
import threading
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from venus_ros.core.frontend import Decision
from venus_ros.core.units import InputUnit
from venus_ros.frontends.remote.codec import encode_jpeg
from venus_ros.frontends.remote.options import RemoteOptions
from venus_ros.frontends.remote.redact import install as _redact_headers

log = logging.getLogger("venus_ros.frontends.remote")
_redact_headers()

#: Timing samples kept per counter (the newest; about 2.8 hours of units).
MAX_SAMPLES = 10_000
#: Units waiting to be sent while the socket is slow; older ones are given up (counted lost).
MAX_OUTBOX = 4


class RemoteError(RuntimeError):
    """The server refused or broke the session (handshake error, fatal ``error`` event)."""


@dataclass
class Answer:
    """What the server answered for one unit.

    Attributes:
        index: the robot's unit index.
        decision: listen or speak.
        end_of_turn: the model ended its turn in this unit.
        text: raw text of the unit (private spans included).
        audio: mono float32 speech at ``rate``.
        rate: sample rate of ``audio``.
        rtt_s: wall time from sending the unit to the complete answer.
        compute_ms: the server's own compute for the unit, when it reports it.
        generation: the connection the answer came on (1 for the first).
    """

    index: int
    decision: Decision
    end_of_turn: bool = False
    text: str = ""
    audio: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    rate: int = 24000
    rtt_s: float = 0.0
    compute_ms: float | None = None
    generation: int = 0


@dataclass
class LinkStats:
    """Counters of one link (read from any thread; written on the loop thread)."""

    sent: int = 0
    answered: int = 0
    lost: int = 0
    connects: int = 0
    failures: int = 0
    errors: int = 0
    bad_events: int = 0
    queued_position: int | None = None
    rtt_s: deque[float] = field(default_factory=lambda: deque(maxlen=MAX_SAMPLES))


@dataclass
class _Pending:
    index: int
    sent_at: float


class Link(abc.ABC):
    """A reconnecting connection to a remote duplex model.

    Args:
        options: the frontend's options.
        system_prompt: sent when a session opens.
        ref_audio: base64 of a WAV file with the assistant's voice, sent when a session opens.
    """

    #: Whether the server can take injected text (``<backend>`` replies); set by subclasses.
    can_inject = False

    def __init__(
        self, options: RemoteOptions, system_prompt: str = "", ref_audio: str = ""
    ) -> None:
        self.options = options
        self.system_prompt = system_prompt
        self.ref_audio = ref_audio
        self.stats = LinkStats()
        self.generation = 0
        self.last_error = ""
        self._token = os.environ.get(options.token_env, "") if options.token_env else ""
        self._cond = threading.Condition()
        self._answers: dict[int, Answer] = {}
        self._waiting: set[int] = set()
        self._connected = False
        self._down_since: float | None = time.monotonic()
        self._outage_logged = False
        self._stopping = False
        self._pending: deque[_Pending] = deque()
        self._outbox: asyncio.Queue[InputUnit] | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="venus-remote-link", daemon=True
        )
        self._task: asyncio.Task[None] | None = None

    # ----------------------------------------------------------- foreground API
    def start(self) -> None:
        """Start the loop thread and the connection task (returns at once)."""
        self._thread.start()

        async def spawn() -> asyncio.Task[None]:
            return asyncio.create_task(self._main(), name="venus-remote-link")

        self._task = asyncio.run_coroutine_threadsafe(spawn(), self._loop).result(5)

    @property
    def connected(self) -> bool:
        """A session is open."""
        return self._connected

    @property
    def down_for(self) -> float:
        """Seconds since the link went down (0 while connected)."""
        since = self._down_since
        return 0.0 if since is None else time.monotonic() - since

    def wait_connected(self, timeout: float) -> bool:
        """Block until a session is open or ``timeout`` passed; True if open."""
        with self._cond:
            return self._cond.wait_for(lambda: self._connected, timeout)

    def submit(self, unit: InputUnit) -> bool:
        """Queue a unit for sending; False (nothing sent) while the link is down."""
        if not self._connected:
            return False
        with self._cond:
            self._waiting.add(unit.index)
        self._loop.call_soon_threadsafe(self._enqueue, unit)
        return True

    def take(self, index: int, deadline: float) -> list[Answer]:
        """Answers for units up to ``index`` that arrived, waiting until ``deadline`` for ``index``.

        Args:
            index: the unit just submitted.
            deadline: ``time.monotonic()`` value after which not to wait.

        Returns:
            The arrived answers with index <= ``index``, oldest first (possibly empty).
        """
        with self._cond:
            self._cond.wait_for(
                lambda: index in self._answers or index not in self._waiting,
                max(0.0, deadline - time.monotonic()),
            )
            ready = sorted(k for k in self._answers if k <= index)
            return [self._answers.pop(k) for k in ready]

    def close(self) -> None:
        """Close the session politely and stop the thread (bounded wait)."""
        self._stopping = True
        if self._task is not None and self._thread.is_alive():
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(5)
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(3)
        if not self._thread.is_alive() and not self._loop.is_closed():
            self._loop.close()

    async def _shutdown(self) -> None:
        """Cancel the connection task (it closes the session) and every task it left."""
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)

    # -------------------------------------------------------------- loop side
    def _enqueue(self, unit: InputUnit) -> None:
        if self._outbox is None:
            self._lose(unit.index)
            return
        while self._outbox.qsize() >= MAX_OUTBOX:
            self._lose(self._outbox.get_nowait().index)
        self._outbox.put_nowait(unit)

    def _lose(self, index: int) -> None:
        self.stats.lost += 1
        with self._cond:
            self._waiting.discard(index)
            self._cond.notify_all()

    def deliver(self, answer: Answer) -> None:
        """Hand an answer to the foreground (subclasses call it, on the loop thread)."""
        if not self._pending:
            self.stats.bad_events += 1
            return
        pending = self._pending.popleft()
        answer.index = pending.index
        answer.rtt_s = time.perf_counter() - pending.sent_at
        answer.generation = self.generation
        self.stats.answered += 1
        self.stats.rtt_s.append(answer.rtt_s)
        with self._cond:
            self._waiting.discard(pending.index)
            self._answers[pending.index] = answer
            self._cond.notify_all()

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context for ``wss://`` with a private CA (``ca=``), else None."""
        if not self.options.ca:
            return None
        return ssl.create_default_context(cafile=self.options.ca)

    @property
    def token(self) -> str:
        """The bearer token (empty when none is configured). Never log it."""
        return self._token

    async def _main(self) -> None:
        delay = self.options.backoff_s
        while not self._stopping:
            try:
                await asyncio.wait_for(self._open(), self.options.queue_timeout_s + 1.0)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # every failure to connect is retried
                self._failed(exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.options.backoff_max_s)
                continue
            delay = self.options.backoff_s
            self._up()
            sender = asyncio.create_task(self._sender(), name="venus-remote-sender")
            try:
                await self._read()
                self._down("the server closed the session")
            except asyncio.CancelledError:
                self._down("closing")
                raise
            except Exception as exc:
                self._down(f"{type(exc).__name__}: {exc}")
            finally:
                sender.cancel()
                with contextlib.suppress(BaseException):
                    await sender
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self._close(), 2.0)
            if not self._stopping:
                await asyncio.sleep(delay)

    async def _sender(self) -> None:
        assert self._outbox is not None
        while True:
            unit = await self._outbox.get()
            jpeg = None
            if self.options.video and unit.frame is not None:
                try:
                    jpeg = await asyncio.to_thread(
                        encode_jpeg,
                        np.asarray(unit.frame.image),
                        self.options.jpeg_quality,
                        self.options.max_side,
                    )
                except Exception as exc:
                    log.warning("remote frontend: frame not sent: %s", exc)
            self._pending.append(_Pending(unit.index, time.perf_counter()))
            self.stats.sent += 1
            await self._send_unit(unit, jpeg)

    def _up(self) -> None:
        self.generation += 1
        self.stats.connects += 1
        self._outbox = asyncio.Queue()
        self._pending.clear()
        if self._outage_logged or self.generation > 1:
            log.info(
                "remote frontend: connected to %s (session %d)", self._where(), self.generation
            )
        self._outage_logged = False
        with self._cond:
            self._answers.clear()  # answers of the previous session belong to its turn state
            self._connected = True
            self._down_since = None
            self._cond.notify_all()

    def _down(self, reason: str) -> None:
        was = self._connected
        with self._cond:
            self._connected = False
            if self._down_since is None:
                self._down_since = time.monotonic()
            lost = set(self._waiting)
            self._waiting.clear()
            self._cond.notify_all()
        self.stats.lost += len(lost)
        self._pending.clear()
        self._outbox = None
        if was and not self._stopping:
            self.last_error = reason
            log.warning("remote frontend: lost the session with %s: %s", self._where(), reason)

    def _failed(self, exc: BaseException) -> None:
        self.stats.failures += 1
        reason = str(exc) or type(exc).__name__
        if self.stats.queued_position:
            reason = (
                f"still queued at position {self.stats.queued_position} after "
                f"{self.options.queue_timeout_s:g} s ({reason})"
            )
        self.last_error = reason
        if not self._outage_logged:
            self._outage_logged = True
            fallback = (
                f"; '{self.options.fallback}' takes over after {self.options.fallback_after_s:g} s"
                if self.options.fallback
                else ""
            )
            log.error(
                "remote frontend: cannot open a session with %s (%s); units are answered "
                "'listen' locally and the link retries with backoff%s",
                self._where(),
                reason,
                fallback,
            )
        else:
            log.debug("remote frontend: retry failed: %s", reason)

    def _where(self) -> str:
        return f"{self.options.protocol} server {self.options.url}"

    # ------------------------------------------------------------ protocols
    @abc.abstractmethod
    async def _open(self) -> None:
        """Connect and open a session (raise on failure)."""

    @abc.abstractmethod
    async def _send_unit(self, unit: InputUnit, jpeg: bytes | None) -> None:
        """Send one unit (its audio, texts and optional JPEG)."""

    @abc.abstractmethod
    async def _read(self) -> None:
        """Read server events until the session ends, calling :meth:`deliver` per answer."""

    @abc.abstractmethod
    async def _close(self) -> None:
        """Close the session politely."""
