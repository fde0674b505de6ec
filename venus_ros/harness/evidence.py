"""A copy of the frontend's timeline, kept by the Harness so tasks can see their evidence.

The frontend owns the session timeline and its sequence numbers; the Harness receives the
records as they are published and keeps them under their original ``seq``, so a task's
evidence cutoff (a frontend seq) selects exactly the records the frontend had at that moment.
Records are metadata only (no media), so a snapshot copies references.

Rules:
- one writer: the records arrive in seq order from one timeline. A record whose seq is not
  newer than the newest one kept, and which is not an exact repeat, means that timeline
  restarted (a new session): the mirror starts over from it.
- records of kinds this version does not know, malformed payloads and records published by
  the Harness itself (payload ``source`` equal to ``ignore_source``) are not kept.
- bounded like the timeline: by a time window before the newest record and by a record count.
"""

from __future__ import annotations

import bisect
import enum
import json
import threading
from collections import Counter

from venus_ros.core.timeline import Kind, Record, TimelineView


class Outcome(str, enum.Enum):
    """What :meth:`EvidenceMirror.add` did with a record."""

    ADDED = "added"
    DUPLICATE = "duplicate"
    RESET = "reset"
    IGNORED = "ignored"
    INVALID = "invalid"


class EvidenceMirror:
    """Timeline records keyed by their original seq; thread-safe.

    Args:
        window_s: records older than this before the newest record are dropped.
        max_records: at most this many records are kept (oldest dropped first).
        ignore_source: records whose payload has ``"source"`` equal to this are not kept.
    """

    def __init__(
        self, window_s: float = 600.0, max_records: int = 50_000, ignore_source: str = "harness"
    ) -> None:
        if not window_s > 0:
            raise ValueError(f"evidence window_s must be > 0, got {window_s}")
        if max_records < 1:
            raise ValueError(f"evidence max_records must be >= 1, got {max_records}")
        self.window_s = float(window_s)
        self.max_records = int(max_records)
        self.ignore_source = ignore_source
        self._seqs: list[int] = []
        self._records: list[Record] = []
        self._lock = threading.Lock()
        self.counts: Counter[Outcome] = Counter()

    def add(self, seq: int, t: float, kind: str, payload_json: str) -> Outcome:
        """Keep one published timeline record (see the module rules)."""
        outcome = self._add(int(seq), float(t), kind, payload_json)
        with self._lock:
            self.counts[outcome] += 1
        return outcome

    def _add(self, seq: int, t: float, kind: str, payload_json: str) -> Outcome:
        try:
            known = Kind(kind)
        except ValueError:
            return Outcome.IGNORED
        try:
            payload = json.loads(payload_json)
        except (json.JSONDecodeError, TypeError):
            return Outcome.INVALID
        if not isinstance(payload, dict) or seq < 1:
            return Outcome.INVALID
        if payload.get("source") == self.ignore_source:
            return Outcome.IGNORED
        record = Record(seq, t, known, payload_json)
        with self._lock:
            outcome = Outcome.ADDED
            if self._seqs and seq <= self._seqs[-1]:
                index = bisect.bisect_left(self._seqs, seq)
                if index < len(self._seqs) and self._records[index] == record:
                    return Outcome.DUPLICATE
                self._seqs.clear()
                self._records.clear()
                outcome = Outcome.RESET
            self._seqs.append(seq)
            self._records.append(record)
            self._evict(t)
        return outcome

    def _evict(self, now: float) -> None:
        horizon = now - self.window_s
        drop = max(0, len(self._records) - self.max_records)
        while drop < len(self._records) and self._records[drop].t < horizon:
            drop += 1
        if drop:
            del self._seqs[:drop]
            del self._records[:drop]

    def snapshot(self, cutoff_seq: int) -> TimelineView:
        """A read-only view of the kept records with ``seq <= cutoff_seq``.

        A cutoff beyond the newest record kept is allowed (the record may still be on its way);
        the view then holds everything kept so far and says ``cutoff_seq`` all the same.
        """
        cutoff = int(cutoff_seq)
        with self._lock:
            count = bisect.bisect_right(self._seqs, cutoff)
            records = tuple(self._records[:count])
        return TimelineView(records, cutoff)

    @property
    def last_seq(self) -> int:
        """The newest seq kept (0 when empty)."""
        with self._lock:
            return self._seqs[-1] if self._seqs else 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)
