"""A fake vLLM-omni duplex endpoint: the real wire protocol, our scripted frontend as the model.

Only the GPU model behind vLLM-omni is faked. The WebSocket side follows vLLM-omni's public
contract (``docs/serving/realtime_duplex_api.md``, ``vllm_omni/engine/duplex/realtime_commands.py``,
``vllm_omni/protocol/duplex/events.py``): ``/v1/realtime?duplex=1`` (or ``/v1/duplex``), the
first ``session.update`` opens the session (``session.created`` then ``session.updated``),
``input_audio_buffer.append`` streams ``pcm16``/``pcm_f32le`` audio that the model consumes in
1000 ms units (``chunk_period_ms``), each unit answered with ``response.listen`` or a response
envelope (``response.created`` ... ``response.speak``, one ``response.output_audio.delta`` with
``metadata.end_of_turn`` and one ``response.output_audio_transcript.delta`` per unit, the
``*.done`` events and ``response.done`` at the end of a turn); ``conversation.item.create`` adds
text to the model's context; ``input.text.append`` is refused the way model-native sessions
refuse it; every server event carries ``event_id`` and ``server_event_seq``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import numpy as np

from venus_ros.core.frontend import Decision, Frontend
from venus_ros.core.units import InputUnit

UNIT = 16000  # chunk_period_ms = 1000 at 16 kHz


@dataclass
class FakeOptions:
    """Knobs for tests: refuse the handshake, or send an error event every N units."""

    refuse_code: str = ""
    error_every: int = 0
    garbage: bool = False
    require_ref_audio: bool = False
    ref_audio: list[str] = field(default_factory=list)
    sessions: int = 0
    texts: list[str] = field(default_factory=list)
    appends: int = 0
    frames: int = 0


def vllm_handler(model: Callable[[], Frontend], options: FakeOptions):
    """A ``websockets`` handler serving one duplex session per connection."""

    async def handler(ws) -> None:
        parts = urlsplit(ws.request.path)
        duplex = dict(parse_qsl(parts.query)).get("duplex", "1").lower() in ("1", "true", "on")
        if not parts.path.rstrip("/").endswith(("/v1/realtime", "/v1/duplex")) or not duplex:
            await ws.send(
                json.dumps(
                    {
                        "type": "error",
                        "error": "Realtime API is not available",
                        "code": "unsupported",
                    }
                )
            )
            return
        await _Session(ws, model(), options).run()

    return handler


class _Session:
    def __init__(self, ws, frontend: Frontend, options: FakeOptions) -> None:
        self.ws = ws
        self.frontend = frontend
        self.options = options
        self.seq = 0
        self.id = f"duplex-{uuid.uuid4().hex}"
        self.buffer = np.zeros(0, np.float32)
        self.texts: list[str] = []
        self.frame = None
        self.index = 0
        self.start = 0
        self.response: str | None = None
        self.transcript = ""
        self.epoch = 0

    async def send(self, kind: str, **fields: Any) -> None:
        self.seq += 1
        event = {
            "type": kind,
            "event_id": f"event_{uuid.uuid4().hex}",
            "server_event_seq": self.seq,
            **fields,
        }
        await self.ws.send(json.dumps(event))

    async def error(self, code: str, message: str, event_id: Any = None) -> None:
        error: dict[str, Any] = {"type": "invalid_request_error", "code": code, "message": message}
        if isinstance(event_id, str):
            error["event_id"] = event_id
        await self.send("error", error=error)

    async def run(self) -> None:
        first = json.loads(await self.ws.recv())
        if self.options.refuse_code:
            await self.error(
                self.options.refuse_code, "the session was refused", first.get("event_id")
            )
            return
        session = first.get("session", {}) if first.get("type") == "session.update" else {}
        if session.get("ref_audio"):
            self.options.ref_audio.append(session["ref_audio"])
        elif self.options.require_ref_audio:  # the MiniCPM-o preset's rule
            await self.error(
                "ref_audio_required", "MiniCPM-o needs ref_audio", first.get("event_id")
            )
            return
        self.options.sessions += 1
        self.frontend.prepare(system_prompt=session.get("instructions") or "")
        info = {
            "object": "realtime.session",
            "type": "realtime",
            "id": self.id,
            "model": session.get("model"),
            "state": "open",
            "turn_state": "idle",
            "epoch": 0,
            "input_audio_format": session.get("input_audio_format", "pcm16"),
            "output_audio_format": "pcm16",
            "playback_commit_policy": session.get("playback_commit_policy", "commit_all_on_done"),
            "capabilities": {
                "implementation_level": "model_native_duplex",
                "chunk_period_ms": 1000,
                "supports_barge_in": True,
                "supports_session_resume": False,
            },
        }
        await self.send("session.created", session=info, attachment_generation=1)
        await self.send("session.updated", session=info)
        async for message in self.ws:
            try:
                event = json.loads(message)
                kind = event["type"]
            except (json.JSONDecodeError, KeyError, TypeError):
                await self.error("bad_event", "Duplex event missing string type")
                continue
            if kind == "input_audio_buffer.append":
                await self.append(event)
            elif kind == "conversation.item.create":
                item = event.get("item", {})
                for part in item.get("content", []):
                    if part.get("type") == "input_text":
                        self.texts.append(part["text"])
                        self.options.texts.append(part["text"])
                item = {**item, "id": f"item_{uuid.uuid4().hex[:8]}", "status": "completed"}
                for name in (
                    "conversation.item.added",
                    "conversation.item.created",
                    "conversation.item.done",
                ):
                    await self.send(name, previous_item_id=None, item=item)
            elif kind in ("input.text.append", "input_text.append", "push_text"):
                await self.error(
                    "native_text_append_unsupported",
                    "model-native sessions do not take text appends",
                    event.get("event_id"),
                )
            elif kind == "playback.ack":
                await self.send(
                    "playback.acknowledged", event={"played_ms": event.get("played_ms")}
                )
            elif kind == "session.close":
                await self.send("session.closed", session_id=self.id, reason="client_close")
                return
            elif kind == "session.heartbeat":
                await self.send("session.heartbeat_ack", session_id=self.id)
            else:
                await self.error(
                    "unknown_event", f"Unknown duplex event type: {kind}", event.get("event_id")
                )

    async def append(self, event: dict[str, Any]) -> None:
        fmt = event.get("input_audio_format", "pcm16")
        try:
            raw = base64.b64decode(event.get("audio", ""), validate=True)
        except (binascii.Error, ValueError):
            await self.error("bad_audio", "input audio is not valid base64", event.get("event_id"))
            return
        if fmt == "pcm_f32le":
            audio = np.frombuffer(raw, "<f4").astype(np.float32)
        else:
            audio = np.frombuffer(raw, "<i2").astype(np.float32) / 32768.0
        self.options.appends += 1
        if event.get("video_frames"):
            self.options.frames += 1
        self.buffer = np.concatenate([self.buffer, audio])
        while self.buffer.size >= UNIT:
            chunk, self.buffer = self.buffer[:UNIT], self.buffer[UNIT:]
            await self.unit(chunk)

    async def unit(self, audio: np.ndarray) -> None:
        unit = InputUnit(
            index=self.index, start_sample=self.start, audio=audio, texts=tuple(self.texts)
        )
        self.texts.clear()
        self.index += 1
        self.start += audio.size

        def step():
            self.frontend.prefill(unit)
            return self.frontend.generate()

        out = await asyncio.to_thread(step)
        if self.options.garbage:  # hostile events the client must count and ignore
            for bad in ("{oops", "[]", json.dumps({"type": 7})):
                await self.ws.send(bad)
            await self.send("response.output_audio.delta", delta="***", format="pcm16")
            await self.send("response.output_audio.delta", delta="AAAA", format="opus")
            await self.send("response.output_audio.delta", delta="AAAA", sample_rate_hz=10**9)
            await self.send("no.such.event", payload={"x": [1] * 50})
        if self.options.error_every and self.index % self.options.error_every == 0:
            await self.send(
                "error",
                error={
                    "type": "server_error",
                    "code": "runtime_append_failed",
                    "message": "stale epoch: expected 1, got 0",
                },
            )
        if out.decision is Decision.LISTEN:
            if self.response is not None:
                await self.finish("cancelled")
            await self.send(
                "response.listen",
                session_id=self.id,
                epoch=self.epoch,
                response={
                    "object": "realtime.response",
                    "status": "listening",
                    "metadata": {"reason": "model_listen"},
                },
            )
            return
        scope = {"output_index": 0, "content_index": 0}
        if self.response is None:
            self.response = f"resp_{uuid.uuid4().hex[:8]}"
            self.transcript = ""
            rid = self.response
            await self.send(
                "response.created",
                response_id=rid,
                response={
                    "id": rid,
                    "object": "realtime.response",
                    "status": "in_progress",
                    "output": [],
                },
            )
            item = {
                "id": f"item_{rid}",
                "object": "realtime.item",
                "type": "message",
                "role": "assistant",
                "status": "in_progress",
                "content": [],
            }
            await self.send(
                "response.output_item.added", response_id=rid, output_index=0, item=item
            )
            await self.send(
                "response.content_part.added",
                response_id=rid,
                item_id=f"item_{rid}",
                part={"type": "audio", "transcript": ""},
                **scope,
            )
            await self.send(
                "response.speak",
                response_id=rid,
                item_id=f"item_{rid}",
                metadata={"session_id": self.id, "epoch": self.epoch, "model_speak": True},
                **scope,
            )
        rid = self.response
        pcm = np.round(np.clip(out.audio, -1, 1) * 32767).astype("<i2").tobytes()
        rate = self.frontend.output_sample_rate
        if out.audio.size:
            await self.send(
                "response.output_audio.delta",
                response_id=rid,
                item_id=f"item_{rid}",
                delta=base64.b64encode(pcm).decode(),
                format="pcm16",
                sample_rate_hz=rate,
                metadata={
                    "session_id": self.id,
                    "epoch": self.epoch,
                    "model_speak": True,
                    "end_of_turn": bool(out.end_of_turn),
                    "audio_duration_ms": round(out.audio.size * 1000 / rate),
                },
                **scope,
            )
        self.transcript += out.text
        await self.send(
            "response.output_audio_transcript.delta",
            response_id=rid,
            item_id=f"item_{rid}",
            delta=out.text,
            **scope,
        )
        if out.end_of_turn:
            await self.finish("completed")

    async def finish(self, status: str) -> None:
        rid, self.response = self.response, None
        scope = {
            "response_id": rid,
            "item_id": f"item_{rid}",
            "output_index": 0,
            "content_index": 0,
        }
        await self.send("response.output_audio.done", **scope)
        await self.send(
            "response.output_audio_transcript.done", transcript=self.transcript, **scope
        )
        await self.send(
            "response.content_part.done",
            part={"type": "audio", "transcript": self.transcript},
            **scope,
        )
        await self.send(
            "response.output_item.done",
            response_id=rid,
            output_index=0,
            item={"id": f"item_{rid}", "status": status},
        )
        await self.send(
            "response.done",
            response_id=rid,
            response={"id": rid, "object": "realtime.response", "status": status},
        )
        await self.send("rate_limits.updated", rate_limits=[])
