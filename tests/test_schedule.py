"""Timers and reminders as scheduled jobs (venus_ros.harness.schedule): on a fake wall clock,
in a real SQLite file, through the real runner and tools."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from venus_ros.core.clock import FakeClock
from venus_ros.core.timeline import TimelineView
from venus_ros.harness.journal import Journal
from venus_ros.harness.runner import HarnessRunner
from venus_ros.harness.schedule import JobState, Schedule, pick_job, timer_tools
from venus_ros.harness.tasks import TaskState
from venus_ros.harness.tools import ToolError, ToolRegistry, builtin_tools, route

EMPTY = TimelineView((), 0)
WAIT_S = 10.0


class Wall:
    """A Unix clock the test moves."""

    def __init__(self, t: float = 1_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def wall() -> Wall:
    return Wall()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "journal.sqlite3"
    Journal(path).close()  # the schedule lives in the task journal's file
    return path


def run(tool: Any, **args: Any) -> Any:
    return asyncio.run(tool.run(args, EMPTY))


def test_a_job_rings_on_time_once(wall: Wall) -> None:
    with Schedule(wall=wall) as schedule:
        job = schedule.add(600, label="")
        assert job.name == "10 minute timer" and schedule.next_due() == wall.t + 600
        wall.t += 599.9
        assert schedule.due() == []
        wall.t += 0.2
        (rung,) = schedule.due()
        assert rung.id == job.id and rung.state is JobState.RUNG
        assert rung.ring_text() == "Your 10 minute timer is done."
        assert schedule.due() == []  # once
        assert schedule.delivered(job.id, "DELIVERED", "played").state is JobState.DELIVERED
        assert schedule.delivered(job.id, "DELIVERED", "again") is None  # duplicate report


def test_a_job_survives_a_restart_and_rings_after_it(db: Path, wall: Wall) -> None:
    with Schedule(db, wall=wall) as first:
        job = first.add(600)
    # killed: nothing ran for eight minutes
    wall.t += 480
    with Schedule(db, wall=wall) as second:
        assert [j.id for j in second.pending()] == [job.id]
        wall.t += 120
        assert [j.id for j in second.due()] == [job.id]
    with Schedule(db, wall=wall) as third:
        assert third.due() == [] and third.get(job.id).state is JobState.RUNG


def test_a_job_due_while_nothing_ran_rings_late_or_is_missed(db: Path, wall: Wall) -> None:
    with Schedule(db, wall=wall, late_max_s=300) as schedule:
        first = schedule.add(60)
        second = schedule.add(10)
        wall.t += 400  # both were due more than 300 s ago when a harness looks again
        assert schedule.due() == []
    with Schedule(db, wall=wall, late_max_s=300) as schedule:
        assert schedule.get(second.id).state is JobState.MISSED
        assert schedule.get(first.id).reason.startswith("missed: due 340 s ago")
        assert schedule.due() == []  # nothing due: no write transaction either
        job = schedule.add(60)
        wall.t += 90
        (rung_late,) = schedule.due()
        assert rung_late.id == job.id
        assert rung_late.ring_text() == "Your 1 minute timer is done. It was due 30 seconds ago."


def test_cancel_picks_the_right_job(wall: Wall) -> None:
    with Schedule(wall=wall) as schedule:
        timer, listing, cancel = timer_tools(schedule)
        run(timer, seconds=300, label="pasta")
        wall.t += 1
        run(timer, seconds=600)
        wall.t += 1
        run(timer, seconds=120, label="tea")
        said = run(listing).text
        assert said == (
            "You have 3 timers: the tea timer with 2 minutes left, the pasta timer with "
            "4 minutes and 58 seconds left and the 10 minute timer with 9 minutes and 59 "
            "seconds left."
        )
        assert run(cancel, label="pasta").text == (
            "Okay, I cancelled the pasta timer. Still set: tea timer and 10 minute timer."
        )
        assert run(cancel, seconds=600).text.startswith("Okay, I cancelled the 10 minute timer.")
        with pytest.raises(ToolError, match="no timer like that"):
            run(cancel, label="eggs")
        assert run(cancel).text == "Okay, I cancelled the tea timer."  # the newest
        with pytest.raises(ToolError, match="no timers set"):
            run(cancel)
        assert run(listing).text == "You have no timers set."


def test_pick_job_by_label_duration_or_newest(wall: Wall) -> None:
    with Schedule(wall=wall) as schedule:
        a = schedule.add(60, label="eggs")
        wall.t += 1
        b = schedule.add(300)
        jobs = schedule.pending()
        assert pick_job(jobs, "the eggs") == a
        assert pick_job(jobs, "", 300) == b
        assert pick_job(jobs) == b
        assert pick_job(jobs, "", 42) is None
        assert pick_job([], "") is None


@pytest.fixture
def runner(wall: Wall) -> Iterator[tuple[HarnessRunner, Schedule]]:
    schedule = Schedule(wall=wall)
    with HarnessRunner(
        ToolRegistry(builtin_tools(schedule)),
        FakeClock(),
        max_concurrent=2,
        listeners=[schedule.follow],
    ) as r:
        yield r, schedule
    schedule.close()


def settle(runner: HarnessRunner, query: str, session: str = "s") -> Any:
    task = runner.submit(query, session, 1, 0, EMPTY)
    return runner.future(task.id).result(WAIT_S)


def test_two_timers_do_not_block_a_calculation(runner: tuple[HarnessRunner, Schedule]) -> None:
    r, schedule = runner
    first = settle(r, "set a timer for ten minutes")
    second = settle(r, "set a timer for twenty five minutes")
    assert (first.state, second.state) == (TaskState.COMPLETED, TaskState.COMPLETED)
    assert sorted(j.seconds for j in schedule.pending()) == [600, 1500]
    calc = settle(r, "what is 12 times 7")  # two slots, both free: timers hold none
    assert calc.state is TaskState.COMPLETED and calc.result_text == "12 times 7 is 84."


def test_never_mind_before_the_reply_was_heard_cancels_the_timer(
    runner: tuple[HarnessRunner, Schedule],
) -> None:
    r, schedule = runner
    timer = settle(r, "set a timer for five minutes")
    assert len(schedule.pending()) == 1
    settle(r, "never mind")
    assert r.get(timer.id).state is TaskState.CANCELLED
    (job,) = schedule.jobs()
    assert job.state is JobState.CANCELLED and "taken back" in job.reason


def test_cancel_the_timer_goes_to_the_timer_not_to_the_session(
    runner: tuple[HarnessRunner, Schedule],
) -> None:
    r, schedule = runner
    settle(r, "set a timer for 5 minutes called pasta")
    settle(r, "set a timer for ten minutes")
    done = settle(r, "cancel the 5 minute timer")
    assert done.tool == "cancel_timer" and done.state is TaskState.COMPLETED
    assert [j.seconds for j in schedule.pending()] == [600]


@pytest.mark.parametrize(
    ("query", "seconds"),
    [
        ("set a timer for twenty five minutes", 1500),
        ("set a timer for a minute and a half", 90),
        ("remind me in a quarter of an hour", 900),
        ("set an alarm for half an hour", 1800),
        ("um, a timer for five, no, ten minutes", 600),
        ("timer for an hour and 20 minutes", 4800),
    ],
)
def test_durations_through_the_keyword_router(query: str, seconds: int) -> None:
    assert route(query) == ("timer", {"seconds": seconds})
