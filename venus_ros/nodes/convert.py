"""Message <-> core conversions, in one place. Every rejection is an InputError naming the field."""

from __future__ import annotations

import json

import numpy as np
from builtin_interfaces.msg import Time
from sensor_msgs.msg import CompressedImage, Image
from std_msgs.msg import Header

from venus_interfaces.msg import (
    AudioChunk,
    PlaybackAck as PlaybackAckMsg,
    TimelineEvent,
    UnitDecision,
)
from venus_ros.core.duplex import UnitResult
from venus_ros.core.playback import PlaybackAck
from venus_ros.core.timeline import Record
from venus_ros.core.units import InputError, VideoFrame

_DTYPES = {
    AudioChunk.ENCODING_PCM_S16LE: np.dtype("<i2"),
    AudioChunk.ENCODING_PCM_F32LE: np.dtype("<f4"),
}
_IMAGE_CHANNELS = {"rgb8": 3, "bgr8": 3, "mono8": 1}
#: Images larger than this (bytes) are rejected before any copy.
MAX_IMAGE_BYTES = 4096 * 4096 * 3


def to_mono(frames: np.ndarray, channel: int = -1) -> np.ndarray:
    """One channel of interleaved ``(samples, channels)`` audio: the mean (``channel=-1``) or
    channel ``channel``, in the input's dtype.

    Raises:
        InputError: ``channel`` is not a channel of ``frames``.
    """
    if frames.ndim == 1:
        return frames
    if channel >= frames.shape[1]:
        raise InputError("audio.channels", f"channel {channel} of {frames.shape[1]} selected")
    if channel >= 0:
        return np.ascontiguousarray(frames[:, channel])
    mixed = frames.astype(np.float64).mean(axis=1)
    return (
        mixed.astype(frames.dtype)
        if frames.dtype.kind == "f"
        else np.rint(mixed).astype(frames.dtype)
    )


def audio_from_msg(msg: AudioChunk, channel: int = -1) -> tuple[np.ndarray, int]:
    """Mono samples (int16 or float32) and rate of an AudioChunk; the rate is checked later.

    Interleaved multi-channel chunks are down-mixed (``channel=-1``) or one channel is taken.
    """
    channels = int(msg.channels)
    if not 1 <= channels <= 64:
        raise InputError("audio.channels", f"expected 1..64 channels, got {channels}")
    dtype = _DTYPES.get(msg.encoding)
    if dtype is None:
        raise InputError(
            "audio.encoding", f"unsupported {msg.encoding!r}; use one of {', '.join(_DTYPES)}"
        )
    data = bytes(msg.data)
    if not data:
        raise InputError("audio.data", "empty chunk")
    if len(data) % (dtype.itemsize * channels):
        raise InputError(
            "audio.data",
            f"{len(data)} bytes is not a whole number of {channels}-channel {msg.encoding} frames",
        )
    samples = np.frombuffer(data, dtype=dtype).astype(dtype.newbyteorder("="))
    if channels > 1:
        samples = to_mono(samples.reshape(-1, channels), channel)
    return samples, int(msg.sample_rate)


def to_float(samples: np.ndarray) -> np.ndarray:
    """float32 samples of int16 (scaled by 1/32768) or float samples (not copied if float32)."""
    if samples.dtype == np.int16:
        return samples.astype(np.float32) / 32768.0
    return samples.astype(np.float32, copy=False)


def to_pcm16(audio: np.ndarray) -> np.ndarray:
    """Little-endian int16 of float samples in [-1, 1] (scaled by 32768, rounded, clipped)."""
    return np.clip(np.rint(audio * 32768.0), -32768, 32767).astype("<i2")


def audio_to_msg(
    samples: np.ndarray,
    sample_rate: int,
    first_sample: int,
    stamp: Time,
    frame_id: str = "",
    unit_index: int = 0,
    encoding: str = AudioChunk.ENCODING_PCM_F32LE,
) -> AudioChunk:
    """A mono AudioChunk: float32 (pcm_f32le, the default) or int16 (pcm_s16le) samples."""
    msg = AudioChunk()
    msg.header = Header(stamp=stamp, frame_id=frame_id)
    msg.sample_rate = int(sample_rate)
    msg.channels = 1
    msg.encoding = encoding
    msg.first_sample = int(first_sample)
    msg.unit_index = int(unit_index)
    msg.data = np.ascontiguousarray(samples, dtype=_DTYPES[encoding]).tobytes()
    return msg


def frame_from_msg(msg: Image, t: float, seq: int) -> VideoFrame:
    """An RGB (or grey) VideoFrame from an Image, stamped with session time ``t``."""
    channels = _IMAGE_CHANNELS.get(msg.encoding)
    if channels is None:
        raise InputError(
            "frame.encoding",
            f"unsupported {msg.encoding!r}; use one of {', '.join(_IMAGE_CHANNELS)}",
        )
    height, width, step = int(msg.height), int(msg.width), int(msg.step)
    if height == 0 or width == 0:
        raise InputError("frame.image", f"empty image {width}x{height}")
    if step < width * channels:
        raise InputError("frame.image", f"step {step} shorter than a row ({width * channels})")
    if height * step > MAX_IMAGE_BYTES:
        raise InputError("frame.image", f"{width}x{height} image is over the size limit")
    data = bytes(msg.data)
    if len(data) != height * step:
        raise InputError("frame.image", f"{len(data)} bytes, expected height*step={height * step}")
    rows = np.frombuffer(data, dtype=np.uint8).reshape(height, step)
    image = rows[:, : width * channels].reshape(height, width, channels)
    if msg.encoding == "bgr8":
        image = image[:, :, ::-1]
    if channels == 1:
        image = image[:, :, 0]
    return VideoFrame(np.ascontiguousarray(image), t, seq=seq)


def frame_from_compressed(msg: CompressedImage, t: float, seq: int) -> VideoFrame:
    """An RGB VideoFrame from a JPEG or PNG CompressedImage (image_transport's compressed)."""
    import cv2  # only nodes that take compressed frames pay for OpenCV

    data = np.frombuffer(bytes(msg.data), dtype=np.uint8)
    if data.size == 0:
        raise InputError("frame.data", "empty compressed image")
    if data.size > MAX_IMAGE_BYTES:
        raise InputError("frame.data", f"{data.size} bytes is over the size limit")
    image = cv2.imdecode(data, cv2.IMREAD_COLOR)
    if image is None:
        raise InputError("frame.format", f"cannot decode a {msg.format!r} image")
    return VideoFrame(np.ascontiguousarray(image[:, :, ::-1]), t, seq=seq)


def frame_to_msg(image: np.ndarray, stamp: Time, frame_id: str = "camera") -> Image:
    """An rgb8 Image from an (H, W, 3) uint8 RGB array."""
    msg = Image()
    msg.header = Header(stamp=stamp, frame_id=frame_id)
    msg.height, msg.width = int(image.shape[0]), int(image.shape[1])
    msg.encoding = "rgb8"
    msg.is_bigendian = 0
    msg.step = int(image.shape[1]) * 3
    msg.data = np.ascontiguousarray(image, dtype=np.uint8).tobytes()
    return msg


def decision_to_msg(result: UnitResult, unit_duration: float, stamp: Time) -> UnitDecision:
    """The UnitDecision message for one boundary."""
    msg = UnitDecision()
    msg.header = Header(stamp=stamp)
    msg.unit_index = int(result.index)
    msg.decision = UnitDecision.SPEAK if result.decision.value == "speak" else UnitDecision.LISTEN
    msg.end_of_turn = bool(result.end_of_turn)
    msg.flush = bool(result.flush)
    msg.compute_time = float(result.compute_s)
    msg.realtime_debt = float(result.debt_s)
    msg.deadline_missed = bool(result.missed)
    msg.unit_duration = float(unit_duration)
    return msg


def record_to_msg(record: Record) -> TimelineEvent:
    """A TimelineEvent for one timeline record."""
    return TimelineEvent(
        seq=record.seq, t=record.t, kind=record.kind.value, payload_json=record.payload_json
    )


def record_payload(msg: TimelineEvent) -> dict:
    """The payload of a TimelineEvent; malformed JSON raises InputError."""
    try:
        payload = json.loads(msg.payload_json)
    except json.JSONDecodeError as exc:
        raise InputError("timeline.payload_json", f"not JSON: {exc}") from exc
    if not isinstance(payload, dict):
        raise InputError("timeline.payload_json", "payload must be a JSON object")
    return payload


def ack_from_msg(msg: PlaybackAckMsg) -> PlaybackAck:
    """The core PlaybackAck for a PlaybackAck message."""
    return PlaybackAck(
        int(msg.unit_index), int(msg.samples_played), int(msg.samples_total), bool(msg.flushed)
    )


def ack_to_msg(ack: PlaybackAck, first_sample: int, stamp: Time) -> PlaybackAckMsg:
    """A PlaybackAck message for a core PlaybackAck."""
    msg = PlaybackAckMsg()
    msg.header = Header(stamp=stamp)
    msg.unit_index = int(ack.unit_index)
    msg.first_sample = int(first_sample)
    msg.samples_played = int(ack.samples_played)
    msg.samples_total = int(ack.samples_total)
    msg.flushed = bool(ack.flushed)
    return msg
