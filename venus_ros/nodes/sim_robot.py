"""sim_robot_node: a small simulated robot that drives to named places (the demo's robot).

- ``go_to`` (action, ``venus_interfaces/action/GoTo``): the goal names a place
  (``location``, e.g. ``"kitchen"``; case, articles and punctuation do not matter). The robot
  turns its simulated pose towards the place and moves there in a straight line at
  ``speed_mps``, publishing feedback every ``1 / rate_hz`` seconds (``progress`` 0..1 and
  ``"2.1 metres to go"``). It ends SUCCEEDED (``"I have arrived at the kitchen."``), ABORTED for
  a place it does not know (``"I don't know where the garage is."``) or when a newer goal
  replaces it (one goal at a time: the newer one wins), or CANCELED where it stands when the
  goal is cancelled.
- ``robot/pose`` (``geometry_msgs/PoseStamped``, frame ``map_frame``): the simulated pose, at
  ``rate_hz``.
- TF per REP-105 (``publish_tf``): ``map`` → ``odom`` (identity: the simulation never drifts)
  latched on ``/tf_static``, and ``odom`` → ``base_link`` (the pose) on ``/tf`` at ``rate_hz``.

Every goal, cancel and outcome is also logged on one line. Motion runs on a thread per goal;
the executor's callbacks never wait.
"""

from __future__ import annotations

import math
import re
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from geometry_msgs.msg import PoseStamped
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from tf2_msgs.msg import TFMessage

from venus_interfaces.action import GoTo
from venus_ros.nodes.frames import transform
from venus_ros.nodes.params import declare_config, reject_unknown_overrides
from venus_ros.nodes.qos import qos_for, topic
from venus_ros.nodes.runtime import run_node

#: The places the robot knows by default: ``"name=x,y"`` in metres on the map.
DEFAULT_PLACES = (
    "living room=0.0,0.0",
    "kitchen=4.0,1.5",
    "front door=-3.0,2.0",
    "bedroom=2.0,-4.0",
    "charging station=0.5,-0.5",
)
_ARTICLES = re.compile(r"^(?:the|a|an|my|our|your)\s+")


def normalise_place(name: str) -> str:
    """A place name as the robot matches it: lower case, no punctuation or leading article."""
    words = " ".join(re.sub(r"[^\w\s-]+", " ", name).lower().split())
    return _ARTICLES.sub("", words)


def parse_places(entries: Sequence[str]) -> dict[str, tuple[float, float]]:
    """``["kitchen=4.0,1.5", ...]`` -> ``{"kitchen": (4.0, 1.5), ...}``.

    Raises:
        ValueError: an entry that is not ``name=x,y`` with finite numbers (naming it).
    """
    places: dict[str, tuple[float, float]] = {}
    for entry in entries:
        name, sep, coords = entry.partition("=")
        parts = coords.split(",")
        try:
            x, y = (float(p) for p in parts) if sep and len(parts) == 2 else (math.nan, math.nan)
        except ValueError:
            x = y = math.nan
        key = normalise_place(name)
        if not key or not (math.isfinite(x) and math.isfinite(y)):
            raise ValueError(f"places: {entry!r} is not 'name=x,y' (metres)")
        places[key] = (x, y)
    if not places:
        raise ValueError("places: the robot needs at least one place")
    return places


@dataclass(frozen=True)
class SimRobotConfig:
    """Parameters of sim_robot_node."""

    places: tuple[str, ...] = field(
        default=DEFAULT_PLACES, metadata={"help": 'known places, "name=x,y" in metres'}
    )
    start: str = field(default="living room", metadata={"help": "where the robot starts"})
    speed_mps: float = field(default=0.8, metadata={"help": "driving speed, m/s"})
    rate_hz: float = field(default=5.0, metadata={"help": "feedback and pose rate, Hz"})
    publish_tf: bool = field(
        default=True, metadata={"help": "publish map -> odom -> base_link (REP-105)"}
    )
    map_frame: str = field(default="map", metadata={"help": "the fixed world frame"})
    odom_frame: str = field(default="odom", metadata={"help": "the odometry frame"})
    base_frame: str = field(default="base_link", metadata={"help": "the robot's body frame"})

    def __post_init__(self) -> None:
        known = parse_places(self.places)
        if normalise_place(self.start) not in known:
            raise ValueError(f"start: {self.start!r} is not one of the places {sorted(known)}")
        if not 0.01 <= self.speed_mps <= 20.0:
            raise ValueError(f"speed_mps must be in 0.01..20, got {self.speed_mps}")
        if not 0.5 <= self.rate_hz <= 100.0:
            raise ValueError(f"rate_hz must be in 0.5..100, got {self.rate_hz}")
        frames = (self.map_frame, self.odom_frame, self.base_frame)
        if not all(frames) or len(set(frames)) != 3:
            raise ValueError(f"map, odom and base frames must be distinct names, got {frames}")


class SimRobot(Node):
    """The go_to action server over a simulated pose.

    Args:
        node_name: the node's name.
        **kwargs: :class:`rclpy.node.Node` keyword arguments.
    """

    def __init__(self, node_name: str = "sim_robot_node", **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        self.config = declare_config(self, SimRobotConfig)
        reject_unknown_overrides(self, kwargs.get("parameter_overrides"))
        self.places = parse_places(self.config.places)
        self._lock = threading.Lock()
        self.x, self.y = self.places[normalise_place(self.config.start)]
        self.heading = 0.0
        self._active: ServerGoalHandle | None = None
        self._outcomes: dict[bytes, tuple[str, GoTo.Result]] = {}
        group = ReentrantCallbackGroup()
        self.pub_pose = self.create_publisher(PoseStamped, "robot/pose", 10)
        self.pub_tf = None
        if self.config.publish_tf:
            self.pub_tf = self.create_publisher(TFMessage, topic("tf"), qos_for("tf"))
            self._pub_static = self.create_publisher(
                TFMessage, topic("tf_static"), qos_for("tf_static")
            )
            identity = transform(self.config.map_frame, self.config.odom_frame)
            identity.header.stamp = self.get_clock().now().to_msg()
            self._pub_static.publish(TFMessage(transforms=[identity]))
        self.create_timer(1.0 / self.config.rate_hz, self._publish_pose, callback_group=group)
        self._server = ActionServer(
            self,
            GoTo,
            "go_to",
            execute_callback=self._finish,
            goal_callback=self._on_goal,
            handle_accepted_callback=self._on_accepted,
            cancel_callback=self._on_cancel,
            callback_group=group,
        )
        self.get_logger().info(
            f"sim robot ready at {self.config.start}; places: {', '.join(sorted(self.places))}"
        )

    # ------------------------------------------------------------------ action callbacks
    def _on_goal(self, request: GoTo.Goal) -> GoalResponse:
        self.get_logger().info(f"goal: go to {request.location!r}")
        return GoalResponse.ACCEPT

    def _on_accepted(self, handle: ServerGoalHandle) -> None:
        with self._lock:
            self._active = handle  # a newer goal replaces the one in progress
        threading.Thread(target=self._drive, args=(handle,), daemon=True).start()

    def _on_cancel(self, handle: ServerGoalHandle) -> CancelResponse:
        self.get_logger().info(f"cancel requested: go to {handle.request.location!r}")
        return CancelResponse.ACCEPT

    def _finish(self, handle: ServerGoalHandle) -> GoTo.Result:
        with self._lock:
            state, result = self._outcomes.pop(bytes(handle.goal_id.uuid))
        if state == "succeed":
            handle.succeed()
        elif state == "cancel":
            handle.canceled()
        else:
            handle.abort()
        self.get_logger().info(f"outcome: go to {handle.request.location!r}: {state}")
        return result

    # ------------------------------------------------------------------ motion (goal thread)
    def _drive(self, handle: ServerGoalHandle) -> None:
        location = handle.request.location
        target = self.places.get(normalise_place(location))
        if target is None:
            place = normalise_place(location) or "that place"
            self._end(handle, "abort", False, f"I don't know where the {place} is.")
            return
        period = 1.0 / self.config.rate_hz
        with self._lock:
            total = math.hypot(target[0] - self.x, target[1] - self.y)
        next_tick = time.monotonic()
        while True:
            with self._lock:
                if self._active is not handle:
                    state = ("abort", False, "A newer goal replaced this one.")
                    break
                if handle.is_cancel_requested:
                    state = ("cancel", False, f"Stopped on the way to the {location}.")
                    break
                dx, dy = target[0] - self.x, target[1] - self.y
                remaining = math.hypot(dx, dy)
                step = self.config.speed_mps * period
                if remaining <= step:
                    self.x, self.y = target
                    remaining = 0.0
                else:
                    self.heading = math.atan2(dy, dx)
                    self.x += step * dx / remaining
                    self.y += step * dy / remaining
                    remaining -= step
            progress = 1.0 if total <= 0 else 1.0 - remaining / total
            handle.publish_feedback(
                GoTo.Feedback(progress=float(progress), message=f"{remaining:.1f} metres to go")
            )
            if remaining == 0.0:
                state = ("succeed", True, f"I have arrived at the {normalise_place(location)}.")
                break
            next_tick += period
            time.sleep(max(0.0, next_tick - time.monotonic()))
        with self._lock:
            if self._active is handle:
                self._active = None
        self._end(handle, *state)

    def _end(self, handle: ServerGoalHandle, state: str, success: bool, message: str) -> None:
        with self._lock:
            self._outcomes[bytes(handle.goal_id.uuid)] = (
                state,
                GoTo.Result(success=success, message=message),
            )
        handle.execute()  # the execute callback (on the executor) sets the final state

    def _publish_pose(self) -> None:
        with self._lock:
            x, y, heading = self.x, self.y, self.heading
        msg = PoseStamped()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.header.frame_id = self.config.map_frame
        msg.pose.position.x = x
        msg.pose.position.y = y
        msg.pose.orientation.z = math.sin(heading / 2.0)
        msg.pose.orientation.w = math.cos(heading / 2.0)
        self.pub_pose.publish(msg)
        if self.pub_tf is not None:
            odom = transform(
                self.config.odom_frame,
                self.config.base_frame,
                (x, y, 0.0),
                (0.0, 0.0, heading),
                msg.header.stamp,
            )
            self.pub_tf.publish(TFMessage(transforms=[odom]))


def main(argv: list[str] | None = None) -> int:
    """Console script ``sim_robot_node``."""
    return run_node(SimRobot, argv)


if __name__ == "__main__":
    sys.exit(main())
