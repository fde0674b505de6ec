"""frames_node: the static TF frames of the conversational hardware, on ``/tf_static``.

Publishes, once and latched (reliable, transient local: what tf2_ros's static broadcaster
offers, so a late RViz or tf2 listener still gets them), one ``tf2_msgs/TFMessage`` with:

- ``base_frame`` → ``mic_frame`` (``mic_xyz``, ``mic_rpy``),
- ``base_frame`` → ``speaker_frame`` (``speaker_xyz``, ``speaker_rpy``),
- ``base_frame`` → ``camera_frame`` (``camera_xyz``, ``camera_rpy``) → ``camera_optical_frame``
  (REP-103's optical rotation: z forward, x right, y down),

in metres and radians, from parameters. ``tf2_ros`` has no Python package on pip, so the
message is written directly (tf2_msgs is built from its definition where missing).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from geometry_msgs.msg import TransformStamped
from rclpy.node import Node
from tf2_msgs.msg import TFMessage

from venus_ros.nodes.params import declare_config, reject_unknown_overrides
from venus_ros.nodes.qos import qos_for, topic
from venus_ros.nodes.runtime import run_node

#: camera_link → camera_optical_frame (REP-103).
OPTICAL_RPY = (-math.pi / 2, 0.0, -math.pi / 2)


def quaternion(roll: float, pitch: float, yaw: float) -> tuple[float, float, float, float]:
    """(x, y, z, w) of fixed-axis roll, pitch, yaw (radians)."""
    cr, sr = math.cos(roll / 2), math.sin(roll / 2)
    cp, sp = math.cos(pitch / 2), math.sin(pitch / 2)
    cy, sy = math.cos(yaw / 2), math.sin(yaw / 2)
    return (
        sr * cp * cy - cr * sp * sy,
        cr * sp * cy + sr * cp * sy,
        cr * cp * sy - sr * sp * cy,
        cr * cp * cy + sr * sp * sy,
    )


def transform(
    parent: str,
    child: str,
    xyz: Sequence[float] = (0.0, 0.0, 0.0),
    rpy: Sequence[float] = (0.0, 0.0, 0.0),
    stamp: Any = None,
) -> TransformStamped:
    """A TransformStamped ``parent`` → ``child``."""
    msg = TransformStamped()
    if stamp is not None:
        msg.header.stamp = stamp
    msg.header.frame_id = parent
    msg.child_frame_id = child
    msg.transform.translation.x, msg.transform.translation.y, msg.transform.translation.z = (
        float(v) for v in xyz
    )
    q = quaternion(*(float(v) for v in rpy))
    rotation = msg.transform.rotation
    rotation.x, rotation.y, rotation.z, rotation.w = q
    return msg


def _vector(name: str, value: Sequence[float]) -> None:
    if len(value) != 3 or not all(math.isfinite(v) for v in value):
        raise ValueError(f"{name} must be 3 finite numbers, got {list(value)}")


@dataclass(frozen=True)
class FramesConfig:
    """Parameters of frames_node."""

    base_frame: str = field(default="base_link", metadata={"help": "the robot's body frame"})
    mic_frame: str = field(default="mic_link", metadata={"help": "frame of the microphone"})
    mic_xyz: tuple[float, ...] = field(default=(0.0, 0.0, 1.2), metadata={"help": "m"})
    mic_rpy: tuple[float, ...] = field(default=(0.0, 0.0, 0.0), metadata={"help": "rad"})
    speaker_frame: str = field(default="speaker_link", metadata={"help": "frame of the speaker"})
    speaker_xyz: tuple[float, ...] = field(default=(0.0, 0.0, 1.0), metadata={"help": "m"})
    speaker_rpy: tuple[float, ...] = field(default=(0.0, 0.0, 0.0), metadata={"help": "rad"})
    camera_frame: str = field(default="camera_link", metadata={"help": "frame of the camera"})
    camera_optical_frame: str = field(
        default="camera_optical_frame", metadata={"help": "the images' frame_id (REP-103)"}
    )
    camera_xyz: tuple[float, ...] = field(default=(0.1, 0.0, 1.4), metadata={"help": "m"})
    camera_rpy: tuple[float, ...] = field(default=(0.0, 0.0, 0.0), metadata={"help": "rad"})

    def __post_init__(self) -> None:
        for name in ("mic", "speaker", "camera"):
            _vector(f"{name}_xyz", getattr(self, f"{name}_xyz"))
            _vector(f"{name}_rpy", getattr(self, f"{name}_rpy"))
        frames = [
            self.base_frame,
            self.mic_frame,
            self.speaker_frame,
            self.camera_frame,
            self.camera_optical_frame,
        ]
        if not all(frames) or len(set(frames)) != len(frames):
            raise ValueError(f"frame names must be non-empty and distinct, got {frames}")

    def transforms(self, stamp: Any = None) -> list[TransformStamped]:
        """The static transforms this config describes."""
        base = self.base_frame
        return [
            transform(base, self.mic_frame, self.mic_xyz, self.mic_rpy, stamp),
            transform(base, self.speaker_frame, self.speaker_xyz, self.speaker_rpy, stamp),
            transform(base, self.camera_frame, self.camera_xyz, self.camera_rpy, stamp),
            transform(self.camera_frame, self.camera_optical_frame, rpy=OPTICAL_RPY, stamp=stamp),
        ]


class FramesNode(Node):
    """Publishes the static frames once, latched.

    Args:
        node_name: the node's name.
        **kwargs: :class:`rclpy.node.Node` keyword arguments.
    """

    def __init__(self, node_name: str = "frames_node", **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        self.config = declare_config(self, FramesConfig)
        reject_unknown_overrides(self, kwargs.get("parameter_overrides"))
        self._publisher = self.create_publisher(TFMessage, topic("tf_static"), qos_for("tf_static"))
        transforms = self.config.transforms(self.get_clock().now().to_msg())
        self._publisher.publish(TFMessage(transforms=transforms))
        self.get_logger().info(
            "static frames: "
            + ", ".join(f"{t.header.frame_id} -> {t.child_frame_id}" for t in transforms)
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Console script ``frames_node``."""
    return run_node(FramesNode, argv)


if __name__ == "__main__":
    sys.exit(main())
