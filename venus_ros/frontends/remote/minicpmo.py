"""MiniCPM-o Realtime V1 through the official ``openbmb-realtime`` SDK.

The SDK (read from its source, version 0.1.6) opens the WebSocket (bearer header, subprotocol
``map.realtime``), waits through ``session.queued`` until ``session.queue_done``, sends
``session.init`` and returns once ``session.created`` arrives; ``send_audio`` /
``send_audio_video`` build ``input.append`` frames; its event stream yields ``TextDelta``,
``AudioDelta``, ``TurnCompleted`` (for ``response.listen`` and ``response.done``), ``ErrorEvent``
(after which the SDK fails the session) and ``SessionClosed``. It has no per-unit boundary and
no way to send text, so:

* we hand the SDK a WebSocket through its ``websocket_factory`` hook that also *taps* the
  frames: ``session.queued`` positions, ``session.created``'s ``venus`` block and the
  ``venus.unit`` header that ``venus-ros serve`` sends before each unit's answer (the SDK parser
  ignores unknown types). With the header, a unit's answer is exact: its decision, raw text
  (private spans included) and the number of audio samples to collect from ``AudioDelta``;
  ``venus.input.text`` frames carry injected ``<backend>`` text through the same socket.
* without the extension (a hosted MiniCPM-o), units are delimited from the SDK's events: an
  ``AudioDelta`` closes a speaking unit (its text came first), ``TurnCompleted`` closes a
  listening one (the one right after a finished turn is that turn's ``response.done``).
  Injected text cannot be sent there; it is counted and dropped.
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from venus_ros.core.frontend import Decision
from venus_ros.core.units import InputUnit
from venus_ros.frontends.remote.link import Answer, Link, RemoteError

log = logging.getLogger("venus_ros.frontends.remote")


class _Tap:
    """The SDK's socket, with a look at every frame on the way in and a way to send our own."""

    def __init__(self, socket: Any, link: MiniCPMoLink) -> None:
        self._socket = socket
        self._link = link

    async def send(self, message: str) -> None:
        await self._socket.send(message)

    async def recv(self) -> str | bytes:
        message = await self._socket.recv()
        if isinstance(message, str) and ('"venus.' in message[:48] or '"session.' in message[:64]):
            self._link.on_frame(message)
        return message

    async def close(self, code: int = 1000, reason: str = "") -> None:
        await self._socket.close(code, reason)


def sdk_base_url(url: str) -> str:
    """The SDK's ``base_url`` for a server address (it appends ``/v1/realtime`` itself)."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    for suffix in ("/v1/realtime", "/realtime"):
        if path.endswith(suffix):
            path = path[: -len(suffix)]
            break
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


class MiniCPMoLink(Link):
    """A :class:`Link` speaking MiniCPM-o Realtime V1 with the ``openbmb-realtime`` SDK."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._tap: _Tap | None = None
        self._session: Any = None
        self.extensions = False
        self._header: list[tuple[Answer, int]] = []  # venus.unit headers and samples to collect
        self._collected: list[np.ndarray] = []
        self._bucket: Answer | None = None  # plain mode: the unit being assembled
        self._turn_just_ended = False
        self._queue_reported = False

    @property
    def can_inject(self) -> bool:  # type: ignore[override]
        """Text can be injected only into ``venus-ros serve`` (its ``venus.input.text``)."""
        return self.extensions

    async def _factory(
        self, url: str, *, headers: dict[str, str], subprotocols: list[str], options: Any
    ) -> _Tap:
        from openbmb_realtime.transport import default_websocket_factory

        context = self.ssl_context()
        if context is None:
            socket = await default_websocket_factory(
                url, headers=headers, subprotocols=subprotocols, options=options
            )
        else:
            from websockets.asyncio.client import connect

            socket = await connect(
                url,
                additional_headers=headers,
                subprotocols=subprotocols,  # type: ignore[arg-type]
                open_timeout=options.connect_timeout,
                max_size=options.max_message_size,
                ssl=context,
            )
        self._tap = _Tap(socket, self)
        return self._tap

    async def _open(self) -> None:
        from openbmb_realtime import RealtimeClient, RealtimeError

        self.extensions = False
        self.stats.queued_position = None
        self._header.clear()
        self._collected.clear()
        self._bucket = None
        self._turn_just_ended = False
        client = RealtimeClient(
            api_key=self.token or "none",  # the SDK refuses an empty key; a free server ignores it
            base_url=sdk_base_url(self.options.url),
            connect_timeout=self.options.queue_timeout_s,
            close_timeout=1.0,
            max_message_size=4 << 20,
            websocket_factory=self._factory,
        )
        connector = client.video if self.options.video else client.audio
        try:
            self._session = await connector.connect(
                model=self.options.model,
                system_prompt=self.system_prompt or None,
                reference_audio_base64=self.ref_audio or None,
            )
        except RealtimeError as exc:
            cause = f" ({type(exc.cause).__name__}: {exc.cause})" if exc.cause else ""
            raise RemoteError(f"{exc.code}{cause}") from exc

    def on_frame(self, message: str) -> None:
        """A raw frame seen by the tap (before the SDK parses it)."""
        try:
            event = json.loads(message)
        except json.JSONDecodeError:
            return  # the SDK ignores it too
        if not isinstance(event, dict):
            return
        kind = event.get("type")
        if kind == "session.queued":
            position = event.get("position")
            if isinstance(position, int) and position != self.stats.queued_position:
                if not self._queue_reported:  # once per outage, not once per attempt
                    self._queue_reported = True
                    log.warning(
                        "remote frontend: %s is busy; queued at position %d",
                        self.options.url,
                        position,
                    )
                self.stats.queued_position = position
        elif kind == "session.created":
            self._queue_reported = False
            offered = isinstance(event.get("venus"), dict)
            self.extensions = offered and self.options.venus != "off"
        elif kind == "venus.unit" and self.extensions:
            self._on_header(event)

    def _on_header(self, event: dict[str, Any]) -> None:
        decision = event.get("decision")
        samples = event.get("audio_samples")
        rate = event.get("sample_rate_hz")
        text = event.get("text")
        compute = event.get("compute_ms")
        if (
            decision not in ("listen", "speak")
            or not isinstance(samples, int)
            or not 0 <= samples <= 5 * 48000
            or not isinstance(rate, int)
            or not 8000 <= rate <= 48000
            or not isinstance(text, str)
            or len(text) > 16000
        ):
            self.stats.bad_events += 1
            return
        answer = Answer(
            index=-1,
            decision=Decision(decision),
            end_of_turn=bool(event.get("end_of_turn")),
            text=text,
            rate=rate,
            compute_ms=float(compute) if isinstance(compute, (int, float)) else None,
        )
        self._header.append((answer, samples))
        self._deliver_ready()

    def _deliver_ready(self) -> None:
        """Deliver the headers whose audio is in, in the order they came.

        The SDK parses frames ahead of the events we take from it, so a header with no audio to
        wait for can be seen before the audio of the units before it: it waits its turn (else
        the answers are handed to the wrong units and a turn ends mid-span).
        """
        while self._header and self._header[0][1] == 0:
            self.deliver(self._header.pop(0)[0])

    async def _send_unit(self, unit: InputUnit, jpeg: bytes | None) -> None:
        session = self._session
        if self.extensions and self._tap is not None:
            for text in unit.texts:
                await self._tap.send(json.dumps({"type": "venus.input.text", "text": text}))
        audio = np.asarray(unit.audio, dtype="<f4").tobytes()
        if jpeg is not None and hasattr(session, "send_audio_video"):
            await session.send_audio_video(audio, jpeg)
        else:
            await session.send_audio(audio)

    async def _read(self) -> None:
        from openbmb_realtime import (
            AudioDelta,
            ErrorEvent,
            SessionClosed,
            TextDelta,
            TurnCompleted,
        )

        async for event in self._session.events():
            if isinstance(event, AudioDelta):
                self._on_audio(event.audio)
            elif isinstance(event, TextDelta) and not self.extensions:
                bucket = self._bucket or Answer(-1, Decision.SPEAK)
                bucket.text += event.text
                bucket.end_of_turn |= event.end_of_turn
                self._bucket = bucket
            elif isinstance(event, TurnCompleted) and not self.extensions:
                self._on_turn_completed()
            elif isinstance(event, ErrorEvent):
                self.stats.errors += 1
                log.warning("remote frontend: server error %s: %s", event.code, event.message[:200])
            elif isinstance(event, SessionClosed):
                return

    def _on_audio(self, data: bytes) -> None:
        if len(data) % 4:
            self.stats.bad_events += 1
            return
        chunk = np.frombuffer(data, dtype="<f4").astype(np.float32)
        if not np.all(np.isfinite(chunk)):
            self.stats.bad_events += 1
            chunk = np.nan_to_num(chunk, nan=0.0, posinf=0.0, neginf=0.0)
        if self.extensions:
            if not self._header:
                self.stats.bad_events += 1
                return
            head, expected = self._header[0]
            self._collected.append(chunk)
            if sum(c.size for c in self._collected) >= expected:
                audio = np.concatenate(self._collected)
                self._collected.clear()
                self._header.pop(0)
                head.audio = audio[:expected]
                self.deliver(head)
                self._deliver_ready()
            return
        bucket = self._bucket or Answer(-1, Decision.SPEAK, rate=self.options.rate)
        bucket.audio = np.concatenate([bucket.audio, chunk])
        bucket.rate = self.options.rate
        self._bucket = None
        self._turn_just_ended = bucket.end_of_turn
        self.deliver(bucket)

    def _on_turn_completed(self) -> None:
        if self._bucket is not None:  # text without audio: the unit ends here, with the turn
            bucket, self._bucket = self._bucket, None
            bucket.end_of_turn = True
            self._turn_just_ended = True
            self.deliver(bucket)
        elif self._turn_just_ended:
            self._turn_just_ended = False  # response.done of the turn that just ended
        else:
            self.deliver(Answer(-1, Decision.LISTEN))

    async def _close(self) -> None:
        if self._session is not None:
            await self._session.close("robot_stop")
            self._session = None
