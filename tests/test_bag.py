"""Session bags: writing and reading rosbag2/mcap with rosbags, recording a live graph with
recorder_node (a separate process, stopped with Ctrl-C), and replaying the bag into the graph."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message, serialize_message
from rosbags.rosbag2 import Reader
from rosproc import ROOT, Probe, start_node
from sensor_msgs.msg import Image
from std_msgs.msg import Header, String
from visualization_msgs.msg import Marker, MarkerArray

from venus_interfaces.msg import (
    AudioChunk,
    BackendReply,
    PlaybackAck,
    TaskStatus,
    TimelineEvent,
    UnitDecision,
)
from venus_ros.bag import (
    RECORDED_TOPICS,
    BagError,
    BagWriter,
    interface_share_dir,
    message_class,
    read_bag,
    summary,
    typestore,
)
from venus_ros.nodes import qos
from venus_ros.nodes.bag_replay import replay_bag
from venus_ros.nodes.recorder import GRAPH_QOS, graph_name, recording_qos


def _audio(i: int) -> AudioChunk:
    return AudioChunk(
        header=Header(frame_id="mic0"),
        sample_rate=16000,
        channels=1,
        encoding=AudioChunk.ENCODING_PCM_S16LE,
        first_sample=i * 1600,
        data=bytes((i * 7 + k) % 256 for k in range(3200)),
    )


def _decision(i: int) -> UnitDecision:
    return UnitDecision(
        unit_index=i,
        decision=UnitDecision.SPEAK if i % 2 else UnitDecision.LISTEN,
        end_of_turn=i == 2,
        flush=i == 1,
        compute_time=0.125 * i,  # float32-exact
        unit_duration=0.25,
    )


def _event(i: int) -> TimelineEvent:
    return TimelineEvent(seq=i, t=0.25 * i, kind="user_speech", payload_json=f'{{"i": {i}}}')


def _image(i: int) -> Image:
    return Image(
        header=Header(frame_id="cam"),
        height=2,
        width=4,
        encoding="rgb8",
        step=12,
        data=bytes((i + k) % 256 for k in range(24)),
    )


def _all_kinds() -> list[tuple[str, Any]]:
    """One message of every recorded type, on its topic."""
    return [
        ("/audio/in", _audio(1)),
        ("/image", _image(1)),
        ("/audio/out", _audio(2)),
        ("/decision", _decision(1)),
        (
            "/audio/played",
            PlaybackAck(unit_index=3, samples_played=100, samples_total=4000, flushed=True),
        ),
        ("/transcript", String(data="Hello — wie geht's?")),
        ("/timeline", _event(7)),
        (
            "/backend_reply",
            BackendReply(task_id="t1", session_id="s", turn_id=2, text="It is 5 pm.", topic="x"),
        ),
        ("/task_status", TaskStatus(task_id="t1", tool="clock", state="RUNNING", progress=0.5)),
        ("/markers", MarkerArray(markers=[Marker(ns="venus", id=3, text="SPEAK")])),
        (
            "/diagnostics",
            DiagnosticArray(
                status=[
                    DiagnosticStatus(
                        level=DiagnosticStatus.WARN,
                        name="frontend",
                        message="behind",
                        values=[KeyValue(key="debt", value="0.3")],
                    )
                ]
            ),
        ),
    ]


def _type_name(msg: Any) -> str:
    module = type(msg).__module__.split(".")[0]
    return f"{module}/msg/{type(msg).__name__}"


# --------------------------------------------------------------------------------------------
# Pure: BagWriter / read_bag / summary
# --------------------------------------------------------------------------------------------


def test_topics_match_the_documented_graph() -> None:
    rows = re.findall(r"^\| `([^`]+)` \| `([^`]+)`", (ROOT / "docs" / "ros.md").read_text(), re.M)
    documented = {
        name: "{}/msg/{}".format(*typ.split(" ")[0].split("/"))
        for name, typ in rows
        if "/action/" not in typ
    }
    assert dict(RECORDED_TOPICS) == documented
    assert set(RECORDED_TOPICS) == set(qos.TOPICS.values()) - {"delegate"}
    assert set(GRAPH_QOS) == set(RECORDED_TOPICS)
    for name, msgtype in RECORDED_TOPICS.items():
        assert message_class(msgtype).__name__ == msgtype.rsplit("/", 1)[1]
        assert msgtype in typestore().fielddefs
        # The recorder's subscription is compatible with the documented publisher.
        sub, pub = recording_qos(name), GRAPH_QOS[name]
        if pub.reliability == ReliabilityPolicy.BEST_EFFORT:
            assert sub.reliability == ReliabilityPolicy.BEST_EFFORT
        assert sub.durability == pub.durability
    assert graph_name("/robot1/audio/in") == "audio/in"
    assert graph_name("/diagnostics") == "/diagnostics"
    assert graph_name("/elsewhere/unknown") is None


def test_custom_type_hashes_equal_rosidl() -> None:
    """The typestore's definitions of our types are the generated ones (same RIHS01 hash)."""
    for name in ("AudioChunk", "UnitDecision", "TimelineEvent", "PlaybackAck", "TaskStatus"):
        expected = _rosidl_hash(name)
        assert typestore().hash_rihs01(f"venus_interfaces/msg/{name}") == expected


def _rosidl_hash(name: str) -> str:
    data = json.loads((interface_share_dir() / "msg" / f"{name}.json").read_text())
    full = f"venus_interfaces/msg/{name}"
    return next(h["hash_string"] for h in data["type_hashes"] if h["type_name"] == full)


def test_write_read_roundtrip(tmp_path: Path) -> None:
    messages = [*_all_kinds(), ("/audio/in", _audio(2)), ("/timeline", _event(8))]
    # serialize_message leaves CDR alignment padding uninitialized (two serializations of one
    # message can differ in those bytes): compare with the bytes actually written.
    raws = [serialize_message(msg) for _, msg in messages]
    t0 = 1_700_000_000_000_000_000
    with BagWriter(tmp_path / "bag") as bag:
        for k, ((topic, msg), raw) in enumerate(zip(messages, raws, strict=True)):
            bag.add(topic, _type_name(msg), raw, t0 + k * 1_000_000)
    assert bag.closed

    got = list(read_bag(tmp_path / "bag"))
    assert [(t, ty) for t, ty, _, _ in got] == [(t, _type_name(m)) for t, m in messages]
    assert [ts for _, _, _, ts in got] == [t0 + k * 1_000_000 for k in range(len(messages))]
    assert [raw for _, _, raw, _ in got] == raws
    for (_, msgtype, raw, _), (_, msg) in zip(got, messages, strict=True):
        assert deserialize_message(raw, message_class(msgtype)) == msg

    counts = summary(tmp_path / "bag")
    assert counts == {
        **{t: 1 for t, _ in _all_kinds()},
        "/audio/in": 2,
        "/timeline": 2,
    }
    only = list(read_bag(tmp_path / "bag", topics=["audio/in"]))
    assert [deserialize_message(r, AudioChunk) for _, _, r, _ in only] == [_audio(1), _audio(2)]


def test_bag_is_mcap_readable_by_rosbags(tmp_path: Path) -> None:
    messages = _all_kinds()
    with BagWriter(tmp_path / "s1") as bag:
        for k, (topic, msg) in enumerate(messages):
            bag.add(topic, _type_name(msg), serialize_message(msg), 1_000 + k)
    mcap = tmp_path / "s1" / "s1.mcap"
    assert mcap.read_bytes()[:8] == b"\x89MCAP0\r\n"
    assert "storage_identifier: mcap" in (tmp_path / "s1" / "metadata.yaml").read_text()

    # The mcap file alone (no metadata.yaml) opens, and rosbags decodes our custom types from
    # the definitions stored in the bag.
    with Reader(mcap) as reader:
        assert reader.message_count == len(messages)
        store = typestore()
        decoded = {
            conn.topic: store.deserialize_cdr(raw, conn.msgtype)
            for conn, _, raw in reader.messages()
        }
    audio = decoded["/audio/in"]
    assert bytes(audio.data) == bytes(_audio(1).data)
    assert audio.encoding == "pcm_s16le" and audio.first_sample == 1600
    assert decoded["/decision"].flush is True
    assert decoded["/timeline"].payload_json == '{"i": 7}'
    assert decoded["/markers"].markers[0].text == "SPEAK"


def test_writer_refuses_existing_path_and_unknown_type(tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    with pytest.raises(BagError, match="exists"):
        BagWriter(tmp_path / "taken")
    with BagWriter(tmp_path / "b") as bag, pytest.raises(BagError, match="unknown message type"):
        bag.add("/x", "nope_msgs/msg/Nope", b"\x00\x01\x00\x00", 1)
    assert summary(tmp_path / "b") == {}
    with pytest.raises(BagError, match="no bag"):
        list(read_bag(tmp_path / "missing"))


def test_bag_module_does_not_import_rclpy() -> None:
    code = "import sys, venus_ros.bag as b; b.typestore(); print('rclpy' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "False"


# --------------------------------------------------------------------------------------------
# Cross-process: recorder_node records a live graph; bag_replay republishes it
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ros(module_probe: Probe) -> Iterator[Probe]:
    """The module's probe, spun on a thread of its own (replay_bag blocks this one). The
    recorder, the test's topics and the replayed ones are in its namespace: nothing else in this
    domain lands in the bag, and resolved names (/test_…/audio/in) get exercised."""
    with module_probe.spinning():
        yield module_probe


#: topic → (QoS the graph publishes with, messages sent).
SENT: dict[str, tuple[QoSProfile, list[Any]]] = {
    "audio/in": (qos.SENSOR_AUDIO, [_audio(i) for i in range(4)]),
    "decision": (qos.reliable(50), [_decision(i) for i in range(3)]),
    "timeline": (qos.reliable(1000), [_event(i) for i in range(3)]),
    "camera/image_raw": (qos.SENSOR_IMAGE, [_image(i) for i in range(2)]),
}


@pytest.fixture(scope="module")
def recorded(ros: Probe, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Run recorder_node, publish SENT from this process, Ctrl-C it; the bag and its output."""
    ns = ros.namespace
    tmp = tmp_path_factory.mktemp("rec")
    bag = tmp / "session"
    debug = ("--log-level", f"{ns.strip('/')}.recorder_node:=debug")
    recorder = ros.start("recorder", tmp, f"path:={bag}", ros_args=debug)
    publishers = {}
    try:
        for topic, (profile, msgs) in SENT.items():
            publishers[topic] = ros.node.create_publisher(type(msgs[0]), topic, profile)
        ros.wait_for(
            lambda: all(p.get_subscription_count() > 0 for p in publishers.values()),
            15.0,
            "the recorder to subscribe",
        )
        # Discovery is asymmetric: our publishers may see the recorder's subscriptions before
        # those see them, and best-effort messages sent in between are dropped. Wait for the
        # recorder's side too (its matched events).
        matched = [f"publisher matched on {ns}/{t} " for t in SENT]
        ros.wait_for_log(recorder, *matched, timeout=10.0, what="the recorder to match us")
        sent_at = time.monotonic()
        for k in range(max(len(m) for _, m in SENT.values())):
            for topic, (_, msgs) in SENT.items():
                if k < len(msgs):
                    publishers[topic].publish(msgs[k])
                    time.sleep(0.01)
        span = time.monotonic() - sent_at
        every = [f"recorded {ns}/{t} #{len(m)} " for t, (_, m) in SENT.items()]
        ros.wait_for_log(recorder, *every, timeout=10.0, what="all messages to be recorded")
        rc = recorder.stop()
        return {"bag": bag, "rc": rc, "log": recorder.log(), "span": span, "ns": ns}
    finally:
        for pub in publishers.values():
            ros.node.destroy_publisher(pub)
        recorder.stop()


def test_recorder_records_live_topics(recorded: dict[str, Any]) -> None:
    assert recorded["rc"] == 0, recorded["log"]
    total = sum(len(m) for _, m in SENT.values())
    assert f"{total} messages" in recorded["log"]
    ns = recorded["ns"]
    assert summary(recorded["bag"]) == {f"{ns}/{t}": len(m) for t, (_, m) in SENT.items()}
    got: dict[str, list[Any]] = {}
    stamps = []
    for topic, msgtype, raw, t_ns in read_bag(recorded["bag"]):
        got.setdefault(topic, []).append(deserialize_message(raw, message_class(msgtype)))
        stamps.append(t_ns)
    assert got == {f"{ns}/{t}": m for t, (_, m) in SENT.items()}
    # Receive times, on the wall clock, in order.
    assert stamps == sorted(stamps)
    assert abs(stamps[0] / 1e9 - time.time()) < 120


def test_recorder_rejects_unknown_topic(tmp_path: Path) -> None:
    recorder = start_node(
        "recorder", tmp_path, f"path:={tmp_path / 'b'}", "topics:=[audio/in, nope]"
    )
    code = recorder.wait(30)
    assert code == 2, recorder.err()
    assert "configuration error" in recorder.err() and "'nope'" in recorder.err()
    assert not (tmp_path / "b").exists()


def test_replay_republishes_in_order(ros: Probe, recorded: dict[str, Any]) -> None:
    received: dict[str, list[Any]] = {t: [] for t in SENT}
    arrivals: list[float] = []
    lock = threading.Lock()
    subs = []
    for topic, (profile, msgs) in SENT.items():
        sub_qos = QoSProfile(depth=100, reliability=profile.reliability)

        def keep(msg: Any, topic: str = topic) -> None:
            with lock:
                received[topic].append(msg)
                arrivals.append(time.monotonic())

        subs.append(ros.node.create_subscription(type(msgs[0]), topic, keep, sub_qos))
    try:
        count = replay_bag(str(recorded["bag"]), rate=1.0, wait_for_subscribers=10.0)
        total = sum(len(m) for _, m in SENT.values())
        assert count == total

        def complete() -> bool:
            with lock:
                return all(len(received[t]) >= len(m) for t, (_, m) in SENT.items())

        ros.wait_for(complete, 5.0, lambda: f"every message replayed, got {received}")
        with lock:
            assert received == {t: m for t, (_, m) in SENT.items()}
        # Original timing (rate 1): the messages arrive spread over the recorded span.
        stamps = [t for _, _, _, t in read_bag(recorded["bag"])]
        recorded_span = (stamps[-1] - stamps[0]) / 1e9
        assert arrivals[-1] - arrivals[0] >= 0.7 * recorded_span
    finally:
        for sub in subs:
            ros.node.destroy_subscription(sub)


def test_replay_rate_zero_and_topic_filter(ros: Probe, recorded: dict[str, Any]) -> None:
    got: list[TimelineEvent] = []
    sub = ros.node.create_subscription(TimelineEvent, "timeline", got.append, qos.reliable(100))
    try:
        count = replay_bag(
            str(recorded["bag"]), rate=0.0, topics=["timeline"], wait_for_subscribers=10.0
        )
        assert count == len(SENT["timeline"][1])
        ros.wait_for(lambda: len(got) >= count, 5.0, "the replayed timeline")
        assert got == SENT["timeline"][1]
    finally:
        ros.node.destroy_subscription(sub)
    with pytest.raises(ValueError, match="rate"):
        replay_bag(str(recorded["bag"]), rate=-1.0)
    with pytest.raises(BagError):
        replay_bag(str(recorded["bag"]) + "_missing")
