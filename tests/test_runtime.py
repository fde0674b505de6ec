"""Node processes stop on Ctrl-C, and a slow stop says where it was stuck (real rclpy, a real
process: ``venus_ros.nodes.runtime``)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from venus_ros.nodes.runtime import CLEANUP_REPORT_S

NODE = """
import sys, time
from rclpy.node import Node
from venus_ros.nodes.runtime import run_node

CLOSE_S = float(sys.argv[1])

class Slow(Node):
    def __init__(self):
        super().__init__("slow_to_close")
        self.create_timer(0.1, lambda: print("spinning", flush=True))

    def close(self):
        time.sleep(CLOSE_S)

raise SystemExit(run_node(Slow, sys.argv[:1]))
"""


def stop_after_spinning(tmp_path: Path, close_s: float) -> tuple[int, str]:
    """Start the node, Ctrl-C it once it spins; its exit code and standard error."""
    script = tmp_path / "slow_node.py"
    script.write_text(NODE)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(close_s)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 30.0
        while proc.stdout.readline().strip() != "spinning":
            assert time.monotonic() < deadline and proc.poll() is None, "the node never spun"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=close_s + 20.0)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err


@pytest.mark.parametrize("close_s", [0.0, CLEANUP_REPORT_S + 1.0])
def test_a_stop_that_outlasts_the_report_time_writes_every_threads_stack(
    tmp_path: Path, close_s: float
) -> None:
    code, err = stop_after_spinning(tmp_path, close_s)
    assert code == 0, err
    slow = close_s > CLEANUP_REPORT_S
    assert ("Timeout (0:00:03)!" in err) is slow, err
    assert ("in close" in err) is slow, err  # the frame it was stuck in


BROKEN = """
import sys, threading, time
import rclpy
from rclpy.node import Node
from venus_ros.nodes.runtime import run_node

SHUTS_DOWN = sys.argv[1] == "yes"

class Broken(Node):
    def __init__(self):
        super().__init__("broken_by_a_signal")
        self.create_timer(0.1, self.tick)

    def tick(self):
        if SHUTS_DOWN:  # as rclpy's signal thread does, a moment after Ctrl-C broke the call
            threading.Timer(0.2, rclpy.try_shutdown).start()
        raise RuntimeError("Unable to convert call argument '0' to Python object")

raise SystemExit(run_node(Broken, sys.argv[:1]))
"""


@pytest.mark.parametrize("shuts_down", [True, False])
def test_an_error_the_shutdown_follows_is_a_clean_stop_and_any_other_a_failure(
    tmp_path: Path, shuts_down: bool
) -> None:
    """Ctrl-C can break the call the executor is in (pybind11 turns the interrupt into a
    RuntimeError) before rclpy's signal thread shuts the context down: an error the shutdown
    follows within the grace time is a clean stop (exit 0); one it does not is a failure."""
    script = tmp_path / "broken_node.py"
    script.write_text(BROKEN)
    done = subprocess.run(
        [sys.executable, str(script), "yes" if shuts_down else "no"],
        capture_output=True,
        text=True,
        timeout=30.0,
    )
    assert (done.returncode == 0) is shuts_down, done.stderr
    assert ("Unable to convert call argument" in done.stderr) is not shuts_down, done.stderr
