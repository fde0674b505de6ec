"""Replay a recorded bag into a live graph: republish its raw messages with their timing.

``python -m venus_ros.nodes.bag_replay --bag PATH [--rate R] [--topics T ...] [--loop]``

Each topic in the bag gets a publisher with the graph's QoS for it (docs/ros.md; the recorded
offered QoS for a topic the graph does not know), and the serialized messages are published as
they are (no deserialization), spaced as they were recorded, divided by ``rate`` (``0``: as fast as
possible). Topic names are the ones in the bag (resolved names, e.g. ``/audio/in``); ROS remapping
arguments after ``--ros-args`` apply as usual.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Iterable, Sequence

import rclpy
from rclpy.context import Context
from rclpy.duration import Duration
from rclpy.node import Node
from rclpy.publisher import Publisher
from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    LivelinessPolicy,
    QoSProfile,
    ReliabilityPolicy,
)
from rclpy.signals import SignalHandlerOptions
from rosbags.interfaces import Qos

from venus_ros.bag import (
    BagError,
    bag_topics,
    message_class,
    offered_qos,
    read_bag,
    topic_matches,
)
from venus_ros.nodes.recorder import graph_name, graph_qos

NODE_NAME = "bag_replay"
#: Longest wait, at the end, for reliable subscribers to acknowledge the last messages.
ACK_TIMEOUT_S = 2.0
#: Pause after the publishers matched, for the subscribers' side of the match.
_SETTLE_S = 0.1


def _from_bag_qos(recorded: Qos) -> QoSProfile:
    """A recorded (rosbags) QoS profile as an rclpy profile (history, depth, reliability,
    durability; the rest default)."""
    history = HistoryPolicy(int(recorded.history))
    reliability = ReliabilityPolicy(int(recorded.reliability))
    durability = DurabilityPolicy(int(recorded.durability))
    return QoSProfile(
        history=history if history != HistoryPolicy.UNKNOWN else HistoryPolicy.KEEP_LAST,
        depth=int(recorded.depth) or 100,  # the graph does not tell the depth: 0
        reliability=reliability
        if reliability != ReliabilityPolicy.UNKNOWN
        else ReliabilityPolicy.RELIABLE,
        durability=durability
        if durability != DurabilityPolicy.UNKNOWN
        else DurabilityPolicy.VOLATILE,
        liveliness=LivelinessPolicy.SYSTEM_DEFAULT,
    )


def replay_qos(topic: str, recorded: Sequence[Qos] = ()) -> QoSProfile:
    """The publisher QoS for a bag topic: the graph's (docs/ros.md) when the topic is one of
    ours, else the first recorded offered profile, else reliable depth 100."""
    if graph_name(topic) is None and recorded:
        return _from_bag_qos(recorded[0])
    return graph_qos(topic)


def _sleep_until(deadline: float, stop: threading.Event | None) -> bool:
    """Wait until ``time.monotonic() >= deadline``; False if ``stop`` was set meanwhile."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return not (stop is not None and stop.is_set())
    if stop is not None:
        return not stop.wait(remaining)
    time.sleep(remaining)
    return True


def _wait_for_subscribers(
    publishers: Iterable[Publisher], timeout_s: float, stop: threading.Event | None
) -> None:
    """Wait (at most ``timeout_s``) until every publisher has matched a subscription.

    Matching is not symmetric: the subscriber may match this publisher a little after this
    side reports the match, and best-effort messages sent in between are dropped, hence a short
    settling pause after the match.
    """
    pubs = list(publishers)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(p.get_subscription_count() > 0 for p in pubs):
            _sleep_until(time.monotonic() + _SETTLE_S, stop)
            return
        if not _sleep_until(time.monotonic() + 0.02, stop):
            return


def replay_bag(
    path: str,
    rate: float = 1.0,
    topics: Iterable[str] | None = None,
    loop: bool = False,
    *,
    wait_for_subscribers: float = 0.0,
    stop: threading.Event | None = None,
    args: Sequence[str] | None = None,
) -> int:
    """Republish the messages of the bag at ``path`` into the live graph.

    Args:
        path: bag folder or its ``.mcap`` file.
        rate: playback speed factor (2.0: twice as fast); 0 publishes as fast as possible.
        topics: only these topics (a relative name selects it in any namespace: ``timeline``
            → ``/timeline``, ``/robot1/timeline``); None: all.
        loop: start over at the end, until interrupted or ``stop`` is set.
        wait_for_subscribers: before the first message, wait up to this long (s) until every
            topic's publisher has matched a subscriber (new publishers take ~0.5 s to be
            discovered; messages published before that are lost for volatile subscribers).
        stop: set it to end the replay early (from another thread).
        args: ROS arguments for the node (``--ros-args ...``, e.g. remappings).

    Returns:
        The number of messages published.

    Raises:
        BagError: no readable bag at ``path``; a message type is not installed.
        ValueError: ``rate`` is negative.
    """
    if rate < 0:
        raise ValueError(f"rate must be >= 0, got {rate}")
    wanted = None if topics is None else list(topics)
    all_types = bag_topics(path)
    recorded = offered_qos(path)
    types = {t: m for t, m in all_types.items() if topic_matches(t, wanted)}
    classes = {t: message_class(m) for t, m in types.items()}  # fail before touching ROS

    context = Context()
    rclpy.init(
        args=["bag_replay", *(args or [])],
        context=context,
        signal_handler_options=SignalHandlerOptions.NO,
    )
    node: Node | None = None
    published = 0
    try:
        node = Node(NODE_NAME, context=context)
        publishers: dict[str, Publisher] = {
            t: node.create_publisher(classes[t], t, replay_qos(t, recorded.get(t, ())))
            for t in types
        }
        if not publishers:
            node.get_logger().warning(f"nothing to replay in {path}")
            return 0
        if wait_for_subscribers > 0:
            _wait_for_subscribers(publishers.values(), wait_for_subscribers, stop)
        node.get_logger().info(
            f"replaying {path} at rate {rate:g}: {', '.join(sorted(publishers))}"
        )
        while True:
            start_wall: float | None = None
            start_bag = 0
            for topic, _type, raw, t_ns in read_bag(path, topics=list(publishers)):
                if stop is not None and stop.is_set():
                    return published
                if start_wall is None:
                    start_wall, start_bag = time.monotonic(), t_ns
                elif rate > 0:
                    due = start_wall + (t_ns - start_bag) / 1e9 / rate
                    if not _sleep_until(due, stop):
                        return published
                publishers[topic].publish(raw)
                published += 1
            if not loop or start_wall is None or not context.ok():
                break
        return published
    except KeyboardInterrupt:
        return published
    finally:
        if node is not None:
            # Reliable subscribers get the tail before the publishers go away (bounded).
            for pub in list(node.publishers):
                if pub.qos_profile.reliability == ReliabilityPolicy.RELIABLE:
                    try:
                        pub.wait_for_all_acked(Duration(seconds=ACK_TIMEOUT_S))
                    except Exception:
                        pass
            node.get_logger().info(f"replayed {published} message(s) from {path}")
            node.destroy_node()
        rclpy.try_shutdown(context=context)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m venus_ros.nodes.bag_replay --bag PATH [--rate R] ...``; exit 0, 2 on error."""
    argv = list(sys.argv[1:] if argv is None else argv)
    ros_args: list[str] = []
    if "--ros-args" in argv:
        ros_args = argv[argv.index("--ros-args") :]
        argv = argv[: argv.index("--ros-args")]
    parser = argparse.ArgumentParser(
        prog="bag_replay", description="Republish a recorded venus_ros bag into the live graph."
    )
    parser.add_argument("--bag", required=True, help="bag folder (or its .mcap file)")
    parser.add_argument(
        "--rate", type=float, default=1.0, help="speed factor; 0 = as fast as possible"
    )
    parser.add_argument("--topics", nargs="+", help="only these topics (default: all)")
    parser.add_argument("--loop", action="store_true", help="start over at the end")
    parser.add_argument(
        "--wait",
        type=float,
        default=1.0,
        metavar="S",
        help="wait up to S seconds for subscribers before the first message (default 1)",
    )
    opts = parser.parse_args(argv)
    # Ctrl-C and SIGTERM end the replay cleanly (KeyboardInterrupt, caught in replay_bag), even
    # where SIGINT came in ignored (a background job of a non-interactive shell).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        count = replay_bag(
            opts.bag,
            rate=opts.rate,
            topics=opts.topics,
            loop=opts.loop,
            wait_for_subscribers=opts.wait,
            args=ros_args,
        )
    except (BagError, ValueError) as exc:
        print(f"bag_replay: {exc}", file=sys.stderr)
        return 2
    print(f"bag_replay: published {count} message(s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
