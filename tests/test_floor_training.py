"""Training the floor policy: room noise, hearing conditions, sub-step labels and the
threshold simulation (fast; the end-to-end runs are in test_floor_policy.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from venus_ros.training.floor import (
    ECHO_DELAYS_S,
    ECHO_GAINS_DB,
    NOISE_KINDS,
    NOISE_SNRS_DB,
    Row,
    _choose_yield,
    _condition,
    _labels,
    _SampleTrace,
    _Truth,
    _yield_outcomes,
    add_noise,
    room_noise,
    train_floor,
)

RATE = 16000


def band_power(x: np.ndarray, lo: float, hi: float) -> float:
    spectrum = np.abs(np.fft.rfft(x)) ** 2
    freqs = np.fft.rfftfreq(len(x), 1.0 / RATE)
    return float(spectrum[(freqs >= lo) & (freqs < hi)].sum())


@pytest.mark.parametrize("kind", NOISE_KINDS)
def test_room_noise_has_unit_level_and_is_seeded(kind: str) -> None:
    a = room_noise(RATE * 2, RATE, kind, np.random.default_rng(3))
    b = room_noise(RATE * 2, RATE, kind, np.random.default_rng(3))
    c = room_noise(RATE * 2, RATE, kind, np.random.default_rng(4))
    assert a.dtype == np.float32 and a.shape == (RATE * 2,)
    assert float(np.sqrt(np.mean(a.astype(np.float64) ** 2))) == pytest.approx(1.0, rel=1e-3)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_room_noise_spectra_differ_by_kind() -> None:
    rng = np.random.default_rng(0)
    pink, brown, hum, fan = (room_noise(RATE * 4, RATE, k, rng) for k in NOISE_KINDS)
    # brown is darker than pink; the fan has (almost) nothing below 150 Hz or above 3 kHz
    ratio = {
        name: band_power(x, 50, 500) / band_power(x, 2000, 6000)
        for name, x in (("pink", pink), ("brown", brown))
    }
    assert ratio["brown"] > 10 * ratio["pink"] > 10
    assert band_power(fan, 150, 3000) > 100 * band_power(fan, 3500, 8000)
    # the hum's power sits on the mains frequency (50 or 60 Hz)
    mains = max(band_power(hum, 49, 51), band_power(hum, 59, 61))
    assert mains > 0.3 * band_power(hum, 0, 8000)
    with pytest.raises(ValueError, match="noise kind"):
        room_noise(10, RATE, "jet engine", rng)


def test_add_noise_sets_the_speech_to_noise_ratio() -> None:
    t = np.arange(RATE * 3) / RATE
    speech = (0.2 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
    speech[RATE : 2 * RATE] = 0.0  # a silent second does not lower the speech level
    noisy = add_noise(speech, RATE, "pink", 10.0, np.random.default_rng(1))
    noise = noisy.astype(np.float64) - speech
    level = 0.2 / np.sqrt(2)
    assert float(np.sqrt(np.mean(noise**2))) == pytest.approx(level / 10**0.5, rel=0.05)
    silent = add_noise(np.zeros(100, np.float32), RATE, "pink", 10.0, np.random.default_rng(1))
    assert not silent.any()  # nothing to measure a level on: left silent


def test_hearing_conditions_are_seeded_and_in_range() -> None:
    conditions = [_condition(5, k, 0.5, 0.5) for k in range(200)]
    assert conditions == [_condition(5, k, 0.5, 0.5) for k in range(200)]
    echoes = [c for c in conditions if c.echo]
    noisy = [c for c in conditions if c.noise is not None]
    assert 60 < len(echoes) < 140 and 60 < len(noisy) < 140
    assert all(ECHO_DELAYS_S[0] <= c.echo_delay_s <= ECHO_DELAYS_S[1] for c in conditions)
    assert all(ECHO_GAINS_DB[0] <= c.echo_gain_db <= ECHO_GAINS_DB[1] for c in conditions)
    assert {c.noise for c in noisy} == set(NOISE_KINDS)
    assert {c.snr_db for c in noisy} <= set(NOISE_SNRS_DB)
    assert not any(c.echo or c.noise for c in (_condition(5, k, 0.0, 0.0) for k in range(50)))


class _Obs:
    """The few observation fields the labels read."""

    def __init__(self, t: float, speaking: bool, forced: bool = True, turn_speech: float = 0.0):
        self.t = t
        self.assistant_speaking = speaking
        self.forced_turn = forced
        self.user_turn_speech_s = turn_speech


def test_sub_step_labels_of_an_interruption() -> None:
    truth = _Truth("interruption", (4.0, 4.5), 4.5, 5.5, 1.0)
    labels = {t: _labels(_Obs(t, True), truth)[0] for t in (3.8, 4.2, 4.4, 6.4, 6.6)}
    # no yield before the onset, none required in the first 0.3 s, required up to end + 2 s
    assert labels == {3.8: 0, 4.2: -1, 4.4: 1, 6.4: 1, 6.6: -1}
    backchannel = _Truth("backchannel", (4.0, 4.5), None, None, 1.0)
    assert _labels(_Obs(4.4, True), backchannel) == (0, -1)
    # listening: the turn is wanted 0.3 s after the interruption's end
    assert _labels(_Obs(4.9, False, turn_speech=0.5), truth) == (-1, 1)
    assert _labels(_Obs(4.6, False, turn_speech=0.5), truth) == (-1, -1)
    idle = _Truth("other_directed_idle", None, None, None, 1.0)
    assert _labels(_Obs(9.0, False, turn_speech=1.0), idle) == (-1, 0)


def trace(category: str, probs: list[float], overlap: tuple[float, float]) -> _SampleTrace:
    """A scripted turn observed every 0.2 s from t = 0.2 with these yield probabilities."""
    out = _SampleTrace(category, overlap)
    for i, p in enumerate(probs):
        t = 0.2 * (i + 1)
        row = Row("x", category, t, True, True, np.zeros((3, 1)), ("", "", ""), -1, -1)
        out.rows.append((row, p, 0.0))
    return out


def test_yield_simulation_counts_sub_steps_latency_and_early_yields() -> None:
    onset = (1.0, 1.4)
    quick = trace("interruption", [0.1] * 5 + [0.9] * 6, onset)  # high from t = 1.2
    slow = trace("interruption", [0.1] * 7 + [0.6, 0.9, 0.9, 0.9], onset)  # from t = 1.6
    early = trace("backchannel", [0.9] + [0.1] * 10, onset)  # a yield before the onset
    calm = trace("backchannel", [0.1] * 5 + [0.9] + [0.1] * 5, onset)  # one high sub-step
    traces = {"q": quick, "s": slow, "e": early, "c": calm}
    late = {"q", "s"}
    latencies: list[float] = []
    out = _yield_outcomes(traces, 0.8, 1, late, latencies)
    assert out == {"interruption": [True, True], "backchannel": [False, False]}
    assert latencies == pytest.approx([0.2, 0.8])
    latencies = []
    out = _yield_outcomes(traces, 0.8, 2, late, latencies)  # two in a row: the blip passes
    assert out == {"interruption": [True, True], "backchannel": [True, True]}
    assert latencies == pytest.approx([0.4, 1.0])
    # interruptions where the teacher yielded early are not scored
    assert _yield_outcomes(traces, 0.8, 2, set(), None) == {"backchannel": [True, True]}
    # the goals are met with two in a row; then the threshold that stops soonest (slow's 0.6)
    threshold, count, rates = _choose_yield(traces, late)
    assert count == 2 and rates["backchannel"] == 1.0 and rates["interruption"] == 1.0
    assert threshold <= 0.6 and rates["mean_stop_s"] == pytest.approx(0.6)


def test_training_rejects_bad_shares(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="echo_share"):
        train_floor(0, tmp_path, echo_share=1.5)
    with pytest.raises(ValueError, match="noise_share"):
        train_floor(0, tmp_path, noise_share=-0.1)
