"""The harness's book of Delegate goals: accepted, waiting for evidence, running, settled.

Pure Python (no rclpy): the node converts ROS callbacks into calls here, under its own lock
(this class is not thread-safe by itself), and does what the answers say. A goal handle is
opaque to the book. The rules:

- **Accept.** A goal whose evidence cutoff record has not arrived on the timeline yet waits for
  it, at most ``evidence_wait_s``; otherwise its task is submitted at once (:attr:`Goal.waiting`).
- **Cancel before accept.** A cancel request can overtake its goal's accept: it is remembered
  (:attr:`CancelAnswer.EARLY`) and the goal, once accepted, starts cancelled.
- **Cancel while waiting** for evidence: the task is submitted already cancelled, so its
  requester still gets a CANCELLED result (:attr:`CancelAnswer.SUBMIT_CANCELLED`).
- **Cancel while running**: the runner is asked (:attr:`CancelAnswer.CANCEL_TASK`); once the
  task settled it is too late (:attr:`CancelAnswer.REJECT`).
- **Settled.** A CANCELLED task's result waits (at most ``cancel_state_wait_s``) for the action
  server to record the cancel, so that the goal ends CANCELED and not ABORTED.
- **Alive.** Every goal not settled yet is reported alive (:meth:`GoalBook.live`): the node
  sends a heartbeat feedback per goal, which is what keeps the frontend waiting for long work.
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from venus_ros.core.clock import Clock
from venus_ros.harness.tasks import Task, TaskState


@dataclass(eq=False)
class Goal:
    """An accepted goal whose result has not been sent yet.

    Attributes:
        task_id: the task's id (the goal id as hex).
        handle: the caller's goal handle.
        cutoff_seq: the goal's evidence cutoff.
        wait_until: while it waits for its cutoff record, when it stops waiting.
        submitted: its task has been handed to the runner.
        cancel: the client asked to cancel it (and the request was accepted).
        task: the settled task, once execution is over.
        send_by: a CANCELLED task's result waits at most until then for the CANCELING state.
    """

    task_id: str
    handle: Any
    cutoff_seq: int
    wait_until: float | None = None
    submitted: bool = False
    cancel: bool = False
    task: Task | None = None
    send_by: float | None = None

    @property
    def waiting(self) -> bool:
        """It waits for its evidence cutoff record (not submitted yet)."""
        return self.wait_until is not None


class CancelAnswer(str, enum.Enum):
    """What a cancel request means for its goal (:meth:`GoalBook.cancel`)."""

    #: the cancel overtook the accept: accept it; the goal will start cancelled
    EARLY = "early"
    #: the task had settled: too late, reject the cancel
    REJECT = "reject"
    #: the task runs: ask the runner to cancel it, then :meth:`GoalBook.cancelling`
    CANCEL_TASK = "cancel_task"
    #: it waited for evidence: submit it now, cancelled
    SUBMIT_CANCELLED = "submit_cancelled"


@dataclass
class Due:
    """What :meth:`GoalBook.due` found to do now.

    Attributes:
        start: goals to submit now (their evidence arrived, or the wait is over).
        incomplete: of those, the ones whose cutoff record never arrived.
        results: goals whose result should be sent now.
    """

    start: list[Goal] = field(default_factory=list)
    incomplete: list[Goal] = field(default_factory=list)
    results: list[Goal] = field(default_factory=list)


class GoalBook:
    """Accepted Delegate goals (rules: module docstring).

    Args:
        clock: the session clock.
        evidence_wait_s: how long a goal waits for its cutoff record (0: never waits).
        cancel_state_wait_s: how long a CANCELLED task's result waits for the CANCELING state.
        remembered: how many early cancel requests are remembered.
    """

    def __init__(
        self,
        clock: Clock,
        *,
        evidence_wait_s: float = 0.5,
        cancel_state_wait_s: float = 0.5,
        remembered: int = 256,
    ) -> None:
        self._clock = clock
        self.evidence_wait_s = float(evidence_wait_s)
        self.cancel_state_wait_s = float(cancel_state_wait_s)
        self._remembered = int(remembered)
        self._goals: dict[str, Goal] = {}
        self._cancel_early: OrderedDict[str, None] = OrderedDict()

    def accept(self, task_id: str, handle: Any, cutoff_seq: int, last_seq: int) -> Goal:
        """Book an accepted goal; submit its task unless :attr:`Goal.waiting`.

        Raises:
            ValueError: if a goal with this id is already booked.
        """
        if task_id in self._goals:
            raise ValueError(f"goal {task_id} is already booked")
        goal = Goal(task_id, handle, int(cutoff_seq), cancel=task_id in self._cancel_early)
        self._cancel_early.pop(task_id, None)
        if not goal.cancel and self.evidence_wait_s > 0 and goal.cutoff_seq > last_seq:
            goal.wait_until = self._clock.now() + self.evidence_wait_s
        self._goals[task_id] = goal
        return goal

    def cancel(self, task_id: str) -> CancelAnswer:
        """A client asked to cancel ``task_id``: what that means now."""
        goal = self._goals.get(task_id)
        if goal is None:
            self._cancel_early[task_id] = None
            while len(self._cancel_early) > self._remembered:
                self._cancel_early.popitem(last=False)
            return CancelAnswer.EARLY
        if goal.task is not None:
            return CancelAnswer.REJECT
        if goal.submitted:
            return CancelAnswer.CANCEL_TASK
        goal.cancel = True
        goal.wait_until = None
        return CancelAnswer.SUBMIT_CANCELLED

    def cancelling(self, task_id: str) -> None:
        """The runner took the cancel of a running task."""
        goal = self._goals.get(task_id)
        if goal is not None:
            goal.cancel = True

    def submitted(self, task_id: str) -> None:
        """The goal's task was handed to the runner."""
        goal = self._goals.get(task_id)
        if goal is not None:
            goal.submitted = True
            goal.wait_until = None

    def settled(self, task_id: str, task: Task, cancel_recorded: bool) -> Goal | None:
        """The goal's task settled; returns the goal if its result should be sent now (None:
        unknown goal, or a CANCELLED result waiting for ``cancel_recorded``)."""
        goal = self._goals.get(task_id)
        if goal is None:
            return None
        goal.task = task
        if task.state is TaskState.CANCELLED and not cancel_recorded:
            goal.send_by = self._clock.now() + self.cancel_state_wait_s
            return None
        return goal

    def due(self, last_seq: int, cancel_recorded: Callable[[Any], bool]) -> Due:
        """Goals to start and results to send now; ``cancel_recorded(handle)`` says whether
        the action server recorded a goal's cancel."""
        now = self._clock.now()
        due = Due()
        for goal in self._goals.values():
            if goal.wait_until is not None and (
                goal.cutoff_seq <= last_seq or goal.wait_until <= now
            ):
                if goal.cutoff_seq > last_seq:
                    due.incomplete.append(goal)
                goal.wait_until = None
                due.start.append(goal)
            elif goal.send_by is not None and (cancel_recorded(goal.handle) or goal.send_by <= now):
                goal.send_by = None
                due.results.append(goal)
        return due

    @property
    def waiting(self) -> bool:
        """Some goal waits for evidence or for its cancel to be recorded (poll until not)."""
        return any(g.wait_until is not None or g.send_by is not None for g in self._goals.values())

    def live(self) -> list[Goal]:
        """Goals whose task has not settled: the harness reports each one alive."""
        return [g for g in self._goals.values() if g.task is None]

    def get(self, task_id: str) -> Goal | None:
        """The booked goal, or None."""
        return self._goals.get(task_id)

    def pop(self, task_id: str) -> Goal | None:
        """Remove and return a goal (its result is being sent)."""
        return self._goals.pop(task_id, None)

    def __len__(self) -> int:
        return len(self._goals)
