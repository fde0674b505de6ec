"""Where the package's data files are: a source checkout or an installed share/ folder."""

from __future__ import annotations

import sys
from pathlib import Path

_SOURCE_ROOT = Path(__file__).resolve().parent.parent


def share_path(relative: str) -> Path:
    """The path of ``config/...`` or ``launch/...`` in the checkout, else in ``share/venus_ros``.

    Installed, ``share/venus_ros`` is looked for under every folder above this package (the
    prefix it was installed into: a colcon ``install/venus_ros``, ``/opt/ros/<distro>``, a venv,
    whatever ``lib/pythonX.Y/site-packages`` layout it has), then under ``sys.prefix``.

    Raises:
        FileNotFoundError: naming every place looked in.
    """
    installed = [parent / "share" / "venus_ros" for parent in Path(__file__).resolve().parents[1:]]
    roots = [_SOURCE_ROOT, *installed, Path(sys.prefix) / "share" / "venus_ros"]
    roots = list(dict.fromkeys(roots))
    for root in roots:
        if (root / relative).exists():
            return root / relative
    raise FileNotFoundError(f"{relative} not found in any of: {', '.join(map(str, roots))}")


def sample_path(name: str) -> Path:
    """A file of the bundled sample session (``venus_ros/samples/hello``)."""
    return Path(__file__).resolve().parent / "samples" / "hello" / name
