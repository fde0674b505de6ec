"""Monitor node: the live session as an RViz text panel and as ROS diagnostics.

Subscribes to ``timeline`` and ``task_status``, folds them with
:class:`~venus_ros.core.monitor.SessionMonitor`, and at ``publish_hz`` publishes

* ``markers`` (latched ``MarkerArray``): a camera-facing text panel above ``frame_id``, coloured
  by who holds the floor (green listening, blue speaking, orange delegating), and a small sphere
  above it coloured by health (green OK, yellow WARN, red ERROR); republished when it changes;
* ``/diagnostics`` (``DiagnosticArray``): one status per monitor entry, named ``venus_ros/...``.

A timeline record whose payload is not a JSON object is counted and logged (throttled); the node
carries on.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.node import Node
from std_msgs.msg import ColorRGBA, Header
from visualization_msgs.msg import Marker, MarkerArray

from venus_interfaces.msg import TaskStatus, TimelineEvent
from venus_ros.core.monitor import FloorState, Level, SessionMonitor
from venus_ros.core.units import InputError
from venus_ros.nodes.convert import record_payload
from venus_ros.nodes.diagnostics import default_hardware_id
from venus_ros.nodes.params import declare_config, reject_unknown_overrides
from venus_ros.nodes.qos import TOPICS, qos_for
from venus_ros.nodes.runtime import run_node

FLOOR_COLOURS = {
    FloorState.LISTENING: (0.2, 0.85, 0.3),
    FloorState.SPEAKING: (0.25, 0.5, 1.0),
    FloorState.DELEGATING: (1.0, 0.55, 0.1),
}
LEVEL_COLOURS = {
    Level.OK: (0.2, 0.85, 0.3),
    Level.WARN: (1.0, 0.85, 0.1),
    Level.ERROR: (1.0, 0.15, 0.1),
}
DIAGNOSTIC_LEVELS = {
    Level.OK: DiagnosticStatus.OK,
    Level.WARN: DiagnosticStatus.WARN,
    Level.ERROR: DiagnosticStatus.ERROR,
}
PANEL_NS = "venus_ros/panel"
LIGHT_NS = "venus_ros/status"


@dataclass(frozen=True)
class MonitorConfig:
    """Parameters of the monitor node."""

    frame_id: str = field(
        default="base_link", metadata={"help": "frame the panel floats above (RViz)"}
    )
    text_height: float = field(default=0.08, metadata={"help": "panel text line height (m)"})
    z_offset: float = field(default=1.6, metadata={"help": "panel height above frame_id (m)"})
    publish_hz: float = field(
        default=2.0, metadata={"help": "rate of markers and diagnostics, 0 < publish_hz <= 50"}
    )
    hardware_id: str = field(
        default="",
        metadata={"help": "hardware_id of the diagnostic statuses; '' = host name + namespace"},
    )

    def __post_init__(self) -> None:
        if not self.frame_id:
            raise ValueError("frame_id must not be empty")
        if not (math.isfinite(self.text_height) and self.text_height > 0):
            raise ValueError(f"text_height must be > 0, got {self.text_height}")
        if not math.isfinite(self.z_offset):
            raise ValueError(f"z_offset must be finite, got {self.z_offset}")
        if not (math.isfinite(self.publish_hz) and 0 < self.publish_hz <= 50):
            raise ValueError(f"publish_hz must be in (0, 50], got {self.publish_hz}")


def panel_markers(text: str, floor: FloorState, level: Level, config: MonitorConfig) -> MarkerArray:
    """The panel text marker (coloured by ``floor``) and the status light (by ``level``).

    The stamp is zero, so RViz places them with the newest transform of ``frame_id``.
    """
    header = Header(stamp=Time(), frame_id=config.frame_id)
    text_marker = Marker(header=header, ns=PANEL_NS, id=0, type=Marker.TEXT_VIEW_FACING)
    text_marker.action = Marker.ADD
    text_marker.pose.position.z = config.z_offset
    text_marker.pose.orientation.w = 1.0
    text_marker.scale.z = config.text_height
    text_marker.color = _colour(FLOOR_COLOURS[floor])
    text_marker.text = text

    lines = text.count("\n") + 1
    light = Marker(header=header, ns=LIGHT_NS, id=0, type=Marker.SPHERE)
    light.action = Marker.ADD
    light.pose.position.z = config.z_offset + (lines / 2 + 1) * config.text_height
    light.pose.orientation.w = 1.0
    size = 1.5 * config.text_height
    light.scale.x = light.scale.y = light.scale.z = size
    light.color = _colour(LEVEL_COLOURS[level])
    return MarkerArray(markers=[text_marker, light])


def diagnostic_array(monitor: SessionMonitor, hardware_id: str, stamp: Time) -> DiagnosticArray:
    """One DiagnosticStatus per monitor diagnostic, named ``venus_ros/<name>``."""
    statuses = [
        DiagnosticStatus(
            level=DIAGNOSTIC_LEVELS[level],
            name=f"venus_ros/{name}",
            message=message,
            hardware_id=hardware_id,
            values=[KeyValue(key=key, value=value) for key, value in values.items()],
        )
        for name, level, message, values in monitor.diagnostics()
    ]
    return DiagnosticArray(header=Header(stamp=stamp), status=statuses)


def _colour(rgb: tuple[float, float, float]) -> ColorRGBA:
    return ColorRGBA(r=rgb[0], g=rgb[1], b=rgb[2], a=1.0)


class MonitorNode(Node):
    """Publishes the session panel (RViz markers) and diagnostics from the timeline."""

    def __init__(self, node_name: str = "monitor_node", **kwargs: Any) -> None:
        """Build the node; ``kwargs`` go to :class:`rclpy.node.Node` (e.g. ``context``)."""
        super().__init__(node_name, **kwargs)
        self.config = declare_config(self, MonitorConfig)
        reject_unknown_overrides(self, kwargs.get("parameter_overrides"))
        self.monitor = SessionMonitor()
        self._markers = self.create_publisher(MarkerArray, TOPICS["markers"], qos_for("markers"))
        self._diagnostics = self.create_publisher(
            DiagnosticArray, TOPICS["diagnostics"], qos_for("diagnostics")
        )
        self.create_subscription(
            TimelineEvent, TOPICS["timeline"], self._on_timeline, qos_for("timeline")
        )
        self.create_subscription(
            TaskStatus, TOPICS["task_status"], self._on_task, qos_for("task_status")
        )
        self._last_panel: tuple[str, FloorState, Level] | None = None
        self.create_timer(1.0 / self.config.publish_hz, self._publish)

    def _on_timeline(self, msg: TimelineEvent) -> None:
        try:
            payload = record_payload(msg)
        except InputError as exc:
            self.monitor.on_malformed()
            self._warn_malformed(msg, str(exc))
            return
        if not self.monitor.on_event(int(msg.seq), float(msg.t), msg.kind, payload):
            self._warn_malformed(msg, "unexpected payload fields")

    def _warn_malformed(self, msg: TimelineEvent, why: str) -> None:
        self.get_logger().warning(
            f"ignored malformed timeline record seq={msg.seq} kind={msg.kind!r}: {why} "
            f"({self.monitor.malformed} so far)",
            throttle_duration_sec=5.0,
        )

    def _on_task(self, msg: TaskStatus) -> None:
        if not self.monitor.on_task(
            msg.task_id, msg.tool, msg.state, float(msg.progress), msg.message
        ):
            self.get_logger().warning(
                f"ignored malformed task status {msg.task_id!r}: state {msg.state!r}",
                throttle_duration_sec=5.0,
            )

    def _publish(self) -> None:
        stamp = self.get_clock().now().to_msg()
        hardware_id = self.config.hardware_id or default_hardware_id(self)
        self._diagnostics.publish(diagnostic_array(self.monitor, hardware_id, stamp))
        panel = (self.monitor.panel_text(), self.monitor.floor, self.monitor.level())
        if panel != self._last_panel:
            self._markers.publish(panel_markers(*panel, self.config))
            self._last_panel = panel


def main(argv: Sequence[str] | None = None) -> int:
    """Console script ``monitor_node``."""
    return run_node(MonitorNode, argv)


if __name__ == "__main__":
    sys.exit(main())
