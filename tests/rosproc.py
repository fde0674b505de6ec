"""Node processes and probe nodes for tests that run real ROS 2 graphs.

Node processes inherit the private ROS_DOMAIN_ID and loopback-only discovery that conftest.py
set, write their output to files (a pipe could fill up), and are stopped with SIGINT, then
killed after a timeout. A probe is a test node with its own Context and executor in a namespace
of its own (all venus topics are relative), so runs that share a domain cannot cross-talk; it
waits on conditions with bounded deadlines, never fixed sleeps.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class NodeProcess:
    """A node started with ``python -m``; its output goes to files (a pipe could fill up)."""

    proc: subprocess.Popen[bytes]
    stdout: Path
    stderr: Path

    def err(self) -> str:
        return self.stderr.read_text(errors="replace")

    def stop(self, timeout: float = 10.0) -> int:
        """SIGINT, then SIGKILL after ``timeout``; the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=timeout)
        return int(self.proc.returncode)


def start_node(
    module: str,
    tmp_path: Path,
    *params: str,
    namespace: str = "/",
    params_file: Path | None = None,
    tag: str = "",
) -> NodeProcess:
    """Start ``venus_ros.nodes.<module>`` with ``-p`` overrides (and a parameter file).

    ``tag`` keeps the output files of a restarted node apart from the first run's.
    """
    env = os.environ.copy()
    # conftest.py set these before anything imported rclpy; the child must share them.
    assert env.get("ROS_AUTOMATIC_DISCOVERY_RANGE") == "LOCALHOST" and env.get("ROS_DOMAIN_ID")
    env["PYTHONUNBUFFERED"] = "1"
    args = [arg for p in params for arg in ("-p", p)]
    if params_file is not None:
        args = ["--params-file", str(params_file), *args]
    out, err = tmp_path / f"{module}{tag}.out", tmp_path / f"{module}{tag}.err"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                f"venus_ros.nodes.{module}",
                "--ros-args",
                "-r",
                f"__ns:={namespace}",
                *args,
            ],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
        )
    return NodeProcess(proc, out, err)


@dataclass
class Probe:
    """A test node with its own context and executor."""

    node: Node
    executor: SingleThreadedExecutor
    namespace: str
    watched: list[NodeProcess] = field(default_factory=list)

    def wait_for(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        """Spin until ``condition()`` holds; fail after ``timeout`` or if a node process died."""
        deadline = time.monotonic() + timeout
        while not condition():
            for node in self.watched:
                if node.proc.poll() is not None:
                    pytest.fail(
                        f"node exited ({node.proc.returncode}) before {what}:\n{node.err()}"
                    )
            if time.monotonic() > deadline:
                pytest.fail(f"timed out after {timeout} s waiting for {what}")
            self.executor.spin_once(timeout_sec=0.01)


@contextmanager
def make_probe() -> Iterator[Probe]:
    """A probe node in a fresh namespace, torn down afterwards."""
    context = Context()
    rclpy.init(context=context)
    namespace = f"/test_{uuid.uuid4().hex[:12]}"
    node = rclpy.create_node("probe", namespace=namespace, context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    try:
        yield Probe(node, executor, namespace)
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
