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
