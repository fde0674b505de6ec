"""Camera node: the newest frame of a camera or a video file, as rgb8 Images at a fixed rate.

A capture thread reads frames as fast as the source gives them (a video file is paced at its own
frame rate) and keeps only the newest; a timer at ``rate_hz`` publishes the newest frame not yet
published on ``image`` (sensor-data QoS, depth 1). Nothing ever queues: a frame replaced before the
timer took it is dropped and counted. Without a camera, use ``source: file:PATH``.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import cv2
import numpy as np
import rclpy.logging
from builtin_interfaces.msg import Time
from rclpy.node import Node
from sensor_msgs.msg import Image

from venus_ros.core.errors import DeviceError
from venus_ros.nodes.convert import frame_to_msg
from venus_ros.nodes.params import declare_config, reject_unknown_overrides
from venus_ros.nodes.qos import TOPICS, qos_for
from venus_ros.nodes.runtime import run_node

#: Frame rate assumed for a video file that does not state a usable one.
FALLBACK_FILE_FPS = 30.0
#: Consecutive failed reads after which a live camera is given up on.
MAX_READ_FAILURES = 50


@dataclass(frozen=True)
class CameraConfig:
    """Parameters of the camera node."""

    source: str = field(
        default="device",
        metadata={"help": '"device" (a camera, see `device`) or "file:PATH" (a video file)'},
    )
    device: int = field(default=0, metadata={"help": "camera index (/dev/videoN)"})
    rate_hz: float = field(default=5.0, metadata={"help": "publish rate, 0 < rate_hz <= 60"})
    width: int = field(default=640, metadata={"help": "published width (px); 0 = as captured"})
    height: int = field(default=480, metadata={"help": "published height (px); 0 = as captured"})
    loop: bool = field(default=True, metadata={"help": "restart a video file at its end"})
    frame_id: str = field(default="camera", metadata={"help": "header.frame_id of the images"})

    def __post_init__(self) -> None:
        if self.source != "device" and not (
            self.source.startswith("file:") and self.source[len("file:") :]
        ):
            raise ValueError(f'source must be "device" or "file:PATH", got {self.source!r}')
        if self.device < 0:
            raise ValueError(f"device must be >= 0, got {self.device}")
        if not (math.isfinite(self.rate_hz) and 0 < self.rate_hz <= 60):
            raise ValueError(f"rate_hz must be in (0, 60], got {self.rate_hz}")
        if self.width < 0 or self.height < 0:
            raise ValueError(f"width and height must be >= 0, got {self.width}x{self.height}")
        if not self.frame_id:
            raise ValueError("frame_id must not be empty")

    @property
    def path(self) -> str | None:
        """The video file of a ``file:`` source, else None."""
        return self.source[len("file:") :] if self.source.startswith("file:") else None


def open_capture(config: CameraConfig) -> tuple[cv2.VideoCapture, float | None]:
    """Open the configured source and check that it yields a frame.

    Returns:
        The capture and, for a video file, its frame rate (None for a camera).

    Raises:
        DeviceError: naming the source and the fix.
    """
    path = config.path
    if path is not None:
        if not os.path.isfile(path):
            raise DeviceError(f"camera: no video file {path!r}; set `source: file:PATH` to one")
        capture = cv2.VideoCapture(path)
        what = f"video file {path!r}"
        fix = "use a video OpenCV can decode (e.g. MJPG .avi or .mp4)"
    else:
        node = f"/dev/video{config.device}"
        fix = "connect a camera or use `source: file:PATH` with a video file"
        if sys.platform.startswith("linux") and not os.path.exists(node):
            raise DeviceError(f"camera: no camera at {node} (device {config.device}); {fix}")
        capture = cv2.VideoCapture(config.device)
        what = f"camera {config.device}"
        if capture.isOpened() and config.width and config.height:
            capture.set(cv2.CAP_PROP_FRAME_WIDTH, config.width)
            capture.set(cv2.CAP_PROP_FRAME_HEIGHT, config.height)
    if not capture.isOpened():
        capture.release()
        raise DeviceError(f"camera: cannot open {what}; {fix}")
    if not capture.grab():
        capture.release()
        raise DeviceError(f"camera: {what} gives no frames; {fix}")
    if path is None:
        return capture, None
    fps = float(capture.get(cv2.CAP_PROP_FPS) or 0.0)
    capture.set(cv2.CAP_PROP_POS_FRAMES, 0)
    return capture, fps if math.isfinite(fps) and 0 < fps <= 1000 else FALLBACK_FILE_FPS


class LatestFrame:
    """A one-slot mailbox: ``put`` replaces (drop-oldest, counted), ``take`` empties."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._item: tuple[np.ndarray, Time] | None = None
        self.put_count = 0
        self.dropped = 0

    def put(self, image: np.ndarray, stamp: Time) -> None:
        """Store the newest frame; an untaken older frame is dropped."""
        with self._lock:
            self.dropped += int(self._item is not None)
            self.put_count += 1
            self._item = (image, stamp)

    def take(self) -> tuple[np.ndarray, Time] | None:
        """The newest frame not taken yet, or None."""
        with self._lock:
            item, self._item = self._item, None
            return item


class CameraNode(Node):
    """Publishes the newest camera (or video file) frame as an rgb8 Image at ``rate_hz``."""

    def __init__(self, **kwargs: Any) -> None:
        """Build the node; ``kwargs`` go to :class:`rclpy.node.Node` (e.g. ``context``)."""
        super().__init__("camera_node", **kwargs)
        self.config = declare_config(self, CameraConfig)
        reject_unknown_overrides(self)
        self._capture, self._file_fps = open_capture(self.config)
        self._frames = LatestFrame()
        self.published = 0
        self._stop = threading.Event()
        self._publisher = self.create_publisher(Image, TOPICS["image"], qos_for("image"))
        self._thread = threading.Thread(target=self._capture_loop, name="camera-capture")
        self._thread.daemon = True
        self._thread.start()
        self._timer = self.create_timer(1.0 / self.config.rate_hz, self._publish)
        if self._file_fps:
            source = f"{self.config.path} at {self._file_fps:g} fps"
        else:
            source = f"camera {self.config.device}"
        self.get_logger().info(
            f"publishing {source} on {self._publisher.topic_name} at {self.config.rate_hz:g} Hz"
        )

    def _capture_loop(self) -> None:
        """Read frames until stopped; keep only the newest. Runs on the capture thread."""
        period = 1.0 / self._file_fps if self._file_fps else 0.0
        due = time.monotonic()
        failures = 0
        while not self._stop.is_set():
            if period:
                wait = due - time.monotonic()
                if wait > 0 and self._stop.wait(wait):
                    break
                due = max(due + period, time.monotonic() - period)
            ok, image = self._capture.read()
            if ok and image is not None:
                failures = 0
                self._frames.put(image, self.get_clock().now().to_msg())
                continue
            if self._file_fps:  # end of the video file
                if not self.config.loop:
                    self.get_logger().info("end of the video file; no more frames")
                    return
                self._capture.set(cv2.CAP_PROP_POS_FRAMES, 0)
                failures += 1
                if failures > 1:  # restarting gave no frame either
                    self.get_logger().error("the video file stopped giving frames")
                    return
                continue
            failures += 1
            if failures >= MAX_READ_FAILURES:
                self.get_logger().error(f"camera {self.config.device} stopped giving frames")
                return
            self._stop.wait(0.01)

    def _publish(self) -> None:
        item = self._frames.take()
        if item is None:
            return
        image, stamp = item
        width = self.config.width or image.shape[1]
        height = self.config.height or image.shape[0]
        if image.ndim == 2:
            rgb = cv2.cvtColor(image, cv2.COLOR_GRAY2RGB)
        else:
            rgb = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
        if (rgb.shape[1], rgb.shape[0]) != (width, height):
            rgb = cv2.resize(rgb, (width, height), interpolation=cv2.INTER_AREA)
        self._publisher.publish(frame_to_msg(rgb, stamp, self.config.frame_id))
        self.published += 1

    @property
    def dropped(self) -> int:
        """Frames replaced by a newer one before they could be published."""
        return self._frames.dropped

    def close(self) -> None:
        """Stop the capture thread and release the source."""
        self._stop.set()
        self._thread.join(timeout=2.0)
        if not self._thread.is_alive():
            self._capture.release()
        # A child logger: after Ctrl-C the node's own logger can no longer reach /rosout.
        rclpy.logging.get_logger(f"{self.get_logger().name}.stats").info(
            f"captured {self._frames.put_count}, published {self.published}, "
            f"dropped {self.dropped} frames"
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Console script ``camera_node``."""
    return run_node(CameraNode, argv)


if __name__ == "__main__":
    sys.exit(main())
