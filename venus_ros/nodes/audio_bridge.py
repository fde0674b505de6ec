"""audio_bridge_node: venus_ros audio to and from the ROS audio_common conventions.

- In: ``audio`` (``audio_common_msgs/AudioStamped``, sensor-data QoS: what audio_common's
  capturer publishes and whisper_ros-style stacks consume) becomes ``audio/in``
  (``venus_interfaces/AudioChunk``, pcm_s16le mono at ``sample_rate``) for the frontend. Every
  ``info.format`` of audio_common (PortAudio's constants: float32 1, int32 2, int16 8, int8 16,
  uint8 32; the samples in the matching ``audio_data`` array, interleaved) and any channel
  count are accepted: several channels are averaged (``channel: -1``) or one is taken
  (``channel: N``); another rate is resampled (soxr). ``first_sample`` counts the samples
  published, so the frontend's units stay contiguous.
- Out: ``audio/out`` (the assistant's speech, ``AudioChunk``) is republished on
  ``assistant/audio`` as ``AudioStamped`` (float32, mono, its own rate, ``header`` kept; remap
  it to ``audio`` for audio_common's player).

With the older ros-drivers audio_common_msgs (the kilted distro package: ``AudioData`` is
``uint8[] data``, no ``AudioStamped``), it subscribes ``AudioDataStamped`` instead and reads
the bytes as ``legacy_sample_format`` (``S16LE`` or ``F32LE``) at ``legacy_rate`` with
``legacy_channels`` (audio_common's capture parameters; they travel on a separate ``audio_info``
topic there), and publishes ``AudioDataStamped`` (S16LE).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import audio_common_msgs.msg as audio_msgs
import numpy as np
import soxr
from diagnostic_msgs.msg import DiagnosticStatus
from std_msgs.msg import Header

from venus_interfaces.msg import AudioChunk
from venus_ros.core.units import InputError
from venus_ros.nodes.convert import audio_from_msg, to_float, to_mono, to_pcm16
from venus_ros.nodes.diagnostics import NodeDiagnostics
from venus_ros.nodes.managed import ManagedNode
from venus_ros.nodes.params import declare_config, reject_unknown_overrides, tunable
from venus_ros.nodes.qos import TOPICS, qos_for, topic
from venus_ros.nodes.runtime import run_node

#: audio_common's ``info.format`` values (PortAudio sample formats) -> the data field.
FORMATS = {
    1: ("float32_data", np.float32),
    2: ("int32_data", np.int32),
    8: ("int16_data", np.int16),
    16: ("int8_data", np.int8),
    32: ("uint8_data", np.uint8),
}
PA_FLOAT32 = 1
#: Whether the installed audio_common_msgs is the AudioStamped flavour.
STAMPED = hasattr(audio_msgs, "AudioStamped")
_LEGACY_DTYPES = {"S16LE": np.dtype("<i2"), "F32LE": np.dtype("<f4")}


@dataclass(frozen=True)
class AudioBridgeConfig:
    """Parameters of audio_bridge_node."""

    sample_rate: int = field(default=16000, metadata={"help": "rate of audio/in, Hz"})
    channel: int = tunable(-1, "input channel to use; -1 = the mean of all channels", -1, 63)
    publish_speech: bool = field(
        default=True, metadata={"help": "republish audio/out on assistant/audio"}
    )
    legacy_sample_format: str = field(
        default="S16LE", metadata={"help": "ros-drivers audio_common only: S16LE or F32LE"}
    )
    legacy_rate: int = field(default=16000, metadata={"help": "ros-drivers audio_common only"})
    legacy_channels: int = field(default=1, metadata={"help": "ros-drivers audio_common only"})

    def __post_init__(self) -> None:
        if not 8000 <= self.sample_rate <= 192000:
            raise ValueError(f"sample_rate must be in 8000..192000 Hz, got {self.sample_rate}")
        if self.channel < -1:
            raise ValueError(f"channel must be -1 (mix) or a channel index, got {self.channel}")
        if self.legacy_sample_format not in _LEGACY_DTYPES:
            raise ValueError("legacy_sample_format must be S16LE or F32LE")
        if not 8000 <= self.legacy_rate <= 192000 or not 1 <= self.legacy_channels <= 64:
            raise ValueError("legacy_rate must be 8000..192000 Hz, legacy_channels 1..64")


def samples_of(data: Any, fmt: int, channels: int) -> np.ndarray:
    """Interleaved samples of an audio_common ``AudioData`` as ``(frames, channels)`` float32.

    Raises:
        InputError: unknown format, no samples, or a partial frame.
    """
    if fmt not in FORMATS:
        raise InputError("audio.format", f"unsupported audio_common format {fmt}")
    if not 1 <= channels <= 64:
        raise InputError("audio.channels", f"expected 1..64 channels, got {channels}")
    name, dtype = FORMATS[fmt]
    values = np.asarray(getattr(data, name), dtype=dtype)
    if values.size == 0 or values.size % channels:
        raise InputError("audio.data", f"{values.size} samples for {channels} channels")
    frames = values.reshape(-1, channels).astype(np.float32)
    if dtype == np.uint8:
        frames = (frames - 128.0) / 128.0
    elif dtype != np.float32:
        frames /= float(-np.iinfo(dtype).min)
    return frames


def speech_to_stamped(samples: np.ndarray, rate: int, header: Header) -> Any:
    """An ``AudioStamped`` (float32 mono) of float samples."""
    msg = audio_msgs.AudioStamped(header=header)
    msg.audio.audio_data.float32_data = np.asarray(samples, np.float32)
    msg.audio.info.format = PA_FLOAT32
    msg.audio.info.channels = 1
    msg.audio.info.rate = int(rate)
    msg.audio.info.chunk = int(samples.shape[0])
    return msg


class AudioBridgeNode(ManagedNode):
    """Bridges ``audio`` (AudioStamped) to ``audio/in`` and ``audio/out`` to AudioStamped.

    Args:
        node_name: the node's name.
        **kwargs: :class:`rclpy.node.Node` keyword arguments.

    Attributes:
        chunks_in: AudioChunks published on ``audio/in``.
        chunks_out: speech messages published for audio_common.
        dropped: input messages dropped (malformed).
    """

    def __init__(self, node_name: str = "audio_bridge_node", **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        self.config = declare_config(self, AudioBridgeConfig)
        reject_unknown_overrides(self, kwargs.get("parameter_overrides"))
        self.chunks_in = self.chunks_out = self.dropped = 0
        self._next_sample = 0
        self._resampler: tuple[int, soxr.ResampleStream] | None = None
        self._pub_in = self.create_lifecycle_publisher(
            AudioChunk, TOPICS["audio_in"], qos_for("audio_in")
        )
        in_type = audio_msgs.AudioStamped if STAMPED else audio_msgs.AudioDataStamped
        self.create_subscription(
            in_type, topic("audio_stamped_in"), self._on_input, qos_for("audio_stamped_in")
        )
        self._pub_out = None
        if self.config.publish_speech:
            self._pub_out = self.create_lifecycle_publisher(
                in_type, topic("audio_stamped_out"), qos_for("audio_stamped_out")
            )
            self.create_subscription(
                AudioChunk, TOPICS["audio_out"], self._on_speech, qos_for("audio_out")
            )
        self._diagnostics = NodeDiagnostics(
            self, "audio_common bridge", self._diagnose, rate_keys=("chunks_in", "chunks_out")
        )

    def _on_input(self, msg: Any) -> None:
        if not self.active:
            return
        config = self.config
        try:
            if STAMPED:
                info = msg.audio.info
                frames = samples_of(msg.audio.audio_data, int(info.format), int(info.channels))
                rate = int(info.rate)
            else:
                dtype = _LEGACY_DTYPES[config.legacy_sample_format]
                data = bytes(msg.audio.data)
                if not data or len(data) % (dtype.itemsize * config.legacy_channels):
                    raise InputError("audio.data", f"{len(data)} bytes is not whole frames")
                raw = np.frombuffer(data, dtype)
                frames = raw.reshape(-1, config.legacy_channels).astype(np.float32)
                if dtype.kind == "i":
                    frames /= 32768.0
                rate = config.legacy_rate
            mono = to_mono(frames, config.channel)
        except InputError as exc:
            self.dropped += 1
            self.get_logger().warning(f"dropped input: {exc}", throttle_duration_sec=5.0)
            return
        mono = self._resample(mono, rate)
        if mono.size == 0:
            return
        pcm = to_pcm16(mono)
        chunk = AudioChunk(
            header=msg.header,
            sample_rate=config.sample_rate,
            channels=1,
            encoding=AudioChunk.ENCODING_PCM_S16LE,
            first_sample=self._next_sample,
            unit_index=0,
            data=pcm.tobytes(),
        )
        self._pub_in.publish(chunk)
        self._next_sample += int(pcm.shape[0])
        self.chunks_in += 1

    def _resample(self, mono: np.ndarray, rate: int) -> np.ndarray:
        target = self.config.sample_rate
        if rate == target:
            return mono
        if self._resampler is None or self._resampler[0] != rate:
            self._resampler = (rate, soxr.ResampleStream(rate, target, 1, dtype="float32"))
        return self._resampler[1].resample_chunk(np.ascontiguousarray(mono, np.float32))

    def _on_speech(self, msg: AudioChunk) -> None:
        if not self.active or self._pub_out is None:
            return
        try:
            samples, rate = audio_from_msg(msg)
        except InputError:
            return
        audio = to_float(samples)
        if STAMPED:
            out = speech_to_stamped(audio, rate, msg.header)
        else:
            out = audio_msgs.AudioDataStamped(header=msg.header)
            pcm = to_pcm16(audio)
            out.audio.data = pcm.tobytes()
        self._pub_out.publish(out)
        self.chunks_out += 1

    def _diagnose(self) -> tuple[bytes, str, dict[str, str]]:
        values = {
            "flavour": "AudioStamped" if STAMPED else "AudioDataStamped (ros-drivers)",
            "chunks_in": str(self.chunks_in),
            "chunks_out": str(self.chunks_out),
            "dropped": str(self.dropped),
        }
        state = "bridging" if self.active else "inactive"
        return DiagnosticStatus.OK, state, values


def main(argv: Sequence[str] | None = None) -> int:
    """Console script ``audio_bridge_node``."""
    return run_node(AudioBridgeNode, argv)


if __name__ == "__main__":
    sys.exit(main())
