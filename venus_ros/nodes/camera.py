"""Camera node: the newest frame of a camera or a video file, as a ROS camera driver publishes it.

A capture thread reads frames as fast as the source gives them (a video file is paced at its own
frame rate) and keeps only the newest; a timer at ``rate_hz`` publishes the newest frame not yet
published. Nothing ever queues: a frame replaced before the timer took it is dropped and counted.
Without a camera, use ``source: file:PATH``.

Topics, as image_transport and camera_info_manager name them (all sensor-data QoS, best effort;
``qos_overrides./<ns>/camera/image_raw.publisher.reliability: reliable`` etc. change it):

- ``camera/image_raw`` (``sensor_msgs/Image``, rgb8), when ``publish_raw``;
- ``camera/image_raw/compressed`` (``sensor_msgs/CompressedImage``, JPEG, format
  ``"rgb8; jpeg compressed bgr8"`` like image_transport's compressed plugin), when
  ``publish_compressed``: ~30x smaller, for robots whose frontend runs on another machine;
- ``camera/camera_info`` (``sensor_msgs/CameraInfo``, same stamp and frame), from the
  camera_info_manager-style YAML in ``camera_info_url`` (``file:///path.yaml`` or a path), or an
  uncalibrated one (size only) when it is empty.

A lifecycle node: configure opens the source and reads the calibration, activate starts
capturing and publishing, deactivate stops both and keeps the source open. ``rate_hz`` and
``jpeg_quality`` can be set at run time.
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
import yaml
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticStatus
from rclpy.qos_overriding_options import QoSOverridingOptions
from rclpy.timer import Timer
from sensor_msgs.msg import CameraInfo, CompressedImage, Image

from venus_ros.core.errors import DeviceError
from venus_ros.nodes.convert import frame_to_msg
from venus_ros.nodes.diagnostics import NodeDiagnostics
from venus_ros.nodes.managed import ManagedNode
from venus_ros.nodes.params import declare_config, reject_unknown_overrides, tunable
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
    rate_hz: float = tunable(5.0, "publish rate, 0 < rate_hz <= 60", 0.1, 60.0)
    width: int = field(default=640, metadata={"help": "published width (px); 0 = as captured"})
    height: int = field(default=480, metadata={"help": "published height (px); 0 = as captured"})
    loop: bool = field(default=True, metadata={"help": "restart a video file at its end"})
    frame_id: str = field(
        default="camera_optical_frame",
        metadata={"help": "header.frame_id of the images: the camera's optical frame (REP-103)"},
    )
    publish_raw: bool = field(default=True, metadata={"help": "publish camera/image_raw"})
    publish_compressed: bool = field(
        default=True, metadata={"help": "publish camera/image_raw/compressed (JPEG)"}
    )
    jpeg_quality: int = tunable(80, "JPEG quality of the compressed images", 1, 100)
    camera_info_url: str = field(
        default="",
        metadata={"help": "camera_info_manager YAML (file:///path or a path); '' = uncalibrated"},
    )

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
        if not 1 <= self.jpeg_quality <= 100:
            raise ValueError(f"jpeg_quality must be in 1..100, got {self.jpeg_quality}")
        if not (self.publish_raw or self.publish_compressed):
            raise ValueError("publish_raw and publish_compressed are both false: nothing to do")

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


def load_camera_info(url: str, width: int, height: int, frame_id: str) -> CameraInfo:
    """A CameraInfo from a camera_info_manager YAML file, or an uncalibrated one for ``""``.

    Raises:
        DeviceError: the file is missing or not a calibration file (naming it).
    """
    info = CameraInfo(width=int(width), height=int(height), distortion_model="plumb_bob")
    info.header.frame_id = frame_id
    if not url:
        return info
    path = url.removeprefix("file://")
    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
        info.width = int(data.get("image_width", width))
        info.height = int(data.get("image_height", height))
        info.distortion_model = str(data.get("distortion_model", "plumb_bob"))
        info.k = _matrix(data, "camera_matrix", 9)
        info.d = _matrix(data, "distortion_coefficients", None)
        info.r = _matrix(data, "rectification_matrix", 9)
        info.p = _matrix(data, "projection_matrix", 12)
    except (OSError, yaml.YAMLError, AttributeError, TypeError, ValueError) as exc:
        raise DeviceError(
            f"camera: cannot read the calibration {url!r} ({exc}); give a camera_info_manager "
            "YAML file (image_width, camera_matrix, ...) or camera_info_url: ''"
        ) from exc
    return info


def _matrix(data: dict, key: str, size: int | None) -> list[float]:
    values = [float(v) for v in (data.get(key) or {}).get("data", [])]
    if size is not None and len(values) not in (0, size):
        raise ValueError(f"{key} has {len(values)} values, expected {size}")
    return values if values or size is None else [0.0] * size


def compress(rgb: np.ndarray, quality: int) -> tuple[str, bytes]:
    """JPEG bytes of an RGB image and the CompressedImage format string for them."""
    ok, data = cv2.imencode(
        ".jpg", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, int(quality)]
    )
    if not ok:
        raise ValueError("JPEG encoding failed")
    return "rgb8; jpeg compressed bgr8", data.tobytes()


class CameraNode(ManagedNode):
    """Publishes the newest camera (or video file) frame at ``rate_hz`` while active.

    Args:
        node_name: the node's name.
        **kwargs: :class:`rclpy.node.Node` keyword arguments (``context``,
            ``parameter_overrides``...), so several nodes can share a process.
    """

    def __init__(self, node_name: str = "camera_node", **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        self.config = declare_config(self, CameraConfig, on_change=self._on_change)
        reject_unknown_overrides(self, kwargs.get("parameter_overrides"))
        self._frames = LatestFrame()
        self.published = 0
        self._stop = threading.Event()
        self._capture: cv2.VideoCapture | None = None
        self._file_fps: float | None = None
        self._thread: threading.Thread | None = None
        self._timer: Timer | None = None
        self._info = CameraInfo()
        overridable = QoSOverridingOptions.with_default_policies()
        self._raw_pub = self._compressed_pub = None
        if self.config.publish_raw:
            self._raw_pub = self.create_lifecycle_publisher(
                Image, TOPICS["image"], qos_for("image"), qos_overriding_options=overridable
            )
        if self.config.publish_compressed:
            self._compressed_pub = self.create_lifecycle_publisher(
                CompressedImage,
                TOPICS["image_compressed"],
                qos_for("image_compressed"),
                qos_overriding_options=overridable,
            )
        self._info_pub = self.create_lifecycle_publisher(
            CameraInfo,
            TOPICS["camera_info"],
            qos_for("camera_info"),
            qos_overriding_options=overridable,
        )
        self._diagnostics = NodeDiagnostics(
            self, "camera", self._diagnose, rate_keys=("published", "captured")
        )

    # --- lifecycle -----------------------------------------------------------------------------

    def setup(self) -> None:
        """Open the source and read the calibration."""
        config = self.config
        self._capture, self._file_fps = open_capture(config)
        width = config.width or int(self._capture.get(cv2.CAP_PROP_FRAME_WIDTH))
        height = config.height or int(self._capture.get(cv2.CAP_PROP_FRAME_HEIGHT))
        self._info = load_camera_info(config.camera_info_url, width, height, config.frame_id)

    def start(self) -> None:
        """Start the capture thread and the publishing timer."""
        self._stop.clear()
        self._thread = threading.Thread(target=self._capture_loop, name="camera-capture")
        self._thread.daemon = True
        self._thread.start()
        self._timer = self.create_timer(1.0 / self.config.rate_hz, self._publish)
        if self._file_fps:
            source = f"{self.config.path} at {self._file_fps:g} fps"
        else:
            source = f"camera {self.config.device}"
        topics = [p.topic_name for p in (self._raw_pub, self._compressed_pub) if p is not None]
        self.get_logger().info(
            f"publishing {source} on {', '.join(topics)} at {self.config.rate_hz:g} Hz"
        )

    def stop(self) -> None:
        """Stop publishing and capturing; the source stays open."""
        if self._timer is not None:
            self._timer.cancel()
            self.destroy_timer(self._timer)
            self._timer = None
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None

    def teardown(self) -> None:
        """Release the source."""
        if self._capture is None:
            return
        if self._thread is None:
            self._capture.release()
        self._capture = None
        # A child logger: after Ctrl-C the node's own logger can no longer reach /rosout.
        rclpy.logging.get_logger(f"{self.get_logger().name}.stats").info(
            f"captured {self._frames.put_count}, published {self.published}, "
            f"dropped {self.dropped} frames"
        )

    def _on_change(self, config: CameraConfig) -> None:
        """A new ``rate_hz`` takes effect at once (``jpeg_quality`` at the next frame)."""
        if self._timer is not None and self._timer.timer_period_ns != round(1e9 / config.rate_hz):
            self.destroy_timer(self._timer)
            self._timer = self.create_timer(1.0 / config.rate_hz, self._publish)

    # --- capture and publishing ----------------------------------------------------------------

    def _capture_loop(self) -> None:
        """Read frames until stopped; keep only the newest. Runs on the capture thread."""
        capture = self._capture
        if capture is None:
            return
        period = 1.0 / self._file_fps if self._file_fps else 0.0
        due = time.monotonic()
        failures = 0
        while not self._stop.is_set():
            if period:
                wait = due - time.monotonic()
                if wait > 0 and self._stop.wait(wait):
                    break
                due = max(due + period, time.monotonic() - period)
            ok, image = capture.read()
            if ok and image is not None:
                failures = 0
                self._frames.put(image, self.get_clock().now().to_msg())
                continue
            if self._file_fps:  # end of the video file
                if not self.config.loop:
                    self.get_logger().info("end of the video file; no more frames")
                    return
                capture.set(cv2.CAP_PROP_POS_FRAMES, 0)
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
        if not self.active:
            return
        item = self._frames.take()
        if item is None:
            return
        image, stamp = item
        config = self.config
        width = config.width or image.shape[1]
        height = config.height or image.shape[0]
        if image.ndim == 2:
            rgb = cv2.cvtColor(image, cv2.COLOR_GRAY2RGB)
        else:
            rgb = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
        if (rgb.shape[1], rgb.shape[0]) != (width, height):
            rgb = cv2.resize(rgb, (width, height), interpolation=cv2.INTER_AREA)
        if self._raw_pub is not None:
            self._raw_pub.publish(frame_to_msg(rgb, stamp, config.frame_id))
        if self._compressed_pub is not None:
            fmt, data = compress(rgb, config.jpeg_quality)
            msg = CompressedImage(format=fmt, data=data)
            msg.header.stamp, msg.header.frame_id = stamp, config.frame_id
            self._compressed_pub.publish(msg)
        self._info.header.stamp = stamp
        self._info_pub.publish(self._info)
        self.published += 1

    @property
    def dropped(self) -> int:
        """Frames replaced by a newer one before they could be published."""
        return self._frames.dropped

    def _diagnose(self) -> tuple[bytes, str, dict[str, str]]:
        values = {
            "source": self.config.source,
            "captured": str(self._frames.put_count),
            "published": str(self.published),
            "dropped": str(self.dropped),
            "rate_hz": f"{self.config.rate_hz:g}",
        }
        if not self.active:
            return DiagnosticStatus.OK, "inactive", values
        if self._thread is not None and not self._thread.is_alive():
            return DiagnosticStatus.ERROR, "the source stopped giving frames", values
        return DiagnosticStatus.OK, "streaming", values


def main(argv: Sequence[str] | None = None) -> int:
    """Console script ``camera_node``."""
    return run_node(CameraNode, argv)


if __name__ == "__main__":
    sys.exit(main())
