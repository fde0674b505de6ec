"""The Harness runner: delegated tasks executed on an asyncio loop in a thread of its own.

The foreground never waits on it: :meth:`HarnessRunner.submit` takes a lock, queues the task and
returns. On the runner's loop each task is one named asyncio task (``harness-task-<id>``) that
waits for a slot (the concurrency limit), runs its tool as another named task
(``harness-tool-<name>-<id>``) under the tool's timeout, and settles COMPLETED, FAILED or
CANCELLED. Every asyncio task is owned by the runner, cancelled and awaited on :meth:`close`,
and whatever it raises is logged and turned into FAILED with a reason.

The runner composes parts that each do one job:

- :mod:`.lifecycle`: the task table and every state move (journal row first, then the task in
  memory, then the listeners; a failed journal write is counted, never fatal).
- :mod:`.takeback`: cancelling a task, cancel requests ("never mind") and superseding requests.
- :mod:`.recovery`: what a previous process left in the journal, resolved after a restart.
- here: the loop and its thread, routing a query to a tool, running the tool on a loop of its
  own (a blocking tool stalls only its own calls), checking its result, and shutting down.

Cancellation tells the truth: a QUEUED task is cancelled at once; a RUNNING task moves to
CANCELLING and its tool is cancelled if it is cancellable. A tool that finishes anyway (it is
not cancellable, or it completed before the cancel landed) settles COMPLETED with a note when
it has side effects (what it did cannot be undone), and CANCELLED when it has none (its result
is simply discarded).

Transition callbacks run on the runner thread, in order, after each state change; they must be
quick. Timestamps come from the injected :class:`~venus_ros.core.clock.Clock`; timeouts are real
time on the loop. With a :class:`~venus_ros.harness.journal.Journal`, every task is written when
the runner picks it up and every transition before it happens, and :meth:`HarnessRunner.recover`
resumes what a previous process left (rules: :mod:`.recovery`). Only the runner thread writes.
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
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from venus_ros.core.clock import Clock
from venus_ros.core.protocol import clean_text
from venus_ros.core.timeline import TimelineView
from venus_ros.harness.journal import Journal
from venus_ros.harness.lifecycle import Control, Lifecycle, ProgressCallback, TransitionCallback
from venus_ros.harness.progress import progress_to
from venus_ros.harness.recovery import INTERRUPTED_REASON, MAY_HAVE_ACTED, Recovery, recover
from venus_ros.harness.secrets import env_secrets, scrub, scrub_value
from venus_ros.harness.takeback import CANCEL_TOOL, CANCEL_WAIT_S, TakeBack, is_cancel_request
from venus_ros.harness.tasks import Task, TaskState
from venus_ros.harness.tools import (
    ArgumentError,
    Tool,
    ToolError,
    ToolRegistry,
    ToolResult,
    UnknownToolError,
    route,
)

__all__ = [
    "ALREADY_DONE_NOTE",
    "CANCEL_GRACE_S",
    "CANCEL_TOOL",
    "CANCEL_WAIT_S",
    "INTERRUPTED_REASON",
    "MAX_PAYLOAD_BYTES",
    "MAX_REASON_CHARS",
    "MAX_RESULT_CHARS",
    "MAY_HAVE_ACTED",
    "NO_TOOL_REASON",
    "SHUTDOWN_REASON",
    "HarnessRunner",
    "ProgressCallback",
    "Recovery",
    "Router",
    "TransitionCallback",
    "is_cancel_request",
]

log = logging.getLogger("venus_ros.harness")

#: ``router(query) -> (tool_name, args) | None``.
Router = Callable[[str], "tuple[str, dict[str, Any]] | None"]

#: The FAILED reason when no tool matches a query.
NO_TOOL_REASON = "no tool can answer this yet"
#: The FAILED reason prefix when the runner shuts down under a task.
SHUTDOWN_REASON = "interrupted: the harness shut down"
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
        self.registry = registry
        self.max_concurrent = int(max_concurrent)
        self._clock = clock
        self._router = router
        self._book = Lifecycle(
            clock,
            journal=journal,
            listeners=listeners,
            progress_listeners=progress_listeners,
            max_retained=max_retained,
        )
        self._takeback = TakeBack(self._book, superseding)
        self._lock = self._book.lock
        self._closed = False
        self._journal = journal
        self._recovered = False
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

    @property
    def journal_errors(self) -> int:
        """Journal writes that failed (each logged); the tasks went on regardless."""
        return self._book.journal_errors

    def add_listener(self, callback: TransitionCallback) -> None:
        """Call ``callback(task, old, new)`` on the runner thread after every transition."""
        self._book.add_listener(callback)

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
        control = Control(task, concurrent.futures.Future())
        with self._lock:
            if self._closed:
                raise RuntimeError("the harness runner is closed")
            if not self._book.insert(control):
                raise ValueError(f"task id {task.id} is already in use")
            self._loop.call_soon_threadsafe(self._start, control, evidence, tool, args)
        return task

    def future(self, task_id: str) -> concurrent.futures.Future[Task]:
        """A future that resolves with the task once it settles (COMPLETED, FAILED, CANCELLED).

        Raises:
            KeyError: for an unknown (or forgotten) task id.
        """
        control = self._book.get(task_id)
        if control is None:
            raise KeyError(task_id)
        return control.future

    def get(self, task_id: str) -> Task | None:
        """The task with this id, or None."""
        control = self._book.get(task_id)
        return control.task if control else None

    def tasks(self) -> list[Task]:
        """Every retained task, oldest first."""
        return [c.task for c in self._book.controls()]

    def cancel(self, task_id: str, reason: str = "cancel requested") -> bool:
        """Ask for a task to be cancelled; returns at once.

        Returns:
            True if the task exists and had not settled when asked (the cancel then takes
            effect on the runner thread; the outcome is in the task's final state), else False.
        """
        return self._on_loop(
            task_id,
            lambda control: not control.task.state.settled,
            lambda control: self._takeback.cancel(control, reason),
        )

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
        if not self._on_loop(
            task_id, lambda _: True, lambda control: self._advance(control, state, reason, result)
        ):
            result.set_exception(KeyError(f"no task {task_id} (or the runner is closed)"))
        return result

    def hand_off(self, task_id: str, via: str = "delegate_result") -> bool:
        """Record that a COMPLETED task's reply left the harness (e.g. in a Delegate result),
        so a restart does not offer it again; returns at once.

        Returns:
            False for an unknown (or forgotten) task or a closed runner.
        """
        return self._on_loop(
            task_id, lambda _: True, lambda control: self._book.hand_off(control, via)
        )

    def undelivered(self) -> list[Task]:
        """COMPLETED tasks whose reply has not left the harness yet, oldest first.

        After :meth:`recover`, these include the replies a previous process completed but
        never handed off; the caller offers them (and moves them to DELIVERING with
        :meth:`advance`, which also marks them handed off).
        """
        return [
            c.task
            for c in self._book.controls()
            if c.task.state is TaskState.COMPLETED and not c.handed_off
        ]

    def recover(
        self,
        evidence: Callable[[int], TimelineView] | None = None,
        *,
        stale_after_s: float | None = None,
        timeout: float = 10.0,
    ) -> Recovery:
        """Resolve what the journal holds from a previous process (rules: :mod:`.recovery`).

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
        journal = self._journal
        if journal is None:
            return Recovery()
        done: concurrent.futures.Future[Recovery] = concurrent.futures.Future()

        def run() -> None:
            try:
                done.set_result(
                    recover(
                        journal, self._book, self.registry, self._rerun, evidence, stale_after_s
                    )
                )
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

    def _on_loop(
        self,
        task_id: str,
        eligible: Callable[[Control], bool],
        action: Callable[[Control], None],
    ) -> bool:
        """Schedule ``action(control)`` on the runner thread if the task is known, the runner
        open and ``eligible(control)``; returns whether it was scheduled."""
        with self._lock:
            control = self._book.get(task_id)
            if control is None or self._closed or not eligible(control):
                return False
            self._loop.call_soon_threadsafe(action, control)
        return True

    # --- runner thread -----------------------------------------------------------------------

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def _start(
        self,
        control: Control,
        evidence: TimelineView,
        tool_name: str | None,
        args: Mapping[str, Any] | None,
    ) -> None:
        task = control.task
        if tool_name is None and is_cancel_request(task.query):
            self._takeback.begin_request(control)
            self._spawn(control, self._takeback.answer_request(control))
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
        self._book.queued(control)
        if problem:
            self._book.fail(control, problem)
            return
        self._takeback.supersede(control)
        self._spawn(control, self._execute(control, evidence))

    def _rerun(self, control: Control, evidence: TimelineView) -> None:
        """Recovery's hook: run a journaled task's tool again under its own id."""
        self._spawn(control, self._execute(control, evidence, rerun=True))

    def _spawn(self, control: Control, body: Any) -> None:
        job = self._loop.create_task(body, name=f"harness-task-{control.task.id}")
        control.job = job
        job.add_done_callback(lambda j: self._job_done(control, j))

    async def _execute(self, control: Control, evidence: TimelineView, rerun: bool = False) -> None:
        task, tool = control.task, control.tool
        assert tool is not None
        book = self._book
        async with self._semaphore:
            if task.state is TaskState.QUEUED:
                book.move(control, TaskState.RUNNING, f"running {tool.name}")
            elif rerun and task.state is TaskState.RUNNING:
                book.resume(control, f"re-running {tool.name} after a harness restart")
            elif rerun and task.state is TaskState.CANCELLING:
                book.move(control, TaskState.CANCELLED, "cancelled before it was re-run")
                return
            else:
                return
            # The tool runs on its own thread; its report_progress() comes back to progress().
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
                book.fail(control, _timeout_reason(tool))
                return
            self._settle(control, tool_job)

    def _settle(self, control: Control, tool_job: asyncio.Task[ToolResult]) -> None:
        """Settle a task from its finished tool job."""
        task, tool, book = control.task, control.tool, self._book
        assert tool is not None
        cancelling = task.state is TaskState.CANCELLING
        if tool_job.cancelled():
            if cancelling:
                book.move(control, TaskState.CANCELLED, f"{tool.name} was cancelled")
            else:
                book.fail(control, f"the {tool.name} tool stopped: it was cancelled")
            return
        exc = tool_job.exception()
        if exc is not None:
            if isinstance(exc, ToolError):
                book.fail(control, _spoken_reason(str(exc)) or f"the {tool.name} tool failed")
            else:
                _log_crash(f"tool {tool.name} failed on task {task.id}", exc)
                book.fail(control, f"the {tool.name} tool failed unexpectedly")
            return
        result = tool_job.result()
        problem = _result_problem(tool, result)
        if problem:
            book.fail(control, problem)
            return
        secrets = env_secrets()
        task.result_text = scrub(clean_text(result.text), secrets)
        task.payload = _clean_value(scrub_value(dict(result.payload), secrets))
        if not cancelling:
            book.move(control, TaskState.COMPLETED, f"{tool.name} finished")
        elif tool.side_effects:
            task.note = ALREADY_DONE_NOTE
            book.move(control, TaskState.COMPLETED, "it had already been done: cancel too late")
        else:
            book.move(control, TaskState.CANCELLED, "result discarded: cancel requested")

    def _job_done(self, control: Control, job: asyncio.Task[None]) -> None:
        if not job.cancelled() and job.exception() is not None:
            exc = job.exception()
            assert exc is not None
            _log_crash(f"task {control.task.id} crashed", exc)
            if not control.task.state.settled:
                self._book.fail(control, "internal error")
        if not control.task.state.settled:
            reason = SHUTDOWN_REASON
            if control.tool is not None and control.tool.side_effects:
                reason += MAY_HAVE_ACTED
            self._book.fail(control, reason)

    def _advance(
        self,
        control: Control,
        state: TaskState,
        reason: str,
        result: concurrent.futures.Future[TaskState],
    ) -> None:
        try:
            if not control.task.state.settled:
                raise ValueError(f"task {control.task.id} is still {control.task.state.value}")
            result.set_result(self._book.move(control, state, reason))
        except Exception as exc:
            result.set_exception(exc)

    async def _shutdown(self) -> None:
        controls = self._book.controls()
        jobs = [c.job for c in controls if c.job is not None and not c.job.done()]
        for job in jobs:
            job.cancel()
        if jobs:
            await asyncio.wait(jobs, timeout=CANCEL_GRACE_S * 2)
        for control in controls:
            if not control.task.state.settled:
                self._book.fail(control, SHUTDOWN_REASON)
        waiting = [c.tool_job for c in controls if c.tool_job is not None and not c.tool_job.done()]
        for tool_job in waiting:  # a second cancel: stop waiting for tools that ignored one
            tool_job.cancel()
        if waiting:
            await asyncio.wait(waiting, timeout=CANCEL_GRACE_S)
        self._tool_loops.close()

    def _from_tool(self, control: Control, fraction: float, message: str) -> None:
        """A tool's progress report (from its own thread), handed to the runner's loop."""
        try:
            self._loop.call_soon_threadsafe(self._book.progress, control, fraction, message)
        except RuntimeError:  # the loop is closed: nobody listens any more
            pass


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
