"""vLLM-omni's full-duplex realtime endpoint (``/v1/realtime?duplex=1``), our own client.

Learnt from vLLM-omni's public code and docs (``docs/serving/realtime_duplex_api.md``,
``vllm_omni/engine/duplex/realtime_commands.py``, ``vllm_omni/protocol/realtime/events.py``,
``vllm_omni/protocol/duplex/events.py``, ``vllm_omni/protocol/realtime/audio_input.py``): an
OpenAI-Realtime dialect in which the model owns turn-taking at its ``chunk_period_ms`` (1000 ms
for MiniCPM-o 4.5). The client opens with ``session.update`` (``turn_detection: null`` leaves
listen/speak to the model) and waits for ``session.created``; it streams
``input_audio_buffer.append`` (``pcm16`` 16 kHz, the camera frame as a bare base64 JPEG in
``video_frames`` on the append that closes a unit). Per unit the server answers either
``response.listen`` or, while speaking, ``response.output_audio.delta`` (``pcm16`` at
``sample_rate_hz``, ``metadata.end_of_turn``) followed by exactly one
``response.output_audio_transcript.delta``; a turn ends with ``response.done``. Text input:
``input.text.append`` is refused by model-native sessions, so injected ``<backend>`` text goes in
as a ``conversation.item.create`` user text item, the one text path the endpoint accepts.
Errors are ``{"type": "error", "error": {"code", "message"}}`` (or a flat shape during the
handshake); they do not end the session. We commit playback on ``response.done``
(``playback_commit_policy: commit_all_on_done``) because the frontend contract has no
playback acknowledgement to forward.
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from venus_ros.core.frontend import Decision
from venus_ros.core.units import InputUnit
from venus_ros.frontends.remote.codec import WireError, decode_s16, encode_s16
from venus_ros.frontends.remote.link import Answer, Link, RemoteError

log = logging.getLogger("venus_ros.frontends.remote")

#: Output rate when a delta does not say (the MiniCPM-o preset's 24 kHz pcm16).
DEFAULT_OUTPUT_RATE = 24000


def duplex_url(url: str, model: str) -> str:
    """``url`` pointed at ``/v1/realtime`` with ``duplex=1`` and ``model`` in the query."""
    parts = urlsplit(url)
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
    path = parts.path.rstrip("/")
    if not path.endswith(("/v1/realtime", "/v1/duplex")):
        path = f"{path}/v1/realtime"
    query = dict(parse_qsl(parts.query))
    query.setdefault("duplex", "1")
    query.setdefault("model", model)
    return urlunsplit((scheme, parts.netloc, path, urlencode(query), ""))


def _error_text(event: dict[str, Any]) -> tuple[str, str]:
    error = event.get("error")
    if isinstance(error, dict):
        return str(error.get("code", "error"))[:64], str(error.get("message", ""))[:300]
    return str(event.get("code", "error"))[:64], str(error or event.get("message", ""))[:300]


class VllmOmniLink(Link):
    """A :class:`Link` speaking vLLM-omni's duplex realtime dialect."""

    can_inject = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._ws: Any = None
        self._speech: Answer | None = None  # audio delta waiting for its transcript delta
        self._sent_ms = 0
        self.session_info: dict[str, Any] = {}

    async def _open(self) -> None:
        from websockets.asyncio.client import connect

        headers = {"Authorization": f"Bearer {self.token}"} if self.token else None
        self._ws = await connect(
            duplex_url(self.options.url, self.options.model),
            additional_headers=headers,
            open_timeout=self.options.queue_timeout_s,
            max_size=4 << 20,
            ssl=self.ssl_context(),
            compression=None,
        )
        self._speech = None
        self._sent_ms = 0
        session: dict[str, Any] = {
            "model": self.options.model,
            "modalities": ["audio", "text"],
            "input_audio_format": "pcm16",
            "output_audio_format": "pcm16",
            "turn_detection": None,
            "overlap_policy": "listen_only",
            "playback_commit_policy": "commit_all_on_done",
        }
        if self.system_prompt:
            session["instructions"] = self.system_prompt
        if self.ref_audio:
            session["ref_audio"] = f"data:audio/wav;base64,{self.ref_audio}"
        await self._ws.send(json.dumps({"type": "session.update", "session": session}))
        while True:
            event = self._parse(await self._ws.recv())
            if event is None:
                continue
            if event.get("type") == "session.created":
                info = event.get("session")
                self.session_info = info if isinstance(info, dict) else {}
                return
            if event.get("type") == "error":
                code, message = _error_text(event)
                raise RemoteError(f"{code}: {message}")

    def _parse(self, message: str | bytes) -> dict[str, Any] | None:
        try:
            event = json.loads(message)
        except (json.JSONDecodeError, UnicodeDecodeError, TypeError):
            self.stats.bad_events += 1
            return None
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            self.stats.bad_events += 1
            return None
        return event

    async def _send_unit(self, unit: InputUnit, jpeg: bytes | None) -> None:
        for text in unit.texts:
            item = {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": text}],
            }
            await self._ws.send(json.dumps({"type": "conversation.item.create", "item": item}))
        duration = round(unit.audio.size * 1000 / unit.sample_rate)
        self._sent_ms += duration
        append: dict[str, Any] = {
            "type": "input_audio_buffer.append",
            "event_id": f"unit_{unit.index}",
            "audio": encode_s16(unit.audio),
            "input_audio_format": "pcm16",
            "sample_rate_hz": unit.sample_rate,
            "duration_ms": duration,
            "audio_end_ms": self._sent_ms,
        }
        if jpeg is not None:
            import base64

            append["video_frames"] = [base64.b64encode(jpeg).decode("ascii")]
        await self._ws.send(json.dumps(append))

    async def _read(self) -> None:
        async for message in self._ws:
            event = self._parse(message)
            if event is None:
                continue
            kind = event["type"]
            if kind == "response.listen":
                self._flush_speech()
                self.deliver(Answer(-1, Decision.LISTEN))
            elif kind == "response.output_audio.delta":
                self._on_audio(event)
            elif kind in ("response.output_audio_transcript.delta", "response.output_text.delta"):
                delta = event.get("delta")
                if not isinstance(delta, str) or len(delta) > 16000:
                    self.stats.bad_events += 1
                    continue
                speech = self._speech or Answer(-1, Decision.SPEAK, rate=DEFAULT_OUTPUT_RATE)
                speech.text += delta
                self._speech = None
                self.deliver(speech)
            elif kind == "response.done":
                if self._speech is not None:
                    self._speech.end_of_turn = True
                self._flush_speech()
            elif kind == "error":
                self.stats.errors += 1
                code, text = _error_text(event)
                log.warning("remote frontend: vLLM-omni error %s: %s", code, text)
            elif kind in ("session.closed", "session.expired", "session.resync_required"):
                return

    def _on_audio(self, event: dict[str, Any]) -> None:
        self._flush_speech()  # two audio deltas in a row: the first had no transcript
        rate = event.get("sample_rate_hz", DEFAULT_OUTPUT_RATE)
        fmt = event.get("format", "pcm16")
        if not isinstance(rate, int) or not 8000 <= rate <= 48000 or fmt not in ("pcm16", "pcm"):
            self.stats.bad_events += 1
            return
        try:
            audio = decode_s16(event.get("delta"), rate, "response.output_audio.delta")
        except WireError as exc:
            self.stats.bad_events += 1
            log.debug("remote frontend: %s", exc)
            return
        metadata = event.get("metadata")
        eot = isinstance(metadata, dict) and bool(metadata.get("end_of_turn"))
        self._speech = Answer(-1, Decision.SPEAK, end_of_turn=eot, audio=audio, rate=rate)

    def _flush_speech(self) -> None:
        if self._speech is not None:
            speech, self._speech = self._speech, None
            self.deliver(speech)

    async def _close(self) -> None:
        if self._ws is not None:
            try:
                await self._ws.send(json.dumps({"type": "session.close"}))
            finally:
                await self._ws.close()
                self._ws = None


__all__ = ["VllmOmniLink", "duplex_url"]
