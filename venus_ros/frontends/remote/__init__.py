"""A frontend whose duplex model runs on another machine, behind an upstream realtime protocol.

Spec ``remote:URL[,key=value,...]`` (options: :class:`.options.RemoteOptions`). Protocols:
MiniCPM-o Realtime V1 through the ``openbmb-realtime`` SDK (``venus-ros serve`` or a hosted
MiniCPM-o) and vLLM-omni's duplex endpoint (``/v1/realtime?duplex=1``). See docs/serving.md.
"""

from venus_ros.frontends.remote.frontend import RemoteFrontend, RemoteStats, make_remote_frontend
from venus_ros.frontends.remote.options import RemoteOptions, parse_options

__all__ = [
    "RemoteFrontend",
    "RemoteOptions",
    "RemoteStats",
    "make_remote_frontend",
    "parse_options",
]
