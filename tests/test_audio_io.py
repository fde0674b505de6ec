"""Tests for venus_ros.audio.io: file sources and sinks, and sound-card failures (no ROS)."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import soundfile as sf

from venus_ros.audio.io import (
    AudioBlock,
    PyAudioCapture,
    PyAudioPlayback,
    WavSink,
    WavSource,
    chunk_samples,
    quiet_stderr,
)
from venus_ros.core.errors import DeviceError

NOISE_MARKERS = ("ALSA", "jack", "Jack", "JACK", "PortAudio", "pcm")


def write_wav(path: Path, samples: np.ndarray, rate: int, subtype: str = "PCM_16") -> Path:
    sf.write(str(path), samples, rate, subtype=subtype)
    return path


@pytest.fixture
def ramp_wav(tmp_path: Path) -> tuple[Path, np.ndarray]:
    """1000 distinct int16 samples at 16 kHz."""
    samples = (np.arange(1000, dtype=np.int32) * 37 % 60000 - 30000).astype(np.int16)
    return write_wav(tmp_path / "ramp.wav", samples, 16000), samples


# --- chunk sizes -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rate", "ms", "expected"),
    [(16000, 20, 320), (24000, 20, 480), (44100, 20, 882), (22050, 25, 551), (8000, 1, 8)],
)
def test_chunk_samples(rate: int, ms: int, expected: int) -> None:
    assert chunk_samples(rate, ms) == expected


@pytest.mark.parametrize(("rate", "ms"), [(0, 20), (16000, 0), (-1, 20)])
def test_chunk_samples_rejects_non_positive(rate: int, ms: int) -> None:
    with pytest.raises(ValueError):
        chunk_samples(rate, ms)


# --- WavSource -------------------------------------------------------------------------------


def test_wav_source_stop_gives_the_file_in_contiguous_chunks(
    ramp_wav: tuple[Path, np.ndarray],
) -> None:
    path, samples = ramp_wav
    with WavSource(path, chunk_ms=20, after_end="stop") as source:
        assert (source.sample_rate, source.file_rate, source.chunk_samples) == (16000, 16000, 320)
        blocks = list(source)
        assert source.ended and source.file_samples == 1000
        assert source.read() is None
    assert [b.first_sample for b in blocks] == [0, 320, 640, 960]
    assert [b.samples.shape[0] for b in blocks] == [320, 320, 320, 40]
    assert all(b.samples.dtype == np.int16 for b in blocks)
    np.testing.assert_array_equal(np.concatenate([b.samples for b in blocks]), samples)


def test_wav_source_silence_pads_and_keeps_going(ramp_wav: tuple[Path, np.ndarray]) -> None:
    path, samples = ramp_wav
    with WavSource(path, chunk_ms=20, after_end="silence") as source:
        blocks = [source.read() for _ in range(7)]
    assert all(isinstance(b, AudioBlock) for b in blocks)
    assert [b.first_sample for b in blocks] == [320 * i for i in range(7)]
    assert all(b.samples.shape == (320,) for b in blocks)
    stream = np.concatenate([b.samples for b in blocks])
    np.testing.assert_array_equal(stream[:1000], samples)
    assert not stream[1000:].any()


def test_wav_source_float32(tmp_path: Path) -> None:
    audio = np.random.default_rng(0).uniform(-0.9, 0.9, 4800).astype(np.float32)
    path = write_wav(tmp_path / "f.wav", audio, 24000, subtype="FLOAT")
    with WavSource(path, chunk_ms=50, after_end="stop", dtype="float32") as source:
        blocks = list(source)
    assert [b.samples.shape[0] for b in blocks] == [1200] * 4
    assert all(b.samples.dtype == np.float32 for b in blocks)
    np.testing.assert_array_equal(np.concatenate([b.samples for b in blocks]), audio)


def test_wav_source_resamples_like_offline_soxr(tmp_path: Path) -> None:
    soxr = pytest.importorskip("soxr")
    t = np.arange(8000 * 3 // 2) / 8000
    audio = (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
    path = write_wav(tmp_path / "8k.wav", audio, 8000, subtype="FLOAT")
    with WavSource(path, 20, "stop", dtype="float32", sample_rate=16000) as source:
        assert (source.file_rate, source.sample_rate, source.chunk_samples) == (8000, 16000, 320)
        blocks = list(source)
    got = np.concatenate([b.samples for b in blocks])
    want = soxr.resample(audio, 8000, 16000)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, atol=1e-6)
    assert [b.first_sample for b in blocks] == [320 * i for i in range(len(blocks))]


def test_wav_source_resampled_int16_is_scaled(tmp_path: Path) -> None:
    audio = np.full(4000, 0.5, dtype=np.float32)
    path = write_wav(tmp_path / "dc.wav", audio, 8000, subtype="FLOAT")
    with WavSource(path, 20, "stop", sample_rate=16000) as source:
        got = np.concatenate([b.samples for b in source])
    assert got.dtype == np.int16
    assert abs(int(np.median(got)) - 16384) <= 2


def test_wav_source_rejects_stereo_naming_the_channels(tmp_path: Path) -> None:
    path = write_wav(tmp_path / "stereo.wav", np.zeros((100, 2), np.int16), 16000)
    with pytest.raises(DeviceError, match=r"stereo\.wav has 2 channels.*mono"):
        WavSource(path, 20)


def test_wav_source_missing_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(DeviceError, match=r"cannot read audio file .*nothing_here\.wav"):
        WavSource(tmp_path / "nothing_here.wav", 20)


def test_wav_source_unreadable_file_names_it(tmp_path: Path) -> None:
    path = tmp_path / "text.wav"
    path.write_text("not audio")
    with pytest.raises(DeviceError, match=r"text\.wav"):
        WavSource(path, 20)


@pytest.mark.parametrize(
    "kwargs", [{"after_end": "loop"}, {"dtype": "int32"}, {"chunk_ms": 0}, {"sample_rate": -1}]
)
def test_wav_source_rejects_bad_arguments(
    ramp_wav: tuple[Path, np.ndarray], kwargs: dict[str, object]
) -> None:
    args: dict[str, object] = {"chunk_ms": 20, **kwargs}
    with pytest.raises(ValueError):
        WavSource(ramp_wav[0], **args)  # type: ignore[arg-type]


def test_wav_source_empty_file(tmp_path: Path) -> None:
    path = write_wav(tmp_path / "empty.wav", np.zeros(0, np.int16), 16000)
    with WavSource(path, 20, "stop") as source:
        assert source.read() is None
        assert source.ended and source.file_samples == 0
    with WavSource(path, 20, "silence") as source:
        block = source.read()
        assert block is not None and block.first_sample == 0 and not block.samples.any()


# --- WavSink ---------------------------------------------------------------------------------


def test_wav_sink_float_round_trip_is_exact(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    parts = [rng.uniform(-1, 1, n).astype(np.float32) for n in (480, 1, 0, 2000)]
    path = tmp_path / "sub" / "out.wav"
    with WavSink(path, 24000) as sink:
        for part in parts:
            sink.write(part)
        sink.flush()
        assert sink.samples_written == 2481
    assert sink.closed
    sink.close()  # idempotent
    data, rate = sf.read(str(path), dtype="float32")
    assert rate == 24000 and sf.info(str(path)).subtype == "FLOAT"
    np.testing.assert_array_equal(data, np.concatenate(parts))


def test_wav_sink_pcm16_round_trip(tmp_path: Path) -> None:
    audio = np.linspace(-0.99, 0.99, 1000, dtype=np.float32)
    path = tmp_path / "pcm.wav"
    with WavSink(path, 16000, subtype="PCM_16") as sink:
        sink.write(audio)
    data, rate = sf.read(str(path), dtype="float32")
    assert rate == 16000 and sf.info(str(path)).subtype == "PCM_16"
    np.testing.assert_allclose(data, audio, atol=1 / 32767)


def test_wav_sink_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        WavSink(tmp_path / "x.wav", 16000, subtype="MP3")
    with pytest.raises(ValueError):
        WavSink(tmp_path / "x.wav", 0)
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(DeviceError, match=r"cannot write audio file .*file/x\.wav"):
        WavSink(blocker / "x.wav", 16000)
    with WavSink(tmp_path / "y.wav", 16000) as sink, pytest.raises(ValueError):
        sink.write(np.zeros((10, 2), np.float32))


# --- sound cards -----------------------------------------------------------------------------


def test_quiet_stderr_silences_fd2_and_restores_it(capfd: pytest.CaptureFixture[str]) -> None:
    with quiet_stderr():
        os.write(2, b"hidden\n")
    os.write(2, b"shown\n")
    err = capfd.readouterr().err
    assert "hidden" not in err and "shown" in err


def _no_sound_card() -> bool:
    pyaudio = pytest.importorskip("pyaudio")
    with quiet_stderr():
        pa = pyaudio.PyAudio()
        try:
            return pa.get_device_count() == 0
        finally:
            pa.terminate()


def _assert_device_error(
    exc: DeviceError, capfd: pytest.CaptureFixture[str], param: str, direction: str
) -> None:
    text = str(exc)
    assert f"audio {direction} device" in text
    assert f"{param}:=file:PATH" in text and f"{param}: file:PATH" in text
    assert "PulseAudio null sink" in text and "ALSA file plugin" in text and "README" in text
    captured = capfd.readouterr()
    noise = [m for m in NOISE_MARKERS if m in captured.err or m in captured.out]
    assert not noise, f"PortAudio noise leaked: {captured.err[:500]!r}"


@pytest.mark.parametrize("device", ["no-such-sound-card-xyz", "9999", ""])
def test_capture_without_device_is_one_clear_error(
    device: str, capfd: pytest.CaptureFixture[str]
) -> None:
    if device == "" and not _no_sound_card():
        pytest.skip("this machine has a sound card; the default device would open")
    capfd.readouterr()
    capture = PyAudioCapture(device, 16000, 20, on_chunk=lambda block: None)
    with pytest.raises(DeviceError) as info:
        capture.start()
    _assert_device_error(info.value, capfd, "source", "input")
    assert not capture.active
    capture.close()  # idempotent after a failed start


@pytest.mark.parametrize("device", ["no-such-sound-card-xyz", ""])
def test_playback_without_device_is_one_clear_error(
    device: str, capfd: pytest.CaptureFixture[str]
) -> None:
    if device == "" and not _no_sound_card():
        pytest.skip("this machine has a sound card; the default device would open")
    capfd.readouterr()
    playback = PyAudioPlayback(device, 24000)
    with pytest.raises(DeviceError) as info:
        playback.start()
    _assert_device_error(info.value, capfd, "sink", "output")
    playback.close()


FAKE_PYAUDIO = SimpleNamespace(paContinue=0, paComplete=1, paInputOverflow=2)


def test_capture_callback_numbers_chunks_and_keeps_errors() -> None:
    blocks: list[AudioBlock] = []
    capture = PyAudioCapture("", 16000, 20, on_chunk=blocks.append)
    capture._pyaudio = FAKE_PYAUDIO  # the callback as PortAudio would call it
    for i in range(3):
        data = np.full(320, i, dtype="<i2").tobytes()
        assert capture._callback(data, 320, {}, 2 if i == 1 else 0) == (None, 0)
    assert [b.first_sample for b in blocks] == [0, 320, 640]
    assert [int(b.samples[0]) for b in blocks] == [0, 1, 2]
    assert capture.overflows == 1

    def fail(block: AudioBlock) -> None:
        raise RuntimeError("publisher gone")

    capture.on_chunk = fail
    assert capture._callback(b"\0\0" * 320, 320, {}, 0) == (None, 1)
    assert isinstance(capture.error, RuntimeError)


def test_playback_queue_feeds_the_callback_and_drops_oldest_beyond_the_limit() -> None:
    playback = PyAudioPlayback("", 1000, max_buffer_ms=100)  # holds 100 samples
    playback._pyaudio = FAKE_PYAUDIO
    playback.write(np.arange(60, dtype=np.float32))
    playback.write(np.arange(60, 120, dtype=np.float32))
    assert playback.dropped_samples == 20 and playback.queued_samples == 100
    out, flag = playback._callback(None, 70, {}, 0)
    np.testing.assert_array_equal(np.frombuffer(out, np.float32), np.arange(20, 90))
    out, _ = playback._callback(None, 50, {}, 0)
    got = np.frombuffer(out, np.float32)
    np.testing.assert_array_equal(got[:30], np.arange(90, 120))
    assert not got[30:].any() and playback.underruns == 1
    out, _ = playback._callback(None, 10, {}, 0)
    assert not np.frombuffer(out, np.float32).any() and playback.underruns == 1
    assert flag == 0
