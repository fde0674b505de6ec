"""The camera and monitor nodes as real processes, observed from a probe node here.

Each test runs ``python -m venus_ros.nodes.<name>`` with ``--ros-args`` (see rosproc.py) in a
namespace of its own and talks to it from a probe node in this process that has its own Context
and executor. Every wait is on a condition with a deadline; processes are stopped with SIGINT
(and killed if they hang) and must exit 0.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import cv2
import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rosproc import Probe, start_node
from sensor_msgs.msg import Image
from visualization_msgs.msg import Marker, MarkerArray

from venus_interfaces.msg import TaskStatus, TimelineEvent
from venus_ros.nodes.qos import LATCHED, SENSOR_IMAGE, TOPICS, reliable

START_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 10.0
#: Two colours (RGB) the test video alternates between, one second each.
FIRST_RGB = (200, 40, 10)
SECOND_RGB = (20, 60, 220)


# ---------------------------------------------------------------------------- helpers


def write_video(path: Path, fps: int = 10, seconds: int = 2) -> None:
    """A 64x48 MJPG video: the first second FIRST_RGB, the second SECOND_RGB."""
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), fps, (64, 48))
    assert writer.isOpened(), "OpenCV cannot write MJPG .avi here"
    for index in range(fps * seconds):
        rgb = FIRST_RGB if index < fps else SECOND_RGB
        frame = np.empty((48, 64, 3), dtype=np.uint8)
        frame[:] = rgb[::-1]  # OpenCV writes BGR
        writer.write(frame)
    writer.release()


def mean_rgb(msg: Image) -> np.ndarray:
    image = np.frombuffer(bytes(msg.data), dtype=np.uint8).reshape(msg.height, msg.step)
    return image[:, : msg.width * 3].reshape(msg.height, msg.width, 3).mean(axis=(0, 1))


# ---------------------------------------------------------------------------- camera


def test_camera_publishes_the_video_file_at_the_configured_rate_and_size(
    probe: Probe, tmp_path: Path
) -> None:
    video = tmp_path / "colours.avi"
    write_video(video)
    images: list[tuple[float, Image]] = []
    probe.node.create_subscription(
        Image, TOPICS["image"], lambda msg: images.append((time.monotonic(), msg)), SENSOR_IMAGE
    )
    camera = probe.start(
        "camera",
        tmp_path,
        f"source:=file:{video}",
        "rate_hz:=5.0",
        "width:=32",
        "height:=24",
        "frame_id:=test_camera",
    )
    try:
        probe.wait_for(lambda: bool(images), START_TIMEOUT_S, "the first image")
        first = len(images)
        window = 3.0
        probe.spin_for(window)
        count = len(images) - first
        rate = count / window
        print(f"camera: {count} images in {window:.1f} s = {rate:.2f} Hz (configured 5 Hz)")
        # The timer runs at 5 Hz on a 10 fps file: about 15 images; never more than the timer.
        assert 9 <= count <= 17, f"{count} images in {window} s at rate_hz 5"
        for _, msg in images:
            assert (msg.encoding, msg.width, msg.height, msg.step) == ("rgb8", 32, 24, 96)
            assert msg.header.frame_id == "test_camera"
        colours = [mean_rgb(msg) for _, msg in images]
        near_first = [np.abs(c - FIRST_RGB).max() <= 12 for c in colours]
        near_second = [np.abs(c - SECOND_RGB).max() <= 12 for c in colours]
        # Every image is one of the video's colours (a resize of a single-colour frame keeps
        # it), and over 3 s of a looping 2 s video both appear.
        assert all(a or b for a, b in zip(near_first, near_second, strict=True)), colours
        assert any(near_first) and any(near_second)
        stamps = [m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for _, m in images]
        assert stamps == sorted(stamps) and stamps[0] > 0
    finally:
        code = camera.stop(STOP_TIMEOUT_S)
    assert code == 0, camera.err()
    assert "published" in camera.err() and "dropped" in camera.err()


@pytest.mark.parametrize(
    ("params", "code", "prefix", "mentions"),
    [
        (("source:=device", "device:=57"), 1, "device error:", "source: file:PATH"),
        (("source:=file:/nonexistent/video.avi",), 1, "device error:", "/nonexistent/video.avi"),
        (("source:=file:{bad}",), 1, "device error:", "cannot open"),
        (("rate_hz:=0.0",), 2, "configuration error:", "rate_hz"),
        (("rate_hz:=61.0",), 2, "configuration error:", "rate_hz"),
        (("sorce:=device",), 2, "configuration error:", "sorce"),
    ],
)
def test_camera_without_a_usable_source_exits_with_one_clear_line(
    tmp_path: Path, params: tuple[str, ...], code: int, prefix: str, mentions: str
) -> None:
    bad = tmp_path / "not_a_video.avi"
    bad.write_bytes(b"this is not a video")
    camera = start_node("camera", tmp_path, *(p.format(bad=bad) for p in params))
    returncode = camera.wait(START_TIMEOUT_S)
    lines = [line for line in camera.err().splitlines() if line.strip()]
    assert returncode == code, camera.err()
    assert len(lines) == 1 and lines[0].startswith(prefix), lines
    assert mentions in lines[0]


# ---------------------------------------------------------------------------- monitor


def panel_of(markers: MarkerArray) -> Marker:
    (text,) = [m for m in markers.markers if m.type == Marker.TEXT_VIEW_FACING]
    return text


def statuses(array: DiagnosticArray) -> dict[str, DiagnosticStatus]:
    return {status.name: status for status in array.status}


def kv(status: DiagnosticStatus) -> dict[str, str]:
    return {pair.key: pair.value for pair in status.values}


def test_monitor_shows_the_session_in_markers_and_diagnostics(probe: Probe, tmp_path: Path) -> None:
    node = probe.node
    markers: list[MarkerArray] = []
    diagnostics: list[DiagnosticArray] = []
    node.create_subscription(MarkerArray, TOPICS["markers"], markers.append, LATCHED)
    node.create_subscription(
        DiagnosticArray, TOPICS["diagnostics"], diagnostics.append, reliable(10)
    )
    timeline = node.create_publisher(TimelineEvent, TOPICS["timeline"], reliable(1000))
    tasks = node.create_publisher(TaskStatus, TOPICS["task_status"], reliable(100))
    seq = iter(range(1, 1000))

    def event(kind: str, payload: dict | str) -> None:
        text = payload if isinstance(payload, str) else json.dumps(payload)
        timeline.publish(TimelineEvent(seq=next(seq), t=1.0, kind=kind, payload_json=text))

    def newest_panel() -> str:
        return panel_of(markers[-1]).text if markers else ""

    def newest_status(name: str) -> dict[str, str]:
        return kv(statuses(diagnostics[-1])[name]) if diagnostics else {}

    monitor = probe.start("monitor", tmp_path, "publish_hz:=10.0", "hardware_id:=test_robot")
    try:
        # The monitor subscribed (so nothing published below is lost) and published its panel.
        probe.wait_for(
            lambda: (
                timeline.get_subscription_count() > 0
                and tasks.get_subscription_count() > 0
                and bool(markers)
                and bool(diagnostics)
            ),
            START_TIMEOUT_S,
            "the monitor to subscribe and publish its panel",
        )
        assert "state: listening" in newest_panel()

        event("assistant_text", {"unit": 0, "turn": 1, "text": "hello there"})
        event("decision", {"unit": 0, "decision": "speak", "end_of_turn": False, "turn": 1})
        stats = {"unit": 0, "compute_s": 0.25, "debt_s": 0.0, "missed": False, "unit_s": 1.0}
        event("unit_stats", stats)
        probe.wait_for(lambda: "state: speaking" in newest_panel(), 5.0, "state: speaking")
        speaking = panel_of(markers[-1])
        event("delegate_open", {"unit": 1, "turn": 1})
        running = TaskStatus(task_id="task-1", tool="web_search", state="RUNNING", progress=0.5)
        tasks.publish(running)

        probe.wait_for(
            lambda: "state: delegating" in newest_panel() and "task-1" in newest_panel(),
            5.0,
            lambda: f"state: delegating with task-1 in the panel:\n{newest_panel()}",
        )
        panel = panel_of(markers[-1])
        print("monitor panel:\n" + panel.text)
        assert "venus: hello there" in panel.text
        assert "task task-1 web_search RUNNING 50%" in panel.text
        assert panel.header.frame_id == "base_link"
        assert panel.scale.z == pytest.approx(0.08) and panel.pose.position.z == pytest.approx(1.6)
        assert (speaking.color.b, panel.color.r) == (1.0, 1.0)  # blue speaking, orange delegating
        assert panel.color.g > panel.color.b
        (light,) = [m for m in markers[-1].markers if m.type == Marker.SPHERE]
        assert light.pose.position.z > panel.pose.position.z

        probe.wait_for(
            lambda: bool(newest_status("venus_ros/tasks").get("state.RUNNING")),
            5.0,
            "a RUNNING task in the diagnostics",
        )
        status = statuses(diagnostics[-1])
        assert set(status) == {
            "venus_ros/session",
            "venus_ros/realtime",
            "venus_ros/errors",
            "venus_ros/tasks",
        }
        assert all(s.hardware_id == "test_robot" for s in status.values())
        assert all(s.level == DiagnosticStatus.OK for s in status.values())
        realtime = kv(status["venus_ros/realtime"])
        assert (realtime["units"], realtime["missed_deadlines"]) == ("1", "0")
        assert realtime["compute_p50_s"] == "0.2500"
        assert kv(status["venus_ros/session"])["floor"] == "delegating"
        assert kv(status["venus_ros/tasks"])["state.RUNNING"] == "1"

        # Malformed records are counted and survived: the node keeps publishing.
        event("unit_stats", "{not json")
        event("unit_stats", '["a", "list"]')
        event("unit_stats", {"unit": 1, "compute_s": "slow"})
        event("frontend_error", {"unit": 1, "error": "RuntimeError", "message": "boom"})
        event("user_text", {"unit": 1, "text": "after the storm"})
        probe.wait_for(
            lambda: "after the storm" in newest_panel(),
            5.0,
            lambda: f"the next user text in the panel:\n{newest_panel()}",
        )
        probe.wait_for(
            lambda: newest_status("venus_ros/errors").get("malformed_records") == "3",
            5.0,
            "3 malformed records in the diagnostics",
        )
        errors = statuses(diagnostics[-1])["venus_ros/errors"]
        assert errors.level == DiagnosticStatus.ERROR  # the frontend error
        assert kv(errors)["frontend_errors"] == "1"
    finally:
        code = monitor.stop(STOP_TIMEOUT_S)
    assert code == 0, monitor.err()
    assert "malformed timeline record" in monitor.err()
