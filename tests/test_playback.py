"""Tests for venus_ros.core.playback (the real-time speaker model and its acks)."""

from __future__ import annotations

import numpy as np
import pytest

from venus_ros.core.clock import FakeClock
from venus_ros.core.playback import PlaybackAck, PlaybackQueue, SpeechChunk

SR = 24_000


def chunk(unit: int, samples: int, rate: int = SR, seed: int | None = None) -> SpeechChunk:
    rng = np.random.default_rng(unit if seed is None else seed)
    audio = rng.uniform(-1.0, 1.0, samples).astype(np.float32)
    return SpeechChunk(
        unit_index=unit,
        turn_id=1,
        first_sample=0,
        audio=audio,
        sample_rate=rate,
        text=f"unit {unit}",
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


# --- the data classes -----------------------------------------------------------------------


def test_speech_chunk_samples_is_the_audio_length() -> None:
    assert chunk(0, 480).samples == 480
    assert chunk(0, 0).samples == 0


@pytest.mark.parametrize(
    ("ack", "complete"),
    [
        (PlaybackAck(0, 0, 10), False),
        (PlaybackAck(0, 9, 10), False),
        (PlaybackAck(0, 10, 10), True),
        (PlaybackAck(0, 3, 10, flushed=True), True),
        (PlaybackAck(0, 0, 10, flushed=True), True),
    ],
)
def test_ack_is_complete_when_fully_played_or_flushed(ack: PlaybackAck, complete: bool) -> None:
    assert ack.complete is complete


# --- playing back to back -------------------------------------------------------------------


def test_chunk_plays_in_real_time_from_its_enqueue_time(clock: FakeClock) -> None:
    queue = PlaybackQueue(SR)
    clock.advance(1.0)
    queue.enqueue(chunk(0, 24_000), clock.now())
    assert queue.advance(clock.now()) == []
    assert queue.advance(clock.advance(0.5)) == [PlaybackAck(0, 12_000, 24_000)]
    assert queue.advance(clock.advance(0.25)) == [PlaybackAck(0, 18_000, 24_000)]
    last = queue.advance(clock.advance(0.25))
    assert last == [PlaybackAck(0, 24_000, 24_000)]
    assert last[0].complete
    assert queue.advance(clock.advance(1.0)) == []


def test_nothing_plays_before_the_enqueue_time() -> None:
    queue = PlaybackQueue(SR)
    queue.enqueue(chunk(0, 24_000), 2.0)
    assert queue.advance(1.999) == []
    assert queue.pending_samples == 24_000


def test_advance_without_time_passing_gives_no_new_acks(clock: FakeClock) -> None:
    queue = PlaybackQueue(SR)
    queue.enqueue(chunk(0, 24_000), 0.0)
    assert queue.advance(clock.advance(0.1)) == [PlaybackAck(0, 2_400, 24_000)]
    assert queue.advance(clock.now()) == []
    assert queue.advance(clock.now() - 0.05) == []  # an earlier time never un-plays


def test_second_chunk_starts_when_the_first_ends_not_when_enqueued() -> None:
    queue = PlaybackQueue(SR)
    queue.enqueue(chunk(0, 24_000), 1.0)  # plays 1.0 .. 2.0
    queue.enqueue(chunk(1, 12_000), 1.2)  # queued behind it: plays 2.0 .. 2.5
    assert queue.idle_at == 2.5
    assert queue.advance(1.9) == [PlaybackAck(0, 21_600, 24_000)]
    assert queue.advance(2.25) == [PlaybackAck(0, 24_000, 24_000), PlaybackAck(1, 6_000, 12_000)]
    assert queue.advance(2.5) == [PlaybackAck(1, 12_000, 12_000)]
    assert queue.pending_samples == 0


def test_one_advance_can_finish_several_chunks() -> None:
    queue = PlaybackQueue(SR)
    for unit in range(3):
        queue.enqueue(chunk(unit, 4_800), 0.0)  # 0.2 s each
    assert queue.advance(10.0) == [PlaybackAck(u, 4_800, 4_800) for u in range(3)]


def test_chunk_enqueued_after_the_speaker_went_idle_starts_at_its_enqueue_time() -> None:
    queue = PlaybackQueue(SR)
    queue.enqueue(chunk(0, 24_000), 0.0)  # plays 0.0 .. 1.0
    assert queue.advance(1.0) == [PlaybackAck(0, 24_000, 24_000)]
    queue.enqueue(chunk(1, 24_000), 3.0)  # the speaker was idle from 1.0 to 3.0
    assert queue.idle_at == 4.0
    assert queue.advance(3.5) == [PlaybackAck(1, 12_000, 24_000)]


def test_back_to_back_chunks_do_not_drift_over_ten_minutes() -> None:
    rate, per_chunk = 16_000, 320  # 20 ms chunks
    count = 30_000  # ten minutes
    queue = PlaybackQueue(rate)
    shared_audio = np.zeros(per_chunk, dtype=np.float32)
    for unit in range(count):
        queue.enqueue(SpeechChunk(unit, 1, unit * per_chunk, shared_audio, rate, ""), 0.0)
    assert queue.idle_at == pytest.approx(600.0, abs=1e-9)
    played: dict[int, int] = {}
    for t in (0.013, 1.0, 299.987, 599.999):
        for ack in queue.advance(t):
            played[ack.unit_index] = ack.samples_played
        assert sum(played.values()) == round(t * rate)
    queue.advance(600.0)
    assert queue.pending_samples == 0


# --- flush ----------------------------------------------------------------------------------


def test_flush_acks_the_remaining_chunks_as_flushed_with_exact_samples_played() -> None:
    queue = PlaybackQueue(SR)
    queue.enqueue(chunk(0, 24_000), 1.0)  # 1.0 .. 2.0
    queue.enqueue(chunk(1, 24_000), 1.0)  # 2.0 .. 3.0
    acks = queue.flush(1.25)
    flushed = [a for a in acks if a.flushed]
    assert flushed == [
        PlaybackAck(0, 6_000, 24_000, flushed=True),
        PlaybackAck(1, 0, 24_000, flushed=True),
    ]
    assert all(a.samples_played == 6_000 for a in acks if a.unit_index == 0)
    assert all(a.complete for a in flushed)
    assert queue.pending_samples == 0
    assert queue.idle_at == 1.25
    assert queue.advance(10.0) == []


def test_flush_does_not_mark_chunks_that_finished_before_it_as_flushed() -> None:
    queue = PlaybackQueue(SR)
    queue.enqueue(chunk(0, 24_000), 1.0)  # 1.0 .. 2.0
    queue.enqueue(chunk(1, 24_000), 1.0)  # 2.0 .. 3.0
    acks = queue.flush(2.5)
    assert PlaybackAck(0, 24_000, 24_000) in acks
    assert [a for a in acks if a.flushed] == [PlaybackAck(1, 12_000, 24_000, flushed=True)]
    assert not [a for a in acks if a.unit_index == 0 and a.flushed]


def test_flush_after_everything_played_flushes_nothing() -> None:
    queue = PlaybackQueue(SR)
    queue.enqueue(chunk(0, 2_400), 0.0)
    assert queue.advance(1.0) == [PlaybackAck(0, 2_400, 2_400)]
    assert queue.flush(1.5) == []
    assert queue.idle_at == 1.5


def test_flush_of_an_empty_queue_returns_no_acks() -> None:
    queue = PlaybackQueue(SR)
    assert queue.flush(3.0) == []
    assert queue.idle_at == 3.0


def test_after_flush_the_next_chunk_starts_immediately() -> None:
    queue = PlaybackQueue(SR)
    queue.enqueue(chunk(0, 24_000), 1.0)
    queue.enqueue(chunk(1, 24_000), 1.0)  # would have started at 2.0
    queue.flush(1.25)
    queue.enqueue(chunk(2, 24_000), 1.25)
    assert queue.idle_at == 2.25
    assert queue.advance(1.75) == [PlaybackAck(2, 12_000, 24_000)]
    assert queue.advance(2.25) == [PlaybackAck(2, 24_000, 24_000)]


# --- validation and empty chunks ------------------------------------------------------------


def test_sample_rate_mismatch_raises_naming_speech_sample_rate() -> None:
    queue = PlaybackQueue(SR)
    with pytest.raises(ValueError, match=r"speech\.sample_rate") as info:
        queue.enqueue(chunk(0, 1_600, rate=16_000), 0.0)
    assert "16000" in str(info.value)
    assert "24000" in str(info.value)
    assert queue.pending_samples == 0
    assert queue.idle_at == 0.0
    assert queue.advance(10.0) == []


def test_empty_chunk_is_ignored() -> None:
    queue = PlaybackQueue(SR)
    queue.enqueue(chunk(0, 24_000), 0.0)  # 0.0 .. 1.0
    queue.enqueue(chunk(1, 0), 0.5)
    assert queue.pending_samples == 24_000
    assert queue.idle_at == 1.0
    queue.enqueue(chunk(2, 12_000), 0.5)  # still starts when chunk 0 ends
    assert queue.advance(5.0) == [PlaybackAck(0, 24_000, 24_000), PlaybackAck(2, 12_000, 12_000)]


def test_empty_chunk_on_an_idle_speaker_does_not_move_idle_at() -> None:
    queue = PlaybackQueue(SR)
    queue.enqueue(chunk(0, 0), 7.0)
    assert queue.idle_at == 0.0
    assert queue.pending_samples == 0
    assert queue.advance(8.0) == []


# --- pending_samples and idle_at ------------------------------------------------------------


def test_pending_samples_counts_queued_samples_not_yet_played() -> None:
    queue = PlaybackQueue(SR)
    assert queue.pending_samples == 0
    queue.enqueue(chunk(0, 24_000), 1.0)
    queue.enqueue(chunk(1, 12_000), 1.0)
    assert queue.pending_samples == 36_000
    queue.advance(1.5)
    assert queue.pending_samples == 24_000
    queue.advance(2.25)
    assert queue.pending_samples == 6_000
    queue.advance(2.5)
    assert queue.pending_samples == 0


def test_idle_at_is_when_everything_queued_will_have_played() -> None:
    queue = PlaybackQueue(SR)
    assert queue.idle_at == 0.0
    queue.enqueue(chunk(0, 24_000), 1.0)
    assert queue.idle_at == 2.0
    queue.enqueue(chunk(1, 12_000), 1.5)
    assert queue.idle_at == 2.5
    queue.advance(2.2)  # playing does not move the finish time
    assert queue.idle_at == 2.5


# --- recording ------------------------------------------------------------------------------


def test_recorded_pieces_concatenate_to_exactly_the_played_audio() -> None:
    queue = PlaybackQueue(SR, record=True)
    first, second = chunk(0, 24_000), chunk(1, 7_000)
    queue.enqueue(first, 1.0)  # 1.0 .. 2.0
    queue.enqueue(second, 1.1)  # 2.0 .. 2.291666...
    for t in (0.5, 1.3, 1.30001, 1.3, 1.999, 2.1, 2.2, 9.0):
        queue.advance(t)
    pieces = queue.played_audio
    assert len(pieces) >= 5
    played = np.concatenate([audio for _, audio in pieces])
    np.testing.assert_array_equal(played, np.concatenate([first.audio, second.audio]))


def test_recorded_pieces_start_when_their_samples_played() -> None:
    queue = PlaybackQueue(SR, record=True)
    first, second = chunk(0, 24_000), chunk(1, 12_000)
    queue.enqueue(first, 1.0)
    queue.enqueue(second, 1.0)
    queue.advance(1.5)
    queue.advance(2.25)
    queue.advance(3.0)
    starts = [start for start, _ in queue.played_audio]
    lengths = [len(audio) for _, audio in queue.played_audio]
    # first chunk: 1.0-1.5, 1.5-2.0; second chunk: 2.0-2.25, 2.25-2.5
    assert starts == pytest.approx([1.0, 1.5, 2.0, 2.25])
    assert lengths == [12_000, 12_000, 6_000, 6_000]


def test_recorded_audio_after_flush_is_only_what_was_played() -> None:
    queue = PlaybackQueue(SR, record=True)
    first, second = chunk(0, 24_000), chunk(1, 24_000)
    queue.enqueue(first, 1.0)
    queue.enqueue(second, 1.0)
    queue.flush(1.25)
    played = np.concatenate([audio for _, audio in queue.played_audio])
    np.testing.assert_array_equal(played, first.audio[:6_000])
    third = chunk(2, 2_400)
    queue.enqueue(third, 1.25)
    queue.advance(5.0)
    start, audio = queue.played_audio[-1]
    assert start == 1.25
    np.testing.assert_array_equal(audio, third.audio)


def test_without_record_no_audio_is_kept() -> None:
    queue = PlaybackQueue(SR)
    queue.enqueue(chunk(0, 24_000), 0.0)
    assert queue.advance(2.0) == [PlaybackAck(0, 24_000, 24_000)]
    assert queue.played_audio == []
