"""Tests for venus_ros.core.units (input unit assembly)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import pytest
import soxr
from hypothesis import HealthCheck, given, settings, strategies as st

from venus_ros.core.units import (
    InputError,
    InputUnit,
    PartialUnit,
    UnitAssembler,
    UnitConfig,
    VideoFrame,
    resample,
)

SUPPORTED = UnitConfig().supported_rates


def sine(rate: int, seconds: float, freq: float = 1000.0, amp: float = 0.5) -> np.ndarray:
    n = round(rate * seconds)
    return (amp * np.sin(2 * np.pi * freq * np.arange(n) / rate)).astype(np.float32)


def noisy_signal(rate: int, seconds: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = sine(rate, seconds, 440.0, 0.4) + rng.uniform(-0.2, 0.2, round(rate * seconds))
    return x.astype(np.float32)


def push_chunks(asm: UnitAssembler, x: np.ndarray, rate: int, sizes: Iterable[int]) -> None:
    sizes = list(sizes)
    pos, i = 0, 0
    while pos < len(x):
        k = sizes[i % len(sizes)]
        asm.push_audio(x[pos : pos + k], rate)
        pos += k
        i += 1


def random_sizes(seed: int, low: int = 1, high: int = 5000, count: int = 64) -> list[int]:
    return [int(s) for s in np.random.default_rng(seed).integers(low, high, count)]


def drain(asm: UnitAssembler, flush: bool = True) -> list[InputUnit]:
    units = []
    while (u := asm.pop_unit()) is not None:
        units.append(u)
    if flush and (u := asm.flush()) is not None:
        units.append(u)
    return units


def valid_audio(units: list[InputUnit]) -> np.ndarray:
    if not units:
        return np.zeros(0, np.float32)
    return np.concatenate([u.audio[: u.valid_samples] for u in units])


def frame(t: float, seq: int = 0, shape: tuple[int, ...] = (4, 6, 3)) -> VideoFrame:
    return VideoFrame(image=np.zeros(shape, np.uint8), t=t, seq=seq)


def summary(units: list[InputUnit]) -> list[tuple]:
    return [
        (
            u.index,
            u.start_sample,
            u.audio.tobytes(),
            None if u.frame is None else u.frame.t,
            u.texts,
            u.valid_samples,
        )
        for u in units
    ]


def counters(asm: UnitAssembler) -> tuple[int, ...]:
    return (
        asm.units_emitted,
        asm.dropped_units,
        asm.dropped_samples,
        asm.stale_frames,
        asm.samples_in,
        asm.pending_units,
        asm.buffered_samples,
    )


# --------------------------------------------------------------------------- unit sizes


def test_first_unit_is_16560_samples_and_later_units_16000() -> None:
    asm = UnitAssembler(UnitConfig(max_pending_units=10))
    asm.push_audio(np.zeros(16560 + 3 * 16000 + 7, np.float32), 16000)
    units = drain(asm, flush=False)
    assert [len(u.audio) for u in units] == [16560, 16000, 16000, 16000]
    assert [u.index for u in units] == [0, 1, 2, 3]
    assert [u.start_sample for u in units] == [0, 16560, 32560, 48560]
    assert units[0].duration_s == pytest.approx(1.035)
    assert units[1].start_s == pytest.approx(1.035)
    assert units[1].end_s == pytest.approx(2.035)
    assert asm.buffered_samples == 7


def test_unit_sizes_follow_config() -> None:
    cfg = UnitConfig(first_unit_ms=500, unit_ms=250, max_pending_units=10)
    assert (cfg.first_unit_samples, cfg.unit_samples) == (8000, 4000)
    asm = UnitAssembler(cfg)
    asm.push_audio(np.zeros(16000, np.float32), 16000)
    assert [len(u.audio) for u in drain(asm, flush=False)] == [8000, 4000, 4000]


def test_default_config_unit_samples() -> None:
    cfg = UnitConfig()
    assert (cfg.first_unit_samples, cfg.unit_samples) == (16560, 16000)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"sample_rate": 0}, "sample_rate"),
        ({"first_unit_ms": -5}, "first_unit_ms"),
        ({"unit_ms": 0}, "unit_ms"),
        ({"max_pending_units": 0}, "max_pending_units"),
        ({"supported_rates": ()}, "supported_rates"),
        ({"supported_rates": (16000, -1)}, "supported_rates"),
        ({"sample_rate": 22050, "first_unit_ms": 1035}, "first_unit_ms"),
    ],
)
def test_config_rejects_invalid_field_naming_it(kwargs: dict, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        UnitConfig(**kwargs)


def test_input_unit_audio_is_read_only_float32() -> None:
    asm = UnitAssembler()
    asm.push_audio(np.ones(16560, np.float64), 16000)
    unit = asm.pop_unit()
    assert unit is not None
    assert unit.audio.dtype == np.float32
    assert not unit.audio.flags.writeable
    with pytest.raises(ValueError):
        unit.audio[0] = 0.0
    assert unit.valid_samples == 16560 and not unit.is_padded
    assert unit.sample_rate == 16000


def test_pop_unit_returns_none_until_a_unit_completes() -> None:
    asm = UnitAssembler()
    assert asm.pop_unit() is None
    asm.push_audio(np.zeros(16559, np.float32), 16000)
    assert asm.pop_unit() is None
    asm.push_audio(np.zeros(1, np.float32), 16000)
    assert asm.pop_unit() is not None


# ------------------------------------------------------------------- resampling


@pytest.mark.parametrize("rate", SUPPORTED)
def test_every_supported_rate_preserves_frequency_amplitude_and_length(rate: int) -> None:
    x = sine(rate, 2.2, freq=1000.0, amp=0.5)
    asm = UnitAssembler(UnitConfig(max_pending_units=10))
    push_chunks(asm, x, rate, random_sizes(rate))
    units = drain(asm)
    y = valid_audio(units)

    assert abs(len(y) - round(len(x) * 16000 / rate)) <= 1
    assert asm.samples_in == len(y)
    assert [len(u.audio) for u in units] == [16560, 16000, 16000]
    spectrum = np.abs(np.fft.rfft(y * np.hanning(len(y))))
    peak_hz = np.argmax(spectrum) * 16000 / len(y)
    assert peak_hz == pytest.approx(1000.0, abs=2.0)
    middle = y[4000 : 4000 + 16 * 1500]  # whole cycles of 1 kHz at 16 kHz
    amplitude = np.sqrt(2 * np.mean(middle.astype(np.float64) ** 2))
    assert amplitude == pytest.approx(0.5, rel=0.05)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rate=st.sampled_from(SUPPORTED),
    sizes=st.lists(st.integers(min_value=1, max_value=12000), min_size=1, max_size=20),
)
def test_streaming_in_any_chunks_equals_pushing_at_once_and_offline(
    rate: int, sizes: list[int]
) -> None:
    x = noisy_signal(rate, 1.3, seed=rate)
    whole = UnitAssembler(UnitConfig(max_pending_units=10))
    whole.push_audio(x, rate)
    chunked = UnitAssembler(UnitConfig(max_pending_units=10))
    push_chunks(chunked, x, rate, sizes)
    a, b = drain(whole), drain(chunked)

    assert [(u.index, u.start_sample, u.valid_samples) for u in a] == [
        (u.index, u.start_sample, u.valid_samples) for u in b
    ]
    for ua, ub in zip(a, b, strict=True):
        np.testing.assert_allclose(ua.audio, ub.audio, atol=1e-6, rtol=0)
    np.testing.assert_allclose(valid_audio(b), resample(x, rate), atol=1e-6, rtol=0)


def test_rate_change_drains_previous_resampler_first() -> None:
    x1 = noisy_signal(44100, 0.5, seed=1)
    x2 = noisy_signal(16000, 0.8, seed=2)
    asm = UnitAssembler()
    push_chunks(asm, x1, 44100, [441])
    push_chunks(asm, x2, 16000, [160])
    y = valid_audio(drain(asm))
    expected = np.concatenate([resample(x1, 44100), x2])
    assert len(y) == 8000 + 12800
    np.testing.assert_allclose(y, expected, atol=1e-6, rtol=0)


def test_flush_output_length_matches_rate_ratio_for_short_pushes() -> None:
    for rate in SUPPORTED:
        asm = UnitAssembler()
        x = noisy_signal(rate, 0.3, seed=3)
        push_chunks(asm, x, rate, [7, 331, 1])
        asm.flush()
        assert abs(asm.samples_in - round(len(x) * 16000 / rate)) <= 1, rate


def test_resample_helper_returns_float32_equal_to_soxr() -> None:
    x = noisy_signal(48000, 0.25).astype(np.float64)
    y = resample(x, 48000)
    assert y.dtype == np.float32 and y.ndim == 1
    assert len(y) == 4000
    np.testing.assert_array_equal(y, soxr.resample(x.astype(np.float32), 48000, 16000))
    same = resample(x[:100].reshape(-1, 1), 16000)
    np.testing.assert_array_equal(same, x[:100].astype(np.float32))
    assert resample(np.zeros(0, np.float32), 44100).shape == (0,)
    with pytest.raises(InputError) as err:
        resample(x, 0)
    assert err.value.field == "audio.sample_rate"


# ------------------------------------------------------------------ input formats


def test_int16_is_scaled_by_1_over_32768() -> None:
    pcm = np.zeros(16560, np.int16)
    pcm[:4] = [16384, -32768, 32767, -1]
    asm = UnitAssembler()
    asm.push_audio(pcm, 16000)
    unit = asm.pop_unit()
    assert unit is not None
    np.testing.assert_array_equal(unit.audio[:4], [0.5, -1.0, 32767 / 32768, -1 / 32768])


def test_n_by_1_float64_and_big_endian_inputs_match_1d_float32() -> None:
    x = noisy_signal(22050, 1.0)
    reference = UnitAssembler()
    reference.push_audio(x, 22050)
    variants = [
        x.reshape(-1, 1),
        x.astype(np.float64),
        x.astype(">f4"),
        np.repeat(x, 2)[::2],  # non-contiguous view
    ]
    expected = summary(drain(reference))
    for v in variants:
        asm = UnitAssembler()
        asm.push_audio(v, 22050)
        assert summary(drain(asm)) == expected


def test_push_does_not_alias_the_callers_buffer() -> None:
    x = np.ones(16560, np.float32)
    asm = UnitAssembler()
    asm.push_audio(x[:10000], 16000)
    x[:] = 7.0
    asm.push_audio(np.ones(6560, np.float32), 16000)
    unit = asm.pop_unit()
    assert unit is not None
    assert np.all(unit.audio == 1.0)


def test_empty_push_is_a_noop_even_at_another_rate() -> None:
    x = noisy_signal(44100, 1.2)
    reference = UnitAssembler()
    push_chunks(reference, x, 44100, [1000])
    asm = UnitAssembler()
    asm.push_audio(x[:5000], 44100)
    before = counters(asm)
    asm.push_audio(np.zeros(0, np.float32), 48000)
    asm.push_audio(np.zeros((0, 1), np.int16), 16000)
    assert counters(asm) == before
    push_chunks(asm, x[5000:], 44100, [1000])
    assert summary(drain(asm)) == summary(drain(reference))


# ------------------------------------------------------------------- backpressure


def test_backpressure_drops_oldest_whole_units_keeping_indices_and_texts() -> None:
    asm = UnitAssembler(UnitConfig(max_pending_units=2))
    asm.push_text("first")
    asm.push_text("second")
    push_chunks(asm, np.zeros(5 * 16000, np.float32), 16000, [1600])  # 5 s, never popped

    assert asm.dropped_units == 2
    assert asm.dropped_samples == 16560 + 16000
    assert asm.pending_units == 2
    a, b = asm.pop_unit(), asm.pop_unit()
    assert a is not None and b is not None and asm.pop_unit() is None
    assert (a.index, b.index) == (2, 3)
    assert (a.start_sample, b.start_sample) == (32560, 48560)
    assert len(a.audio) == len(b.audio) == 16000
    assert a.valid_samples == 16000 and b.valid_samples == 16000
    assert a.texts == ("first", "second") and b.texts == ()
    assert asm.units_emitted == 2


def test_backpressure_keeps_timeline_after_drops() -> None:
    asm = UnitAssembler(UnitConfig(max_pending_units=1))
    asm.push_audio(np.arange(16560 + 2 * 16000, dtype=np.float32) / 1e5, 16000)
    unit = asm.pop_unit()
    assert unit is not None
    assert unit.index == 2 and unit.start_sample == 16560 + 16000
    assert unit.audio[0] == pytest.approx(unit.start_sample / 1e5)
    asm.push_audio(np.zeros(16000, np.float32), 16000)
    nxt = asm.pop_unit()
    assert nxt is not None and nxt.index == 3 and nxt.start_sample == unit.start_sample + 16000


# ------------------------------------------------------------------ frames and text


def test_unit_carries_newest_frame_and_ignores_stale_frames() -> None:
    asm = UnitAssembler()
    asm.push_frame(frame(1.0, seq=1))
    asm.push_frame(frame(2.0, seq=2))
    asm.push_frame(frame(1.5, seq=3))  # arrives late
    assert asm.stale_frames == 1
    asm.push_audio(np.zeros(16560, np.float32), 16000)
    unit = asm.pop_unit()
    assert unit is not None and unit.frame is not None
    assert (unit.frame.t, unit.frame.seq) == (2.0, 2)


def test_frame_at_completion_time_is_attached_not_later_one() -> None:
    asm = UnitAssembler()
    asm.push_frame(frame(0.5))
    asm.push_audio(np.zeros(16560, np.float32), 16000)
    asm.push_frame(frame(1.2))
    unit = asm.pop_unit()
    assert unit is not None and unit.frame is not None and unit.frame.t == 0.5


def test_unit_without_frame_has_none() -> None:
    asm = UnitAssembler()
    asm.push_audio(np.zeros(16560, np.float32), 16000)
    unit = asm.pop_unit()
    assert unit is not None and unit.frame is None


def test_text_is_attached_once_in_order_to_next_completed_unit() -> None:
    asm = UnitAssembler(UnitConfig(max_pending_units=5))
    asm.push_text("a")
    asm.push_text("b")
    asm.push_audio(np.zeros(16560 + 16000, np.float32), 16000)  # completes two units
    asm.push_text("c")  # after both completed: goes to the third
    asm.push_audio(np.zeros(16000, np.float32), 16000)
    units = drain(asm, flush=False)
    assert [u.texts for u in units] == [("a", "b"), (), ("c",)]


def test_video_frame_image_is_read_only_and_accepts_grayscale() -> None:
    img = np.zeros((480, 640), np.uint8)
    f = VideoFrame(image=img, t=3, seq=5)
    assert not f.image.flags.writeable
    assert img.flags.writeable  # the caller's array is untouched
    assert isinstance(f.t, float) and f.t == 3.0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"image": np.zeros((4, 6, 4), np.uint8)}, "frame.image"),
        ({"image": np.zeros((4,), np.uint8)}, "frame.image"),
        ({"image": np.zeros((4, 6, 3), np.float32)}, "frame.image"),
        ({"image": np.zeros((0, 6, 3), np.uint8)}, "frame.image"),
        ({"image": np.zeros((4097, 1), np.uint8)}, "frame.image"),
        ({"image": [[0, 0]]}, "frame.image"),
        ({"t": float("nan")}, "frame.t"),
        ({"t": float("inf")}, "frame.t"),
        ({"t": "1.0"}, "frame.t"),
        ({"t": True}, "frame.t"),
        ({"seq": -1}, "frame.seq"),
    ],
)
def test_invalid_video_frame_raises_input_error_naming_field(kwargs: dict, field: str) -> None:
    args = {"image": np.zeros((4, 6, 3), np.uint8), "t": 0.0, "seq": 0} | kwargs
    with pytest.raises(InputError) as err:
        VideoFrame(**args)
    assert err.value.field == field
    assert str(err.value).startswith(f"{field}: ")


# ------------------------------------------------------------------- bad inputs


def _nan(n: int = 1600) -> np.ndarray:
    x = np.zeros(n, np.float32)
    x[[3, 50, 700]] = [np.nan, np.inf, -np.inf]
    return x


BAD_INPUTS: list[tuple[str, Callable[[UnitAssembler], None], str, str]] = [
    ("nan", lambda a: a.push_audio(_nan(), 44100), "audio.samples", "3 of 1600"),
    (
        "inf_float64",
        lambda a: a.push_audio(np.full(10, np.inf), 44100),
        "audio.samples",
        "NaN or inf",
    ),
    (
        "nan_at_other_rate",
        lambda a: a.push_audio(_nan(), 48000),
        "audio.samples",
        "NaN or inf",
    ),
    (
        "float64_overflow",
        lambda a: a.push_audio(np.full(4, 1e300), 44100),
        "audio.samples",
        "float32",
    ),
    ("int32", lambda a: a.push_audio(np.zeros(100, np.int32), 44100), "audio.dtype", "int32"),
    ("uint8", lambda a: a.push_audio(np.zeros(100, np.uint8), 44100), "audio.dtype", "uint8"),
    (
        "complex",
        lambda a: a.push_audio(np.zeros(100, np.complex64), 44100),
        "audio.dtype",
        "complex64",
    ),
    (
        "object",
        lambda a: a.push_audio(np.array([0.0, None]), 44100),
        "audio.dtype",
        "object",
    ),
    ("list", lambda a: a.push_audio([0.0, 0.1], 44100), "audio.dtype", "list"),
    (
        "stereo",
        lambda a: a.push_audio(np.zeros((100, 2), np.float32), 44100),
        "audio.channels",
        "got 2 channels",
    ),
    (
        "three_d",
        lambda a: a.push_audio(np.zeros((10, 1, 1), np.float32), 44100),
        "audio.channels",
        "3-D",
    ),
    (
        "rate_11025",
        lambda a: a.push_audio(np.zeros(100, np.float32), 11025),
        "audio.sample_rate",
        "44100",
    ),
    (
        "rate_float",
        lambda a: a.push_audio(np.zeros(100, np.float32), 16000.0),
        "audio.sample_rate",
        "16000.0",
    ),
    (
        "empty_bad_rate",
        lambda a: a.push_audio(np.zeros(0, np.float32), 11025),
        "audio.sample_rate",
        "11025",
    ),
    (
        "bad_frame",
        lambda a: a.push_frame(VideoFrame(np.zeros((4, 4, 3), np.float64), 1.0)),
        "frame.image",
        "uint8",
    ),
    ("frame_nan_t", lambda a: a.push_frame(frame(float("nan"))), "frame.t", "nan"),
    ("not_a_frame", lambda a: a.push_frame("frame"), "frame", "VideoFrame"),
    ("text_int", lambda a: a.push_text(42), "text", "int"),
    ("text_nul", lambda a: a.push_text("ab\x00c"), "text", "NUL"),
]


def _scenario(asm: UnitAssembler, bad: Callable[[UnitAssembler], None] | None) -> list[tuple]:
    x = noisy_signal(44100, 2.5, seed=7)
    asm.push_frame(frame(0.1))
    asm.push_text("hello")
    push_chunks(asm, x[:30000], 44100, [4410])
    if bad is not None:
        before = counters(asm)
        with pytest.raises(InputError):
            bad(asm)
        assert counters(asm) == before
    asm.push_frame(frame(0.9))
    asm.push_text("world")
    push_chunks(asm, x[30000:], 44100, [4410])
    return summary(drain(asm))


@pytest.mark.parametrize(
    ("bad", "field", "fragment"),
    [pytest.param(b, f, m, id=name) for name, b, f, m in BAD_INPUTS],
)
def test_bad_input_raises_named_input_error_and_leaves_state_unchanged(
    bad: Callable[[UnitAssembler], None], field: str, fragment: str
) -> None:
    probe = UnitAssembler()
    with pytest.raises(InputError) as err:
        bad(probe)
    assert isinstance(err.value, ValueError)
    assert err.value.field == field
    assert str(err.value).startswith(f"{field}: ")
    assert fragment in str(err.value)

    assert _scenario(UnitAssembler(), bad) == _scenario(UnitAssembler(), None)


def test_nan_error_message_format() -> None:
    with pytest.raises(InputError) as err:
        UnitAssembler().push_audio(_nan(), 16000)
    assert str(err.value) == "audio.samples: contains NaN or inf (3 of 1600 values)"


def test_unsupported_rate_message_lists_supported_rates() -> None:
    with pytest.raises(InputError) as err:
        UnitAssembler().push_audio(np.zeros(10, np.float32), 11025)
    assert "8000, 16000, 22050, 24000, 32000, 44100, 48000" in str(err.value)


# -------------------------------------------------------------------------- flush


def test_flush_returns_zero_padded_tail_with_valid_samples() -> None:
    x = noisy_signal(16000, (16560 + 5000) / 16000)
    asm = UnitAssembler()
    asm.push_text("bye")
    asm.push_audio(x[:16560], 16000)
    asm.push_audio(x[16560:], 16000)
    first = asm.pop_unit()
    assert first is not None and first.texts == ("bye",)
    tail = asm.flush()
    assert tail is not None
    assert (tail.index, tail.start_sample, len(tail.audio)) == (1, 16560, 16000)
    assert tail.valid_samples == 5000 and tail.is_padded
    np.testing.assert_array_equal(tail.audio[:5000], x[16560:])
    assert not np.any(tail.audio[5000:])
    assert asm.units_emitted == 2
    assert asm.flush() is None


def test_flush_of_a_resampled_stream_returns_the_withheld_tail() -> None:
    x = noisy_signal(44100, 0.5)
    asm = UnitAssembler()
    push_chunks(asm, x, 44100, [441])
    assert asm.samples_in < 8000  # soxr withholds its filter delay until drained
    tail = asm.flush()
    assert tail is not None and tail.index == 0 and len(tail.audio) == 16560
    assert tail.valid_samples == asm.samples_in == 8000
    np.testing.assert_allclose(tail.audio[:8000], resample(x, 44100), atol=1e-6)


def test_flush_with_only_pending_text_returns_silent_unit_and_nothing_otherwise() -> None:
    asm = UnitAssembler()
    assert asm.flush() is None
    asm.push_text("last words")
    unit = asm.flush()
    assert unit is not None
    assert unit.texts == ("last words",) and unit.valid_samples == 0
    assert len(unit.audio) == 16560 and not np.any(unit.audio)


def test_pushing_after_flush_continues_the_timeline() -> None:
    asm = UnitAssembler()
    asm.push_audio(np.zeros(100, np.float32), 48000)
    tail = asm.flush()
    assert tail is not None and tail.index == 0
    asm.push_audio(np.zeros(16000, np.float32), 16000)
    unit = asm.pop_unit()
    assert unit is not None and (unit.index, unit.start_sample) == (1, 16560)


def test_reset_forgets_everything() -> None:
    asm = UnitAssembler(UnitConfig(max_pending_units=1))
    asm.push_text("x")
    asm.push_frame(frame(5.0))
    asm.push_frame(frame(1.0))
    asm.push_audio(np.zeros(60000, np.float32), 44100)
    asm.push_audio(np.zeros(40000, np.float32), 16000)
    asm.reset()
    assert counters(asm) == (0, 0, 0, 0, 0, 0, 0)
    asm.push_audio(np.zeros(16560, np.float32), 16000)
    unit = asm.pop_unit()
    assert unit is not None
    assert (unit.index, unit.start_sample, unit.frame, unit.texts) == (0, 0, None, ())


# ------------------------------------------------------------------- the unit in progress


@pytest.mark.parametrize("rate", [16000, 22050, 44100])
def test_partial_audio_is_exactly_what_the_completed_unit_holds_there(rate: int) -> None:
    asm = UnitAssembler()
    signal = noisy_signal(rate, 2.4, seed=3)
    step = rate // 50  # 20 ms microphone frames
    heard: dict[int, list[PartialUnit]] = {}
    units: list[InputUnit] = []
    since = 0
    for start in range(0, signal.size, step):
        asm.push_audio(signal[start : start + step], rate)
        while (unit := asm.pop_unit()) is not None:
            units.append(unit)
            since = 0
        piece = asm.partial(since)
        if piece is not None:
            heard.setdefault(piece.index, []).append(piece)
            since = piece.end
    assert [u.index for u in units] == [0, 1]
    for unit in units:
        pieces = heard[unit.index]
        assert all(p.start_sample == unit.start_sample for p in pieces)
        assert all(p.length == unit.audio.size for p in pieces)
        assert [p.offset for p in pieces[1:]] == [p.end for p in pieces[:-1]]  # no gap, no overlap
        joined = np.concatenate([p.audio for p in pieces])
        assert pieces[0].offset == 0 and joined.size <= unit.audio.size
        np.testing.assert_array_equal(joined, unit.audio[: joined.size])
        assert pieces[-1].end_s <= unit.end_s
    tail = heard[2]  # the unit in progress at the end
    assert tail[0].start_sample == units[1].start_sample + units[1].audio.size


def test_partial_is_none_without_new_samples_and_is_a_read_only_copy() -> None:
    asm = UnitAssembler()
    assert asm.partial() is None
    asm.push_audio(np.full(400, 0.25, np.float32), 16000)
    piece = asm.partial()
    assert piece is not None and (piece.index, piece.offset, piece.end) == (0, 0, 400)
    assert piece.length == 16560 and piece.end_s == pytest.approx(400 / 16000)
    assert not piece.audio.flags.writeable
    assert asm.partial(400) is None
    later = asm.partial(100)
    assert later is not None and later.offset == 100 and later.audio.size == 300
    with pytest.raises(ValueError, match="do not fit"):
        PartialUnit(0, 0, 100, 50, np.zeros(60, np.float32))
