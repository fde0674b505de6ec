"""Tests for venus_ros.core.clock (MonotonicClock and FakeClock)."""

from __future__ import annotations

import itertools
import threading

import pytest

from venus_ros.core.clock import FakeClock, MonotonicClock


def test_fake_clock_starts_at_zero_by_default() -> None:
    assert FakeClock().now() == 0.0


def test_fake_clock_starts_at_the_given_time() -> None:
    clock = FakeClock(start=12.5)
    assert clock.now() == 12.5
    assert isinstance(clock.now(), float)


def test_fake_clock_does_not_move_on_its_own() -> None:
    clock = FakeClock(3.0)
    assert [clock.now() for _ in range(5)] == [3.0] * 5


def test_advance_moves_time_forward_and_returns_the_new_time() -> None:
    clock = FakeClock(1.0)
    assert clock.advance(0.25) == 1.25
    assert clock.now() == 1.25
    assert clock.advance(2.0) == 3.25
    assert clock.now() == 3.25


def test_advance_by_zero_leaves_time_unchanged() -> None:
    clock = FakeClock(4.0)
    assert clock.advance(0.0) == 4.0
    assert clock.now() == 4.0


def test_negative_advance_raises_and_leaves_time_unchanged() -> None:
    clock = FakeClock(5.0)
    with pytest.raises(ValueError, match="seconds must be >= 0"):
        clock.advance(-0.001)
    assert clock.now() == 5.0


def test_sleep_advances_fake_time_instantly() -> None:
    clock = FakeClock(1.0)
    clock.sleep(0.5)
    assert clock.now() == 1.5
    clock.sleep(3600.0)  # an hour of fake time costs nothing
    assert clock.now() == 3601.5


@pytest.mark.parametrize("seconds", [0.0, -1.0])
def test_sleep_of_non_positive_seconds_is_a_no_op(seconds: float) -> None:
    clock = FakeClock(2.0)
    clock.sleep(seconds)
    assert clock.now() == 2.0


def test_concurrent_advances_are_not_lost() -> None:
    clock = FakeClock()
    threads_n, steps = 4, 2_000
    barrier = threading.Barrier(threads_n)

    def work() -> None:
        barrier.wait()
        for _ in range(steps):
            clock.advance(0.5)  # exactly representable, so the sum is exact

    threads = [threading.Thread(target=work) for _ in range(threads_n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert clock.now() == threads_n * steps * 0.5


def test_reader_thread_sees_time_that_never_decreases_while_another_advances() -> None:
    clock = FakeClock()
    done = threading.Event()
    seen: list[float] = []

    def reader() -> None:
        while not done.is_set():
            seen.append(clock.now())
        seen.append(clock.now())

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for _ in range(5_000):
            clock.advance(0.001)
    finally:
        done.set()
        thread.join()
    assert seen, "reader thread never read the clock"
    assert all(a <= b for a, b in itertools.pairwise(seen))
    assert seen[-1] == clock.now()


def test_monotonic_clock_starts_near_zero() -> None:
    clock = MonotonicClock()
    first = clock.now()
    assert 0.0 <= first < 1.0


def test_monotonic_clock_never_decreases() -> None:
    clock = MonotonicClock()
    reads = [clock.now() for _ in range(10_000)]
    assert all(a <= b for a, b in itertools.pairwise(reads))
    assert reads[0] >= 0.0


def test_monotonic_clocks_have_independent_origins() -> None:
    early = MonotonicClock()
    for _ in range(1_000):
        early.now()
    late = MonotonicClock()
    # the later clock's zero is no earlier than the earlier clock's, so it never reads ahead of it
    late_now = late.now()
    assert early.now() >= late_now


def test_monotonic_sleep_of_negative_seconds_is_a_no_op_instead_of_an_error() -> None:
    # time.sleep(-5) would raise ValueError; the clock treats it as "do not wait"
    MonotonicClock().sleep(-5.0)
