"""The frontend's delegation tracker, the harness's goal book (both on the fake clock), and
DELIVERING tasks re-adopted after a harness restart (real SQLite journal, real runner)."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path
from typing import Any

import pytest

from venus_ros.core.clock import FakeClock
from venus_ros.core.delegation import (
    HARNESS_UNAVAILABLE,
    NO_WORD,
    DelegationTracker,
    Verdict,
)
from venus_ros.core.timeline import TimelineView
from venus_ros.harness.journal import Journal, read_journal
from venus_ros.harness.runner import HarnessRunner
from venus_ros.harness.tasks import Task, TaskState
from venus_ros.harness.tools import ToolRegistry, builtin_tools
from venus_ros.ros.goal_book import CancelAnswer, GoalBook

ROOT = Path(__file__).resolve().parents[1]
WAIT_S = 10.0


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=100.0)


def tracker(clock: FakeClock, **options: Any) -> DelegationTracker:
    options.setdefault("liveness_s", 5.0)
    options.setdefault("late_result_max_s", 60.0)
    return DelegationTracker(clock, **options)


# --- the delegation tracker ---------------------------------------------------------------------


def test_long_work_stays_awaited_while_the_harness_reports_it(clock: FakeClock) -> None:
    book = tracker(clock)
    book.send("t", "set a timer for ten minutes")
    assert book.accepted("t", handle="h")
    for _ in range(60 * 10):  # ten minutes of heartbeats, one a second
        clock.advance(1.0)
        assert book.heard("t")
        assert book.expire(harness_up=True, harness_heard_at=clock.now()) == []
    decision = book.result("t", "COMPLETED", has_reply=True)
    assert decision.verdict is Verdict.OFFER and decision.offer
    assert book.pending() == []


def test_a_silent_task_is_given_up_and_its_goal_cancelled(clock: FakeClock) -> None:
    book = tracker(clock)
    book.send("t", "q")
    book.accepted("t", handle="goal-handle")
    clock.advance(4.9)
    assert book.expire(harness_up=True, harness_heard_at=clock.now()) == []
    clock.advance(0.2)
    (give_up,) = book.expire(harness_up=True, harness_heard_at=clock.now())
    assert give_up.cancel and give_up.delegation.handle == "goal-handle"
    assert give_up.reason.startswith(NO_WORD)
    assert book.pending() == [] and not book.heard("t")


def test_a_harness_silent_as_a_whole_is_not_a_task_timeout(clock: FakeClock) -> None:
    book = tracker(clock)
    book.send("t", "q")
    book.accepted("t", handle="h")
    last_beat = clock.now()  # the harness froze: its heartbeat and the task's stop together
    clock.advance(6.0)
    assert book.expire(harness_up=True, harness_heard_at=last_beat) == []
    assert book.pending() == ["t"]  # the harness-down rule decides, not the task timeout


def test_a_dead_harness_gives_up_everything_without_cancelling(clock: FakeClock) -> None:
    book = tracker(clock)
    book.send("a", "q1")
    book.send("b", "q2")
    gone = book.expire(harness_up=False)
    assert sorted(g.delegation.task_id for g in gone) == ["a", "b"]
    assert {g.reason for g in gone} == {HARNESS_UNAVAILABLE}
    assert not any(g.cancel for g in gone)


def test_a_late_result_is_offered_while_fresh_and_dropped_when_stale(clock: FakeClock) -> None:
    book = tracker(clock)
    book.send("fresh", "q1")
    book.send("stale", "q2")
    book.expire(harness_up=False)
    clock.advance(30.0)
    fresh = book.result("fresh", "COMPLETED", has_reply=True)
    assert fresh.verdict is Verdict.LATE_OFFER and fresh.offer and fresh.late_s == 30.0
    clock.advance(31.0)
    stale = book.result("stale", "COMPLETED", has_reply=True)
    assert stale.verdict is Verdict.LATE_DROP and not stale.offer and stale.query == "q2"


def test_a_late_failure_has_nothing_to_say(clock: FakeClock) -> None:
    book = tracker(clock)
    book.send("t", "q")
    book.expire(harness_up=False)
    assert book.result("t", "CANCELLED", has_reply=False).verdict is Verdict.LATE_END
    assert book.result("t", "COMPLETED", has_reply=True).verdict is Verdict.DUPLICATE


def test_results_count_once(clock: FakeClock) -> None:
    book = tracker(clock)
    book.send("t", "q")
    assert book.result("t", "COMPLETED", has_reply=True).verdict is Verdict.OFFER
    assert book.result("t", "COMPLETED", has_reply=True).verdict is Verdict.DUPLICATE
    assert book.result("never-sent", "COMPLETED", has_reply=True).verdict is Verdict.DUPLICATE
    assert book.result("t", "FAILED", has_reply=False).verdict is Verdict.DUPLICATE
    with pytest.raises(ValueError, match="already sent"):
        book.send("t", "again")


def test_an_accept_after_the_give_up_asks_for_a_cancel(clock: FakeClock) -> None:
    book = tracker(clock)
    book.send("t", "q")
    clock.advance(6.0)  # never accepted within the liveness window
    (give_up,) = book.expire(harness_up=True, harness_heard_at=clock.now())
    assert give_up.delegation.handle is None  # nothing to cancel yet
    assert not book.accepted("t", handle="late-handle")  # the caller cancels it now


def test_a_rejected_goal_ends_without_a_result(clock: FakeClock) -> None:
    book = tracker(clock)
    book.send("t", "q")
    assert book.end("t") is not None and book.end("t") is None
    assert book.result("t", "COMPLETED", has_reply=True).verdict is Verdict.DUPLICATE


def test_only_so_many_ended_delegations_are_remembered(clock: FakeClock) -> None:
    book = tracker(clock, remembered=2)
    for name in "abc":
        book.send(name, name)
    book.expire(harness_up=False)
    assert book.result("a", "COMPLETED", has_reply=True).verdict is Verdict.DUPLICATE
    assert book.result("c", "COMPLETED", has_reply=True).verdict is Verdict.LATE_OFFER


# --- the goal book ------------------------------------------------------------------------------


class Handle:
    def __init__(self) -> None:
        self.is_cancel_requested = False


def recorded(handle: Handle) -> bool:
    return handle.is_cancel_requested


def test_a_cancel_before_the_accept_starts_the_goal_cancelled(clock: FakeClock) -> None:
    book = GoalBook(clock, evidence_wait_s=0.5)
    assert book.cancel("g") is CancelAnswer.EARLY
    goal = book.accept("g", Handle(), cutoff_seq=10, last_seq=0)
    assert goal.cancel and not goal.waiting  # starts at once, cancelled
    assert book.accept("h", Handle(), cutoff_seq=0, last_seq=0).cancel is False


def test_a_goal_waits_for_its_evidence_then_starts(clock: FakeClock) -> None:
    book = GoalBook(clock, evidence_wait_s=0.5)
    goal = book.accept("g", Handle(), cutoff_seq=10, last_seq=5)
    assert goal.waiting and book.waiting
    assert book.due(last_seq=9, cancel_recorded=recorded).start == []
    due = book.due(last_seq=10, cancel_recorded=recorded)
    assert due.start == [goal] and due.incomplete == []
    book.submitted("g")
    assert not book.waiting and goal.submitted


def test_a_goal_whose_evidence_never_comes_starts_after_the_wait(clock: FakeClock) -> None:
    book = GoalBook(clock, evidence_wait_s=0.5)
    goal = book.accept("g", Handle(), cutoff_seq=10, last_seq=5)
    clock.advance(0.6)
    due = book.due(last_seq=5, cancel_recorded=recorded)
    assert due.start == [goal] and due.incomplete == [goal]


def test_cancel_answers_follow_the_goal(clock: FakeClock) -> None:
    book = GoalBook(clock, evidence_wait_s=0.5)
    book.accept("waiting", Handle(), cutoff_seq=10, last_seq=0)
    assert book.cancel("waiting") is CancelAnswer.SUBMIT_CANCELLED
    assert not book.get("waiting").waiting
    book.accept("running", Handle(), cutoff_seq=0, last_seq=0)
    book.submitted("running")
    assert book.cancel("running") is CancelAnswer.CANCEL_TASK
    book.cancelling("running")
    assert book.get("running").cancel
    task = Task("running", "q", "s", 1, 0)
    task.transition(TaskState.CANCELLING, 1.0)
    task.transition(TaskState.CANCELLED, 1.0)
    assert book.settled("running", task, cancel_recorded=True) is book.get("running")
    assert book.cancel("running") is CancelAnswer.REJECT  # settled: too late


def test_a_cancelled_result_waits_for_the_cancel_to_be_recorded(clock: FakeClock) -> None:
    book = GoalBook(clock, evidence_wait_s=0.0, cancel_state_wait_s=0.5)
    handle = Handle()
    book.accept("g", handle, cutoff_seq=0, last_seq=0)
    book.submitted("g")
    task = Task("g", "q", "s", 1, 0)
    task.transition(TaskState.CANCELLED, 1.0)
    assert book.settled("g", task, cancel_recorded=False) is None
    assert book.waiting and book.due(0, recorded).results == []
    handle.is_cancel_requested = True
    assert [g.task_id for g in book.due(0, recorded).results] == ["g"]
    # and one whose cancel is never recorded is sent anyway after the wait
    other = Handle()
    book.accept("h", other, cutoff_seq=0, last_seq=0)
    book.settled("h", task, cancel_recorded=False)
    clock.advance(0.6)
    assert [g.task_id for g in book.due(0, recorded).results] == ["h"]


def test_every_unsettled_goal_is_reported_alive(clock: FakeClock) -> None:
    book = GoalBook(clock, evidence_wait_s=0.5)
    book.accept("a", Handle(), cutoff_seq=9, last_seq=0)  # waiting for evidence
    book.accept("b", Handle(), cutoff_seq=0, last_seq=0)
    done = Task("b", "q", "s", 1, 0)
    done.transition(TaskState.FAILED, 1.0)
    book.settled("b", done, cancel_recorded=True)
    assert [g.task_id for g in book.live()] == ["a"]
    assert book.pop("b") is not None and book.pop("b") is None and len(book) == 1
    with pytest.raises(ValueError, match="already booked"):
        book.accept("a", Handle(), cutoff_seq=0, last_seq=0)


def test_the_goal_book_and_tracker_import_no_ros() -> None:
    for path in ("venus_ros/ros/goal_book.py", "venus_ros/core/delegation.py"):
        tree = ast.parse((ROOT / path).read_text())
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert not [n for n in names if n.startswith("rclpy")], path


# --- DELIVERING tasks after a restart ------------------------------------------------------------


def _delivering(journal: Journal, task_id: str) -> Task:
    task = Task(task_id, "what is 6 times 7", "s", 1, 0, t=1.0, tool="calculator")
    task.args = {"expression": "6 * 7"}
    journal.record_task(task)
    for state in (TaskState.RUNNING, TaskState.COMPLETED, TaskState.DELIVERING):
        journal.record_transition(task, task.state, state, 2.0, state.value)
        task.transition(state, 2.0, state.value)
    return task


def test_delivering_tasks_are_readopted_after_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "journal.sqlite3"
    now = [1000.0]
    with Journal(db, wall=lambda: now[0]) as journal:
        _delivering(journal, "heard")
        _delivering(journal, "withdrawn")
    now[0] += 30.0
    clock = FakeClock(start=5.0)
    registry = ToolRegistry(builtin_tools())
    with Journal(db, wall=lambda: now[0]) as journal:
        with HarnessRunner(registry, clock, journal=journal) as runner:
            recovery = runner.recover(stale_after_s=120.0)
            assert sorted(t.id for t in recovery.delivering) == ["heard", "withdrawn"]
            # the frontend's report is taken, and "stop" can still withdraw the other one
            runner.advance("heard", TaskState.DELIVERED, "frontend: delivered").result(WAIT_S)
            stop = runner.submit("stop", "s", 2, 0, TimelineView((), 0))
            assert runner.future(stop.id).result(WAIT_S).state is TaskState.COMPLETED
    on_disk = {row.id: row for row in read_journal(db)}
    assert on_disk["heard"].state is TaskState.DELIVERED
    assert on_disk["withdrawn"].state is TaskState.CANCELLED


def test_a_delivery_unconfirmed_for_too_long_fails_as_stale(tmp_path: Path) -> None:
    db = tmp_path / "journal.sqlite3"
    now = [1000.0]
    with Journal(db, wall=lambda: now[0]) as journal:
        _delivering(journal, "old")
    now[0] += 500.0
    registry = ToolRegistry(builtin_tools())
    with Journal(db, wall=lambda: now[0]) as journal:
        with HarnessRunner(registry, FakeClock(), journal=journal) as runner:
            recovery = runner.recover(stale_after_s=120.0)
    assert [t.id for t in recovery.failed] == ["old"] and recovery.delivering == ()
    (row,) = read_journal(db)
    assert row.state is TaskState.FAILED and row.error.startswith("stale")


# --- the harness process reports every unsettled goal alive ------------------------------------


def test_the_harness_sends_a_heartbeat_feedback_per_unsettled_goal(
    probe: Any, tmp_path: Path
) -> None:
    """A goal whose task has not settled (here: waiting 3 s for its evidence) gets an "alive"
    feedback about every 0.5 s, which is what keeps the frontend's delegation awaited."""
    import time

    from rclpy.action import ActionClient

    from venus_interfaces.action import Delegate
    from venus_ros.nodes.qos import TOPICS

    harness = probe.start("harness", tmp_path, "journal_path:=none", "evidence_wait_s:=3.0")
    action = ActionClient(probe.node, Delegate, TOPICS["delegate"])
    try:
        probe.wait_for(action.server_is_ready, WAIT_S, "a Delegate server")
        beats: list[float] = []

        def on_feedback(msg: Any) -> None:
            if msg.feedback.message == "alive":
                beats.append(time.monotonic())

        goal = Delegate.Goal(query="what is 2 plus 2", turn_id=1, evidence_cutoff_seq=1000)
        sent = action.send_goal_async(goal, feedback_callback=on_feedback)
        probe.wait_for(sent.done, WAIT_S, "the goal accepted")
        result = sent.result().get_result_async()
        probe.wait_for(result.done, WAIT_S, "the result")
        assert result.result().result.final_state == "COMPLETED"
        assert len(beats) >= 3, beats  # ~6 in the 3 s wait; some may be lost to scheduling
        gaps = [b - a for a, b in itertools.pairwise(beats)]
        assert max(gaps) < 1.5, gaps
    finally:
        action.destroy()
    assert harness.stop(WAIT_S) == 0, harness.log()
