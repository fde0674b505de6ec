"""Delegated tasks and their lifecycle.

A task is created QUEUED when the frontend delegates a request. The allowed moves are data
(:data:`TRANSITIONS`), so the runner, the delivery stage and the journal all check against the
same table::

    QUEUED ──▶ RUNNING ──▶ COMPLETED ──▶ DELIVERING ──▶ DELIVERED
      │          │  │          │   │         │
      │          │  └─▶ FAILED ◀┘   │         ├─▶ COMPLETED  (interrupted, offered again)
      │          │                  │         ├─▶ FAILED     (dropped: interrupted again, stale)
      │          │                  └─────────┴─▶ CANCELLED  (withdrawn before it was spoken)
      │          └─▶ CANCELLING ──▶ CANCELLED | FAILED | COMPLETED
      └─▶ CANCELLING | CANCELLED | FAILED

CANCELLING may end COMPLETED: a side-effecting tool may already have committed when the cancel
arrived, and the task then says so instead of pretending it was cancelled. A COMPLETED or
DELIVERING task moves to CANCELLED only when its reply is withdrawn before anyone heard it (the
user cancelled, or a newer request superseded it) and its tool had no side effects.

A task recovered from the journal after a harness restart may re-enter its own QUEUED or
RUNNING state (:meth:`Task.resume`): a history entry that says it was picked up again, not a
move, so the table above stays the whole lifecycle.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple


class TaskState(str, enum.Enum):
    """The state of a delegated task (the values match ``TaskStatus`` message constants)."""

    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    DELIVERING = "DELIVERING"
    DELIVERED = "DELIVERED"
    FAILED = "FAILED"
    CANCELLING = "CANCELLING"
    CANCELLED = "CANCELLED"

    @property
    def terminal(self) -> bool:
        """True when no transition leaves this state."""
        return not TRANSITIONS[self]

    @property
    def settled(self) -> bool:
        """True when execution has ended (the runner's work on the task is over)."""
        return self in SETTLED


_S = TaskState

#: Every allowed move: state -> the states it may move to.
TRANSITIONS: Mapping[TaskState, frozenset[TaskState]] = {
    _S.QUEUED: frozenset({_S.RUNNING, _S.CANCELLING, _S.CANCELLED, _S.FAILED}),
    _S.RUNNING: frozenset({_S.COMPLETED, _S.FAILED, _S.CANCELLING}),
    _S.CANCELLING: frozenset({_S.CANCELLED, _S.FAILED, _S.COMPLETED}),
    _S.COMPLETED: frozenset({_S.DELIVERING, _S.FAILED, _S.CANCELLED}),
    _S.DELIVERING: frozenset({_S.DELIVERED, _S.COMPLETED, _S.FAILED, _S.CANCELLED}),
    _S.DELIVERED: frozenset(),
    _S.FAILED: frozenset(),
    _S.CANCELLED: frozenset(),
}

#: States in which a task's execution is over: its result (or failure) is known.
SETTLED: frozenset[TaskState] = frozenset(
    {_S.COMPLETED, _S.DELIVERING, _S.DELIVERED, _S.FAILED, _S.CANCELLED}
)


class InvalidTransition(ValueError):
    """A task was asked to move along an edge that :data:`TRANSITIONS` does not allow."""

    def __init__(self, task_id: str, old: TaskState, new: TaskState) -> None:
        super().__init__(f"task {task_id}: {old.value} -> {new.value} is not allowed")
        self.task_id = task_id
        self.old = old
        self.new = new


class Transition(NamedTuple):
    """One entry of a task's history: the state entered, when (session time), and why."""

    state: TaskState
    t: float
    reason: str


@dataclass(eq=False)
class Task:
    """One delegated request and everything that happened to it.

    Attributes:
        id: unique task id (the Delegate goal id, as hex, when it came through ROS).
        query: the user's request as text.
        session_id: the session the request belongs to.
        turn_id: the frontend turn that delegated it.
        cutoff_seq: the evidence cutoff (timeline seq at the moment ``<delegate>`` opened).
        tool: the tool chosen to answer it ("" until routed).
        args: the tool's arguments (validated before any call).
        state: the current state.
        history: every state entered, oldest first; starts with QUEUED.
        result_text: the tool's raw text result (COMPLETED only).
        payload: the tool's structured result (JSON-serialisable).
        error: why the task failed (FAILED only).
        note: a remark that qualifies the outcome, e.g. a cancel that came too late.
        progress: fraction done, 0.0 to 1.0.
    """

    id: str
    query: str
    session_id: str
    turn_id: int
    cutoff_seq: int
    t: float = 0.0
    tool: str = ""
    args: dict[str, Any] = field(default_factory=dict)
    state: TaskState = TaskState.QUEUED
    history: list[Transition] = field(default_factory=list)
    result_text: str = ""
    payload: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    note: str = ""
    progress: float = 0.0

    def __post_init__(self) -> None:
        if not self.history:
            self.history.append(Transition(self.state, self.t, "submitted"))

    def transition(self, state: TaskState, t: float, reason: str = "") -> TaskState:
        """Move to ``state`` at session time ``t``; returns the previous state.

        Raises:
            InvalidTransition: if :data:`TRANSITIONS` does not allow the move.
        """
        old = self.state
        if state not in TRANSITIONS[old]:
            raise InvalidTransition(self.id, old, state)
        self.state = state
        self.history.append(Transition(state, float(t), reason))
        return old

    def resume(self, t: float, reason: str) -> None:
        """Re-enter the current state at session time ``t`` (a task recovered after a restart).

        Only a QUEUED or RUNNING task may resume; the state does not change, the history gains
        an entry with ``reason``.

        Raises:
            InvalidTransition: for a task in any other state.
        """
        if self.state not in (TaskState.QUEUED, TaskState.RUNNING):
            raise InvalidTransition(self.id, self.state, self.state)
        self.history.append(Transition(self.state, float(t), reason))

    @property
    def states(self) -> list[TaskState]:
        """The states entered, oldest first."""
        return [entry.state for entry in self.history]

    @property
    def reason(self) -> str:
        """The reason given for the newest transition."""
        return self.history[-1].reason
