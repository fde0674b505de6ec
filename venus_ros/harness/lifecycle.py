"""The tasks a runner holds and every state move they make, in one order.

:class:`Lifecycle` is the runner's table of tasks (:class:`Control`, one per task) and the one
place a task changes state: the journal row first, then the task's state in memory, then the
transition listeners. A failed journal write is logged and counted
(:attr:`Lifecycle.journal_errors`) and the move goes on: a full disk must not stop the robot
answering, it only costs crash safety. Settled tasks beyond ``max_retained`` (oldest first) are
forgotten.

It knows nothing of asyncio loops, tools being called, cancel requests or restarts (those are
:mod:`.runner`, :mod:`.takeback` and :mod:`.recovery`): every method runs on the caller's thread
(the runner's loop thread), except :meth:`Lifecycle.get`, :meth:`Lifecycle.controls` and
:meth:`Lifecycle.add_listener`, which any thread may call. The moves allowed are the table in
:mod:`.tasks` (one :class:`~venus_ros.harness.tasks.TaskState` for the core and the nodes).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from venus_ros.core.clock import Clock
from venus_ros.harness.journal import Journal, JournalError
from venus_ros.harness.progress import clamp_fraction
from venus_ros.harness.tasks import TRANSITIONS, InvalidTransition, Task, TaskState
from venus_ros.harness.tools import Tool, ToolResult

log = logging.getLogger("venus_ros.harness")

#: ``callback(task, old_state, new_state)``; ``old_state`` is None for the initial QUEUED.
TransitionCallback = Callable[[Task, "TaskState | None", TaskState], None]
#: ``callback(task, fraction, message)`` when a running tool reports progress (runner thread).
ProgressCallback = Callable[[Task, float, str], None]


@dataclass(eq=False)
class Control:
    """What the runner holds for one task besides the task's own data."""

    task: Task
    future: concurrent.futures.Future[Task]
    tool: Tool | None = None
    job: asyncio.Task[None] | None = None
    tool_job: asyncio.Task[ToolResult] | None = None
    #: its reply left the harness (Delegate result sent, or offered for delivery)
    handed_off: bool = False
    #: a cancel request's task (not a tool's, whatever a tool may be called)
    cancel_request: bool = False


class Lifecycle:
    """The runner's tasks, their state moves, journal writes and listeners.

    Args:
        clock: stamps every move.
        journal: where every task and move is written first; None writes nothing.
        listeners: transition callbacks (more with :meth:`add_listener`).
        progress_listeners: called by :meth:`progress` while a task is RUNNING.
        max_retained: settled tasks beyond this many (oldest first) are forgotten.

    Raises:
        ValueError: if ``max_retained`` is below 1.
    """

    def __init__(
        self,
        clock: Clock,
        *,
        journal: Journal | None = None,
        listeners: Iterable[TransitionCallback] = (),
        progress_listeners: Iterable[ProgressCallback] = (),
        max_retained: int = 1024,
    ) -> None:
        if max_retained < 1:
            raise ValueError(f"max_retained must be >= 1, got {max_retained}")
        self.clock = clock
        self.journal = journal
        #: guards the task table (and whatever the runner decides together with it); reentrant,
        #: so a caller holding it may still use :meth:`get`, :meth:`insert` and the moves
        self.lock = threading.RLock()
        #: journal writes that failed (each logged); the tasks went on regardless
        self.journal_errors = 0
        self._listeners: tuple[TransitionCallback, ...] = tuple(listeners)
        self._progress_listeners: tuple[ProgressCallback, ...] = tuple(progress_listeners)
        self._max_retained = int(max_retained)
        self._controls: OrderedDict[str, Control] = OrderedDict()
        #: ids of settled tasks, oldest first: what ``_forget_old`` may drop, found in O(1)
        self._settled: OrderedDict[str, None] = OrderedDict()

    # --- the table (any thread) --------------------------------------------------------------

    def add_listener(self, callback: TransitionCallback) -> None:
        """Call ``callback(task, old, new)`` after every later transition."""
        with self.lock:
            self._listeners = (*self._listeners, callback)

    def insert(self, control: Control) -> bool:
        """Add a task to the table; False (nothing added) if its id is taken.

        A settled task may be forgotten at once when the table is full.
        """
        task = control.task
        with self.lock:
            if task.id in self._controls:
                return False
            self._controls[task.id] = control
            if task.state.settled:
                self._settled[task.id] = None
            self._forget_old()
        return True

    def get(self, task_id: str) -> Control | None:
        """The control of this task, or None (unknown or forgotten)."""
        with self.lock:
            return self._controls.get(task_id)

    def controls(self) -> list[Control]:
        """Every retained task's control, oldest first (a copy)."""
        with self.lock:
            return list(self._controls.values())

    # --- moves (runner thread) ---------------------------------------------------------------

    def queued(self, control: Control) -> None:
        """A new task enters the lifecycle: its journal row, then the listeners (None -> QUEUED)."""
        task = control.task
        self.journaled(lambda j: j.record_task(task, control.tool))
        self.notify(task, None, TaskState.QUEUED)

    def move(self, control: Control, state: TaskState, reason: str) -> TaskState:
        """Journal the transition, then make it, then tell the listeners; returns the old state.

        A settled task's future resolves with it (once).

        Raises:
            InvalidTransition: if the table in :mod:`.tasks` forbids the move.
        """
        task = control.task
        old = task.state
        if state not in TRANSITIONS[old]:
            raise InvalidTransition(task.id, old, state)
        t = self.clock.now()
        if state.settled:
            task.progress = 1.0
        self.journaled(lambda j: j.record_transition(task, old, state, t, reason))
        task.transition(state, t, reason)
        if state in (TaskState.DELIVERING, TaskState.DELIVERED):
            control.handed_off = True
        elif state is TaskState.COMPLETED:
            control.handed_off = False
        self.notify(task, old, state)
        if state.settled and not control.future.done():
            with self.lock:
                if task.id in self._controls:
                    self._settled[task.id] = None
            control.future.set_result(task)
        return old

    def fail(self, control: Control, reason: str) -> None:
        """Move the task to FAILED with ``reason`` as its error."""
        control.task.error = reason
        self.move(control, TaskState.FAILED, reason)

    def resume(self, control: Control, reason: str) -> None:
        """A recovered task re-enters its state (journaled first, then listeners)."""
        task = control.task
        t = self.clock.now()
        self.journaled(lambda j: j.record_transition(task, task.state, task.state, t, reason))
        task.resume(t, reason)
        self.notify(task, task.state, task.state)

    def hand_off(self, control: Control, via: str) -> None:
        """Record (once) that the task's reply left the harness ``via`` something."""
        if control.handed_off:
            return
        control.handed_off = True
        self.journaled(lambda j: j.mark_handed_off(control.task.id, via))

    def progress(self, control: Control, fraction: float, message: str) -> None:
        """A running tool's progress: ``task.progress`` is set and the listeners told."""
        task = control.task
        if task.state is not TaskState.RUNNING:
            return
        task.progress = clamp_fraction(fraction)
        for callback in self._progress_listeners:
            try:
                callback(task, task.progress, message)
            except Exception:
                log.exception("harness: a progress listener failed (task %s)", task.id)

    def journaled(self, write: Callable[[Journal], None]) -> None:
        """Run one journal write; a failure is logged and counted, never raised."""
        if self.journal is None:
            return
        try:
            write(self.journal)
        except JournalError as exc:
            self.journal_errors += 1
            if self.journal_errors == 1 or self.journal_errors % 100 == 0:
                log.error("harness: journal write failed (%d so far): %s", self.journal_errors, exc)

    def notify(self, task: Task, old: TaskState | None, new: TaskState) -> None:
        """Tell every transition listener, in order; one that raises is logged and skipped."""
        for callback in self._listeners:
            try:
                callback(task, old, new)
            except Exception:
                log.exception("harness: a transition listener failed (task %s)", task.id)

    def _forget_old(self) -> None:
        """Drop the oldest settled tasks beyond ``max_retained`` (caller holds the lock)."""
        while len(self._controls) > self._max_retained and self._settled:
            task_id, _ = self._settled.popitem(last=False)
            self._controls.pop(task_id, None)
