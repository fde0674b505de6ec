"""The mic and speaker nodes as real processes, driven and observed from a probe node here.

Each test gives its probe its own rclpy Context and executor and waits on conditions with
bounded deadlines. Node processes inherit the private ROS_DOMAIN_ID and the loopback-only
discovery set by conftest.py, and are always stopped with SIGINT (then killed on a timeout).
Every test also runs its nodes and probe in a namespace of its own (all venus topics are
relative), so a run that happens to share the domain with another one cannot cross-talk.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rclpy
import soundfile as sf
from rclpy.context import Context
from rclpy.parameter import Parameter
from rosproc import Probe, start_node

from venus_interfaces.msg import AudioChunk, PlaybackAck as PlaybackAckMsg, UnitDecision
from venus_ros.core.clock import FakeClock
from venus_ros.nodes.convert import audio_to_msg
from venus_ros.nodes.qos import SENSOR_AUDIO, TOPICS, reliable
from venus_ros.nodes.speaker import SpeakerNode

SPEAKER_RATE = 24000


# --- helpers ---------------------------------------------------------------------------------


# --- mic -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Received:
    t: float
    first_sample: int
    sample_rate: int
    encoding: str
    stamp_ns: int
    samples: np.ndarray


def test_mic_file_source_publishes_the_file_in_real_time(probe: Probe, tmp_path: Path) -> None:
    rate, chunk = 16000, 320
    audio = np.random.default_rng(2).integers(-20000, 20000, rate, dtype=np.int16)  # 1.0 s
    wav = tmp_path / "one_second.wav"
    sf.write(str(wav), audio, rate, subtype="PCM_16")
    received: list[Received] = []

    def on_chunk(msg: AudioChunk) -> None:
        received.append(
            Received(
                time.monotonic(),
                int(msg.first_sample),
                int(msg.sample_rate),
                msg.encoding,
                msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec,
                np.frombuffer(bytes(msg.data), dtype="<i2"),
            )
        )

    probe.node.create_subscription(AudioChunk, TOPICS["audio_in"], on_chunk, SENSOR_AUDIO)
    mic = start_node(
        "mic",
        tmp_path,
        f"source:=file:{wav}",
        "chunk_ms:=20",
        "after_end:=stop",
        namespace=probe.namespace,
    )
    probe.watched.append(mic)
    try:
        last = rate - chunk
        probe.wait_for(lambda: bool(received) and received[-1].first_sample >= last, 10, "the end")
        assert mic.stop() == 0, mic.err()
    finally:
        mic.stop()

    starts = [r.first_sample for r in received]
    print(f"mic: {len(received)}/50 chunks, span {received[-1].t - received[0].t:.3f} s")
    assert starts == sorted(set(starts)), "chunks out of order or repeated"
    assert all(s % chunk == 0 for s in starts)
    assert all(r.samples.shape == (chunk,) for r in received)
    assert {(r.sample_rate, r.encoding) for r in received} == {(rate, "pcm_s16le")}
    assert sum(r.samples.shape[0] for r in received) >= 0.95 * rate
    for r in received:
        np.testing.assert_array_equal(r.samples, audio[r.first_sample : r.first_sample + chunk])
        # header.stamp is the capture time of the first sample: exactly first_sample / rate apart
        expected = received[0].stamp_ns + (r.first_sample - starts[0]) * 10**9 // rate
        assert abs(r.stamp_ns - expected) <= 1
    # paced in real time, not sent as a burst
    span = received[-1].t - received[0].t
    assert 0.7 <= span <= 2.0, f"{len(received)} chunks arrived over {span:.3f} s"


def test_a_file_mic_waits_for_all_its_listeners(probe: Probe, tmp_path: Path) -> None:
    """``wait_for_subscribers:=2``: one listener gets nothing, the second starts the file at 0."""
    rate = 16000
    wav = tmp_path / "one_second.wav"
    sf.write(str(wav), np.full(rate, 1000, np.int16), rate, subtype="PCM_16")
    first: list[int] = []
    second: list[int] = []
    topic = TOPICS["audio_in"]
    probe.node.create_subscription(
        AudioChunk, topic, lambda m: first.append(int(m.first_sample)), SENSOR_AUDIO
    )
    mic = start_node(
        "mic",
        tmp_path,
        f"source:=file:{wav}",
        "wait_for_subscribers:=2",
        "after_end:=stop",
        namespace=probe.namespace,
    )
    probe.watched.append(mic)
    try:
        probe.wait_for(lambda: probe.node.count_publishers(topic) > 0, 20, "the mic's publisher")
        probe.spin_for(1.5)  # well past the 0.1 s grace after a match
        assert first == [], "the file started with one of its two listeners"
        probe.node.create_subscription(
            AudioChunk, topic, lambda m: second.append(int(m.first_sample)), SENSOR_AUDIO
        )
        probe.wait_for(lambda: bool(second) and bool(first), 10, "audio on both subscriptions")
        assert first[0] == 0 and second[0] == 0, (first[:3], second[:3])
    finally:
        mic.stop()


@pytest.mark.parametrize(
    ("module", "params"),
    [
        ("mic", ("source:=device", "device:=no-such-sound-card")),
        ("speaker", ("sink:=device", "device:=no-such-sound-card")),
    ],
)
def test_missing_sound_card_is_one_line_and_exit_1(
    module: str, params: tuple[str, ...], tmp_path: Path
) -> None:
    node = start_node(module, tmp_path, *params)
    try:
        code = node.proc.wait(timeout=20)
    finally:
        node.stop()
    lines = [line for line in node.err().splitlines() if line.strip()]
    assert code == 1, node.err()
    assert len(lines) == 1, f"expected one line on stderr, got:\n{node.err()}"
    assert lines[0].startswith("device error: ") and "no-such-sound-card" in lines[0]
    assert "file:" in lines[0] and "Traceback" not in lines[0]


@pytest.mark.parametrize("module", ["mic", "speaker"])
def test_unknown_parameter_is_a_configuration_error(module: str, tmp_path: Path) -> None:
    node = start_node(module, tmp_path, "sourse:=x")
    try:
        code = node.proc.wait(timeout=20)
    finally:
        node.stop()
    assert code == 2, node.err()
    assert "configuration error" in node.err() and "sourse" in node.err()


# --- speaker ---------------------------------------------------------------------------------


def speech(unit: int, samples: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-0.8, 0.8, samples).astype(np.float32)


class SpeakerDriver:
    """Publishes speech and decisions to the speaker and collects its acks."""

    def __init__(self, probe: Probe) -> None:
        self.probe = probe
        node = probe.node
        self.audio_pub = node.create_publisher(AudioChunk, TOPICS["audio_out"], reliable(50))
        self.decision_pub = node.create_publisher(UnitDecision, TOPICS["decision"], reliable(50))
        self.acks: list[PlaybackAckMsg] = []
        self.ack_sub = node.create_subscription(
            PlaybackAckMsg, TOPICS["played"], self.acks.append, reliable(100)
        )
        self.first_sample = 0

    def connected(self) -> bool:
        """All three endpoints matched here (not just seen in the graph: acks the speaker sends
        before our reader has matched its writer are lost, and units 1-3 never look done)."""
        return (
            self.audio_pub.get_subscription_count() > 0
            and self.decision_pub.get_subscription_count() > 0
            and self.ack_sub.get_publisher_count() > 0
        )

    def handshake(self, timeout: float = 15.0) -> np.ndarray:
        """Short chunks of unit 0 until one is acknowledged complete; returns all it sent.

        Our reader having matched the speaker's ack writer does not mean that writer has
        matched our reader yet (discovery is not symmetric in time): acks it sends before then
        are lost. Once one ack has come back, none is lost. The chunks are all played.
        """
        sent: list[np.ndarray] = []
        deadline = time.monotonic() + timeout
        while not self.done(0):
            assert time.monotonic() < deadline, f"no ack from the speaker in {timeout} s"
            sent.append(speech(0, SPEAKER_RATE // 50, len(sent)))
            self.send(0, sent[-1])
            settle = time.monotonic() + 1.0
            while not self.done(0) and time.monotonic() < settle:
                self.probe.spin_for(0.05)
        return np.concatenate(sent)

    def send(self, unit: int, audio: np.ndarray, rate: int = SPEAKER_RATE) -> None:
        stamp = self.probe.node.get_clock().now().to_msg()
        self.audio_pub.publish(audio_to_msg(audio, rate, self.first_sample, stamp, "", unit))
        self.first_sample += audio.shape[0]

    def send_raw(self, msg: AudioChunk) -> None:
        self.audio_pub.publish(msg)

    def flush(self, unit: int) -> None:
        msg = UnitDecision(unit_index=unit, decision=UnitDecision.LISTEN, end_of_turn=True)
        msg.flush = True
        self.decision_pub.publish(msg)

    def of(self, unit: int) -> list[PlaybackAckMsg]:
        return [a for a in self.acks if a.unit_index == unit]

    def done(self, unit: int) -> bool:
        return any(a.flushed or a.samples_played == a.samples_total for a in self.of(unit))


def test_speaker_plays_acks_flushes_and_writes_exactly_what_it_played(
    probe: Probe, tmp_path: Path
) -> None:
    out = tmp_path / "played.wav"
    driver = SpeakerDriver(probe)
    speaker = start_node(
        "speaker", tmp_path, f"sink:=file:{out}", "block_ms:=20", namespace=probe.namespace
    )
    probe.watched.append(speaker)
    try:
        probe.wait_for(driver.connected, 15, "the speaker's topics to connect")
        warm_up = driver.handshake()

        # Three 0.2 s chunks play back to back in real time, each acked up to its total.
        parts = {unit: speech(unit, 4800, unit) for unit in (1, 2, 3)}
        starts = {}
        t0 = time.monotonic()
        for unit, audio in parts.items():
            starts[unit] = driver.first_sample
            driver.send(unit, audio)
        probe.wait_for(lambda: all(driver.done(u) for u in parts), 10, "units 1-3 to play")
        elapsed = time.monotonic() - t0
        assert elapsed >= 0.55, f"0.6 s of audio acked complete after {elapsed:.3f} s"
        for unit in parts:
            acks = driver.of(unit)
            played = [a.samples_played for a in acks]
            assert played == sorted(played) and played[-1] == 4800
            assert {(a.samples_total, a.first_sample, a.flushed) for a in acks} == {
                (4800, starts[unit], False)
            }

        # A long chunk cut short by a flush: the flushed ack says how much was heard.
        long_audio = speech(4, 2 * SPEAKER_RATE, 4)
        driver.send(4, long_audio)
        probe.wait_for(lambda: any(a.samples_played > 0 for a in driver.of(4)), 5, "unit 4")
        driver.flush(4)
        probe.wait_for(lambda: driver.done(4), 5, "the flushed ack of unit 4")
        flushed = driver.of(4)[-1]
        assert flushed.flushed and 0 < flushed.samples_played < flushed.samples_total == 48000
        acks_for_4 = len(driver.of(4))

        # Stale speech of the flushed unit is dropped; the next unit plays.
        driver.send(4, speech(4, 2400, 40))
        driver.send(5, part5 := speech(5, 2400, 5))
        probe.wait_for(lambda: driver.done(5), 5, "unit 5 to play")

        # A malformed chunk and one at the wrong rate are dropped; the speaker keeps working.
        bad = audio_to_msg(
            speech(6, 100, 6), SPEAKER_RATE, 0, driver.probe.node.get_clock().now().to_msg(), "", 6
        )
        bad.data = bytes(bad.data)[:7]
        driver.send_raw(bad)
        driver.send(7, speech(7, 1600, 7), rate=16000)
        driver.send(8, part8 := speech(8, 2400, 8))
        probe.wait_for(lambda: driver.done(8), 5, "unit 8 to play")
        assert len(driver.of(4)) == acks_for_4, "stale unit-4 audio was played"
        assert driver.of(6) == [] and driver.of(7) == []

        assert speaker.stop() == 0, speaker.err()
    finally:
        speaker.stop()

    assert "dropped" in speaker.err()
    data, rate = sf.read(str(out), dtype="float32")
    assert rate == SPEAKER_RATE
    heard = flushed.samples_played
    np.testing.assert_array_equal(data[: warm_up.size], warm_up)  # (some of its acks were lost)
    data = data[warm_up.size :]
    expected = np.concatenate([*parts.values(), long_audio[:heard], part5, part8])
    final = {}
    for ack in driver.acks:
        if ack.unit_index != 0:
            final[(ack.unit_index, ack.first_sample)] = ack.samples_played
    assert data.shape[0] == sum(final.values()) == expected.shape[0]
    np.testing.assert_array_equal(data, expected)
    print(f"speaker: {len(driver.acks)} acks; unit 4 flushed after {heard}/48000 samples")


# --- speaker accounting on a fake clock (in process, no spinning) ----------------------------


def speaker_in_process(out: Path) -> tuple[Context, FakeClock, SpeakerNode]:
    """A speaker node writing to ``out`` on a fake clock, in its own context (not spun)."""
    context = Context()
    rclpy.init(context=context)
    clock = FakeClock()
    node = SpeakerNode(
        clock=clock,
        context=context,
        parameter_overrides=[Parameter("sink", value=f"file:{out}")],
    )
    return context, clock, node


def test_speaker_counters_on_a_fake_clock(tmp_path: Path) -> None:
    out = tmp_path / "fake.wav"
    context, clock, node = speaker_in_process(out)
    acks: list[Any] = []
    node._ack_pub.publish = acks.append  # type: ignore[method-assign]
    try:
        node.start_up()  # configure (open the sink), activate
        stamp = node.get_clock().now().to_msg()
        one = speech(1, 2400, 1)
        node._on_chunk(audio_to_msg(one, SPEAKER_RATE, 100, stamp, "", 1))
        node._on_chunk(audio_to_msg(one, 16000, 0, stamp, "", 2))  # wrong rate
        empty = audio_to_msg(one[:0], SPEAKER_RATE, 0, stamp, "", 3)
        node._on_chunk(empty)  # empty
        clock.advance(0.05)  # 1200 samples due
        node._on_tick()
        assert [(a.unit_index, a.first_sample, a.samples_played) for a in acks] == [(1, 100, 1200)]
        node._on_decision(UnitDecision(unit_index=1, flush=True))
        assert acks[-1].flushed and acks[-1].samples_played == 1200
        node._on_chunk(audio_to_msg(one, SPEAKER_RATE, 0, stamp, "", 1))  # stale
        node._on_chunk(audio_to_msg(one, SPEAKER_RATE, 2400, stamp, "", 4))
        clock.advance(1.0)
        node._on_tick()
        assert (acks[-1].unit_index, acks[-1].samples_played) == (4, 2400)
        assert (node.chunks, node.dropped, node.flushes) == (2, 3, 1)
        assert node.samples_played == 3600
    finally:
        node.close()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
    data, _ = sf.read(str(out), dtype="float32")
    np.testing.assert_array_equal(data, np.concatenate([one[:1200], one]))


def test_a_speaker_stopped_as_the_signal_shuts_rclpy_down_still_finishes_its_file(
    tmp_path: Path,
) -> None:
    """Ctrl-C shuts the context down on rclpy's signal thread, so it can land between the
    speaker's check of the context and its last (flushed) ack: the process must still close
    cleanly, with what was played written to the file (CI saw exit 1 from this race)."""
    out = tmp_path / "race.wav"
    context, clock, node = speaker_in_process(out)
    publish = node._ack_pub.publish
    shut_down: list[bool] = []

    def signal_lands_first(msg: Any) -> None:
        if msg.flushed:  # the flush at stop: the signal thread wins the race
            rclpy.try_shutdown(context=context)
            shut_down.append(True)
        publish(msg)

    node._ack_pub.publish = signal_lands_first  # type: ignore[method-assign]
    try:
        node.start_up()
        one = speech(1, 2400, 1)
        node._on_chunk(audio_to_msg(one, SPEAKER_RATE, 0, node.get_clock().now().to_msg(), "", 1))
        clock.advance(0.05)
        node._on_tick()  # 1200 samples played and acked
        node.close()  # the rest is flushed (acked as such) as the context goes down
        assert shut_down == [True] and node.acks == 1
    finally:
        node.destroy_node()
        rclpy.try_shutdown(context=context)
    data, _ = sf.read(str(out), dtype="float32")
    np.testing.assert_array_equal(data, one[:1200])
