"""The QoS profiles of the venus_ros graph, defined once (see docs/ros.md)."""

from __future__ import annotations

from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSProfile,
    ReliabilityPolicy,
    qos_profile_sensor_data,
)

#: Microphone audio: best effort, a little history so a burst is not lost.
SENSOR_AUDIO = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=10,
    reliability=ReliabilityPolicy.BEST_EFFORT,
    durability=DurabilityPolicy.VOLATILE,
)
#: Camera frames: only the newest matters (drop-oldest, no queueing latency).
SENSOR_IMAGE = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=1,
    reliability=qos_profile_sensor_data.reliability,
    durability=DurabilityPolicy.VOLATILE,
)


def reliable(depth: int) -> QoSProfile:
    """Reliable, volatile, keep-last ``depth``."""
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=depth,
        reliability=ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.VOLATILE,
    )


#: Latched RViz markers: a late RViz still gets the current panel.
LATCHED = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=1,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)

TOPICS = {
    "audio_in": "audio/in",
    "image": "image",
    "audio_out": "audio/out",
    "decision": "decision",
    "played": "audio/played",
    "transcript": "transcript",
    "timeline": "timeline",
    "backend_reply": "backend_reply",
    "task_status": "task_status",
    "delegate": "delegate",
    "markers": "markers",
    "diagnostics": "/diagnostics",
}
