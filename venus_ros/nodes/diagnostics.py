"""Per-node diagnostics on ``/diagnostics``, in diagnostic_updater's conventions.

``diagnostic_updater`` has no Python package on pip, so this writes the same messages itself:
once per ``period_s`` a ``DiagnosticArray`` with one ``DiagnosticStatus`` named
``"<node name>: <task>"`` and the node's ``hardware_id`` (the read-only parameter of that name;
empty = ``<host name>`` plus the node's namespace, so two robots never share one). Counters
named in ``rate_keys`` are also reported as a rate (``<key>_hz``) over the last period.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterable

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.node import Node

from venus_ros.nodes.qos import TOPICS, qos_for

#: (level, message, values) of one status.
Status = tuple[int, str, dict[str, str]]


def default_hardware_id(node: Node) -> str:
    """``<host>`` or ``<host>/<namespace>``: unique per robot and per namespaced graph."""
    namespace = node.get_namespace().strip("/")
    host = socket.gethostname() or "localhost"
    return f"{host}/{namespace}" if namespace else host


class NodeDiagnostics:
    """Publishes one node's status on ``/diagnostics`` every ``period_s``.

    Args:
        node: the node (it gets the read-only ``hardware_id`` parameter if it lacks one).
        task: what the status describes (``"microphone"``, ``"camera"``...).
        status: returns (level, message, values); called on the executor thread.
        rate_keys: counters in ``values`` to report as rates too.
        period_s: publishing period.
    """

    def __init__(
        self,
        node: Node,
        task: str,
        status: Callable[[], Status],
        rate_keys: Iterable[str] = (),
        period_s: float = 1.0,
    ) -> None:
        if not node.has_parameter("hardware_id"):
            node.declare_parameter(
                "hardware_id",
                "",
                ParameterDescriptor(
                    description="hardware_id of this node's diagnostics ('' = host name and "
                    "namespace; read-only)",
                    read_only=True,
                ),
            )
        self.hardware_id = str(node.get_parameter("hardware_id").value) or default_hardware_id(node)
        self.name = f"{node.get_name()}: {task}"
        self.published = 0
        self._node = node
        self._status = status
        self._rate_keys = tuple(rate_keys)
        self._last: tuple[float, dict[str, float]] | None = None
        self._publisher = node.create_publisher(
            DiagnosticArray, TOPICS["diagnostics"], qos_for("diagnostics")
        )
        self._timer = node.create_timer(period_s, self.publish)

    def publish(self) -> None:
        """Publish the current status now."""
        level, message, values = self._status()
        values = dict(values)
        now = time.monotonic()
        counts = {}
        for key in self._rate_keys:
            try:
                counts[key] = float(values[key])
            except (KeyError, ValueError):
                continue
        if self._last is not None:
            then, previous = self._last
            span = now - then
            for key, count in counts.items():
                if key in previous and span > 0:
                    values[f"{key}_hz"] = f"{(count - previous[key]) / span:.2f}"
        self._last = (now, counts)
        status = DiagnosticStatus(
            level=bytes([level]) if isinstance(level, int) else level,
            name=self.name,
            message=message,
            hardware_id=self.hardware_id,
            values=[KeyValue(key=k, value=str(v)) for k, v in values.items()],
        )
        array = DiagnosticArray(status=[status])
        array.header.stamp = self._node.get_clock().now().to_msg()
        self._publisher.publish(array)
        self.published += 1
