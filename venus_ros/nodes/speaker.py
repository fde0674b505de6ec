"""The speaker node: plays ``audio/out`` and acknowledges exactly what it played.

Accounting follows :class:`venus_ros.core.playback.PlaybackQueue` on a monotonic session
clock: a chunk is queued when it arrives and plays back to back with the others in real time.
A timer every ``block_ms`` advances the queue, hands the newly played samples to the sink, and
publishes one ``PlaybackAck`` (cumulative ``samples_played`` of that chunk) on ``audio/played``
for every chunk that progressed. What the sink receives is always exactly what was acked.

- ``sink: device``: PyAudio plays the samples, written just in time, so a flush takes effect
  within one block; the sound reaches the air about ``block_ms`` plus the card's latency after
  its ack.
- ``sink: file:PATH``: the played samples are appended to a float WAV file, back to back (idle
  gaps are not recorded), finished when the node stops.

A ``UnitDecision`` with ``flush`` set discards the queue at once (acks with ``flushed``); chunks
of that unit or earlier that arrive afterwards are stale and dropped. Chunks at another rate
and malformed chunks (odd byte count, unknown encoding, empty, non-finite) are dropped with a
warning and counted; none of them stops the node.
"""

from __future__ import annotations

import sys
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticStatus
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.timer import Timer

from venus_interfaces.msg import AudioChunk, PlaybackAck as PlaybackAckMsg, UnitDecision
from venus_ros.audio.io import PyAudioPlayback, WavSink
from venus_ros.core.clock import Clock, MonotonicClock
from venus_ros.core.playback import PlaybackAck, PlaybackQueue, SpeechChunk
from venus_ros.core.units import InputError
from venus_ros.nodes.convert import ack_to_msg, audio_from_msg, to_float
from venus_ros.nodes.diagnostics import NodeDiagnostics
from venus_ros.nodes.managed import ManagedNode
from venus_ros.nodes.params import declare_config, reject_unknown_overrides, tunable
from venus_ros.nodes.qos import TOPICS, qos_for
from venus_ros.nodes.runtime import run_node

#: Seconds between two warnings about dropped chunks (every drop is counted).
WARN_EVERY_S = 1.0


@dataclass(frozen=True)
class SpeakerConfig:
    """Parameters of the speaker node."""

    sink: str = field(
        default="device",
        metadata={"help": '"device" (a sound card via PyAudio) or "file:PATH" (a float WAV file)'},
    )
    device: str = field(
        default="",
        metadata={"help": 'output device: "" = the default, a device index, or part of its name'},
    )
    sample_rate: int = field(
        default=24000, metadata={"help": "playback rate, Hz; chunks at another rate are dropped"}
    )
    block_ms: int = field(default=20, metadata={"help": "playback/ack period, ms (5..100)"})
    volume: float = tunable(
        1.0, "gain applied to what the sink plays (acks count samples)", 0.0, 2.0
    )

    def __post_init__(self) -> None:
        if self.sink != "device" and self.file_path is None:
            raise ValueError(f"sink must be 'device' or 'file:PATH', got {self.sink!r}")
        if not 8000 <= self.sample_rate <= 192000:
            raise ValueError(f"sample_rate must be in 8000..192000 Hz, got {self.sample_rate}")
        if not 5 <= self.block_ms <= 100:
            raise ValueError(f"block_ms must be in 5..100, got {self.block_ms}")
        if not 0.0 <= self.volume <= 2.0:
            raise ValueError(f"volume must be in 0..2, got {self.volume}")

    @property
    def file_path(self) -> str | None:
        """The path of a ``file:PATH`` sink, else None."""
        if self.sink.startswith("file:") and self.sink[5:].strip():
            return self.sink[5:].strip()
        return None


class SpeakerNode(ManagedNode):
    """Plays assistant speech and publishes what was played (while active).

    Configure opens the sink, activate starts playing, deactivate discards the queue (acked as
    flushed) and stops playing; chunks arriving while inactive are dropped and counted.

    Args:
        clock: the session clock (real monotonic time by default).
        node_name: the node's name.
        **kwargs: :class:`rclpy.node.Node` keyword arguments (``context``,
            ``parameter_overrides``...).

    Attributes:
        chunks: chunks accepted for playback.
        dropped: chunks dropped (malformed, wrong rate, stale after a flush, or inactive).
        flushes: flush decisions carried out.
        acks: acks published.
        samples_played: samples handed to the sink.
    """

    def __init__(
        self, clock: Clock | None = None, node_name: str = "speaker_node", **kwargs: Any
    ) -> None:
        super().__init__(node_name, **kwargs)
        self.config = declare_config(self, SpeakerConfig)
        reject_unknown_overrides(self, kwargs.get("parameter_overrides"))
        config = self.config
        self.chunks = 0
        self.dropped = 0
        self.flushes = 0
        self.acks = 0
        self.samples_played = 0
        self._session = clock if clock is not None else MonotonicClock()
        self._queue = PlaybackQueue(config.sample_rate, record=True)
        # (unit_index, first_sample) of each queued chunk, in queue order: acks come out of the
        # queue for its head chunk, and the head leaves once its ack is complete.
        self._queued: deque[tuple[int, int]] = deque()
        self._flushed_through: int | None = None
        self._lock = threading.Lock()  # callbacks against stop() and teardown()
        self._closed = True  # until setup() opened the sink
        self._sink: WavSink | PyAudioPlayback | None = None
        self._timer: Timer | None = None
        self._ack_pub = self.create_publisher(PlaybackAckMsg, TOPICS["played"], qos_for("played"))
        self._group = MutuallyExclusiveCallbackGroup()
        self.create_subscription(
            AudioChunk,
            TOPICS["audio_out"],
            self._on_chunk,
            qos_for("audio_out"),
            callback_group=self._group,
        )
        self.create_subscription(
            UnitDecision,
            TOPICS["decision"],
            self._on_decision,
            qos_for("decision"),
            callback_group=self._group,
        )
        self._diagnostics = NodeDiagnostics(
            self, "speaker", self._diagnose, rate_keys=("samples_played",)
        )

    # --- lifecycle -----------------------------------------------------------------------------

    def setup(self) -> None:
        """Open the sink (the WAV file, or the sound card)."""
        config = self.config
        path = config.file_path
        if path is not None:
            self._sink = WavSink(path, config.sample_rate, subtype="FLOAT")
        else:
            playback = PyAudioPlayback(config.device, config.sample_rate)
            playback.start()
            self._sink = playback
        with self._lock:
            self._closed = False
        self.get_logger().info(
            f"playing {TOPICS['audio_out']} at {config.sample_rate} Hz to "
            f"{path or (config.device or 'the default output device')}, "
            f"acks every {config.block_ms} ms"
        )

    def start(self) -> None:
        """Start the playback clock."""
        self._timer = self.create_timer(
            self.config.block_ms / 1000.0, self._on_tick, callback_group=self._group
        )

    def stop(self) -> None:
        """Discard what is queued (acked as flushed) and stop playing."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self.destroy_timer(self._timer)
                self._timer = None
            if not self._closed and self.context.ok():  # after Ctrl-C nobody can hear acks
                self._emit(self._queue.flush(self._session.now()))

    def teardown(self) -> None:
        """Finish the sink (idempotent)."""
        with self._lock:
            self._closed = True
            if self._sink is not None:
                self._sink.close()
                self._sink = None

    def _diagnose(self) -> tuple[bytes, str, dict[str, str]]:
        values = {
            "sink": self.config.sink,
            "chunks": str(self.chunks),
            "dropped": str(self.dropped),
            "flushes": str(self.flushes),
            "samples_played": str(self.samples_played),
            "volume": f"{self.config.volume:g}",
        }
        if not self.active:
            return DiagnosticStatus.OK, "inactive", values
        return DiagnosticStatus.OK, "playing", values

    # --- callbacks ---------------------------------------------------------------------------

    def _on_chunk(self, msg: AudioChunk) -> None:
        with self._lock:
            if self._closed or not self.active:
                if not self._closed:
                    self._drop(f"chunk for unit {msg.unit_index}: speaker inactive")
                return
            now = self._session.now()
            unit = int(msg.unit_index)
            if self._flushed_through is not None and unit <= self._flushed_through:
                self._drop(f"stale chunk for unit {unit} (flushed through {self._flushed_through})")
                return
            try:
                samples, rate = audio_from_msg(msg)
            except InputError as exc:
                self._drop(f"malformed chunk for unit {unit}: {exc}")
                return
            if rate != self.config.sample_rate:
                self._drop(
                    f"chunk for unit {unit} is {rate} Hz, the speaker plays "
                    f"{self.config.sample_rate} Hz"
                )
                return
            audio = to_float(samples)
            if not np.isfinite(audio).all():
                self._drop(f"chunk for unit {unit} has non-finite samples")
                return
            chunk = SpeechChunk(unit, 0, int(msg.first_sample), audio, rate, "")
            self._queue.enqueue(chunk, now)
            self._queued.append((unit, int(msg.first_sample)))
            self.chunks += 1

    def _on_decision(self, msg: UnitDecision) -> None:
        if not msg.flush:
            return
        with self._lock:
            if self._closed:
                return
            pending = self._queue.pending_samples
            acks = self._queue.flush(self._session.now())
            self._emit(acks)
            unit = int(msg.unit_index)
            if self._flushed_through is None or unit > self._flushed_through:
                self._flushed_through = unit
            self.flushes += 1
            discarded = sum(a.samples_total - a.samples_played for a in acks if a.flushed)
            self.get_logger().info(
                f"flush at unit {unit}: discarded {discarded} of {pending} queued samples"
            )

    def _on_tick(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._emit(self._queue.advance(self._session.now()))

    # --- helpers -----------------------------------------------------------------------------

    def _emit(self, acks: list[PlaybackAck]) -> None:
        """Send the newly played samples to the sink, then publish ``acks`` (lock held)."""
        pieces = [samples for _, samples in self._queue.played_audio]
        self._queue.played_audio.clear()
        if pieces:
            played = np.concatenate(pieces)
            if self._sink is not None:
                volume = self.config.volume
                self._sink.write(played if volume == 1.0 else played * np.float32(volume))
            self.samples_played += int(played.shape[0])
        if not acks:
            return
        stamp = self.get_clock().now().to_msg()
        for ack in acks:
            unit, first_sample = self._queued[0]
            if unit != ack.unit_index:  # a broken invariant, not bad input
                self.get_logger().error(f"ack for unit {ack.unit_index} but unit {unit} queued")
            if self.while_up(self._ack_pub.publish, ack_to_msg(ack, first_sample, stamp)):
                self.acks += 1
            if ack.complete:
                self._queued.popleft()

    def _drop(self, reason: str) -> None:
        self.dropped += 1
        self.get_logger().warning(
            f"dropped {reason} ({self.dropped} dropped so far)", throttle_duration_sec=WARN_EVERY_S
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the speaker node (console script ``speaker_node``)."""
    return run_node(SpeakerNode, argv)


if __name__ == "__main__":
    sys.exit(main())
