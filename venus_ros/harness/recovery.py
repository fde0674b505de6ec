"""After a harness restart: what the journal holds from the previous process, resolved.

:func:`recover` applies these rules to the journal's rows (the runner calls it on its loop
thread from :meth:`~venus_ros.harness.runner.HarnessRunner.recover`):

- QUEUED or RUNNING, tool idempotent (now and when the task was journaled), arguments intact
  and still valid: re-run, under the same id (a history entry says so).
- QUEUED or RUNNING otherwise: FAILED, "interrupted by a harness restart" (plus "before it
  started" for QUEUED, or "(it may already have taken effect)" for a side-effecting or no
  longer known tool). A non-idempotent tool is never started again: its requester's Delegate
  goal died with the old process, so nothing could cancel it any more.
- CANCELLING: CANCELLED when the tool has no side effects (the cancel is what was asked);
  otherwise FAILED, interrupted, as it may already have taken effect.
- COMPLETED whose reply never left the harness (it was not handed off and it never entered
  DELIVERING): kept for delivery (:attr:`Recovery.undelivered`), or, older than
  ``stale_after_s``, FAILED as stale rather than spoken as if fresh.
- DELIVERING: re-adopted (the frontend holds the reply; its delivery report, or a cancel
  request withdrawing it, moves the task on), or, unconfirmed for longer than
  ``stale_after_s``, FAILED as stale.

Ages are Unix time from the journal's ``wall``. Scheduled jobs (timers, reminders) are not
tasks: they stay in the schedule's table of the same file and ring on time from there
(:mod:`.schedule`); nothing here touches them.
"""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Callable
from dataclasses import dataclass

from venus_ros.core.timeline import TimelineView
from venus_ros.harness.journal import Journal, JournalRow
from venus_ros.harness.lifecycle import Control, Lifecycle
from venus_ros.harness.takeback import CANCEL_TOOL
from venus_ros.harness.tasks import Task, TaskState
from venus_ros.harness.tools import ArgumentError, Tool, ToolRegistry, UnknownToolError

log = logging.getLogger("venus_ros.harness")

#: The FAILED reason prefix of an unsettled task found in the journal after a restart.
INTERRUPTED_REASON = "interrupted by a harness restart"
#: Appended to a FAILED reason when a side-effecting tool may have acted before it stopped.
MAY_HAVE_ACTED = " (it may already have taken effect)"

#: ``rerun(control, evidence)``: start a recovered task's tool again (on the runner's loop).
Rerun = Callable[[Control, TimelineView], None]


@dataclass(frozen=True)
class Recovery:
    """What :func:`recover` did with the journal's unfinished business.

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


def recover(
    journal: Journal,
    book: Lifecycle,
    registry: ToolRegistry,
    rerun: Rerun,
    evidence: Callable[[int], TimelineView] | None = None,
    stale_after_s: float | None = None,
) -> Recovery:
    """Load the journal's unfinished tasks into ``book`` and resolve them (rules: module).

    Args:
        journal: the previous process's journal (open).
        book: the runner's tasks; every recovered task joins it and moves through it.
        registry: the tools known now (a journaled tool no longer known is never re-run).
        rerun: starts a re-runnable task again; called after its resume entry is journaled.
        evidence: ``evidence(cutoff_seq)``, the view a re-run tool gets; an empty view when
            None (the old process's evidence mirror died with it).
        stale_after_s: undelivered or unconfirmed replies older than this end FAILED; None
            keeps them all.

    Raises:
        JournalError: if the journal cannot be read.
    """
    pending, undelivered = journal.pending(), journal.undelivered()
    rerun_: list[Task] = []
    failed: list[Task] = []
    cancelled: list[Task] = []
    offered: list[Task] = []
    delivering: list[Task] = []
    now = journal.wall()
    for row in pending:
        control = adopt(book, registry, row)
        if control is None:
            continue
        task, tool = control.task, control.tool
        if task.state is TaskState.CANCELLING:
            if tool is not None and not tool.side_effects:
                book.move(control, TaskState.CANCELLED, f"{INTERRUPTED_REASON} while cancelling")
                cancelled.append(task)
            else:
                book.fail(control, f"{INTERRUPTED_REASON} while cancelling{MAY_HAVE_ACTED}")
                failed.append(task)
        elif rerunnable(row, tool):
            view = evidence(task.cutoff_seq) if evidence else TimelineView((), task.cutoff_seq)
            if task.state is TaskState.QUEUED:
                book.resume(control, "queued again after a harness restart")
            rerun(control, view)
            rerun_.append(task)
        else:
            reason = INTERRUPTED_REASON
            if task.state is TaskState.QUEUED:
                reason += " before it started"
            elif tool is None or tool.side_effects:
                reason += MAY_HAVE_ACTED
            book.fail(control, reason)
            failed.append(task)

    def waiting(row: JournalRow, kept: list[Task], stale_reason: str) -> None:
        """A reply that waits (undelivered, or with the frontend): kept, or FAILED as stale."""
        control = adopt(book, registry, row)
        if control is None:
            return
        age = now - row.updated_t
        if stale_after_s is not None and age > stale_after_s:
            book.fail(control, stale_reason.format(age=age))
            failed.append(control.task)
        else:
            kept.append(control.task)

    for row in undelivered:
        waiting(
            row, offered, "stale: completed {age:.0f} s before the harness restarted, not delivered"
        )
    for row in journal.rows():
        if row.state is TaskState.DELIVERING:
            waiting(
                row,
                delivering,
                "stale: its delivery was not confirmed within {age:.0f} s before the harness "
                "restarted",
            )
    log.info(
        "harness: recovered from %s: %d re-run, %d failed, %d cancelled, %d undelivered, "
        "%d delivering",
        journal.path,
        len(rerun_),
        len(failed),
        len(cancelled),
        len(offered),
        len(delivering),
    )
    return Recovery(
        tuple(rerun_), tuple(failed), tuple(cancelled), tuple(offered), tuple(delivering)
    )


def adopt(book: Lifecycle, registry: ToolRegistry, row: JournalRow) -> Control | None:
    """A journaled task back under the runner's control (None if its id is taken)."""
    task = row.to_task()
    control = Control(task, concurrent.futures.Future())
    try:
        control.tool = registry.get(row.tool) if row.tool else None
    except UnknownToolError:
        control.tool = None
    control.cancel_request = row.tool == CANCEL_TOOL and control.tool is None
    if task.state.settled:
        control.future.set_result(task)
    if not book.insert(control):
        log.warning("harness: journaled task %s is already known; left alone", task.id)
        return None
    return control


def rerunnable(row: JournalRow, tool: Tool | None) -> bool:
    """True when a journaled task may run again: its tool is known and idempotent (now and when
    it was journaled), its arguments were not redacted, and they are still valid."""
    if tool is None or not (tool.idempotent and row.idempotent) or row.redacted:
        return False
    try:
        tool.validate(row.args)
    except ArgumentError:
        return False
    return True
