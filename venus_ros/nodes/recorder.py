"""recorder_node: record the session's topics into a rosbag2 bag (mcap storage).

Every topic of docs/ros.md except the ``delegate`` action (or the ``topics`` chosen) is subscribed
*raw*: the serialized CDR bytes go into the bag untouched, stamped with their receive time. The
subscriptions accept what the graph publishes: best effort for the sensor topics (matches best
effort and reliable publishers), reliable for the rest, reliable + transient local for the latched
``markers``. Each topic's publishers' offered QoS profiles are stored with the topic, so
``ros2 bag play`` republishes with them too.

Ctrl-C/SIGTERM closes the bag cleanly (index and ``metadata.yaml`` written) and logs how many
messages each topic got. Read the bag with :func:`venus_ros.bag.read_bag`, replay it with
``python -m venus_ros.nodes.bag_replay --bag PATH``.

Run: ``recorder_node --ros-args -p path:=session1`` or ``python -m venus_ros.nodes.recorder``.
At DEBUG level (``--log-level recorder_node:=debug``) every recorded message and every publisher
that matches is logged.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rclpy.event_handler import QoSSubscriptionMatchedInfo, SubscriptionEventCallbacks
from rclpy.logging import LoggingSeverity
from rclpy.node import Node
from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSProfile,
    ReliabilityPolicy,
)
from rclpy.subscription import MessageInfo
from rosbags.interfaces import (
    Qos,
    QosDurability,
    QosHistory,
    QosLiveliness,
    QosReliability,
    QosTime,
)

from venus_ros.bag import RECORDED_TOPICS, BagError, BagWriter, format_summary, message_class
from venus_ros.nodes import qos
from venus_ros.nodes.params import ConfigError, declare_config, reject_unknown_overrides
from venus_ros.nodes.runtime import run_node

NODE_NAME = "recorder_node"

#: The QoS each topic is published with in the graph (docs/ros.md; profiles from qos.py).
GRAPH_QOS: Mapping[str, QoSProfile] = qos.TOPIC_QOS

#: Queue depths of the recorder's own subscriptions (a busy moment must not drop messages).
_BEST_EFFORT_DEPTH = 100
_RELIABLE_DEPTH = 200


@dataclass(frozen=True)
class RecorderConfig:
    """Parameters of recorder_node."""

    path: str = field(
        default="",
        metadata={
            "help": "bag folder to create (must not exist); empty: venus_session_<timestamp> "
            "in the current directory"
        },
    )
    topics: tuple[str, ...] = field(
        default=(),
        metadata={"help": "topics to record (names as in docs/ros.md); empty: all of them"},
    )

    def __post_init__(self) -> None:
        unknown = [t for t in self.topics if graph_name(t) is None]
        if unknown:
            raise ValueError(
                f"topics: unknown {', '.join(map(repr, unknown))}; "
                f"known: {', '.join(RECORDED_TOPICS)}"
            )


def graph_name(topic: str) -> str | None:
    """The docs/ros.md name (key of RECORDED_TOPICS) of a relative or resolved topic name."""
    if topic in RECORDED_TOPICS:
        return topic
    bare = topic.lstrip("/")
    best: str | None = None
    for name in RECORDED_TOPICS:
        key = name.lstrip("/")
        if bare == key or (not name.startswith("/") and bare.endswith("/" + key)):
            if best is None or len(key) > len(best.lstrip("/")):
                best = name
    return best


def graph_qos(topic: str, default: QoSProfile | None = None) -> QoSProfile:
    """The graph's publisher QoS for ``topic`` (relative or resolved); ``default`` if unknown
    (reliable, depth 100 when not given)."""
    name = graph_name(topic)
    if name is not None:
        return GRAPH_QOS[name]
    return default if default is not None else qos.reliable(100)


def recording_qos(topic: str) -> QoSProfile:
    """The QoS of the recorder's subscription to ``topic``: compatible with its publishers."""
    offered = graph_qos(topic)
    if offered.reliability == ReliabilityPolicy.BEST_EFFORT:
        return QoSProfile(
            history=HistoryPolicy.KEEP_LAST,
            depth=_BEST_EFFORT_DEPTH,
            reliability=ReliabilityPolicy.BEST_EFFORT,
            durability=DurabilityPolicy.VOLATILE,
        )
    if offered.durability == DurabilityPolicy.TRANSIENT_LOCAL:
        return offered
    return qos.reliable(max(offered.depth, _RELIABLE_DEPTH))


def to_bag_qos(profile: QoSProfile) -> Qos:
    """An rclpy QoS profile as rosbags stores it (the enum values are the rmw ones)."""

    def span(duration: Any) -> QosTime:
        ns = int(duration.nanoseconds)
        return QosTime(ns // 1_000_000_000, ns % 1_000_000_000)

    return Qos(
        history=QosHistory(int(profile.history)),
        depth=int(profile.depth),
        reliability=QosReliability(int(profile.reliability)),
        durability=QosDurability(int(profile.durability)),
        deadline=span(profile.deadline),
        lifespan=span(profile.lifespan),
        liveliness=QosLiveliness(int(profile.liveliness)),
        liveliness_lease_duration=span(profile.liveliness_lease_duration),
        avoid_ros_namespace_conventions=bool(profile.avoid_ros_namespace_conventions),
    )


def _unique(topics: Sequence[str]) -> tuple[str, ...]:
    """``topics`` without the repeats (``audio/in`` and ``/audio/in`` are one topic)."""
    seen: set[str] = set()
    out = []
    for name in topics:
        key = graph_name(name) or name
        if key not in seen:
            seen.add(key)
            out.append(name)
    return tuple(out)


class _TopicRecorder:
    """The raw-subscription callback of one topic."""

    def __init__(self, node: RecorderNode, topic: str, msgtype: str) -> None:
        self.node = node
        self.topic = topic  # as subscribed (relative); the bag gets the resolved name
        self.msgtype = msgtype
        self.resolved = topic

    def __call__(self, raw: bytes, info: MessageInfo) -> None:
        self.node.record(self, raw, int(info.get("received_timestamp", 0)))

    def on_matched(self, info: QoSSubscriptionMatchedInfo) -> None:
        """A publisher appeared or went away (both ends matched: its messages now arrive)."""
        if info.current_count_change > 0:
            self.node.get_logger().debug(
                f"publisher matched on {self.resolved} ({info.current_count} now)"
            )


class RecorderNode(Node):
    """Subscribes raw to the chosen topics and writes every message into one bag."""

    def __init__(self, node_name: str = NODE_NAME, **kwargs: Any) -> None:
        """Build the node; ``kwargs`` go to :class:`rclpy.node.Node` (e.g. ``context``)."""
        super().__init__(node_name, **kwargs)
        self.config = declare_config(self, RecorderConfig)
        reject_unknown_overrides(self, kwargs.get("parameter_overrides"))
        path = Path(self.config.path or time.strftime("venus_session_%Y%m%d_%H%M%S")).absolute()
        if path.exists():
            raise ConfigError(f"{self.get_name()}: path {str(path)!r} exists already")
        # One subscription per topic, however often it was named.
        chosen = self.config.topics or tuple(RECORDED_TOPICS)
        names = _unique(chosen)
        self._debug = self.get_logger().is_enabled_for(LoggingSeverity.DEBUG)
        self._qos_stored: set[str] = set()
        self.bag: BagWriter | None = None
        try:
            self.bag = BagWriter(path)
        except BagError as exc:
            raise ConfigError(f"{self.get_name()}: {exc}") from exc
        try:
            for name in names:
                self._subscribe(name)
        except BaseException:
            self.bag.close()  # run_node never sees this node: leave a valid (empty) bag
            raise
        self.get_logger().info(f"recording {len(names)} topic(s) to {path}: {', '.join(names)}")

    def _subscribe(self, name: str) -> None:
        msgtype = RECORDED_TOPICS[graph_name(name) or name]
        handler = _TopicRecorder(self, name, msgtype)
        sub = self.create_subscription(
            message_class(msgtype),
            name,
            handler,
            recording_qos(name),
            raw=True,
            event_callbacks=SubscriptionEventCallbacks(matched=handler.on_matched),
        )
        handler.resolved = sub.topic_name

    @property
    def counts(self) -> dict[str, int]:
        return dict(self.bag.counts) if self.bag is not None else {}

    def record(self, handler: _TopicRecorder, raw: bytes, t_ns: int) -> None:
        """Write one received message (called from the executor)."""
        bag = self.bag
        if bag is None or bag.closed:
            return
        if t_ns <= 0:
            t_ns = time.time_ns()
        offered: Sequence[Qos] = ()
        if handler.resolved not in self._qos_stored:
            self._qos_stored.add(handler.resolved)
            offered = self._offered_qos(handler)
        try:
            bag.add(handler.resolved, handler.msgtype, raw, t_ns, qos=offered)
        except BagError:
            return  # closed between the check and the write: shutting down
        if self._debug:
            self.get_logger().debug(
                f"recorded {handler.resolved} #{bag.counts[handler.resolved]} ({len(raw)} B)"
            )

    def _offered_qos(self, handler: _TopicRecorder) -> list[Qos]:
        """The QoS profiles of the topic's publishers now (the graph table if none is seen)."""
        try:
            infos = self.get_publishers_info_by_topic(handler.resolved)
            profiles = [to_bag_qos(i.qos_profile) for i in infos]
        except Exception:  # the graph query is a nicety; never lose the message over it
            profiles = []
        return profiles or [to_bag_qos(graph_qos(handler.topic))]

    def close(self) -> None:
        """Finish the bag and log the per-topic counts (called once by run_node at shutdown)."""
        bag = self.bag
        if bag is None or bag.closed:
            return
        bag.close()
        line = "recorded " + format_summary(bag.path, bag.counts)
        # After Ctrl-C the context is shut down and the logger cannot reach /rosout any more
        # (rcl prints an error for that): then say it on stderr directly.
        if self.context.ok():
            self.get_logger().info(line)
        else:
            print(f"[INFO] [{self.get_name()}]: {line}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``recorder_node`` / ``python -m venus_ros.nodes.recorder``."""
    return run_node(RecorderNode, argv)


if __name__ == "__main__":
    sys.exit(main())
