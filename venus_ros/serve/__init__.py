"""``venus-ros serve``: our frontends behind the MiniCPM-o Realtime protocol (docs/serving.md)."""

from venus_ros.serve.server import RealtimeServer, ServeConfig, ServerThread, ServeStats

__all__ = ["RealtimeServer", "ServeConfig", "ServeStats", "ServerThread"]
