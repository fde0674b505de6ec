"""The nodes as robotics engineers plug them into other ROS stacks, in real processes.

Best-effort and compressed camera frames reach the frontend's units; audio_common's
AudioStamped drives the frontend through audio_bridge_node and the assistant's speech comes back
as AudioStamped; parameters are tunable at run time within their ranges and refused when
structural; shared ``/**`` blocks and ``qos_overrides`` are accepted; the frontend is driven
through its lifecycle by the standard services; static and moving TF frames are published.
Each test runs its nodes in the probe's namespace and waits on conditions with deadlines.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
import rclpy
import soundfile as sf
import yaml
from audio_common_msgs.msg import AudioStamped
from diagnostic_msgs.msg import DiagnosticArray
from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState, GetState
from rcl_interfaces.msg import Parameter as ParameterMsg
from rcl_interfaces.srv import DescribeParameters, SetParameters
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.lifecycle import TransitionCallbackReturn
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rosproc import Probe
from sensor_msgs.msg import CameraInfo, CompressedImage, Image
from std_msgs.msg import Header
from tf2_msgs.msg import TFMessage

from venus_interfaces.msg import AudioChunk, TimelineEvent, UnitDecision
from venus_ros.core.units import InputError
from venus_ros.nodes.camera import CameraNode
from venus_ros.nodes.convert import audio_from_msg, audio_to_msg, frame_to_msg
from venus_ros.nodes.frames import FramesNode
from venus_ros.nodes.mic import MicNode
from venus_ros.nodes.qos import (
    INTEROP_QOS,
    SENSOR_AUDIO,
    SENSOR_IMAGE,
    STATIC_LISTENER,
    TOPICS,
    reliable,
    topic,
)

ROOT = Path(__file__).resolve().parents[1]
START_S = 30.0
SCRIPT = "replies:\n  - at_unit: 1000\n    text: never\n"


def _frontend_script(tmp_path: Path) -> str:
    path = tmp_path / "script.yaml"
    path.write_text(SCRIPT)
    return f"frontend:=scripted:{path}"


class Watch:
    """What the probe sees: the frontend's video_frame records and decisions."""

    def __init__(self, probe: Probe) -> None:
        self.frames: list[dict] = []
        self.decisions: list[UnitDecision] = []
        probe.node.create_subscription(
            TimelineEvent, TOPICS["timeline"], self._event, reliable(1000)
        )
        probe.node.create_subscription(
            UnitDecision, TOPICS["decision"], self.decisions.append, reliable(50)
        )

    def _event(self, msg: TimelineEvent) -> None:
        if msg.kind == "video_frame":
            self.frames.append(json.loads(msg.payload_json))


def _pump_silence(probe: Probe) -> None:
    """100 ms AudioChunks of silence on audio/in, paced by a probe timer."""
    publisher = probe.node.create_publisher(AudioChunk, TOPICS["audio_in"], SENSOR_AUDIO)
    state = {"next": 0}

    def tick() -> None:
        stamp = probe.node.get_clock().now().to_msg()
        msg = audio_to_msg(np.zeros(1600, np.float32), 16000, state["next"], stamp)
        publisher.publish(msg)
        state["next"] += 1600

    probe.node.create_timer(0.1, tick)


def test_audio_stamped_and_best_effort_frames_drive_the_frontend(
    probe: Probe, tmp_path: Path
) -> None:
    watch = Watch(probe)
    mono: list[np.ndarray] = []
    speech: list[Any] = []
    node = probe.node
    node.create_subscription(
        AudioChunk,
        TOPICS["audio_in"],
        lambda m: mono.append(np.frombuffer(bytes(m.data), "<i2")),
        SENSOR_AUDIO,
    )
    node.create_subscription(AudioStamped, topic("audio_stamped_out"), speech.append, SENSOR_AUDIO)
    audio_pub = node.create_publisher(AudioStamped, topic("audio_stamped_in"), SENSOR_AUDIO)
    best_effort = QoSProfile(depth=5, reliability=ReliabilityPolicy.BEST_EFFORT)
    image_pub = node.create_publisher(Image, TOPICS["image"], best_effort)
    speech_pub = node.create_publisher(AudioChunk, TOPICS["audio_out"], reliable(50))
    # 160x120 fits one UDP datagram. A raw 640x480 frame is ~15 fragments, lost whole with any
    # one of them when best effort leaves shared memory for UDP (a CI run lost all for 30 s).
    image = np.zeros((120, 160, 3), np.uint8)
    image[:, :, 1] = 200

    def audio_tick() -> None:  # stereo int16, 100 ms at 16 kHz: left 1000, right 3000
        msg = AudioStamped()
        msg.header.stamp = node.get_clock().now().to_msg()
        frames = np.empty((1600, 2), np.int16)
        frames[:, 0], frames[:, 1] = 1000, 3000
        msg.audio.audio_data.int16_data = frames.reshape(-1)
        msg.audio.info.format, msg.audio.info.channels = 8, 2
        msg.audio.info.rate, msg.audio.info.chunk = 16000, 1600
        audio_pub.publish(msg)

    node.create_timer(0.1, audio_tick)
    node.create_timer(
        0.2, lambda: image_pub.publish(frame_to_msg(image, node.get_clock().now().to_msg()))
    )
    probe.start("audio_bridge", tmp_path)
    probe.start("frontend", tmp_path, _frontend_script(tmp_path))
    probe.wait_for(
        lambda: len(watch.frames) >= 2 and len(watch.decisions) >= 2,
        START_S,
        lambda: f"frames in units ({len(watch.frames)}) and decisions ({len(watch.decisions)})",
    )
    assert watch.frames[-1]["shape"] == [120, 160, 3]
    assert all(np.all(chunk == 2000) for chunk in mono), "stereo is averaged to mono"
    # The assistant's speech (audio/out) comes back as AudioStamped, float32 at its own rate.
    out = np.linspace(-0.5, 0.5, 2400, dtype=np.float32)
    probe.wait_for(lambda: speech_pub.get_subscription_count() > 0, START_S, "the bridge")
    speech_pub.publish(audio_to_msg(out, 24000, 0, node.get_clock().now().to_msg(), "", 3))
    probe.wait_for(lambda: bool(speech), 10.0, "AudioStamped speech")
    got = speech[0].audio
    assert (got.info.format, got.info.channels, got.info.rate) == (1, 1, 24000)
    np.testing.assert_array_equal(np.asarray(got.audio_data.float32_data, np.float32), out)


def _video(path: Path, size: tuple[int, int] = (640, 480), frames: int = 10) -> Path:
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10.0, size)
    for k in range(frames):
        writer.write(np.full((size[1], size[0], 3), 20 * k, np.uint8))
    writer.release()
    return path


def test_compressed_camera_frames_reach_the_frontend(probe: Probe, tmp_path: Path) -> None:
    watch = Watch(probe)
    infos: list[CameraInfo] = []
    sizes: list[int] = []
    probe.node.create_subscription(CameraInfo, TOPICS["camera_info"], infos.append, SENSOR_IMAGE)
    probe.node.create_subscription(
        CompressedImage,
        TOPICS["image_compressed"],
        lambda m: sizes.append(len(m.data)),
        SENSOR_IMAGE,
    )
    _pump_silence(probe)
    video = _video(tmp_path / "v.avi")
    probe.start("camera", tmp_path, f"source:=file:{video}", "publish_raw:=false", "rate_hz:=5.0")
    probe.start("frontend", tmp_path, _frontend_script(tmp_path), "image_transport:=compressed")
    probe.wait_for(
        lambda: len(watch.frames) >= 2, START_S, lambda: f"{len(watch.frames)} frames in units"
    )
    assert watch.frames[-1]["shape"] == [480, 640, 3]
    probe.wait_for(lambda: bool(infos and sizes), 10.0, "camera_info and compressed images here")
    assert (infos[-1].width, infos[-1].height) == (640, 480)
    assert infos[-1].header.frame_id == "camera_optical_frame"
    # JPEG: far smaller than the 921,600 bytes of a raw rgb8 frame.
    assert max(sizes) < 921600 / 10


def _parameter(name: str, value: Any) -> ParameterMsg:
    return Parameter(name, value=value).to_parameter_msg()


def _call(probe: Probe, client: Any, request: Any) -> Any:
    assert client.wait_for_service(timeout_sec=START_S), client.srv_name
    future = client.call_async(request)
    probe.wait_for(future.done, 10.0, f"a reply from {client.srv_name}")
    return future.result()


def test_tunable_parameters_ranges_read_only_shared_blocks_and_qos_overrides(
    probe: Probe, tmp_path: Path
) -> None:
    ns = probe.namespace
    params = tmp_path / "params.yaml"
    params.write_text(
        "/**:\n  ros__parameters:\n    hardware_id: robot7\n    tools_file: for-the-harness\n"
        "/**/camera_node:\n  ros__parameters:\n    rate_hz: 5.0\n"
        f"    qos_overrides:\n      {ns}/camera/image_raw:\n        publisher:\n"
        "          reliability: reliable\n"
    )
    reliable_images: list[Image] = []
    statuses: list[Any] = []
    probe.node.create_subscription(
        Image, TOPICS["image"], reliable_images.append, QoSProfile(depth=5)
    )
    probe.node.create_subscription(
        DiagnosticArray, "/diagnostics", lambda m: statuses.extend(m.status), reliable(10)
    )
    video = _video(tmp_path / "v.avi", (64, 48))
    camera = probe.start(
        "camera", tmp_path, f"source:=file:{video}", "width:=0", "height:=0", params_file=params
    )
    # A reliable subscription matches only because qos_overrides made the publisher reliable.
    probe.wait_for(lambda: bool(reliable_images), START_S, "an image on a reliable subscription")
    name = f"{ns.strip('/')}.camera_node"
    probe.wait_for(
        lambda: any(s.name.endswith("camera_node: camera") for s in statuses),
        START_S,
        "the camera's diagnostics",
    )
    status = next(s for s in statuses if s.name.endswith("camera_node: camera"))
    assert status.hardware_id == "robot7" and name

    node_path = f"{ns}/camera_node"
    setter = probe.node.create_client(SetParameters, f"{node_path}/set_parameters")
    results = _call(
        probe,
        setter,
        SetParameters.Request(
            parameters=[
                _parameter("rate_hz", 2.0),
                _parameter("jpeg_quality", 500),
                _parameter("source", "device"),
            ]
        ),
    ).results
    assert results[0].successful, results[0].reason
    assert not results[1].successful and "jpeg_quality" in results[1].reason
    assert not results[2].successful and "read-only" in results[2].reason
    describer = probe.node.create_client(DescribeParameters, f"{node_path}/describe_parameters")
    described = _call(probe, describer, DescribeParameters.Request(names=["rate_hz", "source"]))
    rate, source = described.descriptors
    assert not rate.read_only and source.read_only
    assert (rate.floating_point_range[0].from_value, rate.floating_point_range[0].to_value) == (
        0.1,
        60.0,
    )
    # The new rate takes effect: about 2 images a second now.
    count, started = len(reliable_images), time.monotonic()
    probe.wait_for(lambda: len(reliable_images) >= count + 4, 10.0, "images at the new rate")
    rate_hz = 4 / (time.monotonic() - started)
    assert 1.0 < rate_hz < 3.5, rate_hz
    assert camera.proc.poll() is None, camera.log()


def test_frontend_lifecycle_driven_by_the_standard_services(probe: Probe, tmp_path: Path) -> None:
    watch = Watch(probe)
    _pump_silence(probe)
    frontend = probe.start("frontend", tmp_path, _frontend_script(tmp_path), "autostart:=false")
    base = f"{probe.namespace}/frontend_node"
    change = probe.node.create_client(ChangeState, f"{base}/change_state")
    get = probe.node.create_client(GetState, f"{base}/get_state")

    def state() -> str:
        return _call(probe, get, GetState.Request()).current_state.label

    def transition(transition_id: int) -> None:
        request = ChangeState.Request(transition=Transition(id=transition_id))
        assert _call(probe, change, request).success

    assert state() == "unconfigured"
    assert "ready" not in frontend.log()
    transition(Transition.TRANSITION_CONFIGURE)
    assert state() == "inactive"
    probe.wait_for(lambda: "ready; units of" in frontend.log(), 10.0, "the frontend loaded")
    assert watch.decisions == []  # audio arrives, but an inactive node takes none
    transition(Transition.TRANSITION_ACTIVATE)
    probe.wait_for(lambda: len(watch.decisions) >= 2, START_S, "units while active")
    transition(Transition.TRANSITION_DEACTIVATE)
    assert state() == "inactive"
    stopped_at = len(watch.decisions)
    probe.spin_for(2.5)  # more than two units' worth of audio goes by
    assert len(watch.decisions) <= stopped_at + 1, "units stop when inactive"
    transition(Transition.TRANSITION_INACTIVE_SHUTDOWN)
    assert state() == "finalized"
    assert frontend.stop() == 0, frontend.log()


def test_harness_heartbeats_only_once_a_manager_activated_it(probe: Probe, tmp_path: Path) -> None:
    beats: list[Header] = []
    probe.node.create_subscription(Header, TOPICS["heartbeat"], beats.append, reliable(1))
    probe.start("harness", tmp_path, "autostart:=false", "journal_path:=none")
    base = f"{probe.namespace}/harness_node"
    change = probe.node.create_client(ChangeState, f"{base}/change_state")
    get = probe.node.create_client(GetState, f"{base}/get_state")
    assert _call(probe, get, GetState.Request()).current_state.label == "unconfigured"
    assert beats == []
    for transition in (Transition.TRANSITION_CONFIGURE, Transition.TRANSITION_ACTIVATE):
        request = ChangeState.Request(transition=Transition(id=transition))
        assert _call(probe, change, request).success
    probe.wait_for(lambda: bool(beats), 10.0, "a heartbeat from the active harness")


def test_camera_lifecycle_starts_and_stops_its_capture_thread(tmp_path: Path) -> None:
    video = _video(tmp_path / "v.avi", (32, 24))
    context = Context()
    rclpy.init(context=context)
    node = CameraNode(
        context=context,
        parameter_overrides=[
            Parameter("source", value=f"file:{video}"),
            Parameter("autostart", value=False),
        ],
    )

    def capture_threads() -> int:
        return sum(t.name == "camera-capture" for t in threading.enumerate())

    try:
        before = capture_threads()
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS and not node.active
        assert capture_threads() == before
        node.trigger_activate()
        assert node.active and capture_threads() == before + 1
        node.trigger_deactivate()
        assert not node.active and capture_threads() == before
        node.trigger_activate()
        assert capture_threads() == before + 1
        node.trigger_shutdown()
        assert capture_threads() == before
    finally:
        node.destroy_node()
        rclpy.try_shutdown(context=context)


def test_static_frames_and_the_simulated_robot_in_tf(probe: Probe, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    base, odom, world = f"base_{tag}", f"odom_{tag}", f"map_{tag}"
    static: dict[str, Any] = {}
    moving: dict[str, Any] = {}

    def on_static(msg: TFMessage) -> None:
        static.update({t.child_frame_id: t for t in msg.transforms if tag in t.child_frame_id})

    probe.node.create_subscription(TFMessage, "/tf_static", on_static, STATIC_LISTENER)
    probe.node.create_subscription(
        TFMessage,
        "/tf",
        lambda m: moving.update({t.child_frame_id: t for t in m.transforms}),
        INTEROP_QOS["/tf"],
    )
    frames = probe.start(
        "frames",
        tmp_path,
        f"base_frame:={base}",
        f"mic_frame:=mic_{tag}",
        f"speaker_frame:=speaker_{tag}",
        f"camera_frame:=camera_{tag}",
        f"camera_optical_frame:=optical_{tag}",
    )
    probe.start(
        "sim_robot", tmp_path, f"base_frame:={base}", f"odom_frame:={odom}", f"map_frame:={world}"
    )
    want = {f"mic_{tag}", f"speaker_{tag}", f"camera_{tag}", f"optical_{tag}", odom}
    probe.wait_for(lambda: want <= set(static), START_S, lambda: f"static frames {set(static)}")
    probe.wait_for(lambda: base in moving, START_S, "odom -> base_link on /tf")
    assert static[f"mic_{tag}"].header.frame_id == base
    assert static[f"optical_{tag}"].header.frame_id == f"camera_{tag}"
    q = static[f"optical_{tag}"].transform.rotation
    np.testing.assert_allclose([q.x, q.y, q.z, q.w], [-0.5, 0.5, -0.5, 0.5], atol=1e-9)
    assert static[odom].header.frame_id == world  # map -> odom (REP-105)
    assert moving[base].header.frame_id == odom
    assert frames.proc.poll() is None, frames.log()


def test_every_node_status_has_an_aggregator_analyzer() -> None:
    analyzers = yaml.safe_load((ROOT / "config" / "diagnostics_analyzers.yaml").read_text())
    groups = analyzers["analyzers"]["ros__parameters"]
    patterns = [p for g in groups.values() if isinstance(g, dict) for p in g["contains"]]
    tasks = set()
    for path in (ROOT / "venus_ros" / "nodes").glob("*.py"):
        tasks |= set(re.findall(r'NodeDiagnostics\(\s*self,\s*"([^"]+)"', path.read_text()))
    assert {"microphone", "camera", "speaker", "foreground loop"} <= tasks
    for task in tasks:
        name = f"some_node: {task}"
        assert any(p in name for p in patterns), f"no analyzer for {name!r}"


def test_multi_channel_audio_chunks_are_down_mixed_or_one_channel_taken() -> None:
    frames = np.array([[100, 300], [-200, 0], [7, 8]], np.int16)
    msg = AudioChunk(
        sample_rate=16000,
        channels=2,
        encoding=AudioChunk.ENCODING_PCM_S16LE,
        data=frames.astype("<i2").tobytes(),
    )
    mixed, rate = audio_from_msg(msg)
    assert rate == 16000 and mixed.tolist() == [200, -100, 8]  # 7.5 rounds to even
    assert audio_from_msg(msg, channel=1)[0].tolist() == [300, 0, 8]
    msg.data = msg.data[:-2]  # half a frame
    with pytest.raises(InputError, match="2-channel"):
        audio_from_msg(msg)


def test_several_nodes_share_one_process_and_executor(tmp_path: Path) -> None:
    """Composition: node classes take Node's keyword arguments; one context, one executor."""
    wav = tmp_path / "one.wav"
    sf.write(str(wav), np.zeros(16000, np.int16), 16000, subtype="PCM_16")
    context = Context()
    rclpy.init(context=context)
    ns = f"/composed_{uuid.uuid4().hex[:8]}"
    mic = MicNode(
        context=context,
        namespace=ns,
        parameter_overrides=[Parameter("source", value=f"file:{wav}")],
    )
    frames = FramesNode(
        node_name="frames_a",
        context=context,
        namespace=ns,
        parameter_overrides=[Parameter("base_frame", value=f"base{ns.replace('/', '_')}")],
    )
    listener = rclpy.create_node("listener", namespace=ns, context=context)
    chunks: list[AudioChunk] = []
    static: list[TFMessage] = []
    listener.create_subscription(AudioChunk, TOPICS["audio_in"], chunks.append, SENSOR_AUDIO)
    listener.create_subscription(TFMessage, "/tf_static", static.append, STATIC_LISTENER)
    executor = SingleThreadedExecutor(context=context)
    for node in (mic, frames, listener):
        executor.add_node(node)
    try:
        mic.start_up()
        deadline = time.monotonic() + START_S
        mine = f"base{ns.replace('/', '_')}"
        while time.monotonic() < deadline and not (
            chunks and any(t.header.frame_id == mine for m in static for t in m.transforms)
        ):
            executor.spin_once(timeout_sec=0.1)
        assert chunks and chunks[0].header.frame_id == "mic_link"
        assert any(t.header.frame_id == mine for m in static for t in m.transforms)
    finally:
        mic.close()
        executor.shutdown()
        for node in (mic, frames, listener):
            node.destroy_node()
        rclpy.try_shutdown(context=context)
