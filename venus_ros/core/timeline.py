"""The session timeline: an append-only, sequence-numbered causal log of every event.

Every event of a session (a user audio unit, a video frame, a decision, assistant text and audio,
playback acknowledgements, delegate spans, task states, backend insertions, protocol errors,
unit statistics) is appended here with a monotonically increasing ``seq`` and the session time
``t``. The log is bounded by a time window and by bytes; the oldest records are evicted first.

A :meth:`Timeline.snapshot` at a cutoff sequence number is the evidence a background task may
see: a read-only view of the records at or before the cutoff. Records carry metadata only, never
media, so a snapshot copies references, not audio or images.
"""

from __future__ import annotations

import enum
import json
import math
import threading
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import IO, Any

from venus_ros.core.clock import Clock

#: Bytes charged per record on top of its JSON text: the Python objects that hold it.
RECORD_OVERHEAD_BYTES = 200


class Kind(str, enum.Enum):
    """Every kind of event the timeline records."""

    USER_AUDIO = "user_audio"
    VIDEO_FRAME = "video_frame"
    USER_TEXT = "user_text"
    DECISION = "decision"
    ASSISTANT_TEXT = "assistant_text"
    ASSISTANT_AUDIO = "assistant_audio"
    PLAYBACK_ACK = "playback_ack"
    FLUSH = "flush"
    DELEGATE_OPEN = "delegate_open"
    DELEGATE_CLOSE = "delegate_close"
    TASK_STATE = "task_state"
    BACKEND_INSERT = "backend_insert"
    DELIVERY = "delivery"
    PROTOCOL_ERROR = "protocol_error"
    FRONTEND_ERROR = "frontend_error"
    INPUT_ERROR = "input_error"
    UNIT_STATS = "unit_stats"


@dataclass(frozen=True, slots=True)
class Record:
    """One timeline entry. ``payload_json`` is the compact JSON text of the payload."""

    seq: int
    t: float
    kind: Kind
    payload_json: str

    @property
    def payload(self) -> dict[str, Any]:
        """The payload, decoded (a fresh dict each call, so callers cannot alter the log)."""
        return json.loads(self.payload_json)

    def to_json(self) -> str:
        """The record as one JSON Lines line (without the newline)."""
        return (
            f'{{"seq": {self.seq}, "t": {json.dumps(self.t)}, "kind": "{self.kind.value}", '
            f'"payload": {self.payload_json}}}'
        )

    @property
    def size_bytes(self) -> int:
        """Bytes charged against the timeline's byte bound."""
        return len(self.payload_json) + RECORD_OVERHEAD_BYTES


class TimelineView:
    """A read-only, immutable view of the records at or before a cutoff sequence number."""

    __slots__ = ("_records", "cutoff_seq")

    def __init__(self, records: tuple[Record, ...], cutoff_seq: int) -> None:
        self._records = records
        self.cutoff_seq = cutoff_seq

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[Record]:
        return iter(self._records)

    def __getitem__(self, index: int) -> Record:
        return self._records[index]

    def of_kind(self, *kinds: Kind) -> list[Record]:
        """Records of the given kinds, oldest first."""
        wanted = set(kinds)
        return [r for r in self._records if r.kind in wanted]

    def last(self, kind: Kind) -> Record | None:
        """The newest record of ``kind`` in the view, or None."""
        for record in reversed(self._records):
            if record.kind is kind:
                return record
        return None


class Timeline:
    """Append-only, thread-safe, bounded event log with sequence numbers starting at 1.

    Args:
        clock: the session clock used to stamp records.
        window_s: records older than ``window_s`` before the newest record are evicted.
        max_bytes: the charged size of all retained records never exceeds this.
    """

    def __init__(self, clock: Clock, window_s: float = 600.0, max_bytes: int = 32 << 20) -> None:
        if not window_s > 0:
            raise ValueError(f"timeline.window_s must be > 0, got {window_s}")
        if max_bytes < 4096:
            raise ValueError(f"timeline.max_bytes must be >= 4096, got {max_bytes}")
        self._clock = clock
        self.window_s = float(window_s)
        self.max_bytes = int(max_bytes)
        self._records: deque[Record] = deque()
        self._bytes = 0
        self._next_seq = 1
        self._evicted = 0
        self._lock = threading.Lock()

    def append(self, kind: Kind, payload: Mapping[str, Any] | None = None) -> Record:
        """Append one event stamped with the clock's current time.

        Args:
            kind: what happened.
            payload: JSON-serialisable metadata (no media: pass sizes and positions instead).

        Returns:
            The new record, whose ``seq`` is one more than the previous record's.

        Raises:
            TypeError: if ``kind`` is not a :class:`Kind` or the payload is not JSON-serialisable.
        """
        if not isinstance(kind, Kind):
            raise TypeError(f"timeline kind must be a Kind, got {kind!r}")
        try:
            text = json.dumps(
                dict(payload or {}), separators=(",", ":"), sort_keys=True, allow_nan=False
            )
        except (TypeError, ValueError) as exc:
            raise TypeError(f"timeline payload for {kind.value} is not JSON: {exc}") from exc
        with self._lock:  # read the clock under the lock: seq order is time order
            t = self._clock.now()
            if not math.isfinite(t):
                raise ValueError(f"timeline clock returned a non-finite time: {t}")
            record = Record(self._next_seq, t, kind, text)
            self._next_seq += 1
            self._records.append(record)
            self._bytes += record.size_bytes
            self._evict(t)
        return record

    def _evict(self, now: float) -> None:
        horizon = now - self.window_s
        records = self._records
        while records and (records[0].t < horizon or self._bytes > self.max_bytes):
            self._bytes -= records.popleft().size_bytes
            self._evicted += 1

    @property
    def last_seq(self) -> int:
        """The sequence number of the newest record ever appended (0 when empty)."""
        with self._lock:
            return self._next_seq - 1

    @property
    def evicted(self) -> int:
        """How many records the bounds have evicted."""
        with self._lock:
            return self._evicted

    @property
    def size_bytes(self) -> int:
        """The charged size of the retained records."""
        with self._lock:
            return self._bytes

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)

    def snapshot(self, cutoff_seq: int | None = None) -> TimelineView:
        """A read-only view of the retained records with ``seq <= cutoff_seq``.

        Args:
            cutoff_seq: the evidence cutoff; None means everything appended so far.

        Raises:
            ValueError: if the cutoff lies in the future (no such record was appended yet).
        """
        with self._lock:
            newest = self._next_seq - 1
            cutoff = newest if cutoff_seq is None else int(cutoff_seq)
            if cutoff > newest:
                raise ValueError(f"snapshot cutoff {cutoff} is after the newest record {newest}")
            if not self._records:
                return TimelineView((), cutoff)
            count = cutoff - self._records[0].seq + 1
            records = tuple(islice(self._records, max(count, 0)))
        return TimelineView(records, cutoff)

    def records_after(self, seq: int, limit: int | None = None) -> list[Record]:
        """Retained records with ``seq`` greater than the given one, oldest first.

        For streaming the log out (e.g. to a topic) without rescanning it.
        """
        with self._lock:
            if not self._records:
                return []
            start = max(seq - self._records[0].seq + 1, 0)
            stop = None if limit is None else start + limit
            return list(islice(self._records, start, stop))

    def export_jsonl(self, target: str | Path | IO[str]) -> int:
        """Write the retained records as JSON Lines; returns the number written."""
        records = self.snapshot()
        if isinstance(target, (str, Path)):
            with open(target, "w", encoding="utf-8") as handle:
                return _write_lines(records, handle)
        return _write_lines(records, target)


def _write_lines(records: Iterable[Record], handle: IO[str]) -> int:
    count = 0
    for record in records:
        handle.write(record.to_json() + "\n")
        count += 1
    return count


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Read an exported timeline back as a list of dicts (seq, t, kind, payload)."""
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]
