"""Compute accounting against audio time."""

from __future__ import annotations

import pytest

from venus_ros.audio.meter import ComputeMeter


def test_rtf_is_compute_over_audio() -> None:
    meter = ComputeMeter("vad")
    meter.add(0.05, 1.0)
    meter.add(0.15, 1.0)
    reading = meter.reading()
    assert reading.calls == 2
    assert reading.rtf == pytest.approx(0.1)


def test_measure_charges_the_body_even_when_it_raises() -> None:
    meter = ComputeMeter("asr")
    with pytest.raises(RuntimeError), meter.measure(audio_seconds=0.5):
        raise RuntimeError("model failed")
    reading = meter.reading()
    assert reading.calls == 1 and reading.audio_s == 0.5 and reading.compute_s >= 0


def test_no_audio_means_rtf_zero() -> None:
    assert ComputeMeter("tts").reading().rtf == 0.0
