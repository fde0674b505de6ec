"""Pending delegations as the frontend sees them: sent, accepted, alive, given up, late.

The frontend sends every ``<delegate>`` span to the harness (a Delegate goal in the ROS graph)
and keeps one :class:`Delegation` per request until its result arrives. The rules, all on the
injected session clock:

- **Alive while the harness says so.** A delegation is alive as long as the harness keeps
  reporting it (goal accepted, feedback, the per-task heartbeat the harness sends while the
  task is unsettled): there is no fixed deadline here. Each tool's own deadline comes from its
  config and is enforced by the harness, which ends the task FAILED ("timeout: ...") and sends
  that result.
- **Silence is a timeout.** With the harness up, a delegation not heard of for ``liveness_s``
  while the harness itself kept talking (its heartbeat came more than ``liveness_s`` after
  the task's last word: a goal never accepted, or a task whose own heartbeat stopped) is given
  up and its goal is cancelled (:attr:`GiveUp.cancel`): the harness stops the task instead of
  finishing it for nobody. A harness that is silent as a whole (busy, frozen, dying) is not
  a task timeout: that is the next rule's business.
- **A dead harness** (its heartbeat topic silent) gives every pending delegation up at once,
  ``harness_unavailable``; nothing is cancelled (there is no one to tell).
- **Late results.** A result that arrives after its delegation was given up is not lost: if it
  is a COMPLETED reply and at most ``late_result_max_s`` passed since the give-up, it is
  offered like any other reply (:attr:`Verdict.LATE_OFFER`: the loop inserts it at the next
  eligible boundary); older, it is dropped (:attr:`Verdict.LATE_DROP`) and the caller reports
  it FAILED ("stale") to the harness, so the journal says which happened.
- **Once.** A second result, or a result for a task never sent, is a :attr:`Verdict.DUPLICATE`
  and is ignored. An accept that arrives after the delegation was given up returns False: the
  caller cancels that goal (the cancel overtook the accept).

The tracker is thread-safe: ROS callbacks and the foreground thread call it concurrently.
"""

from __future__ import annotations

import enum
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from venus_ros.core.clock import Clock

#: The give-up reason when the harness's heartbeat stopped.
HARNESS_UNAVAILABLE = "harness_unavailable"
#: The give-up reason prefix when the harness is up but said nothing about the task.
NO_WORD = "timeout: no word from the harness"


@dataclass
class Delegation:
    """One delegated request the frontend waits on.

    Attributes:
        task_id: the task's id (the goal id as hex).
        query: the request text.
        turn_id: the frontend turn that delegated it.
        cutoff_seq: its evidence cutoff.
        sent_at: session time it was sent.
        heard_at: the last time the harness said something about it.
        handle: the caller's goal handle once accepted (opaque here), else None.
    """

    task_id: str
    query: str
    turn_id: int
    cutoff_seq: int
    sent_at: float
    heard_at: float
    handle: Any = None

    @property
    def accepted(self) -> bool:
        """The harness accepted the goal."""
        return self.handle is not None


@dataclass(frozen=True)
class GiveUp:
    """A delegation the tracker stopped waiting for.

    Attributes:
        delegation: what was pending.
        reason: why (:data:`HARNESS_UNAVAILABLE`, or :data:`NO_WORD` and how long).
        cancel: True when the caller should cancel the goal (the harness is up and would
            otherwise keep working for nobody).
    """

    delegation: Delegation
    reason: str
    cancel: bool


class Verdict(str, enum.Enum):
    """What to do with a result (:meth:`DelegationTracker.result`)."""

    #: the delegation was pending and the reply should be offered for delivery
    OFFER = "offer"
    #: the delegation was pending; nothing to say (failed, cancelled, empty reply)
    END = "end"
    #: it had been given up, the reply is still fresh: offer it at the next eligible boundary
    LATE_OFFER = "late_offer"
    #: it had been given up too long ago: drop it, and report it dropped (stale) to the harness
    LATE_DROP = "late_drop"
    #: it had been given up and the late result has nothing to say
    LATE_END = "late_end"
    #: a second result, or one for a task never sent: ignore it
    DUPLICATE = "duplicate"


@dataclass(frozen=True)
class ResultDecision:
    """The verdict on one result and what it was about.

    Attributes:
        verdict: what to do.
        task_id: the task.
        query: the request ("" for a duplicate).
        late_s: for late results, seconds between the give-up and the result.
    """

    verdict: Verdict
    task_id: str
    query: str = ""
    late_s: float = 0.0

    @property
    def offer(self) -> bool:
        """True when the reply should be offered for delivery."""
        return self.verdict in (Verdict.OFFER, Verdict.LATE_OFFER)


@dataclass(frozen=True)
class _Ended:
    query: str
    at: float
    gave_up: bool


class DelegationTracker:
    """The frontend's book of delegations (rules: module docstring).

    Args:
        clock: the session clock.
        liveness_s: with the harness up, a delegation not heard of for this long is given up
            and its goal cancelled.
        late_result_max_s: a result at most this long after its delegation was given up is
            still offered; later ones are dropped as stale.
        remembered: how many ended delegations are remembered (to recognise late results and
            duplicates); the oldest are forgotten first.
    """

    def __init__(
        self,
        clock: Clock,
        *,
        liveness_s: float = 10.0,
        late_result_max_s: float = 120.0,
        remembered: int = 256,
    ) -> None:
        if not liveness_s > 0:
            raise ValueError(f"liveness_s must be > 0, got {liveness_s}")
        if late_result_max_s < 0:
            raise ValueError(f"late_result_max_s must be >= 0, got {late_result_max_s}")
        if remembered < 1:
            raise ValueError(f"remembered must be >= 1, got {remembered}")
        self.liveness_s = float(liveness_s)
        self.late_result_max_s = float(late_result_max_s)
        self._clock = clock
        self._remembered = int(remembered)
        self._lock = threading.Lock()
        self._pending: dict[str, Delegation] = {}
        self._ended: OrderedDict[str, _Ended] = OrderedDict()

    def send(self, task_id: str, query: str, turn_id: int = 0, cutoff_seq: int = 0) -> Delegation:
        """Record a delegation being sent.

        Raises:
            ValueError: if ``task_id`` was already used.
        """
        now = self._clock.now()
        with self._lock:
            if task_id in self._pending or task_id in self._ended:
                raise ValueError(f"delegation {task_id} was already sent")
            delegation = Delegation(task_id, query, int(turn_id), int(cutoff_seq), now, now)
            self._pending[task_id] = delegation
        return delegation

    def accepted(self, task_id: str, handle: Any) -> bool:
        """The harness accepted the goal.

        Returns:
            False if the delegation is no longer pending (given up, or ended): the caller
            should cancel the goal it just got.
        """
        with self._lock:
            delegation = self._pending.get(task_id)
            if delegation is None:
                return False
            delegation.handle = handle
            delegation.heard_at = self._clock.now()
        return True

    def heard(self, task_id: str) -> bool:
        """The harness said something about the task (feedback, heartbeat); False if it is not
        pending."""
        with self._lock:
            delegation = self._pending.get(task_id)
            if delegation is None:
                return False
            delegation.heard_at = self._clock.now()
        return True

    def end(self, task_id: str) -> Delegation | None:
        """End a pending delegation without a result (sending failed, goal rejected); None if
        it was not pending."""
        with self._lock:
            return self._close(task_id, gave_up=False)

    def expire(self, harness_up: bool, harness_heard_at: float | None = None) -> list[GiveUp]:
        """Give up the delegations the rules say to (call periodically).

        Args:
            harness_up: the harness's heartbeat is fresh.
            harness_heard_at: session time of its latest heartbeat (None: unknown, then the
                task's own silence decides alone).
        """
        now = self._clock.now()
        out: list[GiveUp] = []
        with self._lock:
            for task_id, d in list(self._pending.items()):
                if not harness_up:
                    out.append(GiveUp(d, HARNESS_UNAVAILABLE, cancel=False))
                elif now - d.heard_at > self.liveness_s and (
                    harness_heard_at is None or harness_heard_at - d.heard_at > self.liveness_s
                ):
                    reason = f"{NO_WORD} for {now - d.heard_at:.1f} s"
                    out.append(GiveUp(d, reason, cancel=True))
                else:
                    continue
                self._close(task_id, gave_up=True)
        return out

    def give_up(self, task_id: str, reason: str) -> GiveUp | None:
        """Stop waiting for one delegation now (e.g. the frontend closes); None if not
        pending. Its goal should be cancelled."""
        with self._lock:
            delegation = self._pending.get(task_id)
            if delegation is None:
                return None
            self._close(task_id, gave_up=True)
        return GiveUp(delegation, reason, cancel=True)

    def result(self, task_id: str, state: str, has_reply: bool) -> ResultDecision:
        """Decide what to do with the result of ``task_id`` (final ``state``, and whether it
        carries a reply to speak)."""
        now = self._clock.now()
        speak = state == "COMPLETED" and has_reply
        with self._lock:
            delegation = self._pending.get(task_id)
            if delegation is not None:
                self._close(task_id, gave_up=False)
                return ResultDecision(
                    Verdict.OFFER if speak else Verdict.END, task_id, delegation.query
                )
            ended = self._ended.get(task_id)
            if ended is None or not ended.gave_up:
                return ResultDecision(Verdict.DUPLICATE, task_id)
            # the first late result ends it for good: a second one is a duplicate
            self._ended[task_id] = _Ended(ended.query, ended.at, gave_up=False)
        late_s = now - ended.at
        if not speak:
            verdict = Verdict.LATE_END
        elif late_s <= self.late_result_max_s:
            verdict = Verdict.LATE_OFFER
        else:
            verdict = Verdict.LATE_DROP
        return ResultDecision(verdict, task_id, ended.query, late_s)

    def get(self, task_id: str) -> Delegation | None:
        """The pending delegation with this id, or None."""
        with self._lock:
            return self._pending.get(task_id)

    def pending(self) -> list[str]:
        """The ids of the pending delegations, sorted."""
        with self._lock:
            return sorted(self._pending)

    def _close(self, task_id: str, gave_up: bool) -> Delegation | None:
        """Move a pending delegation to the ended ones (caller holds the lock)."""
        delegation = self._pending.pop(task_id, None)
        if delegation is None:
            return None
        self._ended[task_id] = _Ended(delegation.query, self._clock.now(), gave_up)
        while len(self._ended) > self._remembered:
            self._ended.popitem(last=False)
        return delegation
