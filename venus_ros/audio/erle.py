"""Echo measurement: echo return loss enhancement (ERLE) and synthetic echo scenarios. Numpy only.

:func:`erle_db` measures how much an echo canceller removed from a stretch where the microphone
hears only the echo. :func:`build_echo_scenario` makes such material from any two mono signals:
the assistant's speech (the played reference) goes through a synthetic room
(:func:`synthetic_rir`: exponentially decaying noise with a direct path), is delayed and
attenuated, and the user's speech is added on top for double talk. Everything is deterministic
for a given seed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["EchoScenario", "build_echo_scenario", "energy_db", "erle_db", "synthetic_rir"]

#: -60 dB in amplitude-squared terms is a factor of 1e-6: ln(1e6) = 13.8155...
_LN_1E6 = math.log(1e6)


def _mono(name: str, samples: np.ndarray) -> np.ndarray:
    array = np.asarray(samples)
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-D mono samples, got shape {array.shape}")
    if not np.issubdtype(array.dtype, np.number):
        raise ValueError(f"{name} must be numeric, got dtype {array.dtype}")
    array = array.astype(np.float64)
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} contains NaN or infinite samples")
    return array


def energy_db(samples: np.ndarray) -> float:
    """Mean power of ``samples`` in dB (relative to full scale 1.0); ``-inf`` for silence."""
    array = _mono("samples", samples)
    if array.size == 0:
        raise ValueError("samples is empty")
    power = float(np.mean(array**2))
    return 10.0 * math.log10(power) if power > 0 else -math.inf


def erle_db(echo_only_in: np.ndarray, echo_only_out: np.ndarray) -> float:
    """Echo return loss enhancement: ``10 log10(E[in^2] / E[out^2])`` over an echo-only stretch.

    Args:
        echo_only_in: the microphone signal over a stretch where it holds only echo (no near-end
            speech).
        echo_only_out: the canceller's output for the same stretch (aligned by the caller for
            the canceller's latency; lengths may differ, powers are per sample).

    Returns:
        ERLE in dB; ``inf`` if the output is exactly silent.

    Raises:
        ValueError: if either is empty, not 1-D, not finite, or the input is silent.
    """
    x = _mono("echo_only_in", echo_only_in)
    y = _mono("echo_only_out", echo_only_out)
    if x.size == 0 or y.size == 0:
        raise ValueError("echo_only_in and echo_only_out must not be empty")
    p_in = float(np.mean(x**2))
    p_out = float(np.mean(y**2))
    if p_in <= 0:
        raise ValueError("echo_only_in is silent: there is no echo to measure")
    if p_out <= 0:
        return math.inf
    return 10.0 * math.log10(p_in / p_out)


def synthetic_rir(
    sample_rate: int = 16000,
    rt60_s: float = 0.3,
    *,
    seed: int = 0,
    direct_to_reverb_db: float = 0.0,
) -> np.ndarray:
    """A synthetic room impulse response with unit energy.

    A direct-path impulse at sample 0 plus Gaussian noise whose power decays by 60 dB over
    ``rt60_s`` (amplitude ``exp(-6.91 t / rt60)``), truncated at ``rt60_s``. The direct path
    carries ``direct_to_reverb_db`` more energy than the tail (a robot's speaker close to its
    microphone has a high ratio; across a room it is near 0 dB or below).

    Raises:
        ValueError: for a non-positive rate or RT60.
    """
    if sample_rate <= 0:
        raise ValueError(f"sample_rate must be > 0, got {sample_rate}")
    if not rt60_s > 0:
        raise ValueError(f"rt60_s must be > 0, got {rt60_s}")
    length = max(2, round(rt60_s * sample_rate))
    t = np.arange(length) / sample_rate
    tail = np.random.default_rng(seed).standard_normal(length) * np.exp(-0.5 * _LN_1E6 * t / rt60_s)
    tail[0] = 0.0
    tail /= math.sqrt(float(np.sum(tail**2)))
    rir = tail
    rir[0] = math.sqrt(10.0 ** (direct_to_reverb_db / 10.0))
    return rir / math.sqrt(float(np.sum(rir**2)))


@dataclass(frozen=True)
class EchoScenario:
    """A synthetic microphone recording with echo, at one rate, all arrays the same length.

    Attributes:
        sample_rate: rate of every array.
        reference: what the speaker played (the assistant's speech, then silence).
        echo: the echo at the microphone (reference through room, delay and gain).
        user: the user's speech at the microphone (zeros where the user is silent).
        mic: what the microphone hears: ``echo + user`` plus the noise floor.
        delay_samples: the pure delay added before the room response.
        echo_only: ``(start, stop)`` sample range where the assistant's echo is audible and the
            user is silent.
        double_talk: ``(start, stop)`` where both are audible (empty if no user).
        user_only: ``(start, stop)`` where only the user is audible (after the echo has died).
    """

    sample_rate: int
    reference: np.ndarray
    echo: np.ndarray
    user: np.ndarray
    mic: np.ndarray
    delay_samples: int
    echo_only: tuple[int, int]
    double_talk: tuple[int, int]
    user_only: tuple[int, int]


def build_echo_scenario(
    assistant: np.ndarray,
    user: np.ndarray | None = None,
    *,
    sample_rate: int = 16000,
    delay_ms: float = 100.0,
    echo_gain_db: float = -6.0,
    user_gain_db: float = -6.0,
    user_start_s: float | None = None,
    rir: np.ndarray | None = None,
    noise_db: float | None = -70.0,
    seed: int = 0,
) -> EchoScenario:
    """Mix the assistant's echo and the user's speech as a microphone would hear them.

    The reference is ``assistant`` followed by silence long enough for the echo (delay and room)
    to die out and the user to finish. The echo is ``reference`` convolved with ``rir``
    (default :func:`synthetic_rir` with ``seed``), delayed by ``delay_ms`` and scaled by
    ``echo_gain_db``. The user (scaled by ``user_gain_db``) starts at ``user_start_s`` (default:
    halfway through the assistant's speech), giving double talk until the assistant's echo ends.
    A white noise floor at ``noise_db`` (dBFS power, None for none) keeps the mic realistic.

    Args:
        assistant: the assistant's speech, mono, at ``sample_rate``.
        user: the user's speech, mono, at ``sample_rate``; None for echo only.
        sample_rate: rate of the inputs and of every output array.
        delay_ms: pure delay of the echo path, >= 0.
        echo_gain_db: gain of the echo path (applied after the unit-energy room response).
        user_gain_db: gain applied to ``user``.
        user_start_s: where the user starts; must lie within the assistant's speech.
        rir: a room impulse response; default a deterministic 0.3 s synthetic one.
        noise_db: power of the white noise floor in dBFS, or None.
        seed: seed of the default room response and of the noise.

    Raises:
        ValueError: for empty or non-finite input, a negative delay, or a user start outside
            the assistant's speech.
    """
    a = _mono("assistant", assistant)
    if a.size == 0:
        raise ValueError("assistant is empty")
    if sample_rate <= 0:
        raise ValueError(f"sample_rate must be > 0, got {sample_rate}")
    if delay_ms < 0:
        raise ValueError(f"delay_ms must be >= 0, got {delay_ms}")
    room = synthetic_rir(sample_rate, seed=seed) if rir is None else _mono("rir", rir)
    if room.size == 0:
        raise ValueError("rir is empty")
    u = None if user is None else _mono("user", user) * 10.0 ** (user_gain_db / 20.0)
    delay = round(delay_ms * sample_rate / 1000.0)
    echo_end = a.size + delay + room.size - 1
    if u is None:
        start = total = echo_end
    else:
        start = round(a.size / 2 if user_start_s is None else user_start_s * sample_rate)
        if not 0 <= start < a.size:
            raise ValueError(
                f"user_start_s must lie within the assistant's speech (0..{a.size / sample_rate}"
                f" s), got {start / sample_rate} s"
            )
        total = max(echo_end, start + u.size)
    reference = np.zeros(total)
    reference[: a.size] = a
    echo = np.zeros(total)
    wet = np.convolve(a, room)[: total - delay] * 10.0 ** (echo_gain_db / 20.0)
    echo[delay : delay + wet.size] = wet
    near = np.zeros(total)
    if u is not None:
        near[start : start + u.size] = u
    mic = echo + near
    if noise_db is not None:
        rng = np.random.default_rng(seed + 1)
        mic = mic + rng.standard_normal(total) * 10.0 ** (noise_db / 20.0)
    if u is None:
        double_talk = (start, start)
        user_only = (total, total)
    else:
        double_talk = (start, min(start + u.size, echo_end))
        user_only = (min(echo_end, start + u.size), start + u.size)
    f32 = np.float32
    return EchoScenario(
        sample_rate=sample_rate,
        reference=reference.astype(f32),
        echo=echo.astype(f32),
        user=near.astype(f32),
        mic=mic.astype(f32),
        delay_samples=delay,
        echo_only=(delay, start),
        double_talk=double_talk,
        user_only=user_only,
    )
