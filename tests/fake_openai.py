"""A scripted OpenAI chat-completions server on 127.0.0.1, for tests (stdlib only).

``FakeOpenAI`` is a real HTTP server on an ephemeral loopback port, served by a thread. Each
``POST /v1/chat/completions`` takes the next reply from its script (a :class:`Reply`, or a
function of the :class:`Recorded` request that returns one) and records the request (method,
path, headers, body) for assertions. An exhausted script answers 500 ("script exhausted").

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
    """

    status: int = 200
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    drop: bool = False


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
                self._send(fake._next(request))

            def do_GET(self) -> None:
                self._send(error(404, "only POST /v1/chat/completions"))

            def _send(self, reply: Reply) -> None:
                if reply.delay_s and fake._stop.wait(reply.delay_s):
                    self.close_connection = True
                    return
                if reply.drop:
                    self.close_connection = True
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

            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet: tests assert on fake.requests instead

        return Handler


def scripted(replies: Iterable[Script]) -> FakeOpenAI:
    """A started server with this script."""
    return FakeOpenAI(*replies).start()
