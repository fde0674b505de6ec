"""``venus-ros serve``: our frontends behind the MiniCPM-o Realtime protocol (docs/serving.md).

The names below load :mod:`.server` (and ``websockets``) on first use, so the command line
can describe ``serve`` without importing the server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from venus_ros.serve.server import RealtimeServer, ServeConfig, ServerThread, ServeStats

__all__ = ["RealtimeServer", "ServeConfig", "ServeStats", "ServerThread"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from venus_ros.serve import server

        return getattr(server, name)
    raise AttributeError(f"module 'venus_ros.serve' has no attribute {name!r}")
