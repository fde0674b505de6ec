"""Delivery of backend replies: from the reply queue to "the user heard it".

A reply from the Harness waits in the loop's queue until an eligible boundary, is inserted into
the frontend's input as a ``<backend>`` span, and is then *voiced* by the next assistant turn that
starts at or after its insertion. What happens to that turn's audio decides the outcome:

* the turn's audio was all played (every chunk acknowledged complete, none flushed):
  **delivered**;
* the turn was interrupted (a yield flushed the speaker) after the user had heard at least
  ``heard_enough`` of the turn's visible text: **delivered** (partially heard; the user chose to
  talk over the rest);
* interrupted earlier, or never voiced (the turn carried no audio, or no turn started within
  :data:`UNVOICED_UNITS` units): **offered again** at the next eligible boundary, at most
  ``reoffer_limit`` times, and then **dropped**;
* older than ``reply_max_age_s`` when its boundary comes (it waited through a long user turn,
  or was offered again too late): **dropped** as stale rather than spoken as if fresh;
* withdrawn by the Harness (the user cancelled, or a newer request superseded it) before it was
  inserted: **withdrawn**, never spoken. Once inserted it is already being said; the outcome is
  then whatever playback shows.

Every outcome is one ``delivery`` record on the timeline and one :class:`DeliveryOutcome` for the
listeners (the ROS node reports it to the Harness, whose journal records DELIVERED only then).

This class holds no lock: :class:`~venus_ros.core.duplex.DuplexLoop` calls it under its own.
"""

from __future__ import annotations

import enum
from collections import OrderedDict, deque
from dataclasses import dataclass, field, replace

from venus_ros.core.timeline import Kind, Timeline

#: A reply inserted but not voiced by any turn within this many units is offered again.
UNVOICED_UNITS = 10
#: Task ids remembered after their outcome, so a duplicate offer is recognised.
REMEMBERED_OUTCOMES = 512


class Outcome(str, enum.Enum):
    """How one delivery attempt of a backend reply ended."""

    DELIVERED = "delivered"
    REOFFERED = "reoffered"
    DROPPED = "dropped"
    WITHDRAWN = "withdrawn"

    @property
    def final(self) -> bool:
        """True when the reply will not be offered again."""
        return self is not Outcome.REOFFERED


@dataclass(frozen=True)
class BackendReply:
    """A reply from the background harness, waiting to be inserted as a ``<backend>`` span.

    Attributes:
        task_id: the Harness task that produced it.
        text: what to say.
        topic: a short label (the tool that answered), for logs and monitors.
        attempt: 1 for the first offer, 2 for the first re-offer, ...
        offered_at: session time of the first offer (set by the loop; staleness counts from it).
    """

    task_id: str
    text: str
    topic: str = ""
    attempt: int = 1
    offered_at: float | None = None


@dataclass(frozen=True)
class DeliveryOutcome:
    """The end of one delivery attempt, as reported to listeners.

    Attributes:
        task_id: the reply's task.
        outcome: what happened.
        reason: why, in words ("played in full", "interrupted: 20% heard", "stale: 130 s old").
        attempt: the attempt that ended.
        heard_fraction: share of the voicing turn's visible text the user heard (None if no
            turn voiced it).
    """

    task_id: str
    outcome: Outcome
    reason: str
    attempt: int
    heard_fraction: float | None = None


@dataclass(frozen=True)
class DeliveryRules:
    """When an interrupted reply counts as delivered, and how often it may come back.

    Attributes:
        heard_enough: an interrupted reply counts as delivered once the user heard this share
            of the voicing turn's visible text.
        reoffer_limit: how many times a reply interrupted early (or never voiced) is offered
            again before it is dropped.
        reply_max_age_s: a reply older than this (since its first offer) when its boundary comes
            is dropped as stale.
    """

    heard_enough: float = 0.5
    reoffer_limit: int = 1
    reply_max_age_s: float = 120.0

    def __post_init__(self) -> None:
        if not 0.0 < self.heard_enough <= 1.0:
            raise ValueError(f"heard_enough must be in (0, 1], got {self.heard_enough}")
        if self.reoffer_limit < 0:
            raise ValueError(f"reoffer_limit must be >= 0, got {self.reoffer_limit}")
        if not self.reply_max_age_s > 0:
            raise ValueError(f"reply_max_age_s must be > 0, got {self.reply_max_age_s}")


@dataclass
class _Turn:
    """Playback of one assistant turn that voices replies."""

    replies: list[BackendReply] = field(default_factory=list)
    said_chars: int = 0
    heard_chars: int = 0
    outstanding: set[int] = field(default_factory=set)  # unit indices not fully acknowledged
    chunks: int = 0
    flushed: bool = False
    ended: bool = False


class DeliveryTracker:
    """Follows each inserted reply until playback decides its outcome (see the module docstring).

    Args:
        timeline: where ``delivery`` records go.
        rules: the delivery rules.
    """

    def __init__(self, timeline: Timeline, rules: DeliveryRules) -> None:
        self._timeline = timeline
        self.rules = rules
        self._queue: deque[BackendReply] = deque()
        self._unvoiced: list[tuple[BackendReply, int]] = []  # inserted, waiting for a turn
        self._turns: dict[int, _Turn] = {}
        self._withdrawn: OrderedDict[str, str] = OrderedDict()  # task id -> reason
        self._done: OrderedDict[str, Outcome] = OrderedDict()
        self.outcomes: list[DeliveryOutcome] = []  # drained by the loop after each call

    # --- the queue ---------------------------------------------------------------------------

    def offer(self, reply: BackendReply, now: float, max_pending: int) -> None:
        """Queue a reply (a duplicate of one queued, in flight or finished is ignored)."""
        if self._known(reply.task_id):
            self._timeline.append(
                Kind.BACKEND_INSERT,
                {"task_id": reply.task_id, "inserted": False, "reason": "duplicate"},
            )
            return
        if reply.task_id in self._withdrawn:
            self._finish(reply, Outcome.WITHDRAWN, self._withdrawn[reply.task_id])
            return
        if reply.offered_at is None:
            reply = replace(reply, offered_at=now)
        self._queue.append(reply)
        if len(self._queue) > max_pending:
            self._finish(self._queue.popleft(), Outcome.DROPPED, "queue_full")

    @property
    def pending(self) -> int:
        """Replies waiting for a boundary."""
        return len(self._queue)

    def withdraw(self, task_id: str, reason: str) -> bool:
        """Take back a reply that is no longer fresh; False if it is already being voiced/done.

        A reply not offered yet is refused when it arrives.
        """
        for reply in self._queue:
            if reply.task_id == task_id:
                self._queue.remove(reply)
                self._finish(reply, Outcome.WITHDRAWN, reason)
                return True
        if self._known(task_id):
            return False
        self._withdrawn[task_id] = reason
        while len(self._withdrawn) > REMEMBERED_OUTCOMES:
            self._withdrawn.popitem(last=False)
        return True

    def take(self, unit_index: int, now: float) -> BackendReply | None:
        """The next fresh reply to insert at this (eligible) boundary, or None."""
        while self._queue:
            reply = self._queue.popleft()
            age = now - (reply.offered_at if reply.offered_at is not None else now)
            if age > self.rules.reply_max_age_s:
                self._finish(reply, Outcome.DROPPED, f"stale: {age:.0f} s old")
                continue
            self._unvoiced.append((reply, unit_index))
            return reply
        return None

    # --- playback ----------------------------------------------------------------------------

    def turn_started(self, turn_id: int) -> None:
        """A new assistant turn began: it voices every reply inserted and not yet voiced."""
        if self._unvoiced:
            self._turns[turn_id] = _Turn(replies=[reply for reply, _ in self._unvoiced])
            self._unvoiced.clear()

    def spoke(self, turn_id: int, unit_index: int, text: str, has_audio: bool) -> None:
        """The turn produced a unit of visible text and (maybe) audio for the speaker."""
        turn = self._turns.get(turn_id)
        if turn is None:
            return
        turn.said_chars += len(text)
        if has_audio:
            turn.chunks += 1
            turn.outstanding.add(unit_index)

    def acknowledged(
        self, turn_id: int, unit_index: int, heard_chars: int, complete: bool, flushed: bool
    ) -> None:
        """The speaker reported progress on one of the turn's chunks."""
        turn = self._turns.get(turn_id)
        if turn is None:
            return
        turn.heard_chars += heard_chars
        turn.flushed |= flushed and complete
        if complete:
            turn.outstanding.discard(unit_index)
        self._settle(turn_id)

    def given_up(self, turn_id: int, unit_index: int) -> None:
        """The loop stopped waiting for a chunk's acknowledgement (the speaker never answered)."""
        turn = self._turns.get(turn_id)
        if turn is not None and unit_index in turn.outstanding:
            turn.outstanding.discard(unit_index)
            turn.flushed = True  # unknown playback counts as interrupted
            self._settle(turn_id)

    def turn_ended(self, turn_id: int, unit_index: int) -> None:
        """The turn ended at this unit; its outcome follows once playback is acknowledged."""
        turn = self._turns.get(turn_id)
        if turn is not None:
            turn.ended = True
            self._settle(turn_id)

    def boundary(self, unit_index: int) -> None:
        """A unit boundary passed: replies inserted long ago and never voiced come back."""
        waiting = []
        for reply, inserted in self._unvoiced:
            if unit_index - inserted >= UNVOICED_UNITS:
                self._retry(reply, "never voiced", None)
            else:
                waiting.append((reply, inserted))
        self._unvoiced = waiting

    # --- outcomes ----------------------------------------------------------------------------

    def _settle(self, turn_id: int) -> None:
        turn = self._turns[turn_id]
        if not turn.ended or turn.outstanding:
            return
        del self._turns[turn_id]
        if turn.chunks == 0:
            for reply in turn.replies:
                self._retry(reply, "the voicing turn carried no audio", None)
            return
        heard = min(1.0, turn.heard_chars / turn.said_chars) if turn.said_chars else 1.0
        for reply in turn.replies:
            if not turn.flushed:
                self._finish(reply, Outcome.DELIVERED, "played in full", heard)
            elif heard >= self.rules.heard_enough:
                self._finish(reply, Outcome.DELIVERED, f"interrupted: {heard:.0%} heard", heard)
            else:
                self._retry(reply, f"interrupted: {heard:.0%} heard", heard)

    def _retry(self, reply: BackendReply, why: str, heard: float | None) -> None:
        if reply.attempt > self.rules.reoffer_limit:
            self._finish(reply, Outcome.DROPPED, f"{why}; offered {reply.attempt} times", heard)
            return
        self._record(reply, Outcome.REOFFERED, why, heard)
        self._queue.appendleft(replace(reply, attempt=reply.attempt + 1))

    def _finish(
        self, reply: BackendReply, outcome: Outcome, reason: str, heard: float | None = None
    ) -> None:
        self._done[reply.task_id] = outcome
        while len(self._done) > REMEMBERED_OUTCOMES:
            self._done.popitem(last=False)
        self._record(reply, outcome, reason, heard)

    def _record(
        self, reply: BackendReply, outcome: Outcome, reason: str, heard: float | None
    ) -> None:
        fraction = None if heard is None else round(heard, 3)
        self._timeline.append(
            Kind.DELIVERY,
            {
                "task_id": reply.task_id,
                "outcome": outcome.value,
                "reason": reason,
                "attempt": reply.attempt,
                "heard_fraction": fraction,
                "topic": reply.topic,
            },
        )
        self.outcomes.append(DeliveryOutcome(reply.task_id, outcome, reason, reply.attempt, heard))

    def _known(self, task_id: str) -> bool:
        return (
            task_id in self._done
            or any(r.task_id == task_id for r in self._queue)
            or any(r.task_id == task_id for r, _ in self._unvoiced)
            or any(r.task_id == task_id for t in self._turns.values() for r in t.replies)
        )
