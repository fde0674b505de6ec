"""A scripted OpenAI chat-completions server on 127.0.0.1, for tests (stdlib only).

``FakeOpenAI`` is a real HTTP server on an ephemeral loopback port, served by a thread. Each
``POST /v1/chat/completions`` takes the next reply from its script (a :class:`Reply`, or a
function of the :class:`Recorded` request that returns one) and records the request (method,
path, headers, body) for assertions. An exhausted script answers 500 ("script exhausted").

A request with ``"stream": true`` gets a chat completion the way the real API streams it:
``Content-Type: text/event-stream`` over chunked transfer encoding, one ``data: {chunk}`` event
per ``chat.completion.chunk`` (the role, the text in pieces, each tool call's name and then its
arguments in pieces, the ``finish_reason``), then ``data: [DONE]``. :func:`events` scripts a
stream event by event (hostile chunks, no ``[DONE]``, a stall mid-way); :func:`stalled` stops
a reply's stream after some chunks; ``Reply(stream=False)`` is a server that ignores ``stream``.

    with FakeOpenAI(tool_calls(("calculator", {"expression": "6*7"})), text("42.")) as server:
        settings = LlmSettings(base_url=server.url, model="fake", api_key_env="KEY")
        ...
        assert server.requests[0].headers["authorization"] == "Bearer sk-test"
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CHAT_PATH = "/v1/chat/completions"


@dataclass(frozen=True)
class Recorded:
    """One request the server received; header names are lower-case."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        """The body decoded as JSON."""
        return json.loads(self.body)

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The chat messages of the request."""
        return list(self.json()["messages"])


@dataclass(frozen=True)
class Reply:
    """One scripted answer.

    Attributes:
        status: the HTTP status.
        body: the raw body (bytes are sent as they are; anything else as JSON).
        headers: extra response headers.
        delay_s: seconds to wait before answering (a slow server).
        drop: close the connection without answering.
        stream: answer a streaming request with server-sent events (False: one JSON body).
        events: exactly these stream events, whatever the request asked (a dict or list is
            sent as JSON, bytes as they are); None: made from ``body`` when streaming.
        done: end the stream with ``data: [DONE]`` and the chunked-encoding terminator.
        stall_after: send this many events, then hang for ``stall_s`` (or until the server
            closes) and drop the connection.
        stall_s: how long a stall lasts.
    """

    status: int = 200
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    drop: bool = False
    stream: bool = True
    events: tuple[Any, ...] | None = None
    done: bool = True
    stall_after: int | None = None
    stall_s: float = 30.0


Script = Reply | Callable[[Recorded], Reply]
_ids = itertools.count(1)


def completion(message: Mapping[str, Any], finish_reason: str, model: str = "fake") -> dict:
    """A chat-completions body with one choice."""
    return {
        "id": f"chatcmpl-{next(_ids)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": dict(message), "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def text(content: Any, **options: Any) -> Reply:
    """A final answer (``content`` may be anything JSON: hostile tests send odd values)."""
    return Reply(body=completion({"role": "assistant", "content": content}, "stop"), **options)


def tool_calls(*calls: tuple[str, Any], content: str | None = None) -> Reply:
    """A reply that asks for function calls: ``(name, arguments)`` pairs; a dict is encoded as
    JSON, a string is sent as it is (so malformed arguments can be scripted)."""
    wire = [
        {
            "id": f"call_{next(_ids)}",
            "type": "function",
            "function": {
                "name": name,
                "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
            },
        }
        for name, arguments in calls
    ]
    message = {"role": "assistant", "content": content, "tool_calls": wire}
    return Reply(body=completion(message, "tool_calls"))


def error(status: int, message: str = "error", retry_after: str | None = None, **extra) -> Reply:
    """An OpenAI-style error reply; ``retry_after`` sets the Retry-After header."""
    headers = dict(extra.pop("headers", {}))
    if retry_after is not None:
        headers["Retry-After"] = retry_after
    body = {"error": {"message": message, "type": "test_error", "code": None}}
    return Reply(status=status, body=body, headers=headers, **extra)


def slow(delay_s: float, reply: Reply | None = None) -> Reply:
    """``reply`` (default: a short text) after ``delay_s`` seconds."""
    base = reply or text("late")
    return Reply(base.status, base.body, base.headers, delay_s=delay_s)


def raw(body: bytes, status: int = 200, content_type: str = "application/json") -> Reply:
    """Exactly these bytes (malformed JSON, non-UTF-8, ...)."""
    return Reply(status=status, body=body, headers={"Content-Type": content_type})


def drop() -> Reply:
    """Close the connection without answering."""
    return Reply(drop=True)


def pieces(text: str, parts: int = 16, smallest: int = 4) -> list[str]:
    """``text`` cut into at most ``parts`` pieces of at least ``smallest`` characters (the last
    may be shorter), cutting through words as token streams do."""
    size = max(smallest, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def chunks_of(body: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The ``chat.completion.chunk`` events that stream ``body``; None if it is not a chat
    completion with a message (it is then sent as one JSON body)."""
    choices = body.get("choices") if isinstance(body, Mapping) else None
    if not (isinstance(choices, list) and choices and isinstance(choices[0], Mapping)):
        return None
    message = choices[0].get("message")
    if not isinstance(message, Mapping):
        return None
    base = {k: body[k] for k in ("id", "created", "model") if k in body}
    base["object"] = "chat.completion.chunk"

    def chunk(delta: Mapping[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": dict(delta), "finish_reason": finish}]}

    content = message.get("content")
    out = [chunk({"role": "assistant", "content": "" if isinstance(content, str) else None})]
    if isinstance(content, str):
        out += [chunk({"content": piece}) for piece in pieces(content)]
    elif content is not None:  # hostile values go out as they are
        out.append(chunk({"content": content}))
    for index, call in enumerate(message.get("tool_calls") or []):
        function = dict(call.get("function") or {})
        head = {"index": index, "id": call.get("id"), "type": "function"}
        out.append(chunk({"tool_calls": [{**head, "function": {"name": function.get("name")}}]}))
        arguments = function.get("arguments", "")
        for piece in pieces(arguments) if isinstance(arguments, str) else [arguments]:
            out.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    out.append(chunk({}, choices[0].get("finish_reason")))
    return out


def events(*items: Any, done: bool = True, stall_after: int | None = None) -> Reply:
    """A stream of exactly these events (chunks as dicts, or raw bytes after ``data: ``)."""
    return Reply(events=tuple(items), done=done, stall_after=stall_after)


def stalled(reply: Reply, after: int, stall_s: float = 30.0) -> Reply:
    """``reply`` streamed, but only its first ``after`` events; then the server goes quiet."""
    chunks = chunks_of(reply.body)
    assert chunks is not None, "only a chat completion can be streamed"
    return Reply(events=tuple(chunks), stall_after=after, stall_s=stall_s)


class FakeOpenAI:
    """The server; use as a context manager (or :meth:`start` / :meth:`close`).

    Args:
        replies: the script, answered in order.
    """

    def __init__(self, *replies: Script) -> None:
        self._script: deque[Script] = deque(replies)
        self._requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.01},
            name="fake-openai",
            daemon=True,
        )
        self._started = False

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The base URL to configure (``http://127.0.0.1:PORT/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def requests(self) -> list[Recorded]:
        """Every request so far, oldest first."""
        with self._lock:
            return list(self._requests)

    def add(self, *replies: Script) -> None:
        """Append replies to the script."""
        with self._lock:
            self._script.extend(replies)

    def start(self) -> FakeOpenAI:
        if not self._started:
            self._started = True
            self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving (slow replies in progress give up) and free the port."""
        self._stop.set()
        if self._started:
            self._server.shutdown()
            self._thread.join(5.0)
        self._server.server_close()

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- serving ---

    def _next(self, request: Recorded) -> Reply:
        with self._lock:
            self._requests.append(request)
            script = self._script.popleft() if self._script else None
        if script is None:
            return error(500, "script exhausted")
        return script(request) if callable(script) else script

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                request = Recorded(
                    "POST",
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                )
                if self.path != CHAT_PATH:
                    with fake._lock:
                        fake._requests.append(request)
                    self._send(error(404, f"no route {self.path}"))
                    return
                asked = False
                try:
                    asked = json.loads(body).get("stream") is True
                except (ValueError, AttributeError):
                    pass
                self._send(fake._next(request), asked)

            def do_GET(self) -> None:
                self._send(error(404, "only POST /v1/chat/completions"))

            def _send(self, reply: Reply, streaming: bool = False) -> None:
                if reply.delay_s and fake._stop.wait(reply.delay_s):
                    self.close_connection = True
                    return
                if reply.drop:
                    self.close_connection = True
                    return
                stream = reply.events
                if stream is None and streaming and reply.stream and reply.status == 200:
                    chunks = chunks_of(reply.body)
                    stream = tuple(chunks) if chunks is not None else None
                if stream is not None:
                    self._send_events(reply, stream)
                    return
                if isinstance(reply.body, (bytes, bytearray)):
                    payload = bytes(reply.body)
                else:
                    payload = json.dumps(reply.body).encode("utf-8")
                try:
                    self.send_response(reply.status)
                    headers = {"Content-Type": "application/json", **dict(reply.headers)}
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            def _send_events(self, reply: Reply, stream: tuple[Any, ...]) -> None:
                """Server-sent events over chunked transfer encoding, as the real API does."""
                try:
                    self.send_response(reply.status)
                    headers = {
                        "Content-Type": "text/event-stream; charset=utf-8",
                        "Cache-Control": "no-cache",
                        **dict(reply.headers),
                    }
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for index, item in enumerate(stream):
                        if index == reply.stall_after:
                            fake._stop.wait(reply.stall_s)
                            self.close_connection = True
                            return
                        data = item if isinstance(item, bytes) else json.dumps(item).encode()
                        self._chunk(b"data: " + data + b"\n\n")
                    if reply.stall_after is not None and reply.stall_after >= len(stream):
                        fake._stop.wait(reply.stall_s)
                        self.close_connection = True
                        return
                    if reply.done:
                        self._chunk(b"data: [DONE]\n\n")
                        self._chunk(b"")  # the chunked-encoding terminator
                    else:
                        self.close_connection = True  # cut: no [DONE], no terminator
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet: tests assert on fake.requests instead

        return Handler


def scripted(replies: Iterable[Script]) -> FakeOpenAI:
    """A started server with this script."""
    return FakeOpenAI(*replies).start()
