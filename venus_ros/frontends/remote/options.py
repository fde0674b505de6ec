"""Options of the remote frontend: ``remote:URL[,key=value,...]`` into a frozen dataclass."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

from venus_ros.core.frontend import FrontendError

#: Protocols the remote frontend speaks.
PROTOCOLS = ("minicpmo", "vllm")


@dataclass(frozen=True)
class RemoteOptions:
    """Settings of :class:`~venus_ros.frontends.remote.frontend.RemoteFrontend`.

    Attributes:
        url: ``ws://`` / ``wss://`` (or ``http(s)://``) address of the model server.
        protocol: ``minicpmo`` (MiniCPM-o Realtime V1 through the ``openbmb-realtime`` SDK:
            ``venus-ros serve`` or a hosted MiniCPM-o) or ``vllm`` (vLLM-omni's
            ``/v1/realtime?duplex=1``). Default: ``vllm`` when the URL asks for ``duplex=1`` or
            ends in ``/v1/duplex``, else ``minicpmo``.
        model: model name sent to the server.
        deadline_ms: how long after a unit is sent its answer may take; later, the unit is
            answered locally (``listen``, or "keep speaking what is queued") and counted dropped.
        token_env: environment variable holding the bearer token (never logged).
        fallback: a frontend spec (e.g. ``cascade``) taking over while the server is unreachable.
        fallback_after_s: how long the link must be down before the fallback takes over.
        connect_timeout_s: how long ``prepare`` waits for the first connection.
        queue_timeout_s: how long a queued session may wait for a slot before it counts as down.
        backoff_s: first reconnection delay; doubled after each failure up to ``backoff_max_s``.
        backoff_max_s: longest reconnection delay.
        video: send the newest camera frame with each unit (MiniCPM-o video mode).
        jpeg_quality: JPEG quality of sent frames.
        max_side: frames are shrunk so that neither side exceeds this many pixels.
        rate: sample rate of the audio this frontend hands to the loop (server audio is
            resampled to it).
        venus: use ``venus-ros serve``'s extension events when the server offers them
            (``auto``) or never (``off``: behave like a plain SDK client).
        ca: a CA bundle (PEM) to verify a ``wss://`` server with a private certificate.
        ref_audio: a WAV file with the assistant's voice, sent when a session opens (vLLM-omni's
            MiniCPM-o preset refuses a session without one: ``ref_audio_required``).
    """

    url: str
    protocol: str = "minicpmo"
    model: str = "minicpm-o-4.5"
    deadline_ms: float = 600.0
    token_env: str = "VENUS_REMOTE_TOKEN"
    fallback: str = ""
    fallback_after_s: float = 3.0
    connect_timeout_s: float = 3.0
    queue_timeout_s: float = 10.0
    backoff_s: float = 0.25
    backoff_max_s: float = 5.0
    video: bool = True
    jpeg_quality: int = 80
    max_side: int = 640
    rate: int = 24000
    venus: str = "auto"
    ca: str = ""
    ref_audio: str = ""

    def __post_init__(self) -> None:
        scheme = urlsplit(self.url).scheme
        if scheme not in ("ws", "wss", "http", "https") or not urlsplit(self.url).netloc:
            raise FrontendError(f"remote frontend: {self.url!r} is not a ws:// or wss:// URL")
        if self.protocol not in PROTOCOLS:
            raise FrontendError(f"remote frontend: protocol must be one of {', '.join(PROTOCOLS)}")
        if self.venus not in ("auto", "off"):
            raise FrontendError("remote frontend: venus must be auto or off")
        if not 10 <= self.deadline_ms <= 5000:
            raise FrontendError("remote frontend: deadline_ms must be in [10, 5000]")
        if not 8000 <= self.rate <= 48000:
            raise FrontendError("remote frontend: rate must be in [8000, 48000]")
        for name in ("connect_timeout_s", "queue_timeout_s", "backoff_s", "backoff_max_s"):
            if getattr(self, name) <= 0:
                raise FrontendError(f"remote frontend: {name} must be > 0")
        if self.fallback.partition(":")[0] == "remote":
            raise FrontendError("remote frontend: the fallback must be a local frontend")

    @property
    def deadline_s(self) -> float:
        """:attr:`deadline_ms` in seconds."""
        return self.deadline_ms / 1000.0


_BOOL = {"1": True, "true": True, "on": True, "yes": True, "0": False, "false": False}
_BOOL |= {"off": False, "no": False}


def parse_options(argument: str) -> RemoteOptions:
    """Parse ``URL[,key=value,...]`` (``remote:`` already removed).

    Raises:
        FrontendError: no URL, an unknown key, or a bad value.
    """
    url, *items = [part.strip() for part in argument.split(",")]
    if not url:
        raise FrontendError("frontend 'remote' needs a server URL: remote:ws://HOST:PORT[,...]")
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    native = query.get("duplex", "").lower() in ("1", "true", "on")
    values: dict[str, object] = {
        "url": url,
        "protocol": "vllm"
        if native or parts.path.rstrip("/").endswith("/v1/duplex")
        else "minicpmo",
    }
    fields = {f.name: f for f in dataclasses.fields(RemoteOptions)}
    for item in filter(None, items):
        key, sep, value = item.partition("=")
        key = key.strip()
        if key not in fields or key == "url":
            known = ", ".join(sorted(k for k in fields if k != "url"))
            raise FrontendError(f"remote frontend: unknown option {key!r} (known: {known})")
        kind = type(getattr(RemoteOptions("ws://x"), key))
        try:
            if kind is bool:
                values[key] = _BOOL[value.strip().lower()] if sep else True
            elif kind in (int, float):
                values[key] = kind(value)
            else:
                values[key] = value.strip()
        except (KeyError, ValueError) as exc:
            raise FrontendError(f"remote frontend: bad value for {key}: {value!r}") from exc
    return RemoteOptions(**values)  # type: ignore[arg-type]
