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
#: Camera frames, camera info and compressed frames: ROS's sensor-data profile (best effort,
#: volatile), so the frontend accepts any camera driver (a best-effort subscription matches
#: reliable and best-effort publishers alike); only the newest frame matters. Big raw frames
#: between machines belong on the compressed topic. Publishers take ``qos_overrides``.
SENSOR_IMAGE = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=5,
    reliability=ReliabilityPolicy.BEST_EFFORT,
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

#: /tf_static as tf2_ros's static broadcaster offers it: reliable, transient local, depth 1.
LATCHED_STATIC = LATCHED

#: A /tf_static reader, as tf2_ros's static listener subscribes: transient local with a deep
#: history. Every static broadcaster keeps one latched message and a reader of depth 1 keeps only
#: the newest of them, so two broadcasters that match at once would lose one's frames.
STATIC_LISTENER = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=100,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)

TOPICS = {
    "audio_in": "audio/in",
    "image": "camera/image_raw",
    "image_compressed": "camera/image_raw/compressed",
    "camera_info": "camera/camera_info",
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
    TOPICS["image_compressed"]: SENSOR_IMAGE,
    TOPICS["camera_info"]: SENSOR_IMAGE,
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


#: Topics for other ROS stacks (audio_common, tf2), outside the recorded graph of ``TOPICS``.
#: ``audio`` is what audio_common's capturer publishes; ``assistant/audio`` is the assistant's
#: speech for audio_common's player (remap it to the player's ``audio``).
INTEROP_TOPICS = {
    "audio_stamped_in": "audio",
    "audio_stamped_out": "assistant/audio",
    "tf_static": "/tf_static",
    "tf": "/tf",
}
INTEROP_QOS = {
    INTEROP_TOPICS["audio_stamped_in"]: SENSOR_AUDIO,
    INTEROP_TOPICS["audio_stamped_out"]: reliable(50),
    INTEROP_TOPICS["tf_static"]: LATCHED_STATIC,
    INTEROP_TOPICS["tf"]: reliable(100),
}


def qos_for(key: str) -> QoSProfile:
    """The QoS of the topic ``TOPICS[key]`` (or ``INTEROP_TOPICS[key]``)."""
    if key in TOPICS:
        return TOPIC_QOS[TOPICS[key]]
    return INTEROP_QOS[INTEROP_TOPICS[key]]


def topic(key: str) -> str:
    """The name of ``TOPICS[key]`` or ``INTEROP_TOPICS[key]``."""
    return TOPICS[key] if key in TOPICS else INTEROP_TOPICS[key]
