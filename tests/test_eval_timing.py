"""FDB-style timing: merging, double talk and response gaps on hand-made segments; the Silero
detector on real synthetic speech agrees with the energy detector; spoken numbers round-trip."""

from __future__ import annotations

import numpy as np
import pytest

from venus_ros.eval.numbers import (
    number_words,
    ordinal_words,
    parse_duration,
    parse_number,
    spoken_duration,
)
from venus_ros.eval.timing import (
    double_talk,
    energy_segments,
    merge_segments,
    response_gaps,
    speech_segments,
)


def test_merge_joins_gaps_up_to_the_threshold() -> None:
    segs = [(0.0, 1.0), (1.5, 2.0), (2.61, 3.0), (3.0, 3.2)]
    assert merge_segments(segs, 0.5) == [(0.0, 2.0), (2.61, 3.2)]
    assert merge_segments(segs, 0.62) == [(0.0, 3.2)]
    assert merge_segments([], 0.5) == []


def test_double_talk_and_response_gaps_as_fdb_defines_them() -> None:
    user = [(1.0, 2.0), (5.0, 6.0), (9.0, 9.5)]
    model = [(0.0, 5.5), (7.0, 8.0)]
    # Overlaps: [1, 2] and [5, 5.5].
    assert double_talk(user, model) == [(1.0, 2.0), (5.0, 5.5)]
    # User end -> next model start after it: 2.0 -> 7.0 and 6.0 -> 7.0 share a start: the later
    # user end wins; 9.5 has no model start after it.
    assert response_gaps(user, model) == [(6.0, 7.0)]


@pytest.fixture(scope="module")
def speech() -> tuple[np.ndarray, int]:
    """Two espeak-ng sentences with a 0.4 s and a 1.2 s pause, at 24 kHz."""
    from venus_ros.audio.tts import EspeakTts

    tts = EspeakTts(output_rate=24000)
    parts = []
    for sentence in ("The train leaves at ten past eight.", "Platform four.", "Goodbye now."):
        audio, rate = tts.render(sentence)
        audio = np.asarray(audio, np.float32)
        voiced = energy_segments(audio, rate)  # espeak pads each sentence with silence
        parts.append(audio[round(voiced[0][0] * rate) : round(voiced[-1][1] * rate)])
    rate = 24000
    gap1, gap2 = np.zeros(round(0.4 * rate), np.float32), np.zeros(round(1.2 * rate), np.float32)
    lead = np.zeros(rate // 2, np.float32)
    return np.concatenate([lead, parts[0], gap1, parts[1], gap2, parts[2], lead]), rate


def test_silero_and_energy_agree_on_synthetic_speech(speech: tuple[np.ndarray, int]) -> None:
    audio, rate = speech
    silero = merge_segments(speech_segments(audio, rate, "silero"), 0.5)
    energy = merge_segments(energy_segments(audio, rate), 0.5)
    # The 0.4 s pause is bridged by both and the 1.2 s pause splits: two turns.
    assert len(silero) == len(energy) == 2
    for (a1, b1), (a2, b2) in zip(silero, energy, strict=True):
        assert abs(a1 - a2) <= 0.1 and abs(b1 - b2) <= 0.15


def test_speech_segments_refuse_bad_input() -> None:
    with pytest.raises(ValueError, match="1-D"):
        speech_segments(np.zeros((2, 2)), 16000)
    with pytest.raises(ValueError, match="rate"):
        speech_segments(np.zeros(10), 0)
    with pytest.raises(ValueError, match="detector"):
        speech_segments(np.zeros(10), 16000, "webrtc")
    assert speech_segments(np.zeros(0, np.float32), 16000) == []
    assert speech_segments(np.zeros(16000, np.float32), 16000) == []


def test_numbers_and_durations_round_trip() -> None:
    for n in (0, 7, 13, 21, 99, 100, 105, 342, 1000, 1005, 2300, 45_678, 1_000_021):
        assert parse_number(number_words(n)) == n
    assert number_words(342) == "three hundred and forty-two"
    assert ordinal_words(21) == "twenty-first" and ordinal_words(3) == "third"
    assert parse_number("twenty-first") == 21 and parse_number("21st") == 21
    assert parse_number("a hundred and five") == 105 and parse_number("one and a half") == 1.5
    assert parse_number("kitchen") is None and parse_number("") is None
    assert parse_duration("a minute and a half") == 90
    assert parse_duration("a quarter of an hour") == 900
    assert parse_duration("an hour and twenty minutes") == 4800
    assert parse_duration("two and a half hours") == 9000
    assert parse_duration("the kitchen") is None
    rng = np.random.default_rng(7)
    drawn = [spoken_duration(rng) for _ in range(200)]
    assert all(parse_duration(words) == seconds for words, seconds in drawn)
    assert len({words for words, _ in drawn}) > 100  # a general generator, not a short list
    with pytest.raises(ValueError):
        number_words(-1)
