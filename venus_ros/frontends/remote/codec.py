"""Wire encodings shared by the remote frontend and ``venus-ros serve``.

Audio travels as base64 of little-endian PCM (float32 for MiniCPM-o Realtime, int16 for the
vLLM-omni endpoint's ``pcm16``), camera frames as base64 JPEG. Everything decoded from the
network is validated here: a bad payload raises :class:`WireError`, never anything else.
"""

from __future__ import annotations

import base64
import binascii

import numpy as np
import numpy.typing as npt

#: Longest audio accepted in one wire message, in seconds (a unit is 1-1.035 s).
MAX_AUDIO_S = 2.5
#: Largest JPEG accepted, in bytes.
MAX_JPEG_BYTES = 2 * 1024 * 1024


class WireError(ValueError):
    """A payload from the network that cannot be used (bad base64, size, dtype, values)."""


def encode_f32(audio: np.ndarray) -> str:
    """Base64 of mono float32 little-endian samples."""
    return base64.b64encode(np.asarray(audio, dtype="<f4").tobytes()).decode("ascii")


def encode_s16(audio: np.ndarray) -> str:
    """Base64 of mono int16 little-endian samples (float input clipped to [-1, 1])."""
    pcm = np.clip(np.asarray(audio, dtype=np.float32), -1.0, 1.0) * 32767.0
    return base64.b64encode(np.round(pcm).astype("<i2").tobytes()).decode("ascii")


def _b64(value: object, what: str, limit: int) -> bytes:
    if not isinstance(value, str):
        raise WireError(f"{what}: expected a base64 string, got {type(value).__name__}")
    if len(value) > limit * 4 // 3 + 8:
        raise WireError(f"{what}: {len(value)} base64 characters exceed the limit")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise WireError(f"{what}: not valid base64") from exc


def decode_f32(value: object, rate: int, what: str = "audio") -> npt.NDArray[np.float32]:
    """Decode base64 float32 mono audio, at most :data:`MAX_AUDIO_S` at ``rate``.

    Raises:
        WireError: not base64, not whole samples, too long, or not finite.
    """
    raw = _b64(value, what, int(MAX_AUDIO_S * rate) * 4)
    if len(raw) % 4:
        raise WireError(f"{what}: {len(raw)} bytes is not a whole number of float32 samples")
    audio = np.frombuffer(raw, dtype="<f4").astype(np.float32)
    if audio.size > MAX_AUDIO_S * rate:
        raise WireError(f"{what}: {audio.size} samples exceed {MAX_AUDIO_S} s at {rate} Hz")
    if not np.all(np.isfinite(audio)):
        raise WireError(f"{what}: samples must be finite")
    return audio


def decode_s16(value: object, rate: int, what: str = "audio") -> npt.NDArray[np.float32]:
    """Decode base64 int16 mono audio to float32 in [-1, 1).

    Raises:
        WireError: not base64, not whole samples, or too long.
    """
    raw = _b64(value, what, int(MAX_AUDIO_S * rate) * 2)
    if len(raw) % 2:
        raise WireError(f"{what}: {len(raw)} bytes is not a whole number of int16 samples")
    audio = np.frombuffer(raw, dtype="<i2").astype(np.float32) / 32768.0
    if audio.size > MAX_AUDIO_S * rate:
        raise WireError(f"{what}: {audio.size} samples exceed {MAX_AUDIO_S} s at {rate} Hz")
    return audio


def encode_jpeg(image: np.ndarray, quality: int = 80, max_side: int = 640) -> bytes:
    """JPEG bytes of an RGB (or grayscale) uint8 image, shrunk to ``max_side`` pixels."""
    import cv2  # only where frames are sent

    height, width = image.shape[:2]
    scale = min(1.0, max_side / max(height, width))
    if scale < 1.0:
        size = (max(1, round(width * scale)), max(1, round(height * scale)))
        image = cv2.resize(image, size, interpolation=cv2.INTER_AREA)
    bgr = cv2.cvtColor(image, cv2.COLOR_RGB2BGR) if image.ndim == 3 else image
    ok, data = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
    if not ok:
        raise WireError("frame: JPEG encoding failed")
    return data.tobytes()


def decode_jpeg(value: object, what: str = "video_frames") -> npt.NDArray[np.uint8]:
    """Decode one base64 JPEG (or PNG) to an RGB uint8 image.

    Raises:
        WireError: not base64, too large, or not an image.
    """
    raw = _b64(value, what, MAX_JPEG_BYTES)
    if len(raw) > MAX_JPEG_BYTES:
        raise WireError(f"{what}: {len(raw)} bytes exceed {MAX_JPEG_BYTES}")
    import cv2

    image = cv2.imdecode(np.frombuffer(raw, dtype=np.uint8), cv2.IMREAD_COLOR)
    if image is None:
        raise WireError(f"{what}: not a decodable image")
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)


def wav_base64(audio: np.ndarray, rate: int = 16000) -> str:
    """Base64 of a 16-bit mono WAV file holding ``audio`` (a reference voice clip)."""
    import io

    import soundfile

    buffer = io.BytesIO()
    soundfile.write(
        buffer, np.asarray(audio, dtype=np.float32), rate, format="WAV", subtype="PCM_16"
    )
    return base64.b64encode(buffer.getvalue()).decode("ascii")
