"""Tests for venus_ros.core.timeline (the bounded, sequence-numbered session log)."""

from __future__ import annotations

import dataclasses
import io
import itertools
import json
import math
import os
import threading
from pathlib import Path
from types import MappingProxyType

import pytest
from hypothesis import given, settings, strategies as st

from venus_ros.core.clock import FakeClock
from venus_ros.core.timeline import (
    RECORD_OVERHEAD_BYTES,
    Kind,
    Record,
    Timeline,
    TimelineView,
    read_jsonl,
)

MIN_BYTES = 4096


def seqs(records: object) -> list[int]:
    return [r.seq for r in records]  # type: ignore[attr-defined]


def blob_payload(chars: int) -> dict[str, str]:
    """A payload whose compact JSON text is ``chars + 11`` characters: {"blob":"..."}."""
    return {"blob": "x" * chars}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def timeline(clock: FakeClock) -> Timeline:
    return Timeline(clock)


# --- sequence numbers and time stamps -------------------------------------------------------


def test_empty_timeline_has_no_records_and_last_seq_zero(timeline: Timeline) -> None:
    assert len(timeline) == 0
    assert timeline.last_seq == 0
    assert timeline.evicted == 0
    assert timeline.size_bytes == 0


def test_seq_starts_at_one_and_increases_by_one(timeline: Timeline) -> None:
    records = [timeline.append(Kind.USER_AUDIO, {"i": i}) for i in range(10)]
    assert seqs(records) == list(range(1, 11))
    assert timeline.last_seq == 10
    assert len(timeline) == 10


def test_append_returns_the_stored_record(timeline: Timeline) -> None:
    record = timeline.append(Kind.DECISION, {"speak": True})
    assert isinstance(record, Record)
    assert timeline.snapshot()[0] == record
    assert record.kind is Kind.DECISION


def test_t_is_stamped_from_the_clock(clock: FakeClock, timeline: Timeline) -> None:
    clock.advance(1.25)
    first = timeline.append(Kind.USER_TEXT, {"text": "hi"})
    clock.advance(0.5)
    second = timeline.append(Kind.ASSISTANT_TEXT, {"text": "hello"})
    third = timeline.append(Kind.FLUSH)
    assert (first.t, second.t, third.t) == (1.25, 1.75, 1.75)


def test_record_is_frozen(timeline: Timeline) -> None:
    record = timeline.append(Kind.DECISION, {"a": 1})
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.seq = 99  # type: ignore[misc]


def test_missing_payload_is_stored_as_empty_dict(timeline: Timeline) -> None:
    assert timeline.append(Kind.FLUSH).payload == {}
    assert timeline.append(Kind.FLUSH, None).payload == {}


def test_any_mapping_is_accepted_as_payload(timeline: Timeline) -> None:
    record = timeline.append(Kind.TASK_STATE, MappingProxyType({"state": "running"}))
    assert record.payload == {"state": "running"}


def test_size_bytes_is_json_length_plus_overhead(timeline: Timeline) -> None:
    record = timeline.append(Kind.UNIT_STATS, {"b": 2, "a": 1})
    assert record.payload_json == '{"a":1,"b":2}'  # compact and key-sorted
    assert record.size_bytes == len('{"a":1,"b":2}') + RECORD_OVERHEAD_BYTES
    assert timeline.size_bytes == record.size_bytes


# --- payload immutability -------------------------------------------------------------------


def test_mutating_the_payload_passed_in_does_not_change_the_record(timeline: Timeline) -> None:
    payload = {"words": ["a", "b"], "meta": {"n": 1}}
    record = timeline.append(Kind.ASSISTANT_TEXT, payload)
    payload["words"].append("c")
    payload["meta"]["n"] = 2
    payload["extra"] = True
    expected = {"words": ["a", "b"], "meta": {"n": 1}}
    assert record.payload == expected
    assert timeline.snapshot()[0].payload == expected


def test_mutating_the_returned_payload_does_not_change_the_record(timeline: Timeline) -> None:
    record = timeline.append(Kind.ASSISTANT_TEXT, {"words": ["a"], "meta": {"n": 1}})
    returned = record.payload
    returned["words"].append("b")
    returned["meta"]["n"] = 2
    returned.clear()
    assert record.payload == {"words": ["a"], "meta": {"n": 1}}
    assert timeline.snapshot()[0].payload == {"words": ["a"], "meta": {"n": 1}}
    assert record.payload is not record.payload


# --- invalid appends ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["decision", 3, None, "DECISION"])
def test_non_kind_raises_type_error_naming_the_kind(timeline: Timeline, kind: object) -> None:
    with pytest.raises(TypeError, match="Kind") as info:
        timeline.append(kind, {})  # type: ignore[arg-type]
    assert repr(kind) in str(info.value)
    assert timeline.last_seq == 0
    assert len(timeline) == 0


@pytest.mark.parametrize(
    "payload",
    [
        {"obj": object()},
        {"nan": math.nan},
        {"inf": math.inf},
        {"neg_inf": -math.inf},
        {"nested": {"nan": [1.0, math.nan]}},
        {"raw": b"bytes"},
        {"set": {1, 2}},
    ],
    ids=["object", "nan", "inf", "neg_inf", "nested_nan", "bytes", "set"],
)
def test_non_json_payload_raises_type_error_naming_the_kind(
    timeline: Timeline, payload: dict[str, object]
) -> None:
    with pytest.raises(TypeError, match="video_frame"):
        timeline.append(Kind.VIDEO_FRAME, payload)
    assert timeline.last_seq == 0
    assert len(timeline) == 0


def test_failed_append_does_not_consume_a_seq(timeline: Timeline) -> None:
    timeline.append(Kind.DECISION, {"ok": 1})
    with pytest.raises(TypeError):
        timeline.append(Kind.DECISION, {"bad": math.nan})
    with pytest.raises(TypeError):
        timeline.append("decision", {})  # type: ignore[arg-type]
    assert timeline.append(Kind.DECISION, {"ok": 2}).seq == 2


class _NanClock:
    def now(self) -> float:
        return math.nan

    def sleep(self, seconds: float) -> None:
        pass


def test_non_finite_clock_time_raises_value_error_without_appending() -> None:
    timeline = Timeline(_NanClock())
    with pytest.raises(ValueError, match="non-finite"):
        timeline.append(Kind.DECISION, {})
    assert timeline.last_seq == 0
    assert len(timeline) == 0


# --- snapshots ------------------------------------------------------------------------------


def test_snapshot_contains_exactly_the_records_up_to_the_cutoff(timeline: Timeline) -> None:
    for i in range(10):
        timeline.append(Kind.USER_AUDIO, {"i": i})
    for cutoff in range(0, 11):
        view = timeline.snapshot(cutoff)
        assert seqs(view) == list(range(1, cutoff + 1))
        assert view.cutoff_seq == cutoff
        assert len(view) == cutoff


def test_snapshot_excludes_records_appended_after_it(timeline: Timeline) -> None:
    for i in range(5):
        timeline.append(Kind.USER_AUDIO, {"i": i})
    view = timeline.snapshot(3)
    everything = timeline.snapshot()
    before = list(view)
    for i in range(5):
        timeline.append(Kind.DECISION, {"i": i})
    assert list(view) == before
    assert seqs(view) == [1, 2, 3]
    assert seqs(everything) == [1, 2, 3, 4, 5]
    assert everything.cutoff_seq == 5


def test_snapshot_is_unaffected_by_later_eviction(clock: FakeClock) -> None:
    timeline = Timeline(clock, window_s=1.0)
    for i in range(3):
        timeline.append(Kind.USER_AUDIO, {"i": i})
    view = timeline.snapshot()
    clock.advance(5.0)
    timeline.append(Kind.USER_AUDIO, {"i": 3})
    assert len(timeline) == 1
    assert seqs(view) == [1, 2, 3]
    assert [r.payload["i"] for r in view] == [0, 1, 2]


def test_snapshot_view_is_read_only(timeline: Timeline) -> None:
    timeline.append(Kind.DECISION, {"a": 1})
    view = timeline.snapshot()
    assert isinstance(view, TimelineView)
    with pytest.raises(TypeError):
        view[0] = view[0]  # type: ignore[index]
    with pytest.raises(AttributeError):
        view.append(view[0])  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        view.extra = 1  # type: ignore[attr-defined]


def test_snapshot_none_returns_everything_appended(timeline: Timeline) -> None:
    for i in range(7):
        timeline.append(Kind.USER_TEXT, {"i": i})
    view = timeline.snapshot(None)
    assert seqs(view) == list(range(1, 8))
    assert view.cutoff_seq == 7
    assert view[0].seq == 1
    assert view[-1].seq == 7


def test_snapshot_of_empty_timeline_is_empty(timeline: Timeline) -> None:
    view = timeline.snapshot()
    assert len(view) == 0
    assert view.cutoff_seq == 0
    assert list(view) == []
    assert view.last(Kind.DECISION) is None


def test_snapshot_of_a_future_seq_raises(timeline: Timeline) -> None:
    with pytest.raises(ValueError, match="after the newest record 0"):
        timeline.snapshot(1)
    timeline.append(Kind.DECISION, {})
    timeline.append(Kind.DECISION, {})
    with pytest.raises(ValueError, match="snapshot cutoff 3"):
        timeline.snapshot(3)
    assert len(timeline.snapshot(2)) == 2


def test_of_kind_returns_matching_records_oldest_first(timeline: Timeline) -> None:
    timeline.append(Kind.USER_AUDIO, {"i": 0})
    timeline.append(Kind.DECISION, {"i": 1})
    timeline.append(Kind.USER_AUDIO, {"i": 2})
    timeline.append(Kind.PLAYBACK_ACK, {"i": 3})
    timeline.append(Kind.DECISION, {"i": 4})
    view = timeline.snapshot()
    assert seqs(view.of_kind(Kind.DECISION)) == [2, 5]
    assert seqs(view.of_kind(Kind.USER_AUDIO, Kind.PLAYBACK_ACK)) == [1, 3, 4]
    assert view.of_kind(Kind.FLUSH) == []
    assert view.of_kind() == []


def test_of_kind_respects_the_cutoff(timeline: Timeline) -> None:
    for _ in range(4):
        timeline.append(Kind.DECISION, {})
    assert seqs(timeline.snapshot(2).of_kind(Kind.DECISION)) == [1, 2]


def test_last_returns_the_newest_record_of_a_kind_within_the_view(timeline: Timeline) -> None:
    timeline.append(Kind.DECISION, {"n": 1})
    timeline.append(Kind.USER_AUDIO, {})
    timeline.append(Kind.DECISION, {"n": 2})
    timeline.append(Kind.USER_AUDIO, {})
    timeline.append(Kind.DECISION, {"n": 3})
    assert timeline.snapshot().last(Kind.DECISION).payload == {"n": 3}  # type: ignore[union-attr]
    assert timeline.snapshot(4).last(Kind.DECISION).payload == {"n": 2}  # type: ignore[union-attr]
    assert timeline.snapshot(4).last(Kind.USER_AUDIO).seq == 4  # type: ignore[union-attr]
    assert timeline.snapshot().last(Kind.FLUSH) is None


# --- time-window eviction -------------------------------------------------------------------


def test_records_older_than_the_window_are_evicted_on_append(clock: FakeClock) -> None:
    timeline = Timeline(clock, window_s=10.0)
    timeline.append(Kind.USER_AUDIO, {"i": 0})  # t=0
    clock.advance(5.0)
    timeline.append(Kind.USER_AUDIO, {"i": 1})  # t=5
    clock.advance(7.0)
    timeline.append(Kind.USER_AUDIO, {"i": 2})  # t=12: horizon 2 evicts t=0 only
    assert seqs(timeline.snapshot()) == [2, 3]
    assert timeline.evicted == 1
    assert len(timeline) == 2
    assert timeline.last_seq == 3
    assert timeline.size_bytes == sum(r.size_bytes for r in timeline.snapshot())


def test_record_exactly_window_old_is_kept(clock: FakeClock) -> None:
    timeline = Timeline(clock, window_s=10.0)
    timeline.append(Kind.USER_AUDIO, {})
    clock.advance(10.0)
    timeline.append(Kind.USER_AUDIO, {})
    assert seqs(timeline.snapshot()) == [1, 2]
    assert timeline.evicted == 0


def test_advancing_past_the_window_evicts_everything_but_the_new_record(
    clock: FakeClock,
) -> None:
    timeline = Timeline(clock, window_s=2.0)
    for _ in range(50):
        timeline.append(Kind.VIDEO_FRAME, {"w": 640})
        clock.advance(0.01)
    clock.advance(100.0)
    new = timeline.append(Kind.DECISION, {})
    assert list(timeline.snapshot()) == [new]
    assert timeline.evicted == 50
    assert timeline.size_bytes == new.size_bytes


def test_snapshot_at_an_evicted_cutoff_is_empty_or_partial_but_never_wrong(
    clock: FakeClock,
) -> None:
    timeline = Timeline(clock, window_s=10.0)
    for _ in range(5):  # seq 1..5 at t=0..4
        timeline.append(Kind.USER_AUDIO, {})
        clock.advance(1.0)
    clock.advance(8.0)  # t=13: horizon 3 evicts t=0,1,2 (seq 1..3)
    timeline.append(Kind.USER_AUDIO, {})  # seq 6
    assert timeline.evicted == 3
    for cutoff in (0, 1, 2, 3):
        view = timeline.snapshot(cutoff)
        assert len(view) == 0
        assert view.cutoff_seq == cutoff
    assert seqs(timeline.snapshot(4)) == [4]
    assert seqs(timeline.snapshot(5)) == [4, 5]
    assert seqs(timeline.snapshot(6)) == [4, 5, 6]


# --- byte bound -----------------------------------------------------------------------------


def test_size_never_exceeds_max_bytes_and_oldest_records_are_evicted(clock: FakeClock) -> None:
    timeline = Timeline(clock, max_bytes=MIN_BYTES)
    per_record = 1000 + 11 + RECORD_OVERHEAD_BYTES  # 1211: three fit in 4096, four do not
    for i in range(50):
        record = timeline.append(Kind.BACKEND_INSERT, blob_payload(1000))
        assert record.size_bytes == per_record
        assert timeline.size_bytes <= MIN_BYTES
        assert timeline.size_bytes == sum(r.size_bytes for r in timeline.snapshot())
        assert timeline.evicted + len(timeline) == i + 1
    assert seqs(timeline.snapshot()) == [48, 49, 50]
    assert timeline.evicted == 47
    assert timeline.size_bytes == 3 * per_record


def test_byte_bound_holds_with_mixed_record_sizes(clock: FakeClock) -> None:
    timeline = Timeline(clock, max_bytes=10_000)
    for i in range(300):
        timeline.append(Kind.UNIT_STATS, blob_payload((i * 37) % 3000))
        assert timeline.size_bytes <= 10_000
    retained = seqs(timeline.snapshot())
    assert retained == list(range(retained[0], 301))
    assert timeline.evicted == retained[0] - 1


def test_record_larger_than_max_bytes_is_not_retained(clock: FakeClock) -> None:
    timeline = Timeline(clock, max_bytes=MIN_BYTES)
    timeline.append(Kind.DECISION, {})
    huge = timeline.append(Kind.BACKEND_INSERT, blob_payload(MIN_BYTES))
    assert huge.seq == 2
    assert timeline.last_seq == 2
    assert timeline.size_bytes <= MIN_BYTES
    assert huge not in list(timeline.snapshot())
    assert timeline.evicted + len(timeline) == 2


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from([0.0, 0.5, 1.0, 3.0, 25.0]),  # time advance before the append
            st.integers(min_value=0, max_value=2500),  # payload size
        ),
        min_size=1,
        max_size=40,
    )
)
def test_bounded_timeline_matches_a_model_of_the_newest_suffix(
    steps: list[tuple[float, int]],
) -> None:
    clock = FakeClock()
    window_s, max_bytes = 20.0, MIN_BYTES
    timeline = Timeline(clock, window_s=window_s, max_bytes=max_bytes)
    history: list[Record] = []
    for advance, size in steps:
        clock.advance(advance)
        history.append(timeline.append(Kind.ASSISTANT_AUDIO, blob_payload(size)))

        # model: the longest suffix of history that is inside the window and within the bytes
        horizon = clock.now() - window_s
        expected: list[Record] = []
        total = 0
        for record in reversed(history):
            if record.t < horizon or total + record.size_bytes > max_bytes:
                break
            total += record.size_bytes
            expected.insert(0, record)

        assert list(timeline.snapshot()) == expected
        assert timeline.size_bytes == total <= max_bytes
        assert timeline.evicted == len(history) - len(expected)
        assert timeline.last_seq == len(history)
        for cutoff in range(0, len(history) + 1):
            assert list(timeline.snapshot(cutoff)) == [r for r in expected if r.seq <= cutoff]


# --- export ---------------------------------------------------------------------------------


def _fill_for_export(clock: FakeClock, timeline: Timeline) -> list[Record]:
    records = []
    payloads = [
        {},
        {"text": "héllo wörld ✓", "quote": 'say "hi"\n'},
        {"nested": {"list": [1, 2.5, None, True], "empty": {}}},
        {"x": 0.1, "big": 10**18, "neg": -3},
    ]
    for i, kind in enumerate([Kind.USER_AUDIO, Kind.ASSISTANT_TEXT, Kind.DECISION, Kind.FLUSH]):
        clock.advance(1 / 3)
        records.append(timeline.append(kind, payloads[i]))
    return records


def _as_dicts(records: list[Record]) -> list[dict[str, object]]:
    return [{"seq": r.seq, "t": r.t, "kind": r.kind.value, "payload": r.payload} for r in records]


@pytest.mark.parametrize("as_str", [False, True], ids=["Path", "str"])
def test_export_jsonl_to_a_path_round_trips_via_read_jsonl(
    clock: FakeClock, timeline: Timeline, tmp_path: Path, as_str: bool
) -> None:
    records = _fill_for_export(clock, timeline)
    target = tmp_path / "timeline.jsonl"
    assert timeline.export_jsonl(str(target) if as_str else target) == len(records)
    loaded = read_jsonl(target)
    assert loaded == _as_dicts(records)
    assert [Kind(d["kind"]) for d in loaded] == [r.kind for r in records]
    assert all(isinstance(d["t"], float) for d in loaded)


def test_export_jsonl_to_a_text_stream_round_trips_via_read_jsonl(
    clock: FakeClock, timeline: Timeline, tmp_path: Path
) -> None:
    records = _fill_for_export(clock, timeline)
    stream = io.StringIO()
    assert timeline.export_jsonl(stream) == len(records)
    text = stream.getvalue()
    assert text.endswith("\n")
    assert len(text.splitlines()) == len(records)
    assert [json.loads(line) for line in text.splitlines()] == _as_dicts(records)
    dumped = tmp_path / "stream.jsonl"
    dumped.write_text(text, encoding="utf-8")
    assert read_jsonl(dumped) == _as_dicts(records)
    file_target = tmp_path / "file.jsonl"
    timeline.export_jsonl(file_target)
    assert file_target.read_text(encoding="utf-8") == text


def test_export_of_empty_timeline_writes_nothing(timeline: Timeline, tmp_path: Path) -> None:
    target = tmp_path / "empty.jsonl"
    assert timeline.export_jsonl(target) == 0
    assert target.read_text(encoding="utf-8") == ""
    assert read_jsonl(target) == []


def test_export_writes_only_retained_records(clock: FakeClock, tmp_path: Path) -> None:
    timeline = Timeline(clock, window_s=1.0)
    timeline.append(Kind.USER_AUDIO, {"old": True})
    clock.advance(2.0)
    kept = timeline.append(Kind.USER_AUDIO, {"old": False})
    target = tmp_path / "t.jsonl"
    assert timeline.export_jsonl(target) == 1
    assert read_jsonl(target) == _as_dicts([kept])


# --- threads --------------------------------------------------------------------------------


def test_concurrent_appends_get_distinct_contiguous_seqs(clock: FakeClock) -> None:
    timeline = Timeline(clock)
    threads_n, per_thread = 4, 2_000
    barrier = threading.Barrier(threads_n + 1)
    results: list[list[Record]] = [[] for _ in range(threads_n)]
    snapshot_errors: list[str] = []
    done = threading.Event()

    def writer(index: int) -> None:
        barrier.wait()
        for i in range(per_thread):
            results[index].append(timeline.append(Kind.USER_AUDIO, {"w": index, "i": i}))

    def snapshotter() -> None:
        barrier.wait()
        while not done.is_set():
            view = timeline.snapshot()
            if seqs(view) != list(range(1, view.cutoff_seq + 1)):
                snapshot_errors.append(f"non-contiguous snapshot at cutoff {view.cutoff_seq}")
                return

    writers = [threading.Thread(target=writer, args=(i,)) for i in range(threads_n)]
    reader = threading.Thread(target=snapshotter)
    for thread in [*writers, reader]:
        thread.start()
    for thread in writers:
        thread.join()
    done.set()
    reader.join()

    total = threads_n * per_thread
    all_seqs = sorted(r.seq for rs in results for r in rs)
    assert all_seqs == list(range(1, total + 1))
    for index, records in enumerate(results):
        own = seqs(records)
        assert own == sorted(own), f"writer {index} saw seqs go backwards"
        assert [r.payload["i"] for r in records] == list(range(per_thread))
    assert timeline.last_seq == total
    assert len(timeline) == total
    assert seqs(timeline.snapshot()) == list(range(1, total + 1))
    assert timeline.size_bytes == sum(r.size_bytes for r in timeline.snapshot())
    assert snapshot_errors == []


class _CountingClock:
    """Every read returns a strictly larger time, then lets other threads run before returning.

    The yield widens the gap between reading the clock and appending, so a timeline that reads
    the clock outside its lock hands out a later seq with an earlier t.
    """

    def __init__(self) -> None:
        self._ticks = itertools.count(1)
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            t = float(next(self._ticks))
        os.sched_yield()
        return t

    def sleep(self, seconds: float) -> None:
        pass


@pytest.mark.parametrize("round_", range(2))
def test_t_increases_with_seq_under_concurrent_appends(round_: int) -> None:
    timeline = Timeline(_CountingClock(), window_s=1e9)  # one tick per read: keep them all
    threads_n, per_thread = 4, 2_000
    barrier = threading.Barrier(threads_n)

    def writer() -> None:
        barrier.wait()
        for i in range(per_thread):
            timeline.append(Kind.USER_AUDIO, {"i": i})

    threads = [threading.Thread(target=writer) for _ in range(threads_n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    times = [r.t for r in timeline.snapshot()]
    assert len(times) == threads_n * per_thread
    inversions = [(a, b) for a, b in itertools.pairwise(times) if a >= b]
    assert inversions == [], f"{len(inversions)} records have a t not after the previous seq's"


# --- constructor validation -----------------------------------------------------------------


@pytest.mark.parametrize("window_s", [0.0, -1.0, math.nan])
def test_non_positive_or_nan_window_is_rejected(clock: FakeClock, window_s: float) -> None:
    with pytest.raises(ValueError, match=r"timeline\.window_s must be > 0"):
        Timeline(clock, window_s=window_s)


@pytest.mark.parametrize("max_bytes", [0, -1, MIN_BYTES - 1])
def test_max_bytes_below_4096_is_rejected(clock: FakeClock, max_bytes: int) -> None:
    with pytest.raises(ValueError, match=r"timeline\.max_bytes must be >= 4096"):
        Timeline(clock, max_bytes=max_bytes)


def test_smallest_valid_bounds_are_accepted(clock: FakeClock) -> None:
    timeline = Timeline(clock, window_s=1e-9, max_bytes=MIN_BYTES)
    assert timeline.window_s == 1e-9
    assert timeline.max_bytes == MIN_BYTES
    assert timeline.append(Kind.DECISION, {}).seq == 1


def test_records_after_streams_only_newer_records_in_order() -> None:
    clock = FakeClock()
    timeline = Timeline(clock)
    for i in range(5):
        timeline.append(Kind.DECISION, {"unit": i})
    assert [r.seq for r in timeline.records_after(2)] == [3, 4, 5]
    assert [r.seq for r in timeline.records_after(0, limit=2)] == [1, 2]
    assert timeline.records_after(5) == []


def test_records_after_an_evicted_seq_starts_at_the_oldest_retained() -> None:
    clock = FakeClock()
    timeline = Timeline(clock, window_s=10.0)
    timeline.append(Kind.DECISION, {"unit": 0})
    clock.advance(20.0)
    timeline.append(Kind.DECISION, {"unit": 1})
    assert [r.seq for r in timeline.records_after(0)] == [2]
