"""Tests for the crash-safe task journal and recovery after a restart (venus_ros.harness.journal).

Pure tests drive a :class:`HarnessRunner` over a real SQLite file; a "previous process" is a
journal written through the same API (what a killed process leaves). The process test kills
harness_node with SIGKILL mid-task and restarts it on the same journal.
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from venus_ros.core.clock import FakeClock, MonotonicClock
from venus_ros.core.timeline import TimelineView
from venus_ros.harness.journal import (
    MIGRATIONS,
    REDACTED,
    SCHEMA_VERSION,
    Journal,
    JournalError,
    JournalRow,
    default_journal_path,
    format_journal,
    read_journal,
    redact,
)
from venus_ros.harness.runner import INTERRUPTED_REASON, HarnessRunner, Recovery
from venus_ros.harness.tasks import Task, TaskState
from venus_ros.harness.tools import Tool, ToolRegistry, ToolResult, builtin_tools

S = TaskState
WAIT_S = 5.0
EMPTY = TimelineView((), 0)


# --- helpers ------------------------------------------------------------------------------------


async def _answer(args: Mapping[str, Any], evidence: TimelineView) -> ToolResult:
    return ToolResult("done", {"args": dict(args)})


def tool(name: str, run: Callable[..., Any] = _answer, **options: Any) -> Tool:
    options.setdefault("schema", {"type": "object"})
    return Tool(name=name, description=f"test tool {name}", run=run, **options)


def builtin(name: str) -> Tool:
    return next(t for t in builtin_tools() if t.name == name)


def wait_for(condition: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def seed(
    journal: Journal,
    task_id: str,
    tool: Tool | None,
    states: list[TaskState],
    args: Mapping[str, Any] | None = None,
) -> Task:
    """Journal a task the way a runner would have, up to ``states`` (a previous process)."""
    task = Task(task_id, f"query {task_id}", "s", 1, 7, t=1.0, tool=tool.name if tool else "gone")
    task.args = dict(args or {})
    journal.record_task(task, tool)
    for step, state in enumerate(states, start=2):
        if state is S.COMPLETED:
            task.result_text = "6 times 7 is 42."
        journal.record_transition(task, task.state, state, float(step), f"to {state.value}")
        task.transition(state, float(step), f"to {state.value}")
    return task


def rows(path: Path) -> dict[str, JournalRow]:
    return {row.id: row for row in read_journal(path)}


def states(row: JournalRow) -> list[TaskState]:
    return [tr.state for tr in row.transitions]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "state" / "journal.sqlite3"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=1.0)


# --- write-ahead ------------------------------------------------------------------------------


def test_every_transition_is_in_the_journal_before_anyone_acts_on_it(
    db: Path, clock: FakeClock
) -> None:
    problems: list[str] = []
    heard: list[tuple[str, TaskState]] = []
    gate = threading.Event()
    started: list[str] = []  # look tools that have checked the journal

    def journaled(task_id: str, seq: int) -> tuple[str | None, str | None]:
        row = reader.execute("SELECT state FROM tasks WHERE id = ?", (task_id,)).fetchone()
        entry = reader.execute(
            "SELECT state FROM transitions WHERE task_id = ? AND seq = ?", (task_id, seq)
        ).fetchone()
        return (row[0] if row else None, entry[0] if entry else None)

    def listener(task: Task, old: TaskState | None, new: TaskState) -> None:
        heard.append((task.id, new))
        found = journaled(task.id, len(task.history) - 1)
        if found != (new.value, new.value):
            problems.append(f"{task.id} {new.value}: the journal had {found}")

    async def look_first(args: Mapping[str, Any], evidence: TimelineView) -> ToolResult:
        task_id = args["id"]
        query = "SELECT state FROM tasks WHERE id = ?"
        found = tool_reader.execute(query, (task_id,)).fetchone()
        if found != ("RUNNING",):
            problems.append(f"the tool started while the journal had {found}")
        started.append(task_id)
        while not gate.is_set():
            await asyncio.sleep(0.005)
        return ToolResult("looked")

    journal = Journal(db)
    # Second and third connections, one per thread, read what is on disk: the listener runs on
    # the runner's thread, the tool on the tools' loop. (One connection shared by both threads
    # let a statement still open on one thread hold the other's read at an older snapshot.)
    reader = sqlite3.connect(db, check_same_thread=False)
    tool_reader = sqlite3.connect(db, check_same_thread=False)
    registry = ToolRegistry([*builtin_tools(), tool("look", look_first)])
    with HarnessRunner(registry, clock, listeners=[listener], journal=journal) as runner:
        done = runner.submit("what is 12 times 7", "s", 1, 0, EMPTY)
        failed = runner.submit("book me a table", "s", 1, 0, EMPTY)
        looked, cancelled = (
            runner.submit("look", "s", 1, 0, EMPTY, task_id=i, tool="look", args={"id": i})
            for i in ("look-1", "look-2")
        )
        for task in (done, failed):
            runner.future(task.id).result(WAIT_S)
        # Cancel once both tools have looked at the journal: a cancel racing look-2's start
        # would have the tool see CANCELLING (written after RUNNING) instead.
        wait_for(lambda: len(started) == 2, "both look tools to start")
        runner.cancel("look-2")
        gate.set()
        for task in (looked, cancelled):
            runner.future(task.id).result(WAIT_S)
        runner.advance(done.id, S.DELIVERING, "offered").result(WAIT_S)
        runner.advance(done.id, S.DELIVERED, "played").result(WAIT_S)
        tasks = runner.tasks()
    reader.close()
    tool_reader.close()
    journal.close()
    assert problems == []
    assert len(heard) == sum(len(task.history) for task in tasks) >= 14
    on_disk = rows(db)
    for task in tasks:  # the journal's history is the task's, entry for entry
        assert [(tr.state, tr.t, tr.reason) for tr in on_disk[task.id].transitions] == [
            tuple(entry) for entry in task.history
        ]
        assert on_disk[task.id].state is task.state
    assert states(on_disk[done.id]) == [
        S.QUEUED,
        S.RUNNING,
        S.COMPLETED,
        S.DELIVERING,
        S.DELIVERED,
    ]
    assert on_disk[failed.id].error == "no tool can answer this yet"
    assert on_disk[done.id].payload == {"expression": "12 * 7", "value": 84}


@pytest.mark.parametrize(("synchronous", "level"), [("FULL", 2), ("normal", 1)])
def test_the_journal_is_in_wal_mode_with_the_chosen_sync(
    db: Path, synchronous: str, level: int
) -> None:
    with Journal(db, synchronous=synchronous) as journal:
        other = sqlite3.connect(db)
        assert other.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        other.close()
        assert journal._conn().execute("PRAGMA synchronous").fetchone() == (level,)
        seed(journal, "a", None, [S.RUNNING])
        for path in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + ".lock")):
            assert path.stat().st_mode & 0o777 == 0o600, path  # the user's words: owner only
    with pytest.raises(ValueError, match="synchronous"):
        Journal(db, synchronous="OFF")


# --- schema -------------------------------------------------------------------------------------


def test_the_schema_is_versioned_and_migrated_once(db: Path) -> None:
    assert SCHEMA_VERSION == len(MIGRATIONS) == 1
    with Journal(db) as journal:
        assert journal.schema_version == SCHEMA_VERSION
        seed(journal, "a", None, [S.RUNNING])
    with Journal(db) as journal:  # reopening migrates nothing and keeps the data
        assert journal.get("a") is not None
    raw = sqlite3.connect(db)
    assert [r[0] for r in raw.execute("SELECT version FROM schema_version")] == [1]
    columns = {r[1] for r in raw.execute("PRAGMA table_info(tasks)")}
    assert {
        "id",
        "query",
        "session_id",
        "turn_id",
        "cutoff_seq",
        "tool",
        "args_json",
        "state",
        "result_text",
        "payload_json",
        "error",
        "note",
        "created_t",
        "updated_t",
        "idempotent",
    } <= columns
    assert {r[1] for r in raw.execute("PRAGMA table_info(transitions)")} >= {
        "task_id",
        "seq",
        "state",
        "t",
        "reason",
    }
    raw.execute("INSERT INTO schema_version (version, applied_t) VALUES (99, 0)")
    raw.commit()
    raw.close()
    for opener in (Journal, read_journal):
        with pytest.raises(JournalError, match="schema version 99, newer") as info:
            opener(db)
        assert str(db) in str(info.value)


def test_an_sqlite_file_of_something_else_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other.sqlite3"
    raw = sqlite3.connect(other)
    raw.execute("CREATE TABLE photos (name TEXT)")
    raw.commit()
    raw.close()
    with pytest.raises(JournalError, match="not a venus_ros journal") as info:
        Journal(other)
    assert str(other) in str(info.value)


@pytest.mark.parametrize("problem", ["corrupt", "directory", "parent is a file"])
def test_an_unusable_journal_file_is_a_clear_error_naming_it(tmp_path: Path, problem: str) -> None:
    path = tmp_path / "journal.sqlite3"
    if problem == "corrupt":
        path.write_bytes(b"this is not a database, just bytes " * 200)
    elif problem == "directory":
        path.mkdir()
    else:
        (tmp_path / "file").write_text("x")
        path = tmp_path / "file" / "journal.sqlite3"
    with pytest.raises(JournalError) as info:
        Journal(path)
    assert str(path) in str(info.value)
    assert "Traceback" not in str(info.value)
    if problem == "corrupt":
        assert "not a database" in str(info.value)
        with pytest.raises(JournalError, match="not a database"):
            format_journal(path)


def test_one_process_owns_a_journal(db: Path) -> None:
    first = Journal(db)
    with pytest.raises(JournalError, match=r"in use by another process \(pid \d+\)") as info:
        Journal(db)
    assert str(db) in str(info.value)
    assert read_journal(db) == []  # reading needs no ownership
    first.close()
    Journal(db).close()


def test_old_tasks_are_pruned_only_when_nothing_more_is_owed(db: Path) -> None:
    with Journal(db) as journal:
        for i in range(5):
            seed(journal, f"done-{i}", None, [S.FAILED])
        seed(journal, "running", None, [S.RUNNING])
        seed(journal, "undelivered", builtin("calculator"), [S.RUNNING, S.COMPLETED])
    with Journal(db, max_tasks=3):
        pass
    assert list(rows(db)) == ["done-4", "running", "undelivered"]
    raw = sqlite3.connect(db)
    assert raw.execute("SELECT COUNT(*) FROM transitions WHERE task_id LIKE 'done-%'").fetchone()
    assert raw.execute("SELECT DISTINCT task_id FROM transitions ORDER BY 1").fetchall() == [
        ("done-4",),
        ("running",),
        ("undelivered",),
    ]
    raw.close()


def test_the_default_path_is_per_namespace_under_xdg_state_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert default_journal_path("/") == tmp_path / "venus_ros" / "harness.sqlite3"
    assert default_journal_path("/robot1/voice") == (
        tmp_path / "venus_ros" / "harness.robot1.voice.sqlite3"
    )
    monkeypatch.delenv("XDG_STATE_HOME")
    assert default_journal_path() == Path.home() / ".local/state/venus_ros/harness.sqlite3"


# --- secrets ------------------------------------------------------------------------------------

SECRET_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "key": {"type": "string", "writeOnly": True},
        "auth": {
            "type": "object",
            "properties": {"session": {"type": "string", "writeOnly": True}},
        },
        "accounts": {
            "type": "array",
            "items": {"type": "object", "properties": {"pin": {"writeOnly": True}}},
        },
    },
}
SECRETS = ("sk-live-0123456789", "sess-abcdef", "pin-9876", "hunter2-pass", "tok-xyz-42")


def test_redaction_rules() -> None:
    value, hidden = redact(
        {
            "key": SECRETS[0],
            "auth": {"session": SECRETS[1], "user": "bob"},
            "accounts": [{"pin": SECRETS[2], "name": "main"}],
            "OPENAI_API_KEY": "x",
            "apiKey": "x",
            "client_secret": "x",
            "auth_token": "x",
            "max_tokens": 256,
            "city": "Paris",
        },
        SECRET_SCHEMA,
    )
    assert hidden
    assert value == {
        "key": REDACTED,
        "auth": {"session": REDACTED, "user": "bob"},
        "accounts": [{"pin": REDACTED, "name": "main"}],
        "OPENAI_API_KEY": REDACTED,
        "apiKey": REDACTED,
        "client_secret": REDACTED,
        "auth_token": REDACTED,
        "max_tokens": 256,
        "city": "Paris",
    }
    assert redact({"city": "Paris"}, SECRET_SCHEMA) == ({"city": "Paris"}, False)


def test_secrets_never_reach_the_journal_file(db: Path, clock: FakeClock) -> None:
    seen: list[Mapping[str, Any]] = []

    async def weather(args: Mapping[str, Any], evidence: TimelineView) -> ToolResult:
        seen.append(args)
        return ToolResult("Sunny.", {"password": SECRETS[3], "headers": {"token": SECRETS[4]}})

    secretive = tool("weather", weather, schema=SECRET_SCHEMA, idempotent=True)
    args = {
        "city": "Paris",
        "key": SECRETS[0],
        "auth": {"session": SECRETS[1]},
        "accounts": [{"pin": SECRETS[2]}],
    }
    with (
        Journal(db) as journal,
        HarnessRunner(ToolRegistry([secretive]), clock, journal=journal) as runner,
    ):
        task = runner.submit("weather", "s", 1, 0, EMPTY, tool="weather", args=args)
        runner.future(task.id).result(WAIT_S)
    row = rows(db)[task.id]
    assert seen == [args]  # the tool itself got the real values
    assert row.redacted
    assert row.args == {
        "city": "Paris",
        "key": REDACTED,
        "auth": {"session": REDACTED},
        "accounts": [{"pin": REDACTED}],
    }
    assert row.payload == {"password": REDACTED, "headers": {"token": REDACTED}}
    for path in db.parent.iterdir():  # the database, its WAL and anything beside them
        data = path.read_bytes()
        assert not [s for s in SECRETS if s.encode() in data], path
    # A task whose arguments were redacted cannot be re-run: it ends FAILED after a restart.
    with Journal(db) as journal:
        seed(journal, "needs-key", secretive, [S.RUNNING], args=args)
    with (
        Journal(db) as journal,
        HarnessRunner(ToolRegistry([secretive]), clock, journal=journal) as runner,
    ):
        recovery = runner.recover()
    assert [t.id for t in recovery.failed] == ["needs-key"]
    assert len(seen) == 1


# --- recovery -----------------------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, TaskState | None, TaskState]] = []
        self._lock = threading.Lock()

    def __call__(self, task: Task, old: TaskState | None, new: TaskState) -> None:
        with self._lock:
            self.events.append((task.id, old, new))


def test_recovery_reruns_idempotent_work_and_fails_the_rest_honestly(
    db: Path, clock: FakeClock
) -> None:
    calculator, timer = builtin("calculator"), builtin("timer")
    send = tool("send", side_effects=True)
    six_times_seven = {"expression": "6 * 7"}
    with Journal(db) as journal:  # what a killed process left behind
        seed(journal, "calc-running", calculator, [S.RUNNING], six_times_seven)
        seed(journal, "calc-queued", calculator, [], six_times_seven)
        seed(journal, "calc-cancelling", calculator, [S.RUNNING, S.CANCELLING], six_times_seven)
        seed(journal, "timer-running", timer, [S.RUNNING], {"seconds": 30})
        seed(journal, "timer-queued", timer, [], {"seconds": 30})
        seed(journal, "send-running", send, [S.RUNNING])
        seed(journal, "send-cancelling", send, [S.RUNNING, S.CANCELLING])
        seed(journal, "gone-running", None, [S.RUNNING])
        seed(journal, "calc-bad-args", calculator, [S.RUNNING], {"expression": 7})
        seed(journal, "undelivered", calculator, [S.RUNNING, S.COMPLETED], six_times_seven)
        handed = seed(journal, "handed-off", calculator, [S.RUNNING, S.COMPLETED])
        journal.mark_handed_off(handed.id, "delegate_result")
        seed(journal, "delivering", calculator, [S.RUNNING, S.COMPLETED, S.DELIVERING])
        seed(journal, "failed", calculator, [S.FAILED])
    recorder = Recorder()
    cutoffs: list[int] = []

    def evidence(cutoff: int) -> TimelineView:
        cutoffs.append(cutoff)
        return TimelineView((), cutoff)

    registry = ToolRegistry([*builtin_tools(), send])
    with Journal(db) as journal:
        with HarnessRunner(registry, clock, listeners=[recorder], journal=journal) as runner:
            recovery = runner.recover(evidence)
            ids = lambda tasks: sorted(t.id for t in tasks)  # noqa: E731
            assert ids(recovery.rerun) == ["calc-queued", "calc-running"]
            assert ids(recovery.cancelled) == ["calc-cancelling"]
            assert ids(recovery.failed) == [
                "calc-bad-args",
                "gone-running",
                "send-cancelling",
                "send-running",
                "timer-queued",
                "timer-running",
            ]
            assert ids(recovery.undelivered) == ["undelivered"]
            for task in recovery.rerun:
                assert runner.future(task.id).result(WAIT_S).state is S.COMPLETED
                assert task.result_text == "6 times 7 is 42."
            assert sorted(t.id for t in runner.undelivered()) == [
                "calc-queued",
                "calc-running",
                "undelivered",
            ]
            with pytest.raises(RuntimeError, match="only be called once"):
                runner.recover()
            on_disk = rows(db)
            assert all(row.state.settled for row in on_disk.values())
            for task in runner.tasks():
                assert [(tr.state, tr.reason) for tr in on_disk[task.id].transitions] == [
                    (entry.state, entry.reason) for entry in task.history
                ]
    assert cutoffs == [7, 7]
    running, queued = on_disk["calc-running"], on_disk["calc-queued"]
    assert states(running) == [S.QUEUED, S.RUNNING, S.RUNNING, S.COMPLETED]
    assert running.transitions[2].reason == "re-running calculator after a harness restart"
    assert states(queued) == [S.QUEUED, S.QUEUED, S.RUNNING, S.COMPLETED]
    assert queued.transitions[1].reason == "queued again after a harness restart"
    assert ("calc-running", S.RUNNING, S.RUNNING) in recorder.events
    errors = {key: row.error for key, row in on_disk.items() if row.state is S.FAILED}
    assert errors == {
        "timer-running": INTERRUPTED_REASON,
        "timer-queued": f"{INTERRUPTED_REASON} before it started",
        "send-running": f"{INTERRUPTED_REASON} (it may already have taken effect)",
        "send-cancelling": (
            f"{INTERRUPTED_REASON} while cancelling (it may already have taken effect)"
        ),
        "gone-running": f"{INTERRUPTED_REASON} (it may already have taken effect)",
        "calc-bad-args": INTERRUPTED_REASON,
        "failed": "",
    }
    assert on_disk["calc-cancelling"].state is S.CANCELLED
    assert on_disk["undelivered"].undelivered
    assert not on_disk["handed-off"].undelivered
    assert on_disk["delivering"].state is S.DELIVERING


def test_a_tool_journaled_as_not_idempotent_is_not_rerun(db: Path, clock: FakeClock) -> None:
    before = tool("lookup")  # not idempotent when the task was journaled
    after = tool("lookup", idempotent=True)
    with Journal(db) as journal:
        seed(journal, "t", before, [S.RUNNING])
    with Journal(db) as journal, HarnessRunner(ToolRegistry([after]), clock, journal=journal) as r:
        recovery = r.recover()
    assert [t.id for t in recovery.failed] == ["t"] and recovery.rerun == ()
    assert rows(db)["t"].error == INTERRUPTED_REASON


def test_stale_undelivered_replies_are_dropped_not_spoken(db: Path, clock: FakeClock) -> None:
    now = [1000.0]
    calculator = builtin("calculator")
    with Journal(db, wall=lambda: now[0]) as journal:
        seed(journal, "old", calculator, [S.RUNNING, S.COMPLETED])
        now[0] = 1250.0
        seed(journal, "recent", calculator, [S.RUNNING, S.COMPLETED])
    now[0] = 1300.0
    with (
        Journal(db, wall=lambda: now[0]) as journal,
        HarnessRunner(ToolRegistry.builtins(), clock, journal=journal) as runner,
    ):
        recovery = runner.recover(stale_after_s=120.0)
    assert [t.id for t in recovery.undelivered] == ["recent"]
    assert [t.id for t in recovery.failed] == ["old"]
    assert (
        rows(db)["old"].error
        == "stale: completed 300 s before the harness restarted, not delivered"
    )


def test_handing_off_a_reply_means_a_restart_does_not_repeat_it(db: Path, clock: FakeClock) -> None:
    with Journal(db) as journal:
        with HarnessRunner(ToolRegistry.builtins(), clock, journal=journal) as runner:
            sent = runner.future(runner.submit("what is 1 plus 1", "s", 1, 0, EMPTY).id).result(
                WAIT_S
            )
            back = runner.future(runner.submit("what is 2 plus 2", "s", 1, 0, EMPTY).id).result(
                WAIT_S
            )
            assert {t.id for t in runner.undelivered()} == {sent.id, back.id}
            assert runner.hand_off(sent.id)
            runner.advance(back.id, S.DELIVERING, "offered").result(WAIT_S)
            assert runner.undelivered() == []
            # An interrupted delivery gives the reply back: undelivered again.
            runner.advance(back.id, S.COMPLETED, "interrupted").result(WAIT_S)
            assert [t.id for t in runner.undelivered()] == [back.id]
            assert not runner.hand_off("no-such-task")
            wait_for(lambda: journal.get(sent.id).handed_off_via != "", "the hand-off")  # type: ignore[union-attr]
    on_disk = rows(db)
    assert on_disk[sent.id].handed_off_via == "delegate_result"
    assert on_disk[back.id].undelivered and on_disk[back.id].handed_off_via == ""
    with (
        Journal(db) as journal,
        HarnessRunner(ToolRegistry.builtins(), clock, journal=journal) as r,
    ):
        assert [t.id for t in r.recover().undelivered] == [back.id]


def test_without_a_journal_recovery_is_empty(clock: FakeClock) -> None:
    with HarnessRunner(ToolRegistry.builtins(), clock) as runner:
        assert runner.recover() == Recovery()
        assert runner.undelivered() == []


def test_a_failing_journal_costs_crash_safety_not_answers(
    db: Path, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    journal = Journal(db)
    with HarnessRunner(ToolRegistry.builtins(), clock, journal=journal) as runner:
        journal.close()  # e.g. the disk went away
        task = runner.submit("what is 3 plus 4", "s", 1, 0, EMPTY)
        assert runner.future(task.id).result(WAIT_S).state is S.COMPLETED
        assert runner.journal_errors == 3  # QUEUED, RUNNING, COMPLETED
    assert "journal write failed" in caplog.text and str(db) in caplog.text


# --- listing ------------------------------------------------------------------------------------


def test_format_journal_lists_tasks_and_transitions(db: Path, clock: FakeClock) -> None:
    long_query = "what is 1 plus 1 " + "and then some more words " * 5
    with Journal(db) as journal:
        with HarnessRunner(ToolRegistry.builtins(), clock, journal=journal) as runner:
            done = runner.submit("what is 12 times 7", "s", 1, 0, EMPTY)
            failed = runner.submit("book me a table", "s", 1, 0, EMPTY)
            long = runner.submit(long_query, "s", 1, 0, EMPTY)
            for task in (done, failed, long):
                runner.future(task.id).result(WAIT_S)
            runner.advance(done.id, S.DELIVERING, "offered").result(WAIT_S)
            text = format_journal(db)  # while the writer has it open
    lines = text.splitlines()
    assert lines[0] == f"journal {db} (schema {SCHEMA_VERSION}): 3 tasks"
    first, second, third = lines[1:]
    assert first.startswith(done.id[:8]) and first.split()[1:3] == ["DELIVERING", "calculator"]
    assert first.endswith('"what is 12 times 7"')
    assert second.split()[1:3] == ["FAILED", "-"]
    assert second.endswith('"book me a table"  error: no tool can answer this yet')
    assert third.endswith('…"  [reply not handed off]')
    assert len(third.split('"')[1]) == 60
    verbose = format_journal(db, verbose=True).splitlines()
    assert len(verbose) == 1 + 3 + (4 + 2 + 3)
    assert verbose[2].split()[0] == "0" and verbose[2].split()[2:] == ["QUEUED", "submitted"]
    assert verbose[5].split()[2:] == ["DELIVERING", "offered"]
    with pytest.raises(JournalError, match="no task journal at"):
        format_journal(db.parent / "missing.sqlite3")


def test_format_journal_of_an_empty_journal(db: Path) -> None:
    Journal(db).close()
    assert format_journal(db) == f"journal {db} (schema {SCHEMA_VERSION}): no tasks"


# --- harness_node: kill -9 and restart ----------------------------------------------------------

NODE_WAIT_S = 10.0


def test_kill_9_with_a_delivering_task_and_a_pending_timer_then_restart_loses_nothing(
    probe: Any, tmp_path: Path
) -> None:
    from rclpy.action import ActionClient
    from std_msgs.msg import Header

    from venus_interfaces.action import Delegate
    from venus_interfaces.msg import BackendReply, TaskStatus
    from venus_ros.harness.schedule import JobState, Schedule
    from venus_ros.nodes.qos import TOPICS, qos_for, reliable

    db = tmp_path / "j.sqlite3"
    scale = "time_scale:=120.0"  # the 10-minute timer rings after 5 s
    first = probe.start("harness", tmp_path, f"journal_path:={db}", scale)
    action = ActionClient(probe.node, Delegate, TOPICS["delegate"])
    replies: list[BackendReply] = []
    probe.node.create_subscription(
        BackendReply, TOPICS["backend_reply"], replies.append, reliable(20)
    )
    delivery = probe.node.create_publisher(TaskStatus, TOPICS["delivery"], qos_for("delivery"))

    def ask(query: str) -> tuple[str, Any]:
        future = action.send_goal_async(Delegate.Goal(query=query, turn_id=2))
        probe.wait_for(future.done, NODE_WAIT_S, f"goal {query!r} accepted")
        handle = future.result()
        assert handle.accepted
        result = handle.get_result_async()
        probe.wait_for(result.done, NODE_WAIT_S, f"the result of {query!r}")
        return bytes(handle.goal_id.uuid).hex(), result.result().result

    def journal_state(task_id: str) -> TaskState | None:
        row = rows(db).get(task_id) if db.exists() else None
        return row.state if row else None

    def report(task_id: str, state: str) -> None:
        delivery.publish(TaskStatus(header=Header(), task_id=task_id, state=state, message="test"))

    def jobs() -> list[Any]:
        with Schedule(db) as schedule:
            return schedule.jobs()

    try:
        probe.wait_for(action.server_is_ready, NODE_WAIT_S, "a Delegate server")
        calc_id, calc = ask("what is 12 times 7")
        assert calc.final_state == "COMPLETED"
        timer_id, timer = ask("set a timer for ten minutes")
        assert timer.final_state == "COMPLETED" and "10 minute timer" in timer.reply_text
        # Both replies went out in their Delegate results; the node journals DELIVERING just
        # after sending them, so wait for both before the kill.
        probe.wait_for(
            lambda: (
                journal_state(calc_id) is S.DELIVERING and journal_state(timer_id) is S.DELIVERING
            ),
            NODE_WAIT_S,
            "the replies DELIVERING",
        )
        first.stopped = True
        first.proc.kill()
        assert first.proc.wait(NODE_WAIT_S) == -signal.SIGKILL
        (job,) = jobs()
        assert job.state is JobState.PENDING and job.seconds == 600

        # A task that completed just before the crash, its reply never sent (no hand-off).
        with (
            Journal(db) as journal,
            HarnessRunner(ToolRegistry.builtins(), MonotonicClock(), journal=journal) as runner,
        ):
            pending = runner.submit("what is 6 times 7", "default", 4, 0, EMPTY)
            assert runner.future(pending.id).result(WAIT_S).state is S.COMPLETED

        second = probe.start("harness", tmp_path, f"journal_path:={db}", scale, tag="-restarted")
        probe.wait_for(
            lambda: any(r.task_id == pending.id for r in replies),
            NODE_WAIT_S,
            "the undelivered reply after the restart",
        )
        probe.wait_for(lambda: journal_state(pending.id) is S.DELIVERING, NODE_WAIT_S, "DELIVERING")
        probe.wait_for_log(
            second,
            "recovered: 0 re-run, 0 failed, 0 cancelled, 1 undelivered",
            timeout=NODE_WAIT_S,
            what="the recovery summary",
        )
        # The reply that was DELIVERING before the crash was re-adopted: its report lands.
        report(calc_id, "DELIVERED")
        probe.wait_for(lambda: journal_state(calc_id) is S.DELIVERED, NODE_WAIT_S, "DELIVERED")
        # The timer rings on time (600 s / 120 after it was set), once.
        probe.wait_for(lambda: len(replies) == 2, NODE_WAIT_S, "the timer to ring")
        (ring,) = [r for r in replies if r.task_id.startswith("job-")]
        assert ring.task_id == job.id and ring.text.startswith("Your 10 minute timer is done.")
        report(job.id, "DELIVERED")
        probe.wait_for(
            lambda: jobs()[0].state is JobState.DELIVERED, NODE_WAIT_S, "the ring DELIVERED"
        )
        probe.spin_for(1.0)  # a second ring would arrive now
    finally:
        action.destroy()
    # (the two may come in either order: both wait for the same subscriber to match)
    assert sorted((r.task_id, r.text[:29], r.topic) for r in replies) == sorted(
        [
            (pending.id, "6 times 7 is 42.", "calculator"),
            (job.id, "Your 10 minute timer is done.", "timer"),
        ]
    )
    on_disk = rows(db)
    assert set(on_disk) == {calc_id, timer_id, pending.id}  # nothing lost
    assert on_disk[calc_id].state is S.DELIVERED
    assert on_disk[timer_id].state is S.DELIVERING  # its reply went out in the Delegate result
    code = second.stop(NODE_WAIT_S)
    output = second.log()
    assert code == 0, output
    assert "Traceback" not in output and "Traceback" not in first.log()


def test_an_unusable_journal_stops_the_node_with_exit_2_naming_it(tmp_path: Path) -> None:
    from rosproc import start_node

    bad = tmp_path / "bad.sqlite3"
    bad.write_bytes(b"not a database " * 100)
    process = start_node("harness", tmp_path, f"journal_path:={bad}")
    code = process.wait(NODE_WAIT_S * 2)
    output = process.log()
    assert code == 2, output
    assert "configuration error" in output and str(bad) in output
    assert "not a database" in output and "Traceback" not in output
