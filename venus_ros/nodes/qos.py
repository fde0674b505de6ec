"""The QoS profiles of the venus_ros graph, defined once (see docs/ros.md)."""

from __future__ import annotations

from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSProfile,
    ReliabilityPolicy,
)

#: Microphone audio: best effort, a little history so a burst is not lost.
SENSOR_AUDIO = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=10,
    reliability=ReliabilityPolicy.BEST_EFFORT,
    durability=DurabilityPolicy.VOLATILE,
)
#: Camera frames: only the newest matters (keep last 1: drop-oldest, no queueing latency).
#: Reliable, because best-effort 640x480 rgb8 frames between processes were measured to
#: arrive 0-2 times in 150 (fragment loss); reliable with depth 1 delivered 50 of 50.
SENSOR_IMAGE = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=1,
    reliability=ReliabilityPolicy.RELIABLE,
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
    "delivery": "delivery",
    "delegate": "delegate",
    "heartbeat": "harness/heartbeat",
    "markers": "markers",
    "diagnostics": "/diagnostics",
}

#: The QoS each topic is published with (see docs/ros.md), keyed by topic name.
TOPIC_QOS = {
    TOPICS["audio_in"]: SENSOR_AUDIO,
    TOPICS["image"]: SENSOR_IMAGE,
    TOPICS["audio_out"]: reliable(50),
    TOPICS["decision"]: reliable(50),
    TOPICS["played"]: reliable(100),
    TOPICS["transcript"]: reliable(50),
    TOPICS["timeline"]: reliable(1000),
    TOPICS["backend_reply"]: reliable(20),
    TOPICS["task_status"]: reliable(100),
    TOPICS["delivery"]: reliable(100),
    TOPICS["heartbeat"]: reliable(1),
    TOPICS["markers"]: LATCHED,
    TOPICS["diagnostics"]: reliable(10),
}


def qos_for(key: str) -> QoSProfile:
    """The QoS of the topic ``TOPICS[key]``, from :data:`TOPIC_QOS`."""
    return TOPIC_QOS[TOPICS[key]]
