"""Taking work back: cancelling a task, cancel requests ("never mind") and superseding.

Requests that take work back are handled here, not by a tool:

- A cancel request ("stop", "never mind", "cancel that", "forget it", see
  :func:`is_cancel_request`) becomes a task of its own (tool :data:`CANCEL_TOOL`) that cancels
  every unfinished task of its session, withdraws replies nobody has heard yet (their tasks end
  CANCELLED when their tool had no side effects), waits briefly for the cancelled tools to stop,
  and completes with what really happened: "Okay, I stopped that." or "That had already been
  done: ...", or that nothing was running.
- A request routed to a tool named in ``superseding`` (e.g. navigation: a new goal replaces the
  old one) supersedes the session's older tasks on that tool the same way, so an old answer is
  never spoken as if fresh.

Cancelling one task tells the truth: a QUEUED task is cancelled at once; a RUNNING task moves to
CANCELLING and its tool job is cancelled if the tool is cancellable (how the tool then settles
is the runner's business). Every method runs on the runner's loop thread; the moves go through
the :class:`~venus_ros.harness.lifecycle.Lifecycle`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection

from venus_ros.harness.lifecycle import Control, Lifecycle
from venus_ros.harness.tasks import Task, TaskState
from venus_ros.harness.tools import Tool
from venus_ros.text.repair import is_cancel_request

__all__ = [
    "CANCEL_TOOL",
    "CANCEL_WAIT_S",
    "TakeBack",
    "cancel_summary",
    "is_cancel_request",
]

#: The tool name of a cancel request's task (no registry tool has it).
CANCEL_TOOL = "cancel"
#: How long a cancel request waits for the tasks it cancelled to settle before it answers.
CANCEL_WAIT_S = 2.0

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


class TakeBack:
    """Cancels, cancel requests and superseding requests over a runner's tasks.

    Args:
        book: the runner's tasks and the one way they move.
        superseding: tools whose newer request supersedes the session's older ones.
    """

    def __init__(self, book: Lifecycle, superseding: Collection[str] = ()) -> None:
        self._book = book
        self.superseding = frozenset(superseding)

    def cancel(self, control: Control, reason: str) -> None:
        """Cancel one task: QUEUED ends CANCELLED now; RUNNING moves to CANCELLING and its tool
        job is cancelled when the tool is cancellable; any other state is left alone."""
        task = control.task
        if task.state is TaskState.QUEUED:
            self._book.move(control, TaskState.CANCELLING, reason)
            self._book.move(control, TaskState.CANCELLED, "cancelled before it started")
            if control.job is not None:
                control.job.cancel()
        elif task.state is TaskState.RUNNING:
            self._book.move(control, TaskState.CANCELLING, reason)
            tool, tool_job = control.tool, control.tool_job
            if tool is not None and tool.cancellable and tool_job is not None:
                tool_job.cancel()

    def session_work(self, task: Task, tool: str | None = None) -> list[Control]:
        """The session's other tasks (on ``tool``) not finished yet: running, or with a reply
        nobody has heard."""
        return [
            c
            for c in self._book.controls()
            if c.task is not task
            and c.task.session_id == task.session_id
            and not c.cancel_request
            and (tool is None or c.task.tool == tool)
            and c.task.state in _TAKE_BACK
        ]

    def take_back(self, control: Control, reason: str) -> None:
        """Cancel a task that is still working; withdraw a reply nobody has heard yet."""
        task = control.task
        if not task.state.settled:
            self.cancel(control, reason)
        elif control.tool is None or not control.tool.side_effects:
            self._book.move(control, TaskState.CANCELLED, f"reply withdrawn: {reason}")

    def supersede(self, control: Control) -> None:
        """A new task on a superseding tool takes back the session's older ones on that tool."""
        task = control.task
        if task.tool not in self.superseding:
            return
        for older in self.session_work(task, tool=task.tool):
            self.take_back(older, f"superseded by a newer request (task {task.id[:8]})")

    def begin_request(self, control: Control) -> None:
        """Make a new task a cancel request (tool :data:`CANCEL_TOOL`) and queue it."""
        control.task.tool = CANCEL_TOOL
        control.cancel_request = True
        self._book.queued(control)

    async def answer_request(self, control: Control) -> None:
        """A cancel request's body: take the session's work back, wait briefly, say what
        really happened (COMPLETED, with the targets' states in the payload)."""
        task = control.task
        self._book.move(control, TaskState.RUNNING, "cancelling the session's work")
        targets = self.session_work(task)
        for target in targets:
            self.take_back(target, "the user asked to stop")
        unsettled = [t.future for t in targets if not t.future.done()]
        if unsettled:
            await asyncio.wait([asyncio.wrap_future(f) for f in unsettled], timeout=CANCEL_WAIT_S)
        task.result_text = cancel_summary([t.task for t in targets], [t.tool for t in targets])
        task.payload = {"targets": {t.task.id: t.task.state.value for t in targets}}
        self._book.move(control, TaskState.COMPLETED, "cancel request answered")


def cancel_summary(tasks: list[Task], tools: list[Tool | None]) -> str:
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
