"""Shared test set-up: loopback-only DDS discovery and a private ROS domain for every run."""

from __future__ import annotations

import atexit
import os
import random
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

# Before anything imports rclpy: discovery never leaves this machine, and a run that was not
# given a domain (e.g. plain `pytest`) picks its own.
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.setdefault("ROS_DOMAIN_ID", str(random.randint(1, 101)))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Harness journals and other state files of this run go to a folder of its own, not ~/.local.
os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="venus_ros_state_")
atexit.register(shutil.rmtree, os.environ["XDG_STATE_HOME"], True)


@pytest.fixture
def probe() -> Iterator[Any]:
    """A probe node (own Context, executor and namespace) for tests that run ROS graphs."""
    from rosproc import make_probe  # imports rclpy: only for the tests that ask for it

    with make_probe() as p:
        yield p


@pytest.fixture(scope="module")
def module_probe() -> Iterator[Any]:
    """A probe shared by the tests of one module (for nodes they share, e.g. a module fixture's)."""
    from rosproc import make_probe

    with make_probe() as p:
        yield p


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if a test left a child process running (and stop it).

    The processes started through tests/rosproc.py are stopped and named first; any other
    child of this process still alive then (a node started some other way) is killed and named.
    """
    import sys

    survivors: list[str] = []
    rosproc = sys.modules.get("rosproc")
    if rosproc is not None:
        survivors += rosproc.stop_started()
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil is a dependency of the package
        psutil = None
    if psutil is not None:
        for child in psutil.Process().children(recursive=True):
            try:
                if child.status() == psutil.STATUS_ZOMBIE:
                    continue
                survivors.append(f"{' '.join(child.cmdline()[:4])} (pid {child.pid})")
                child.kill()
            except psutil.Error:
                continue
    if survivors:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = "child processes still running at the end of the run (stopped now): "
        message += "; ".join(survivors)
        if reporter is not None:
            reporter.write_line(f"ERROR: {message}", red=True)
        else:
            print(f"ERROR: {message}", file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
