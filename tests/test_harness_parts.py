"""Tests for the runner's parts on their own (no loop thread, no tool called): the lifecycle
(venus_ros.harness.lifecycle), taking work back (venus_ros.harness.takeback) and recovery after
a restart (venus_ros.harness.recovery), on a fake clock and a fake wall over real SQLite files.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from venus_ros.core.clock import FakeClock
from venus_ros.core.timeline import TimelineView
from venus_ros.harness.journal import Journal, read_journal
from venus_ros.harness.lifecycle import Control, Lifecycle
from venus_ros.harness.recovery import INTERRUPTED_REASON, MAY_HAVE_ACTED, recover, rerunnable
from venus_ros.harness.schedule import JobState, Schedule
from venus_ros.harness.takeback import CANCEL_TOOL, TakeBack, cancel_summary
from venus_ros.harness.tasks import InvalidTransition, Task, TaskState
from venus_ros.harness.tools import Tool, ToolRegistry, ToolResult

S = TaskState


async def _answer(args: Mapping[str, Any], evidence: TimelineView) -> ToolResult:
    return ToolResult("done")


def tool(name: str, **options: Any) -> Tool:
    return Tool(name, f"test tool {name}", {"type": "object"}, _answer, **options)


LOOKUP = tool("lookup", idempotent=True)
SEND = tool("send", side_effects=True)
REGISTRY = ToolRegistry([LOOKUP, SEND])


class Wall:
    """A fake Unix clock for journals and schedules."""

    def __init__(self, t: float = 1_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def control(task_id: str, tool_: Tool | None = None, session: str = "s") -> Control:
    task = Task(task_id, f"query {task_id}", session, 1, 0, t=0.0, tool=tool_.name if tool_ else "")
    return Control(task, concurrent.futures.Future(), tool=tool_)


def added(book: Lifecycle, c: Control, *states: TaskState) -> Control:
    assert book.insert(c)
    book.queued(c)
    for state in states:
        book.move(c, state, f"to {state.value}")
    return c


# --- lifecycle ----------------------------------------------------------------------------------


def test_a_move_is_journaled_and_stamped_before_the_listeners_hear_it(
    tmp_path: Path,
) -> None:
    clock, heard = FakeClock(5.0), []
    with Journal(tmp_path / "j.sqlite3") as journal:

        def listener(task: Task, old: TaskState | None, new: TaskState) -> None:
            row = journal.get(task.id)
            assert row is not None and row.state is new  # the journal already says so
            heard.append((old, new, task.state))

        book = Lifecycle(clock, journal=journal, listeners=[listener])
        c = added(book, control("a", LOOKUP))
        clock.advance(2.0)
        assert book.move(c, S.RUNNING, "running") is S.QUEUED
        assert heard == [(None, S.QUEUED, S.QUEUED), (S.QUEUED, S.RUNNING, S.RUNNING)]
        assert c.task.history[-1].t == 7.0  # stamped by the injected clock
        assert not c.future.done()
        book.move(c, S.COMPLETED, "done")
        assert c.future.result(0) is c.task and c.task.progress == 1.0


def test_a_forbidden_move_raises_and_writes_nothing(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.sqlite3") as journal:
        book = Lifecycle(FakeClock(), journal=journal)
        c = added(book, control("a", LOOKUP))
        with pytest.raises(InvalidTransition):
            book.move(c, S.DELIVERED, "skipping ahead")
        row = journal.get("a")
        assert row is not None and row.state is S.QUEUED and c.task.state is S.QUEUED


def test_a_failed_journal_write_is_counted_and_the_task_moves_on(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.sqlite3")
    book = Lifecycle(FakeClock(), journal=journal)
    c = added(book, control("a", LOOKUP))
    journal.close()  # every later write fails
    book.move(c, S.RUNNING, "running")
    book.fail(c, "it broke")
    assert book.journal_errors == 2
    assert c.task.state is S.FAILED and c.task.error == "it broke"


def test_delivery_moves_mark_the_reply_handed_off_and_hand_off_is_written_once(
    tmp_path: Path,
) -> None:
    with Journal(tmp_path / "j.sqlite3") as journal:
        book = Lifecycle(FakeClock(), journal=journal)
        c = added(book, control("a", LOOKUP), S.RUNNING, S.COMPLETED)
        assert not c.handed_off
        book.hand_off(c, "delegate_result")
        book.hand_off(c, "again")  # once only
        row = journal.get("a")
        assert row is not None and row.handed_off_via == "delegate_result"
        d = added(book, control("b", LOOKUP), S.RUNNING, S.COMPLETED, S.DELIVERING)
        assert d.handed_off


def test_settled_tasks_beyond_the_limit_are_forgotten_oldest_first() -> None:
    book = Lifecycle(FakeClock(), max_retained=2)
    running = added(book, control("running", LOOKUP), S.RUNNING)
    first = added(book, control("first", LOOKUP), S.RUNNING, S.COMPLETED)
    added(book, control("second", LOOKUP), S.RUNNING, S.COMPLETED)
    assert [c.task.id for c in book.controls()] == ["running", "second"]
    assert book.get("first") is None and first.future.done()
    assert book.get("running") is running and not book.insert(control("running"))


def test_progress_reaches_listeners_only_while_running() -> None:
    heard: list[tuple[str, float, str]] = []
    book = Lifecycle(FakeClock(), progress_listeners=[lambda t, f, m: heard.append((t.id, f, m))])
    c = added(book, control("a", LOOKUP))
    book.progress(c, 0.5, "queued: not yet")
    book.move(c, S.RUNNING, "running")
    book.progress(c, 7.0, "half")  # clamped
    assert heard == [("a", 1.0, "half")]
    with pytest.raises(ValueError, match="max_retained"):
        Lifecycle(FakeClock(), max_retained=0)


# --- taking work back ---------------------------------------------------------------------------


def test_cancel_ends_a_queued_task_and_marks_a_running_one_cancelling() -> None:
    book = Lifecycle(FakeClock())
    back = TakeBack(book)
    queued = added(book, control("q", LOOKUP))
    running = added(book, control("r", LOOKUP), S.RUNNING)
    back.cancel(queued, "asked")
    back.cancel(running, "asked")
    assert queued.task.states == [S.QUEUED, S.CANCELLING, S.CANCELLED]
    assert running.task.state is S.CANCELLING  # the tool settles it, not the cancel
    back.cancel(queued, "again")  # settled: left alone
    assert queued.task.state is S.CANCELLED


def test_take_back_withdraws_only_replies_whose_tool_had_no_side_effects() -> None:
    book = Lifecycle(FakeClock())
    back = TakeBack(book)
    lookup = added(book, control("lookup", LOOKUP), S.RUNNING, S.COMPLETED)
    sent = added(book, control("sent", SEND), S.RUNNING, S.COMPLETED, S.DELIVERING)
    back.take_back(lookup, "the user asked to stop")
    back.take_back(sent, "the user asked to stop")
    assert lookup.task.state is S.CANCELLED
    assert lookup.task.reason == "reply withdrawn: the user asked to stop"
    assert sent.task.state is S.DELIVERING  # what was sent cannot be unsent
    assert cancel_summary([lookup.task, sent.task], [LOOKUP, SEND]) == (
        "Okay, I stopped that. That had already been done: query sent."
    )
    assert cancel_summary([], []) == "There was nothing running to stop."


def test_supersede_takes_back_the_same_sessions_older_work_on_that_tool_only() -> None:
    book = Lifecycle(FakeClock())
    back = TakeBack(book, superseding={"lookup"})
    old = added(book, control("old", LOOKUP), S.RUNNING)
    other_session = added(book, control("other", LOOKUP, session="t"), S.RUNNING)
    other_tool = added(book, control("send", SEND), S.RUNNING)
    new = added(book, control("new", LOOKUP))
    back.supersede(new)
    assert old.task.state is S.CANCELLING and "superseded by a newer request" in old.task.reason
    assert other_session.task.state is S.RUNNING and other_tool.task.state is S.RUNNING
    assert new.task.state is S.QUEUED
    back.supersede(other_tool)  # send does not supersede
    assert new.task.state is S.QUEUED


def test_a_cancel_request_answers_with_what_really_happened() -> None:
    book = Lifecycle(FakeClock())
    back = TakeBack(book)
    queued = added(book, control("q", LOOKUP))
    done = added(book, control("done", SEND), S.RUNNING, S.COMPLETED)
    request = control("stop")
    assert book.insert(request)
    back.begin_request(request)
    assert request.task.tool == CANCEL_TOOL and request.cancel_request
    asyncio.run(back.answer_request(request))
    assert request.task.state is S.COMPLETED
    assert request.task.result_text == (
        "Okay, I stopped that. That had already been done: query done."
    )
    assert request.task.payload == {"targets": {"q": "CANCELLED", "done": "COMPLETED"}}
    assert queued.task.state is S.CANCELLED and done.task.state is S.COMPLETED
    assert request not in back.session_work(queued.task)  # a cancel request is never a target


# --- recovery -----------------------------------------------------------------------------------


def journaled(journal: Journal, wall: Wall, task_id: str, tool_: Tool, *states: TaskState) -> Task:
    """What a previous process left: the task journaled up to ``states``."""
    task = Task(task_id, f"query {task_id}", "s", 1, 7, t=1.0, tool=tool_.name)
    journal.record_task(task, tool_)
    for step, state in enumerate(states, start=2):
        if state is S.COMPLETED:
            task.result_text = f"answer {task_id}"
        journal.record_transition(task, task.state, state, float(step), f"to {state.value}")
        task.transition(state, float(step), f"to {state.value}")
        wall.t += 1.0
    return task


def test_after_kill_a_delivering_reply_is_readopted_and_a_pending_timer_rings_once(
    tmp_path: Path,
) -> None:
    path, wall = tmp_path / "journal.sqlite3", Wall()
    journal, schedule = Journal(path, wall=wall), Schedule(path, wall=wall)
    journaled(journal, wall, "spoken", LOOKUP, S.RUNNING, S.COMPLETED, S.DELIVERING)
    timer = schedule.add(600.0, label="tea", session_id="s")
    journal.close()  # the process dies: nothing more is written
    schedule.close()
    wall.t += 30.0

    journal, schedule = Journal(path, wall=wall), Schedule(path, wall=wall)
    book, reruns = Lifecycle(FakeClock(100.0), journal=journal), []
    found = recover(journal, book, REGISTRY, lambda c, v: reruns.append(c), stale_after_s=60.0)
    assert [t.id for t in found.delivering] == ["spoken"] and not reruns
    assert not (found.failed or found.rerun or found.undelivered or found.cancelled)
    spoken = book.get("spoken")
    assert spoken is not None and spoken.task.state is S.DELIVERING and spoken.future.done()
    book.move(spoken, S.DELIVERED, "the frontend spoke it")  # its delivery report is accepted
    assert {r.id: r.state for r in read_journal(path)} == {"spoken": S.DELIVERED}

    assert schedule.due() == []  # 30 s of 600: not yet
    wall.t = timer.due_t + 1.0
    rung = schedule.due()
    assert [j.id for j in rung] == [timer.id] and rung[0].state is JobState.RUNG
    assert schedule.due() == []  # once
    journal.close()
    schedule.close()


def test_a_delivering_reply_unconfirmed_for_too_long_fails_as_stale(tmp_path: Path) -> None:
    path, wall = tmp_path / "journal.sqlite3", Wall()
    with Journal(path, wall=wall) as journal:
        journaled(journal, wall, "old", LOOKUP, S.RUNNING, S.COMPLETED, S.DELIVERING)
        journaled(journal, wall, "waiting", LOOKUP, S.RUNNING, S.COMPLETED)
    wall.t += 120.0
    with Journal(path, wall=wall) as journal:
        book = Lifecycle(FakeClock(), journal=journal)
        found = recover(journal, book, REGISTRY, lambda c, v: None, stale_after_s=60.0)
        assert [t.id for t in found.failed] == ["waiting", "old"]
        assert found.failed[1].error == (
            "stale: its delivery was not confirmed within 123 s before the harness restarted"
        )
        assert found.failed[0].error == (
            "stale: completed 121 s before the harness restarted, not delivered"
        )
        assert journal.get("old").state is S.FAILED  # type: ignore[union-attr]


def test_recovery_reruns_idempotent_work_after_journaling_its_resume(tmp_path: Path) -> None:
    path, wall = tmp_path / "journal.sqlite3", Wall()
    with Journal(path, wall=wall) as journal:
        journaled(journal, wall, "queued", LOOKUP)
        journaled(journal, wall, "running", LOOKUP, S.RUNNING)
        journaled(journal, wall, "sending", SEND, S.RUNNING)
        journaled(journal, wall, "cancelling", LOOKUP, S.RUNNING, S.CANCELLING)
    with Journal(path, wall=wall) as journal:
        book, reruns = Lifecycle(FakeClock(), journal=journal), []

        def rerun(c: Control, view: TimelineView) -> None:
            row = journal.get(c.task.id)
            assert row is not None
            reruns.append((c.task.id, view.cutoff_seq, [t.reason for t in row.transitions][-1]))

        found = recover(journal, book, REGISTRY, rerun)
        assert reruns == [
            ("queued", 7, "queued again after a harness restart"),  # resume written first
            ("running", 7, "to RUNNING"),  # the runner records its resume when it runs
        ]
        assert [t.id for t in found.rerun] == ["queued", "running"]
        assert [t.id for t in found.failed] == ["sending"]
        assert found.failed[0].error == INTERRUPTED_REASON + MAY_HAVE_ACTED
        assert [t.id for t in found.cancelled] == ["cancelling"]
        # a task already known is left alone, not adopted twice
        again = recover(journal, book, REGISTRY, rerun)
        assert again.rerun == () and len(reruns) == 2


def test_only_known_idempotent_tools_with_valid_intact_arguments_are_rerunnable(
    tmp_path: Path,
) -> None:
    strict = Tool(
        "strict",
        "needs n",
        {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        _answer,
        idempotent=True,
    )
    with Journal(tmp_path / "j.sqlite3") as journal:
        task = Task("t", "q", "s", 1, 0, t=0.0, tool="strict")
        journal.record_task(task, strict)
        row = journal.get("t")
        assert row is not None
        assert not rerunnable(row, strict)  # its arguments no longer validate
        assert not rerunnable(row, None)  # a tool no longer known
        assert not rerunnable(row, SEND)
