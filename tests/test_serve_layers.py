"""Where sockets may appear: only ``serve/`` and ``frontends/remote`` import the WebSocket stack.

``serve/`` is the one place a socket meets a frontend; ``frontends/remote`` is the client side.
Neither imports ROS, and importing the frontend registry or the command line loads neither
``websockets`` nor the SDK (they load when a remote frontend or the server is used).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "venus_ros"
NETWORK = {"websockets", "openbmb_realtime"}
ALLOWED = ("venus_ros/serve/", "venus_ros/frontends/remote/", "venus_ros/bench/remote.py")


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name.partition(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.partition(".")[0])
    return names


def test_only_serve_and_the_remote_frontend_import_the_network_stack() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if _imports(path) & NETWORK and not rel.startswith(ALLOWED):
            offenders.append(rel)
    assert offenders == []


def test_serve_and_the_remote_frontend_never_import_ros() -> None:
    for folder in ("serve", "frontends/remote"):
        for path in (PACKAGE / folder).rglob("*.py"):
            assert "rclpy" not in _imports(path), path


def test_the_registry_and_cli_do_not_load_the_network_stack() -> None:
    network = sorted(NETWORK)
    probe = (
        "import sys, json, venus_ros.frontends, venus_ros.cli, venus_ros.serve;"
        f"print(json.dumps(sorted(m for m in sys.modules if m.partition('.')[0] in {network})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
