"""The microphone node: a sound card or a sound file, published as AudioChunk on ``audio/in``.

Chunks are mono pcm_s16le at ``sample_rate`` with contiguous ``first_sample`` (counted from the
start of the stream); ``header.stamp`` is the capture time of the chunk's first sample.

- ``source: device``: PyAudio captures from ``device`` and publishes from PortAudio's callback
  thread, one chunk per ``chunk_ms`` as the card delivers them.
- ``source: file:PATH``: the file (any mono format libsndfile reads, resampled to
  ``sample_rate`` if needed) is played in real time by a timer at the chunk period. Each tick
  publishes every chunk that is due by the monotonic clock, so timer jitter never changes the
  average rate. Playing starts shortly (``MATCH_GRACE_S``) after ``wait_for_subscribers``
  subscribers (default 1) have matched on ``audio/in``, so the start of a replay is not lost to
  discovery (a graph where a recorder and the frontend both listen sets 2: starting at the
  first match lost the frontend the session's first word). After the end it
  publishes silence (``after_end: silence``, like a real microphone) or nothing more
  (``after_end: stop``; the node stays up).

A missing sound card ends the process with one ``device error: ...`` line and exit code 1.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticStatus
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.duration import Duration
from rclpy.qos_overriding_options import QoSOverridingOptions
from rclpy.timer import Timer

from venus_interfaces.msg import AudioChunk
from venus_ros.audio.io import AFTER_END, AudioBlock, PyAudioCapture, WavSource
from venus_ros.nodes.convert import audio_to_msg
from venus_ros.nodes.diagnostics import NodeDiagnostics
from venus_ros.nodes.managed import ManagedNode
from venus_ros.nodes.params import declare_config, reject_unknown_overrides
from venus_ros.nodes.qos import TOPICS, qos_for
from venus_ros.nodes.runtime import run_node

#: Delay between the first subscriber appearing and the file starting: the publisher sees the
#: match a moment before the subscriber does, and best-effort data sent in between is lost.
MATCH_GRACE_S = 0.1
#: Most audio one timer tick publishes when it has fallen behind (the rest follows next tick).
MAX_CATCH_UP_S = 1.0


@dataclass(frozen=True)
class MicConfig:
    """Parameters of the mic node."""

    source: str = field(
        default="device",
        metadata={"help": '"device" (a sound card via PyAudio) or "file:PATH" (a mono sound file)'},
    )
    device: str = field(
        default="",
        metadata={"help": 'input device: "" = the default, a device index, or part of its name'},
    )
    sample_rate: int = field(
        default=16000, metadata={"help": "published sample rate, Hz (files are resampled)"}
    )
    chunk_ms: int = field(default=20, metadata={"help": "chunk duration, ms (20..100)"})
    after_end: str = field(
        default="silence",
        metadata={"help": 'file source after its end: "silence" (keep publishing) or "stop"'},
    )
    frame_id: str = field(default="mic_link", metadata={"help": "header.frame_id of the chunks"})
    wait_for_subscribers: int = field(
        default=1,
        metadata={"help": "file source: start once this many subscribers matched (1..16)"},
    )

    def __post_init__(self) -> None:
        if self.source != "device" and self.file_path is None:
            raise ValueError(f"source must be 'device' or 'file:PATH', got {self.source!r}")
        if not 20 <= self.chunk_ms <= 100:
            raise ValueError(f"chunk_ms must be in 20..100, got {self.chunk_ms}")
        if not 8000 <= self.sample_rate <= 192000:
            raise ValueError(f"sample_rate must be in 8000..192000 Hz, got {self.sample_rate}")
        if not 1 <= self.wait_for_subscribers <= 16:
            raise ValueError(
                f"wait_for_subscribers must be in 1..16, got {self.wait_for_subscribers}"
            )
        if self.after_end not in AFTER_END:
            raise ValueError(
                f"after_end must be one of {', '.join(AFTER_END)}, got {self.after_end!r}"
            )

    @property
    def file_path(self) -> str | None:
        """The path of a ``file:PATH`` source, else None."""
        if self.source.startswith("file:") and self.source[5:].strip():
            return self.source[5:].strip()
        return None


class MicNode(ManagedNode):
    """Publishes microphone (or file) audio on ``audio/in`` while active.

    Configure opens the file or the sound card, activate starts publishing, deactivate stops
    it (a device stays open; what it captures meanwhile is discarded). ``first_sample`` stays
    contiguous across a pause.

    Args:
        node_name: the node's name.
        **kwargs: :class:`rclpy.node.Node` keyword arguments (``context``,
            ``parameter_overrides``...).

    Attributes:
        chunks_published: chunks sent so far.
    """

    def __init__(self, node_name: str = "mic_node", **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        self.config = declare_config(self, MicConfig)
        reject_unknown_overrides(self, kwargs.get("parameter_overrides"))
        self.chunks_published = 0
        self._lock = threading.Lock()  # the timer tick and the capture thread against stop()
        self._publisher = self.create_lifecycle_publisher(
            AudioChunk,
            TOPICS["audio_in"],
            qos_for("audio_in"),
            qos_overriding_options=QoSOverridingOptions.with_default_policies(),
        )
        self._source: WavSource | None = None
        self._capture: PyAudioCapture | None = None
        self._timer: Timer | None = None
        self._next_sample = 0  # first_sample of the next chunk published
        self._chunk_s = self.config.chunk_ms / 1000.0
        self._diagnostics = NodeDiagnostics(self, "microphone", self._diagnose)

    # --- lifecycle -----------------------------------------------------------------------------

    def setup(self) -> None:
        """Open the file source or the sound card."""
        config = self.config
        path = config.file_path
        if path is not None:
            self._source = WavSource(
                path, config.chunk_ms, config.after_end, "int16", config.sample_rate
            )
            self._chunk_s = self._source.chunk_samples / config.sample_rate
            self._max_catch_up = max(1, round(MAX_CATCH_UP_S / self._chunk_s))
            self._announced_end = False
            self.get_logger().info(
                f"file source {path} ({self._source.file_rate} Hz, published at "
                f"{config.sample_rate} Hz in {config.chunk_ms} ms chunks); starts when "
                f"{TOPICS['audio_in']} has a subscriber"
            )
        else:
            self._capture = PyAudioCapture(
                config.device, config.sample_rate, config.chunk_ms, self._on_device_chunk
            )
            self._capture.start()
            self.get_logger().info(
                f"capturing from {config.device or 'the default input device'} at "
                f"{config.sample_rate} Hz in {config.chunk_ms} ms chunks"
            )

    def start(self) -> None:
        """Start publishing (a file restarts its real-time pacing from now)."""
        if self._source is None:
            return
        self._matched_at: float | None = None
        self._origin: float | None = None
        self._origin_stamp = self.get_clock().now()
        self._origin_sample = self._next_sample
        self._due_sent = 0
        # Tick at a quarter chunk: a chunk goes out at most ~chunk/4 after its last sample is
        # due, like a sound card's period, never before.
        self._timer = self.create_timer(
            self._chunk_s / 4, self._on_tick, callback_group=MutuallyExclusiveCallbackGroup()
        )

    def stop(self) -> None:
        """Stop publishing; the source stays open."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self.destroy_timer(self._timer)
                self._timer = None

    def teardown(self) -> None:
        """Close the sound card or the file."""
        if self._capture is not None:
            self._capture.close()
            self._capture = None
        with self._lock:
            if self._source is not None:
                self._source.close()
                self._source = None

    # --- publishing ----------------------------------------------------------------------------

    def _on_tick(self) -> None:
        """Publish every file chunk due by now (real-time pacing on the monotonic clock)."""
        with self._lock:
            if self.active:
                self._publish_due()

    def _publish_due(self) -> None:
        source = self._source
        if source is None:
            return
        now = time.monotonic()
        if self._origin is None:
            if self._matched_at is None:
                count = self._publisher.get_subscription_count()
                if count >= self.config.wait_for_subscribers:
                    self._matched_at = now
                return
            if now - self._matched_at < MATCH_GRACE_S:
                return
            self._origin = now
            self._origin_stamp = self.get_clock().now()
        due = int((now - self._origin) / self._chunk_s)  # chunks whose last sample is past
        for _ in range(min(due - self._due_sent, self._max_catch_up)):
            block = source.read()
            if block is None:
                self._finish_file()
                return
            offset = Duration(
                nanoseconds=round(
                    (self._next_sample - self._origin_sample) * 1e9 / source.sample_rate
                )
            )
            stamp = (self._origin_stamp + offset).to_msg()
            self._send(block.samples, source.sample_rate, stamp)
            self._due_sent += 1
        if source.ended and self.config.after_end == "silence" and not self._announced_end:
            self._announced_end = True
            self.get_logger().info(
                f"end of {source.path} after {source.file_samples} samples; publishing silence"
            )

    def _send(self, samples: np.ndarray, rate: int, stamp: Time) -> None:
        self._publisher.publish(
            audio_to_msg(
                samples,
                rate,
                self._next_sample,
                stamp,
                frame_id=self.config.frame_id,
                encoding=AudioChunk.ENCODING_PCM_S16LE,
            )
        )
        self._next_sample += int(samples.shape[0])
        self.chunks_published += 1

    def _finish_file(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._source is not None:
            self._source.close()
            self._source = None
        self.get_logger().info(f"end of the file source after {self.chunks_published} chunks")

    def _on_device_chunk(self, block: AudioBlock) -> None:
        """PortAudio's thread: stamp and publish one captured chunk (only while active)."""
        with self._lock:
            if not self.active:
                return
            duration = Duration(
                nanoseconds=round(block.samples.shape[0] * 1e9 / self.config.sample_rate)
            )
            stamp = (self.get_clock().now() - duration).to_msg()
            self._send(block.samples, self.config.sample_rate, stamp)

    def _diagnose(self) -> tuple[int, str, dict[str, str]]:
        values = {
            "source": self.config.source,
            "sample_rate": str(self.config.sample_rate),
            "chunks_published": str(self.chunks_published),
        }
        if self._capture is not None:
            values["overflows"] = str(self._capture.overflows)
            if self._capture.error is not None:
                return DiagnosticStatus.ERROR, f"capture failed: {self._capture.error}", values
        if not self.active:
            return DiagnosticStatus.OK, "inactive", values
        return DiagnosticStatus.OK, "streaming", values


def main(argv: Sequence[str] | None = None) -> int:
    """Run the mic node (console script ``mic_node``)."""
    return run_node(MicNode, argv)


if __name__ == "__main__":
    sys.exit(main())
