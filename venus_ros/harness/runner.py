"""The Harness runner: delegated tasks executed on an asyncio loop in a thread of its own.

The foreground never waits on it: :meth:`HarnessRunner.submit` takes a lock, queues the task and
returns. On the runner's loop each task is one named asyncio task (``harness-task-<id>``) that
waits for a slot (the concurrency limit), runs its tool as another named task
(``harness-tool-<name>-<id>``) under the tool's timeout, and settles COMPLETED, FAILED or
CANCELLED. Every asyncio task is owned by the runner, cancelled and awaited on :meth:`close`,
and whatever it raises is logged and turned into FAILED with a reason.

Cancellation tells the truth: a QUEUED task is cancelled at once; a RUNNING task moves to
CANCELLING and its tool is cancelled if it is cancellable. A tool that finishes anyway (it is
not cancellable, or it completed before the cancel landed) settles COMPLETED with a note when
it has side effects (what it did cannot be undone), and CANCELLED when it has none (its result
is simply discarded).

Transition callbacks run on the runner thread, in order, after each state change; they must be
quick. Timestamps come from the injected :class:`~venus_ros.core.clock.Clock`; timeouts are real
time on the loop.

With a :class:`~venus_ros.harness.journal.Journal`, every task is written when the runner picks
it up and every transition before it happens: the journal row first, then the task's state in
memory, then the listeners, then (for RUNNING) the tool. Only the runner thread writes. A
failed journal write is logged and counted (:attr:`HarnessRunner.journal_errors`) and the task
goes on: a full disk must not stop the robot answering, it only costs crash safety.

Requests that take work back are handled here, not by a tool:

- A cancel request ("stop", "never mind", "cancel that", "forget it", see
  :func:`is_cancel_request`) becomes a task of its own (tool ``cancel``) that cancels every
  unfinished task of its session, withdraws replies nobody has heard yet (their tasks end
  CANCELLED when their tool had no side effects), waits briefly for the cancelled tools to stop,
  and completes with what really happened: "Okay, I stopped that." or "That had already been
  done: ...", or that nothing was running.
- A request routed to a tool named in ``superseding`` (e.g. navigation: a new goal replaces the
  old one) supersedes the session's older tasks on that tool the same way, so an old answer is
  never spoken as if fresh.

After a restart, :meth:`HarnessRunner.recover` applies these rules to what the journal holds:

- QUEUED or RUNNING, tool idempotent (now and when the task was journaled), arguments intact
  and still valid: re-run, under the same id (a history entry says so).
- QUEUED or RUNNING otherwise: FAILED, "interrupted by a harness restart" (plus "before it
  started" for QUEUED, or "(it may already have taken effect)" for a side-effecting or no
  longer known tool). A non-idempotent tool is never started again: its requester's Delegate
  goal died with the old process, so nothing could cancel it any more.
- CANCELLING: CANCELLED when the tool has no side effects (the cancel is what was asked);
  otherwise FAILED, interrupted, as it may already have taken effect.
- COMPLETED whose reply never left the harness (:meth:`HarnessRunner.hand_off` was not called
  and it never entered DELIVERING): kept for delivery (:meth:`HarnessRunner.undelivered`), or,
  older than ``stale_after_s``, FAILED as stale rather than spoken as if fresh.
- DELIVERING: re-adopted (the frontend holds the reply; its delivery report, or a cancel
  request withdrawing it, moves the task on), or, unconfirmed for longer than
  ``stale_after_s``, FAILED as stale.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import re
import threading
import traceback
import uuid
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from venus_ros.core.clock import Clock
from venus_ros.core.protocol import clean_text
from venus_ros.core.timeline import TimelineView
from venus_ros.harness.journal import Journal, JournalError, JournalRow
from venus_ros.harness.progress import clamp_fraction, progress_to
from venus_ros.harness.secrets import env_secrets, scrub, scrub_value
from venus_ros.harness.tasks import TRANSITIONS, InvalidTransition, Task, TaskState
from venus_ros.harness.tools import (
    ArgumentError,
    Tool,
    ToolError,
    ToolRegistry,
    ToolResult,
    UnknownToolError,
    route,
)
from venus_ros.text.repair import is_cancel_request

log = logging.getLogger("venus_ros.harness")

#: ``callback(task, old_state, new_state)``; ``old_state`` is None for the initial QUEUED.
TransitionCallback = Callable[[Task, "TaskState | None", TaskState], None]
#: ``callback(task, fraction, message)`` when a running tool reports progress (runner thread).
ProgressCallback = Callable[[Task, float, str], None]
#: ``router(query) -> (tool_name, args) | None``.
Router = Callable[[str], "tuple[str, dict[str, Any]] | None"]

#: The FAILED reason when no tool matches a query.
NO_TOOL_REASON = "no tool can answer this yet"
#: The FAILED reason prefix when the runner shuts down under a task.
SHUTDOWN_REASON = "interrupted: the harness shut down"
#: The FAILED reason prefix of an unsettled task found in the journal after a restart.
INTERRUPTED_REASON = "interrupted by a harness restart"
#: Appended to a FAILED reason when a side-effecting tool may have acted before it stopped.
MAY_HAVE_ACTED = " (it may already have taken effect)"
#: The note on a side-effecting task that completed although a cancel was requested.
ALREADY_DONE_NOTE = "That had already been done when the cancel came"
#: Tool results with more text than this fail instead of being spoken.
MAX_RESULT_CHARS = 20_000
#: Tool payloads larger than this (as JSON, UTF-8 bytes) fail instead of being journaled/sent.
MAX_PAYLOAD_BYTES = 256 * 1024
#: A tool's own failure message (ToolError) is spoken at most this long.
MAX_REASON_CHARS = 160
#: How long a tool gets to stop after being cancelled (timeout, shutdown).
CANCEL_GRACE_S = 1.0
#: The tool name of a cancel request's task (no registry tool has it).
CANCEL_TOOL = "cancel"
#: How long a cancel request waits for the tasks it cancelled to settle before it answers.
CANCEL_WAIT_S = 2.0


@dataclass(eq=False)
class _Control:
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


@dataclass(frozen=True)
class Recovery:
    """What :meth:`HarnessRunner.recover` did with the journal's unfinished business.

    Attributes:
        rerun: tasks being run again (settle futures as usual; no Delegate goal waits on them).
        failed: unsettled tasks now FAILED (interrupted), and undelivered ones too stale.
        cancelled: tasks that were CANCELLING, now CANCELLED.
        undelivered: COMPLETED tasks whose reply never left the harness, oldest first.
        delivering: DELIVERING tasks re-adopted: their reply is with the frontend, whose
            delivery report (or a cancel request's withdrawal) moves them on as before.
    """

    rerun: tuple[Task, ...] = ()
    failed: tuple[Task, ...] = ()
    cancelled: tuple[Task, ...] = ()
    undelivered: tuple[Task, ...] = ()
    delivering: tuple[Task, ...] = ()


class HarnessRunner:
    """Runs delegated tasks in the background.

    Args:
        registry: the tools that may run.
        clock: the session clock that stamps every transition.
        max_concurrent: at most this many tasks are RUNNING at once; others wait QUEUED.
        router: picks a tool for a query when :meth:`submit` is not told one.
        listeners: transition callbacks (more with :meth:`add_listener`).
        progress_listeners: called when a running tool reports progress
            (:func:`venus_ros.harness.progress.report_progress`); ``task.progress`` is updated.
        max_retained: settled tasks beyond this many (oldest first) are forgotten.
        name: names the thread (``<name>-loop``) for logs and debuggers.
        journal: write every task and transition there first (the caller opens and closes
            it); call :meth:`recover` once to resume what a previous process left.
        superseding: tools whose newer request supersedes the session's older ones.

    Use as a context manager, or call :meth:`close`.
    """

    def __init__(
        self,
        registry: ToolRegistry,
        clock: Clock,
        *,
        max_concurrent: int = 4,
        router: Router = route,
        listeners: Iterable[TransitionCallback] = (),
        progress_listeners: Iterable[ProgressCallback] = (),
        max_retained: int = 1024,
        name: str = "harness",
        journal: Journal | None = None,
        superseding: Collection[str] = (),
    ) -> None:
        if max_concurrent < 1:
            raise ValueError(f"max_concurrent must be >= 1, got {max_concurrent}")
        if max_retained < 1:
            raise ValueError(f"max_retained must be >= 1, got {max_retained}")
        self.registry = registry
        self.max_concurrent = int(max_concurrent)
        self._clock = clock
        self._router = router
        self._listeners: tuple[TransitionCallback, ...] = tuple(listeners)
        self._progress_listeners: tuple[ProgressCallback, ...] = tuple(progress_listeners)
        self._max_retained = int(max_retained)
        self._controls: OrderedDict[str, _Control] = OrderedDict()
        #: ids of settled tasks, oldest first: what ``_forget_old`` may drop, found in O(1)
        self._settled: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()
        self._closed = False
        self._journal = journal
        self._superseding = frozenset(superseding)
        self._recovered = False
        #: journal writes that failed (each logged); the tasks went on regardless
        self.journal_errors = 0
        self._loop = asyncio.new_event_loop()
        self._tool_loops = _ToolLoops(name)
        self._semaphore = asyncio.Semaphore(self.max_concurrent)
        self._thread = threading.Thread(target=self._serve, name=f"{name}-loop", daemon=True)
        self._thread.start()

    # --- public API (any thread) -------------------------------------------------------------

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The runner's event loop (schedule on it with ``call_soon_threadsafe`` only)."""
        return self._loop

    @property
    def thread(self) -> threading.Thread:
        """The thread the loop runs on."""
        return self._thread

    def add_listener(self, callback: TransitionCallback) -> None:
        """Call ``callback(task, old, new)`` on the runner thread after every transition."""
        with self._lock:
            self._listeners = (*self._listeners, callback)

    def submit(
        self,
        query: str,
        session_id: str,
        turn_id: int,
        cutoff_seq: int,
        evidence: TimelineView,
        *,
        task_id: str | None = None,
        tool: str | None = None,
        args: Mapping[str, Any] | None = None,
    ) -> Task:
        """Queue a task and return it at once (QUEUED); it runs on the runner thread.

        Args:
            query: the user's request.
            session_id: the session it belongs to.
            turn_id: the frontend turn that delegated it.
            cutoff_seq: the evidence cutoff (timeline seq when ``<delegate>`` opened).
            evidence: the read-only records at or before the cutoff, as the tool will see them.
            task_id: the id to use (e.g. the ROS goal id); a fresh one when None.
            tool: run this tool instead of asking the router.
            args: the tool's arguments (with ``tool``); validated before any call.

        Raises:
            RuntimeError: if the runner is closed.
            ValueError: if ``task_id`` is already in use.
        """
        task = Task(
            id=task_id or uuid.uuid4().hex,
            query=clean_text(str(query)),
            session_id=clean_text(str(session_id)),
            turn_id=int(turn_id),
            cutoff_seq=int(cutoff_seq),
            t=self._clock.now(),
        )
        control = _Control(task, concurrent.futures.Future())
        with self._lock:
            if self._closed:
                raise RuntimeError("the harness runner is closed")
            if task.id in self._controls:
                raise ValueError(f"task id {task.id} is already in use")
            self._controls[task.id] = control
            self._forget_old()
            self._loop.call_soon_threadsafe(self._start, control, evidence, tool, args)
        return task

    def future(self, task_id: str) -> concurrent.futures.Future[Task]:
        """A future that resolves with the task once it settles (COMPLETED, FAILED, CANCELLED).

        Raises:
            KeyError: for an unknown (or forgotten) task id.
        """
        with self._lock:
            return self._controls[task_id].future

    def get(self, task_id: str) -> Task | None:
        """The task with this id, or None."""
        with self._lock:
            control = self._controls.get(task_id)
        return control.task if control else None

    def tasks(self) -> list[Task]:
        """Every retained task, oldest first."""
        with self._lock:
            return [c.task for c in self._controls.values()]

    def cancel(self, task_id: str, reason: str = "cancel requested") -> bool:
        """Ask for a task to be cancelled; returns at once.

        Returns:
            True if the task exists and had not settled when asked (the cancel then takes
            effect on the runner thread; the outcome is in the task's final state), else False.
        """
        with self._lock:
            control = self._controls.get(task_id)
            if control is None or self._closed or control.task.state.settled:
                return False
            self._loop.call_soon_threadsafe(self._cancel, control, reason)
        return True

    def advance(
        self, task_id: str, state: TaskState, reason: str = ""
    ) -> concurrent.futures.Future[TaskState]:
        """Move a settled task on (delivery: COMPLETED -> DELIVERING -> DELIVERED ...).

        Returns:
            A future with the previous state, or the error (KeyError for an unknown task,
            :class:`~venus_ros.harness.tasks.InvalidTransition` for a move the table forbids,
            ValueError for a task whose execution has not ended).
        """
        result: concurrent.futures.Future[TaskState] = concurrent.futures.Future()
        with self._lock:
            control = self._controls.get(task_id)
            if control is None or self._closed:
                result.set_exception(KeyError(f"no task {task_id} (or the runner is closed)"))
                return result
            self._loop.call_soon_threadsafe(self._advance, control, state, reason, result)
        return result

    def hand_off(self, task_id: str, via: str = "delegate_result") -> bool:
        """Record that a COMPLETED task's reply left the harness (e.g. in a Delegate result),
        so a restart does not offer it again; returns at once.

        Returns:
            False for an unknown (or forgotten) task or a closed runner.
        """
        with self._lock:
            control = self._controls.get(task_id)
            if control is None or self._closed:
                return False
            self._loop.call_soon_threadsafe(self._hand_off, control, via)
        return True

    def undelivered(self) -> list[Task]:
        """COMPLETED tasks whose reply has not left the harness yet, oldest first.

        After :meth:`recover`, these include the replies a previous process completed but
        never handed off; the caller offers them (and moves them to DELIVERING with
        :meth:`advance`, which also marks them handed off).
        """
        with self._lock:
            return [
                c.task
                for c in self._controls.values()
                if c.task.state is TaskState.COMPLETED and not c.handed_off
            ]

    def recover(
        self,
        evidence: Callable[[int], TimelineView] | None = None,
        *,
        stale_after_s: float | None = None,
        timeout: float = 10.0,
    ) -> Recovery:
        """Resolve what the journal holds from a previous process (rules: module docstring).

        Call once, before submitting work. Recovered tasks join :meth:`tasks` (transitions go
        to the listeners as usual; a re-run first records a resume with the same state).

        Args:
            evidence: ``evidence(cutoff_seq)``, the view a re-run tool gets; an empty view when
                None (the old process's evidence mirror died with it).
            stale_after_s: undelivered replies completed longer ago than this (Unix time, from
                the journal) end FAILED instead of being offered; None keeps them all.
            timeout: how long to wait for the runner thread.

        Returns:
            What was done; an empty :class:`Recovery` without a journal.

        Raises:
            RuntimeError: if called twice, on a closed runner, or from the runner thread.
            JournalError: if the journal cannot be read.
        """
        if threading.current_thread() is self._thread:
            raise RuntimeError("HarnessRunner.recover() called from its own thread")
        with self._lock:
            if self._closed:
                raise RuntimeError("the harness runner is closed")
            if self._recovered:
                raise RuntimeError("HarnessRunner.recover() may only be called once")
            self._recovered = True
        if self._journal is None:
            return Recovery()
        done: concurrent.futures.Future[Recovery] = concurrent.futures.Future()

        def run() -> None:
            try:
                done.set_result(self._recover(evidence, stale_after_s))
            except BaseException as exc:
                done.set_exception(exc)

        self._loop.call_soon_threadsafe(run)
        return done.result(timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Cancel every task, await them, stop the loop and join the thread. Idempotent.

        Tasks that had not settled end FAILED ("interrupted: the harness shut down").
        """
        if threading.current_thread() is self._thread:
            raise RuntimeError("HarnessRunner.close() called from its own thread")
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._thread.is_alive():
            done = asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
            try:
                done.result(timeout)
            except (concurrent.futures.TimeoutError, RuntimeError) as exc:
                log.warning("harness: tasks did not stop within %.1f s (%s)", timeout, exc)
            except Exception:  # close() must close whatever a task did
                log.exception("harness: shutting the tasks down failed")
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)
        if self._thread.is_alive():
            log.warning("harness: the runner thread did not stop within %.1f s", timeout)
        else:
            self._loop.close()

    def __enter__(self) -> HarnessRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- runner thread -----------------------------------------------------------------------

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def _forget_old(self) -> None:
        """Drop the oldest settled tasks beyond ``max_retained`` (caller holds the lock)."""
        while len(self._controls) > self._max_retained and self._settled:
            task_id, _ = self._settled.popitem(last=False)
            self._controls.pop(task_id, None)

    def _start(
        self,
        control: _Control,
        evidence: TimelineView,
        tool_name: str | None,
        args: Mapping[str, Any] | None,
    ) -> None:
        task = control.task
        if tool_name is None and is_cancel_request(task.query):
            self._start_cancel_request(control)
            return
        problem = ""
        try:
            if tool_name is None:
                routed = self._router(task.query)
                if routed is None:
                    raise ToolError(NO_TOOL_REASON)
                tool_name, args = routed
            task.tool = tool_name
            control.tool = self.registry.get(tool_name)
            task.args = control.tool.validate(args if args is not None else {})
        except (ToolError, ArgumentError, UnknownToolError) as exc:
            problem = str(exc)
        except Exception:  # a router bug must not take the runner down
            log.exception("harness: routing task %s failed", task.id)
            problem = "routing failed (an internal error)"
        self._journaled(lambda j: j.record_task(task, control.tool))
        self._notify(task, None, TaskState.QUEUED)
        if problem:
            self._fail(control, problem)
            return
        if task.tool in self._superseding:
            for older in self._session_work(task, tool=task.tool):
                self._take_back(older, f"superseded by a newer request (task {task.id[:8]})")
        self._spawn(control, self._execute(control, evidence))

    def _spawn(self, control: _Control, body: Any) -> None:
        job = self._loop.create_task(body, name=f"harness-task-{control.task.id}")
        control.job = job
        job.add_done_callback(lambda j: self._job_done(control, j))

    # --- taking work back: cancel requests and superseding requests --------------------------

    def _session_work(self, task: Task, tool: str | None = None) -> list[_Control]:
        """The session's other tasks (on ``tool``) not finished yet: running, or with a reply
        nobody has heard."""
        with self._lock:
            controls = list(self._controls.values())
        return [
            c
            for c in controls
            if c.task is not task
            and c.task.session_id == task.session_id
            and not c.cancel_request
            and (tool is None or c.task.tool == tool)
            and c.task.state in _TAKE_BACK
        ]

    def _take_back(self, control: _Control, reason: str) -> None:
        """Cancel a task that is still working; withdraw a reply nobody has heard yet."""
        task = control.task
        if not task.state.settled:
            self._cancel(control, reason)
        elif control.tool is None or not control.tool.side_effects:
            self._move(control, TaskState.CANCELLED, f"reply withdrawn: {reason}")

    def _start_cancel_request(self, control: _Control) -> None:
        task = control.task
        task.tool = CANCEL_TOOL
        control.cancel_request = True
        self._journaled(lambda j: j.record_task(task, None))
        self._notify(task, None, TaskState.QUEUED)
        self._spawn(control, self._cancel_request(control))

    async def _cancel_request(self, control: _Control) -> None:
        task = control.task
        self._move(control, TaskState.RUNNING, "cancelling the session's work")
        targets = self._session_work(task)
        for target in targets:
            self._take_back(target, "the user asked to stop")
        unsettled = [t.future for t in targets if not t.future.done()]
        if unsettled:
            await asyncio.wait([asyncio.wrap_future(f) for f in unsettled], timeout=CANCEL_WAIT_S)
        task.result_text = _cancel_summary([t.task for t in targets], [t.tool for t in targets])
        task.payload = {"targets": {t.task.id: t.task.state.value for t in targets}}
        self._move(control, TaskState.COMPLETED, "cancel request answered")

    async def _execute(
        self, control: _Control, evidence: TimelineView, rerun: bool = False
    ) -> None:
        task, tool = control.task, control.tool
        assert tool is not None
        async with self._semaphore:
            if task.state is TaskState.QUEUED:
                self._move(control, TaskState.RUNNING, f"running {tool.name}")
            elif rerun and task.state is TaskState.RUNNING:
                self._resume(control, f"re-running {tool.name} after a harness restart")
            elif rerun and task.state is TaskState.CANCELLING:
                self._move(control, TaskState.CANCELLED, "cancelled before it was re-run")
                return
            else:
                return
            # The tool runs on its own thread; its report_progress() comes back to _progress.
            tool_job = self._loop.create_task(
                _call_tool(
                    self._tool_loops,
                    tool,
                    dict(task.args),
                    evidence,
                    lambda fraction, message: self._from_tool(control, fraction, message),
                ),
                name=f"harness-tool-{tool.name}-{task.id}",
            )
            tool_job.add_done_callback(_retrieve)  # a late failure is not "never retrieved"
            control.tool_job = tool_job
            try:
                done, _ = await asyncio.wait({tool_job}, timeout=tool.timeout_s)
            except asyncio.CancelledError:
                await _stop(tool_job)
                raise
            if not done:
                await _stop(tool_job)
                self._fail(control, _timeout_reason(tool))
                return
            self._settle(control, tool_job)

    def _settle(self, control: _Control, tool_job: asyncio.Task[ToolResult]) -> None:
        """Settle a task from its finished tool job."""
        task, tool = control.task, control.tool
        assert tool is not None
        cancelling = task.state is TaskState.CANCELLING
        if tool_job.cancelled():
            if cancelling:
                self._move(control, TaskState.CANCELLED, f"{tool.name} was cancelled")
            else:
                self._fail(control, f"the {tool.name} tool stopped: it was cancelled")
            return
        exc = tool_job.exception()
        if exc is not None:
            if isinstance(exc, ToolError):
                self._fail(control, _spoken_reason(str(exc)) or f"the {tool.name} tool failed")
            else:
                _log_crash(f"tool {tool.name} failed on task {task.id}", exc)
                self._fail(control, f"the {tool.name} tool failed unexpectedly")
            return
        result = tool_job.result()
        problem = _result_problem(tool, result)
        if problem:
            self._fail(control, problem)
            return
        secrets = env_secrets()
        task.result_text = scrub(clean_text(result.text), secrets)
        task.payload = _clean_value(scrub_value(dict(result.payload), secrets))
        if not cancelling:
            self._move(control, TaskState.COMPLETED, f"{tool.name} finished")
        elif tool.side_effects:
            task.note = ALREADY_DONE_NOTE
            self._move(control, TaskState.COMPLETED, "it had already been done: cancel too late")
        else:
            self._move(control, TaskState.CANCELLED, "result discarded: cancel requested")

    def _job_done(self, control: _Control, job: asyncio.Task[None]) -> None:
        if not job.cancelled() and job.exception() is not None:
            exc = job.exception()
            assert exc is not None
            _log_crash(f"task {control.task.id} crashed", exc)
            if not control.task.state.settled:
                self._fail(control, "internal error")
        if not control.task.state.settled:
            reason = SHUTDOWN_REASON
            if control.tool is not None and control.tool.side_effects:
                reason += " (it may already have taken effect)"
            self._fail(control, reason)

    def _cancel(self, control: _Control, reason: str) -> None:
        task = control.task
        if task.state is TaskState.QUEUED:
            self._move(control, TaskState.CANCELLING, reason)
            self._move(control, TaskState.CANCELLED, "cancelled before it started")
            if control.job is not None:
                control.job.cancel()
        elif task.state is TaskState.RUNNING:
            self._move(control, TaskState.CANCELLING, reason)
            tool, tool_job = control.tool, control.tool_job
            if tool is not None and tool.cancellable and tool_job is not None:
                tool_job.cancel()

    def _advance(
        self,
        control: _Control,
        state: TaskState,
        reason: str,
        result: concurrent.futures.Future[TaskState],
    ) -> None:
        try:
            if not control.task.state.settled:
                raise ValueError(f"task {control.task.id} is still {control.task.state.value}")
            result.set_result(self._move(control, state, reason))
        except Exception as exc:
            result.set_exception(exc)

    async def _shutdown(self) -> None:
        with self._lock:
            controls = list(self._controls.values())
        jobs = [c.job for c in controls if c.job is not None and not c.job.done()]
        for job in jobs:
            job.cancel()
        if jobs:
            await asyncio.wait(jobs, timeout=CANCEL_GRACE_S * 2)
        for control in controls:
            if not control.task.state.settled:
                self._fail(control, SHUTDOWN_REASON)
        waiting = [c.tool_job for c in controls if c.tool_job is not None and not c.tool_job.done()]
        for tool_job in waiting:  # a second cancel: stop waiting for tools that ignored one
            tool_job.cancel()
        if waiting:
            await asyncio.wait(waiting, timeout=CANCEL_GRACE_S)
        self._tool_loops.close()

    def _hand_off(self, control: _Control, via: str) -> None:
        if control.handed_off:
            return
        control.handed_off = True
        self._journaled(lambda j: j.mark_handed_off(control.task.id, via))

    def _recover(
        self, evidence: Callable[[int], TimelineView] | None, stale_after_s: float | None
    ) -> Recovery:
        """Runner thread: load the journal's unfinished tasks and resolve them (see module)."""
        journal = self._journal
        assert journal is not None
        pending, undelivered = journal.pending(), journal.undelivered()
        rerun: list[Task] = []
        failed: list[Task] = []
        cancelled: list[Task] = []
        offered: list[Task] = []
        now = journal.wall()
        for row in pending:
            control = self._adopt(row)
            if control is None:
                continue
            task, tool = control.task, control.tool
            if task.state is TaskState.CANCELLING:
                if tool is not None and not tool.side_effects:
                    reason = f"{INTERRUPTED_REASON} while cancelling"
                    self._move(control, TaskState.CANCELLED, reason)
                    cancelled.append(task)
                else:
                    self._fail(control, f"{INTERRUPTED_REASON} while cancelling{MAY_HAVE_ACTED}")
                    failed.append(task)
            elif self._rerunnable(row, tool):
                assert tool is not None
                view = evidence(task.cutoff_seq) if evidence else TimelineView((), task.cutoff_seq)
                if task.state is TaskState.QUEUED:
                    self._resume(control, "queued again after a harness restart")
                job = self._loop.create_task(
                    self._execute(control, view, rerun=True), name=f"harness-task-{task.id}"
                )
                control.job = job
                job.add_done_callback(lambda j, c=control: self._job_done(c, j))
                rerun.append(task)
            else:
                reason = INTERRUPTED_REASON
                if task.state is TaskState.QUEUED:
                    reason += " before it started"
                elif tool is None or tool.side_effects:
                    reason += MAY_HAVE_ACTED
                self._fail(control, reason)
                failed.append(task)
        for row in undelivered:
            control = self._adopt(row)
            if control is None:
                continue
            age = now - row.updated_t
            if stale_after_s is not None and age > stale_after_s:
                self._fail(
                    control,
                    f"stale: completed {age:.0f} s before the harness restarted, not delivered",
                )
                failed.append(control.task)
            else:
                offered.append(control.task)
        delivering: list[Task] = []
        for row in journal.rows():
            if row.state is not TaskState.DELIVERING:
                continue
            control = self._adopt(row)
            if control is None:
                continue
            age = now - row.updated_t
            if stale_after_s is not None and age > stale_after_s:
                reason = f"stale: its delivery was not confirmed within {age:.0f} s"
                self._fail(control, f"{reason} before the harness restarted")
                failed.append(control.task)
            else:
                delivering.append(control.task)
        log.info(
            "harness: recovered from %s: %d re-run, %d failed, %d cancelled, %d undelivered",
            journal.path,
            len(rerun),
            len(failed),
            len(cancelled),
            len(offered),
        )
        return Recovery(
            tuple(rerun), tuple(failed), tuple(cancelled), tuple(offered), tuple(delivering)
        )

    def _adopt(self, row: JournalRow) -> _Control | None:
        """A journaled task back under the runner's control (None if its id is taken)."""
        task = row.to_task()
        control = _Control(task, concurrent.futures.Future())
        try:
            control.tool = self.registry.get(row.tool) if row.tool else None
        except UnknownToolError:
            control.tool = None
        control.cancel_request = row.tool == CANCEL_TOOL and control.tool is None
        if task.state.settled:
            control.future.set_result(task)
        with self._lock:
            if task.id in self._controls:
                log.warning("harness: journaled task %s is already known; left alone", task.id)
                return None
            self._controls[task.id] = control
            if task.state.settled:
                self._settled[task.id] = None
            self._forget_old()
        return control

    def _rerunnable(self, row: JournalRow, tool: Tool | None) -> bool:
        if tool is None or not (tool.idempotent and row.idempotent) or row.redacted:
            return False
        try:
            tool.validate(row.args)
        except ArgumentError:
            return False
        return True

    def _fail(self, control: _Control, reason: str) -> None:
        control.task.error = reason
        self._move(control, TaskState.FAILED, reason)

    def _move(self, control: _Control, state: TaskState, reason: str) -> TaskState:
        """Journal the transition, then make it, then tell the listeners."""
        task = control.task
        old = task.state
        if state not in TRANSITIONS[old]:
            raise InvalidTransition(task.id, old, state)
        t = self._clock.now()
        if state.settled:
            task.progress = 1.0
        self._journaled(lambda j: j.record_transition(task, old, state, t, reason))
        task.transition(state, t, reason)
        if state in (TaskState.DELIVERING, TaskState.DELIVERED):
            control.handed_off = True
        elif state is TaskState.COMPLETED:
            control.handed_off = False
        self._notify(task, old, state)
        if state.settled and not control.future.done():
            with self._lock:
                if task.id in self._controls:
                    self._settled[task.id] = None
            control.future.set_result(task)
        return old

    def _resume(self, control: _Control, reason: str) -> None:
        """A recovered task re-enters its state (journaled first, then listeners)."""
        task = control.task
        t = self._clock.now()
        self._journaled(lambda j: j.record_transition(task, task.state, task.state, t, reason))
        task.resume(t, reason)
        self._notify(task, task.state, task.state)

    def _journaled(self, write: Callable[[Journal], None]) -> None:
        """Run one journal write; a failure is logged and counted, never raised."""
        if self._journal is None:
            return
        try:
            write(self._journal)
        except JournalError as exc:
            self.journal_errors += 1
            if self.journal_errors == 1 or self.journal_errors % 100 == 0:
                log.error("harness: journal write failed (%d so far): %s", self.journal_errors, exc)

    def _from_tool(self, control: _Control, fraction: float, message: str) -> None:
        """A tool's progress report (from its own thread), handed to the runner's loop."""
        try:
            self._loop.call_soon_threadsafe(self._progress, control, fraction, message)
        except RuntimeError:  # the loop is closed: nobody listens any more
            pass

    def _progress(self, control: _Control, fraction: float, message: str) -> None:
        task = control.task
        if task.state is not TaskState.RUNNING:
            return
        task.progress = clamp_fraction(fraction)
        for callback in self._progress_listeners:
            try:
                callback(task, task.progress, message)
            except Exception:
                log.exception("harness: a progress listener failed (task %s)", task.id)

    def _notify(self, task: Task, old: TaskState | None, new: TaskState) -> None:
        for callback in self._listeners:
            try:
                callback(task, old, new)
            except Exception:
                log.exception("harness: a transition listener failed (task %s)", task.id)


#: States of a task a cancel or a superseding request can still take back.
_TAKE_BACK = frozenset(
    {
        TaskState.QUEUED,
        TaskState.RUNNING,
        TaskState.CANCELLING,
        TaskState.COMPLETED,
        TaskState.DELIVERING,
    }
)


def _cancel_summary(tasks: list[Task], tools: list[Tool | None]) -> str:
    """What a cancel request says it did, truthfully, from the targets' states now."""
    if not tasks:
        return "There was nothing running to stop."
    stopped = [t for t in tasks if t.state is TaskState.CANCELLED]
    done = [
        t
        for t, tool in zip(tasks, tools, strict=True)
        if t.state in (TaskState.COMPLETED, TaskState.DELIVERING, TaskState.DELIVERED)
        and (t.note or (tool is not None and tool.side_effects))
    ]
    still = [t for t in tasks if not t.state.settled]
    parts = []
    if stopped:
        parts.append(
            "Okay, I stopped that."
            if len(stopped) == 1
            else f"Okay, I stopped {len(stopped)} tasks."
        )
    for t in done:
        parts.append(f"That had already been done: {_quoted(t.query)}.")
    for t in still:
        parts.append(f"I could not stop {_quoted(t.query)} yet; it is still finishing.")
    if not parts:
        parts.append("Okay, there was nothing left to stop.")
    return " ".join(parts)


def _quoted(query: str, limit: int = 80) -> str:
    text = " ".join(query.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


async def _stop(job: asyncio.Task[Any]) -> None:
    """Cancel ``job`` and give it :data:`CANCEL_GRACE_S` to finish."""
    job.cancel()
    await asyncio.wait({job}, timeout=CANCEL_GRACE_S)
    if not job.done():
        log.warning("harness: %s ignored its cancellation", job.get_name())


class _ToolCrash(Exception):
    """A tool raised something that is not an Exception (SystemExit, KeyboardInterrupt...)."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(f"{type(exc).__name__}: {exc}")
        self.original = exc


class _ToolLoops:
    """A thread with an event loop of its own for each tool, started on its first call.

    A tool that blocks (synchronous I/O, a busy loop) then stalls only its own calls: the
    runner's loop times it out, fails its task and goes on. A loop that does not react to a
    cancel within the grace period is retired: later calls of the tool get a fresh loop, and
    the old one stops once its remaining work has ended. Asyncio objects a tool keeps between
    calls (a lock, a client) stay on the tool's loop.
    """

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._lock = threading.Lock()
        self._loops: dict[str, asyncio.AbstractEventLoop] = {}
        self._closed = False

    def loop_for(self, name: str) -> asyncio.AbstractEventLoop:
        """The tool's loop (a new thread the first time)."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the harness runner is closed")
            loop = self._loops.get(name)
            if loop is None or loop.is_closed():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=_serve_tool_loop, args=(loop,), name=f"{self._prefix}-tool-{name}"
                )
                thread.daemon = True
                thread.start()
                self._loops[name] = loop
            return loop

    def retire(self, name: str, loop: asyncio.AbstractEventLoop) -> None:
        """Give later calls of ``name`` a fresh loop; ``loop`` stops when its work has ended."""
        with self._lock:
            if self._loops.get(name) is loop:
                del self._loops[name]
        _stop_when_idle(loop)

    def close(self) -> None:
        """Stop every tool loop once its work has ended (abandoned tools are daemons)."""
        with self._lock:
            self._closed = True
            loops, self._loops = list(self._loops.values()), {}
        for loop in loops:
            _stop_when_idle(loop)


def _serve_tool_loop(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        try:
            _close_loop(loop)
        except BaseException:  # nothing may escape the thread
            pass


def _stop_when_idle(loop: asyncio.AbstractEventLoop) -> None:
    async def stop() -> None:
        this = asyncio.current_task()
        while any(t is not this and not t.done() for t in asyncio.all_tasks()):
            await asyncio.sleep(0.2)
        loop.stop()

    try:
        loop.call_soon_threadsafe(lambda: loop.create_task(stop(), name="harness-tool-loop-stop"))
    except RuntimeError:  # already closed
        pass


async def _guarded(tool: Tool, args: dict[str, Any], evidence: TimelineView) -> ToolResult:
    """The tool's body; SystemExit and the like become this call's failure only."""
    try:
        return await tool.run(args, evidence)
    except (asyncio.CancelledError, Exception):
        raise
    except BaseException as exc:
        raise _ToolCrash(exc) from None


async def _call_tool(
    loops: _ToolLoops,
    tool: Tool,
    args: dict[str, Any],
    evidence: TimelineView,
    progress: Callable[[float, str], None],
) -> ToolResult:
    """Run ``tool`` on its own loop and await it from the runner's loop.

    A cancel is passed on to the tool, which may stop (the call is then cancelled), fail, or
    finish anyway (its result counts); a second cancel stops waiting for it.
    """
    runner_loop = asyncio.get_running_loop()
    done: asyncio.Future[ToolResult] = runner_loop.create_future()
    done.add_done_callback(_retrieve)
    tool_loop = loops.loop_for(tool.name)
    holder: list[asyncio.Task[ToolResult]] = []

    def copy(task: asyncio.Task[ToolResult]) -> None:
        if done.done():
            return
        if task.cancelled():
            done.cancel()
        elif task.exception() is not None:
            done.set_exception(task.exception())  # type: ignore[arg-type]
        else:
            done.set_result(task.result())

    def start() -> None:  # on the tool's loop, in the context it was scheduled from
        task = tool_loop.create_task(_guarded(tool, args, evidence))
        holder.append(task)

        def back(t: asyncio.Task[ToolResult]) -> None:
            try:
                runner_loop.call_soon_threadsafe(copy, t)
            except RuntimeError:  # the runner has closed
                pass

        task.add_done_callback(back)

    def cancel() -> None:
        if holder:
            holder[0].cancel()

    with progress_to(progress):  # the tool's task copies this context: its progress lands
        tool_loop.call_soon_threadsafe(start)
    try:
        return await asyncio.shield(done)
    except asyncio.CancelledError:
        if done.done():
            raise
        tool_loop.call_soon_threadsafe(cancel)
    try:
        return await asyncio.wait_for(asyncio.shield(done), CANCEL_GRACE_S * 0.9)
    except asyncio.TimeoutError:
        loops.retire(tool.name, tool_loop)  # it did not stop promptly: later calls go elsewhere
    return await asyncio.shield(done)


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Mark a future's exception seen: asyncio would print it (unscrubbed) to stderr."""
    if not future.cancelled():
        future.exception()


def _close_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what a tool left running on its loop, then close the loop."""
    leftover = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in leftover:
        task.cancel()
    if leftover:
        loop.run_until_complete(asyncio.wait(leftover, timeout=CANCEL_GRACE_S))
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()


def _log_crash(what: str, exc: BaseException) -> None:
    """Log an unexpected failure: its type, its message scrubbed and shortened, the frames."""
    original = exc.original if isinstance(exc, _ToolCrash) else exc
    message = scrub(clean_text(" ".join(str(original).split())))[:300]
    frames = "".join(traceback.format_tb(original.__traceback__)[-8:])
    log.error("harness: %s: %s: %s\n%s", what, type(original).__name__, message, frames)


#: Markup in a tool's failure message (an HTML error page, tags) is not spoken.
_MARKUP = re.compile(r"<[^>]{0,200}>")


def _spoken_reason(text: str) -> str:
    """A tool's own failure message (ToolError) fit to be spoken: no secrets, no markup, short."""
    text = " ".join(_MARKUP.sub(" ", scrub(clean_text(text))).split())
    if len(text) > MAX_REASON_CHARS:
        text = text[: MAX_REASON_CHARS - 1].rsplit(" ", 1)[0].rstrip(" ,;:") + "…"
    return text


def _clean_value(value: Any) -> Any:
    """:func:`clean_text` applied to every string (keys too) inside JSON-like data."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, Mapping):
        return {clean_text(str(k)): _clean_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean_value(v) for v in value]
    return value


def _timeout_reason(tool: Tool) -> str:
    reason = f"timeout: {tool.name} took longer than {tool.timeout_s:g} s"
    if tool.side_effects:
        reason += " (it may already have taken effect)"
    return reason


def _result_problem(tool: Tool, result: object) -> str:
    if not isinstance(result, ToolResult):
        return f"the {tool.name} tool returned {type(result).__name__}, not a ToolResult"
    if not isinstance(result.text, str):
        return f"the {tool.name} tool returned non-text output"
    if len(result.text) > MAX_RESULT_CHARS:
        return f"the {tool.name} tool returned too much text ({len(result.text)} characters)"
    try:
        encoded = json.dumps(dict(result.payload), allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        return f"the {tool.name} tool returned a payload that is not JSON ({type(exc).__name__})"
    if len(encoded) > MAX_PAYLOAD_BYTES // 4 and len(encoded.encode("utf-8", "replace")) > (
        MAX_PAYLOAD_BYTES
    ):
        return f"the {tool.name} tool returned too much data ({len(encoded)} characters)"
    return ""
