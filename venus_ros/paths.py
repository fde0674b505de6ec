"""Where the package's data files are: a source checkout or an installed share/ folder."""

from __future__ import annotations

import sys
from pathlib import Path

_SOURCE_ROOT = Path(__file__).resolve().parent.parent


def share_path(relative: str) -> Path:
    """The path of ``config/...`` or ``launch/...`` in the checkout, else in ``share/venus_ros``.

    Raises:
        FileNotFoundError: naming both places looked in.
    """
    candidates = [_SOURCE_ROOT / relative, Path(sys.prefix) / "share" / "venus_ros" / relative]
    for candidate in candidates:
        if candidate.exists():
            return candidate
    raise FileNotFoundError(
        f"{relative} not found in {candidates[0].parent} or {candidates[1].parent}"
    )


def sample_path(name: str) -> Path:
    """A file of the bundled sample session (``venus_ros/samples/hello``)."""
    return Path(__file__).resolve().parent / "samples" / "hello" / name
