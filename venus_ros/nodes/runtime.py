"""Starting and stopping node processes: one clear line on a fatal error, exit 0 on Ctrl-C.

``run_node`` runs one node in a process; ``run_nodes`` runs several in one process on one
executor (composition: every node class takes the :class:`rclpy.node.Node` keyword arguments).
A :class:`~venus_ros.nodes.managed.ManagedNode` with ``autostart`` set is configured and
activated before spinning; without it, it waits for a lifecycle manager.
"""

from __future__ import annotations

import faulthandler
import signal
import sys
import time
from collections.abc import Callable, Sequence

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node

from venus_ros.core.errors import DeviceError
from venus_ros.nodes.managed import ManagedNode
from venus_ros.nodes.params import ConfigError, set_process_arguments

CLEANUP_REPORT_S = 3.0
"""Seconds a node process may take to close its nodes before it reports every thread's stack
(below ``venus-ros run``'s grace period of 5 s, after which it is killed)."""
SHUTDOWN_GRACE_S = 1.0
"""How long an error out of the executor waits for rclpy to shut the context down before it
counts as a failure: rclpy does that on its own signal thread, after Ctrl-C may already have
broken the call the executor was in."""


def run_node(factory: Callable[[], Node], argv: Sequence[str] | None = None) -> int:
    """Create the node with ``factory`` and spin it until shutdown.

    Returns:
        0 after Ctrl-C/SIGTERM, 2 for a configuration error, 1 for a missing device.
    """
    return run_nodes([factory], argv)


def run_nodes(factories: Sequence[Callable[[], Node]], argv: Sequence[str] | None = None) -> int:
    """Create every node (in order) and spin them together on one executor until shutdown.

    Returns:
        0 after Ctrl-C/SIGTERM, 2 for a configuration error, 1 for a missing device.
    """
    args = list(argv) if argv is not None else list(sys.argv)
    set_process_arguments(args)
    rclpy.init(args=args)
    nodes: list[Node] = []
    try:
        for factory in factories:
            node = factory()
            nodes.append(node)
            if isinstance(node, ManagedNode) and node.autostart:
                node.start_up()
        # Single-threaded on purpose: no callback of ours blocks (slow work has its own
        # threads), and rclpy 9.1's MultiThreadedExecutor busy-loops and stalls callbacks for
        # up to seconds (ros2/rclpy#1223; measured here: 60-800 ms action round trips vs 4 ms).
        executor = SingleThreadedExecutor()
        for node in nodes:
            executor.add_node(node)
        try:
            executor.spin()
        except ExternalShutdownException:
            pass
        except Exception:
            # A signal can invalidate the context while the executor builds its wait set
            # (RCLError "context is not valid"), or interrupt a message being taken (pybind11's
            # "Unable to convert call argument"), before rclpy's signal thread has shut the
            # context down: that is a shutdown, not a failure.
            if not _shut_down_within(SHUTDOWN_GRACE_S):
                raise
        return 0
    except KeyboardInterrupt:
        return 0
    except ConfigError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    except DeviceError as exc:
        print(f"device error: {exc}", file=sys.stderr)
        return 1
    finally:
        # Cleanup is bounded; a second Ctrl-C (or a launcher forwarding the first) must not
        # interrupt it half-way and turn a clean stop into a traceback.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        # A cleanup that outlasts CLEANUP_REPORT_S writes every thread's stack to stderr, so a
        # process killed after its launcher's grace period leaves where it was stuck.
        faulthandler.dump_traceback_later(CLEANUP_REPORT_S)
        try:
            for node in reversed(nodes):
                close = getattr(node, "close", None)
                if close is not None:
                    close()
                node.destroy_node()
            if rclpy.ok():
                rclpy.try_shutdown()
        finally:
            faulthandler.cancel_dump_traceback_later()


def _shut_down_within(seconds: float) -> bool:
    """Whether the default context is shut down now or within ``seconds``."""
    deadline = time.monotonic() + seconds
    while rclpy.ok():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True
