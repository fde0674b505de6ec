"""Realtime-Venus / MiniCPM-o 4.5 checkpoints through transformers (``venus:PATH[,OPTION...]``).

:mod:`.frontend` drives the checkpoint's duplex API; :mod:`.checkpoint` reads a checkpoint
folder without loading it; :mod:`.standin` builds the tiny CPU stand-in used by the tests.
Nothing here imports torch or transformers until a checkpoint is loaded.
"""

from venus_ros.frontends.venus.frontend import (
    VenusFrontend,
    VenusOptions,
    load_venus_frontend,
    make_venus_frontend,
    parse_venus_spec,
)

__all__ = [
    "VenusFrontend",
    "VenusOptions",
    "load_venus_frontend",
    "make_venus_frontend",
    "parse_venus_spec",
]
