"""Benchmarks that print figures (``venus-ros bench core|ros|speech|harness``).

Tests check correctness; these measure speed and memory on the machine they run on. The helpers
here are shared by the benchmarks: formatting of latency figures against a goal, and a real
node set (one process per node) observed by a probe node in this process.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from venus_ros.launcher import NodeSpec, Supervisor


def figures(values_ms: Sequence[float]) -> str:
    """``p50 .. ms, p99 .. ms, max .. ms`` of a list of milliseconds."""
    if not values_ms:
        return "no samples"
    p50, p99 = np.percentile(values_ms, [50, 99])
    return f"p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {max(values_ms):.2f} ms"


def goal(values_ms: Sequence[float], goal_ms: float) -> str:
    """``goal p99 <= X ms: met`` or ``NOT met``."""
    met = bool(values_ms) and float(np.percentile(values_ms, 99)) <= goal_ms
    return f"goal p99 <= {goal_ms:g} ms: {'met' if met else 'NOT met'}"


@dataclass
class ProbedGraph:
    """A node set started by a Supervisor and a probe node that watches it.

    Create the probe's subscriptions, then ``supervisor.start()``; spin ``executor``.
    ``codes`` holds the nodes' exit codes once the context manager has stopped them.
    """

    supervisor: Supervisor
    node: Any
    executor: Any
    codes: dict[str, int | None] = field(default_factory=dict)

    @property
    def unclean(self) -> dict[str, int | None]:
        """Nodes that did not exit 0 when stopped."""
        return {name: code for name, code in self.codes.items() if code not in (0, None)}


@contextmanager
def probed_graph(nodes: list[NodeSpec], probe_name: str) -> Iterator[ProbedGraph]:
    """Run ``nodes`` in a fresh namespace with a probe in the same domain, loopback only.

    The nodes are stopped, the probe destroyed and this process's ROS environment restored on
    exit, whatever happened.
    """
    import rclpy
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor

    from venus_ros.launcher import Supervisor
    from venus_ros.paths import share_path

    namespace = f"bench_{uuid.uuid4().hex[:8]}"
    supervisor = Supervisor(nodes, share_path("config/venus.yaml"), namespace)
    keys = ("ROS_AUTOMATIC_DISCOVERY_RANGE", "ROS_DOMAIN_ID")
    saved = {key: os.environ.get(key) for key in keys}
    os.environ.update({key: supervisor.env[key] for key in keys})  # read by rclpy.init
    context = Context()
    rclpy.init(context=context)
    node = rclpy.create_node(probe_name, namespace=namespace, context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    graph = ProbedGraph(supervisor, node, executor)
    try:
        yield graph
    finally:
        graph.codes = supervisor.stop()
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
