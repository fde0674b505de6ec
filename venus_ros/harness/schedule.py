"""Timers and reminders as scheduled jobs in the journal, not tasks holding a slot.

Setting a timer is a short task: the ``timer`` tool writes a :class:`Job` into the schedule
(a table in the task journal's SQLite file, so it survives ``kill -9``) and completes at once
("Okay, a 10 minute timer."). Nothing runs meanwhile, so timers never hold one of the runner's
concurrency slots. Whoever owns the schedule (the harness node) calls :meth:`Schedule.due`
periodically; a due job is moved to ``RUNG`` in the same transaction that selects it, so each
job rings at most once, even when two processes or a restart race for it; its ring is then
offered for delivery (a backend reply whose task id is the job id) and the frontend's delivery
report moves it on (:meth:`Schedule.delivered`).

Job states::

    PENDING ──▶ RUNG ──▶ DELIVERED | FAILED | CANCELLED   (the frontend's delivery report)
       │  └───▶ MISSED     (due while no harness ran, more than ``late_max_s`` ago)
       └──────▶ CANCELLED  ("cancel the timer")

Times are Unix time from the injected ``wall`` (tests and demos pass a fake or scaled one), so
a job set before a restart rings on time after it: a job that fell due while no harness was
running rings as soon as one runs, if at most ``late_max_s`` late (its ring says how late), else
it ends ``MISSED``, journaled with the reason, and is not spoken as if fresh.

The tools over a schedule (:func:`timer_tools`): ``timer`` (set), ``list_timers`` and
``cancel_timer`` (by label, by duration, else the newest). A timer whose setting task is taken
back before its reply was heard ("never mind" right after "set a timer") is cancelled with it
(:meth:`Schedule.follow`, a runner transition listener); once heard, "cancel the timer" is
how it goes. Without a journal a schedule lives
in memory (``path=None``): tests and single-process tools still never hold a slot.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import re
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from venus_ros.core.timeline import TimelineView
from venus_ros.harness.tasks import Task, TaskState
from venus_ros.harness.tools import (
    MAX_TIMER_S,
    TIMER_SCHEMA,
    Tool,
    ToolError,
    ToolResult,
)
from venus_ros.text.numbers import say_duration, spoken_duration
from venus_ros.text.speech import and_list

#: How late a job may ring after a harness restart before it is MISSED instead.
LATE_MAX_S = 300.0
#: Finished jobs kept (the newest), for listing and audit; older ones are deleted on open.
KEEP_JOBS = 1000
#: Job ids start with this (the ring's backend reply carries the job id as its task id).
JOB_PREFIX = "job-"


class JobState(str, enum.Enum):
    """The state of a scheduled job (see the module docstring)."""

    PENDING = "PENDING"
    RUNG = "RUNG"
    DELIVERED = "DELIVERED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    MISSED = "MISSED"


@dataclass(frozen=True)
class Job:
    """One scheduled timer or reminder.

    Attributes:
        id: the job id (``job-...``).
        label: what it is for ("pasta"), or "" for a plain timer.
        seconds: the duration it was set for.
        session_id: the session that set it (its ring goes there).
        task_id: the task that set it.
        created_t: Unix time it was set.
        due_t: Unix time it rings.
        state: its state.
        reason: why it is in that state (for MISSED, CANCELLED, FAILED).
        rung_t: Unix time it rang (0 if not yet).
        late_s: how late it rang, when that is worth saying (0 otherwise).
    """

    id: str
    label: str
    seconds: float
    session_id: str
    task_id: str
    created_t: float
    due_t: float
    state: JobState
    reason: str = ""
    rung_t: float = 0.0
    late_s: float = 0.0

    @property
    def name(self) -> str:
        """How the job is spoken of: "pasta timer", "10 minute timer"."""
        if self.label:
            label = self.label.strip()
            return label if re.search(r"\b(?:timer|reminder|alarm)\b", label) else f"{label} timer"
        return f"{spoken_duration(self.seconds)} timer"

    def ring_text(self) -> str:
        """What the ring says, with how late it is when it rings late."""
        text = f"Your {self.name} is done."
        if self.late_s > 0:
            text += f" It was due {say_duration(self.late_s)} ago."
        return text


_SCHEMA = """
CREATE TABLE IF NOT EXISTS schedule (
    id TEXT PRIMARY KEY,
    label TEXT NOT NULL,
    seconds REAL NOT NULL,
    session_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    created_t REAL NOT NULL,
    due_t REAL NOT NULL,
    state TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    rung_t REAL NOT NULL DEFAULT 0
)
"""
_COLUMNS = "id, label, seconds, session_id, task_id, created_t, due_t, state, reason, rung_t"


class Schedule:
    """Scheduled jobs in one SQLite table (see the module docstring). Thread-safe.

    Args:
        path: the database file (the task journal's file: the table lives beside its tasks),
            or None for a schedule in memory.
        wall: the Unix time source.
        late_max_s: a job found due more than this late rings no more: MISSED.
        late_note_s: a ring at least this late says how late it is.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        wall: Callable[[], float] = time.time,
        late_max_s: float = LATE_MAX_S,
        late_note_s: float = 5.0,
    ) -> None:
        self.path = None if path is None else os.fspath(path)
        self.late_note_s = float(late_note_s)
        self.wall = wall
        self.late_max_s = float(late_max_s)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(
            self.path or ":memory:", isolation_level=None, check_same_thread=False, timeout=5.0
        )
        if self.path is not None:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(_SCHEMA)
        self._db.execute(  # jobs that need nothing more, beyond the newest KEEP_JOBS
            "DELETE FROM schedule WHERE state NOT IN ('PENDING', 'RUNG') AND id NOT IN "
            "(SELECT id FROM schedule ORDER BY created_t DESC LIMIT ?)",
            (KEEP_JOBS,),
        )

    # --- writes ------------------------------------------------------------------------------

    def add(
        self, seconds: float, *, label: str = "", session_id: str = "", task_id: str = ""
    ) -> Job:
        """Schedule a job ``seconds`` from now.

        Raises:
            ValueError: for a duration that is not in (0, :data:`MAX_TIMER_S`].
        """
        seconds = float(seconds)
        if not 0 < seconds <= MAX_TIMER_S:
            raise ValueError(f"a timer must last between 0 and {MAX_TIMER_S} s, got {seconds:g}")
        now = self.wall()
        job = Job(
            JOB_PREFIX + uuid.uuid4().hex[:16],
            " ".join(label.split())[:80],
            seconds,
            session_id,
            task_id,
            now,
            now + seconds,
            JobState.PENDING,
        )
        with self._lock:
            self._db.execute(
                f"INSERT INTO schedule ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                _values(job),
            )
        return job

    def cancel(self, job_id: str, reason: str = "cancelled by the user") -> Job | None:
        """Cancel a PENDING job; returns it (CANCELLED), or None if it was not pending."""
        return self._move(job_id, (JobState.PENDING,), JobState.CANCELLED, reason)

    def due(self) -> list[Job]:
        """The jobs due now, each moved to RUNG (returned) or MISSED (too late) at once.

        The select and the move are one transaction, so a job rings once only.
        """
        now = self.wall()
        upcoming = self.next_due()
        if upcoming is None or upcoming > now:  # the common case: no write lock taken
            return []
        rung: list[Job] = []
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                rows = self._db.execute(
                    f"SELECT {_COLUMNS} FROM schedule WHERE state = 'PENDING' AND due_t <= ? "
                    "ORDER BY due_t",
                    (now,),
                ).fetchall()
                for row in rows:
                    job = _job(row)
                    late = now - job.due_t
                    if late > self.late_max_s:
                        reason = f"missed: due {late:.0f} s ago, when no one could be told"
                        self._set(job.id, JobState.MISSED, reason, now)
                    else:
                        self._set(job.id, JobState.RUNG, "rang", now)
                        rung.append(
                            dataclasses.replace(
                                job,
                                state=JobState.RUNG,
                                reason="rang",
                                rung_t=now,
                                late_s=late if late >= self.late_note_s else 0.0,
                            )
                        )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return rung

    def delivered(self, job_id: str, state: str, reason: str = "") -> Job | None:
        """The frontend's report on a ring (DELIVERED, FAILED or CANCELLED); None if the job
        did not ring or was already reported (a duplicate report changes nothing)."""
        target = JobState(state)
        if target not in (JobState.DELIVERED, JobState.FAILED, JobState.CANCELLED):
            raise ValueError(f"a ring cannot end {state}")
        return self._move(job_id, (JobState.RUNG,), target, reason)

    # --- reads -------------------------------------------------------------------------------

    def get(self, job_id: str) -> Job | None:
        """The job with this id, or None."""
        with self._lock:
            row = self._db.execute(
                f"SELECT {_COLUMNS} FROM schedule WHERE id = ?", (job_id,)
            ).fetchone()
        return _job(row) if row else None

    def pending(self, session_id: str | None = None) -> list[Job]:
        """PENDING jobs (of one session, or all), soonest first."""
        where, params = "state = 'PENDING'", ()
        if session_id is not None:
            where, params = where + " AND session_id = ?", (session_id,)
        return self._select(where, params)

    def jobs(self) -> list[Job]:
        """Every job, oldest first."""
        return self._select("1", (), order="created_t")

    def next_due(self) -> float | None:
        """The Unix time the next PENDING job rings, or None."""
        with self._lock:
            value = self._db.execute(
                "SELECT MIN(due_t) FROM schedule WHERE state = 'PENDING'"
            ).fetchone()[0]
        return None if value is None else float(value)

    def follow(self, task: Task, old: TaskState | None, new: TaskState) -> None:
        """A runner transition listener: a task that set a timer and is taken back before its
        reply was heard (CANCELLED: "never mind", or superseded) cancels its job too."""
        job_id = task.payload.get("job_id") if new is TaskState.CANCELLED else None
        if isinstance(job_id, str) and job_id.startswith(JOB_PREFIX):
            self.cancel(job_id, f"its request was taken back: {task.reason}")

    def close(self) -> None:
        """Close the database. Idempotent."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> Schedule:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- internals ---------------------------------------------------------------------------

    def _select(self, where: str, params: Sequence[Any], order: str = "due_t") -> list[Job]:
        with self._lock:
            rows = self._db.execute(
                f"SELECT {_COLUMNS} FROM schedule WHERE {where} ORDER BY {order}", tuple(params)
            ).fetchall()
        return [_job(r) for r in rows]

    def _move(
        self, job_id: str, sources: Sequence[JobState], target: JobState, reason: str
    ) -> Job | None:
        marks = ", ".join("?" * len(sources))
        with self._lock:
            moved = self._db.execute(
                f"UPDATE schedule SET state = ?, reason = ? WHERE id = ? AND state IN ({marks})",
                (target.value, reason, job_id, *(s.value for s in sources)),
            ).rowcount
            if not moved:
                return None
            row = self._db.execute(
                f"SELECT {_COLUMNS} FROM schedule WHERE id = ?", (job_id,)
            ).fetchone()
        return _job(row)

    def _set(self, job_id: str, state: JobState, reason: str, now: float) -> None:
        self._db.execute(
            "UPDATE schedule SET state = ?, reason = ?, rung_t = ? WHERE id = ?",
            (state.value, reason, now, job_id),
        )


def _values(job: Job) -> tuple[Any, ...]:
    return (
        job.id,
        job.label,
        job.seconds,
        job.session_id,
        job.task_id,
        job.created_t,
        job.due_t,
        job.state.value,
        job.reason,
        job.rung_t,
    )


def _job(row: Sequence[Any]) -> Job:
    return Job(
        str(row[0]),
        str(row[1]),
        float(row[2]),
        str(row[3]),
        str(row[4]),
        float(row[5]),
        float(row[6]),
        JobState(row[7]),
        str(row[8]),
        float(row[9]),
    )


# --- choosing the job a request means ---------------------------------------------------------


def pick_job(jobs: Sequence[Job], label: str = "", seconds: float | None = None) -> Job | None:
    """The job "cancel the (pasta | 5 minute) timer" means: the newest whose label shares a
    word with ``label``, else the newest set for ``seconds``; with neither said, the newest.
    None when something was said and nothing matches it."""
    words = set(re.findall(r"[a-z]+", label.lower())) - {"the", "my", "a", "timer", "reminder"}
    if words:
        named = [j for j in jobs if words & set(re.findall(r"[a-z]+", j.label.lower()))]
        if named:
            return max(named, key=lambda j: j.created_t)
    if seconds is not None:
        timed = [j for j in jobs if abs(j.seconds - seconds) < 0.5]
        return max(timed, key=lambda j: j.created_t) if timed else None
    if words or not jobs:
        return None
    return max(jobs, key=lambda j: j.created_t)


# --- the tools --------------------------------------------------------------------------------

LIST_SCHEMA: Mapping[str, Any] = {"type": "object", "additionalProperties": False}
CANCEL_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "label": {"type": "string", "maxLength": 80, "description": "which timer, by its name"},
        "seconds": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": MAX_TIMER_S,
            "description": "which timer, by the duration in seconds it was set for",
        },
    },
    "additionalProperties": False,
}


def timer_tools(schedule: Schedule) -> tuple[Tool, Tool, Tool]:
    """The ``timer``, ``list_timers`` and ``cancel_timer`` tools over ``schedule``."""

    async def set_timer(args: Mapping[str, Any], evidence: TimelineView) -> ToolResult:
        try:
            job = schedule.add(float(args["seconds"]), label=str(args.get("label", "")))
        except ValueError as exc:
            raise ToolError(str(exc)) from exc
        return ToolResult(
            f"Okay, a {job.name}. It rings in {say_duration(job.seconds)}.",
            {"job_id": job.id, "seconds": job.seconds, "due_t": job.due_t},
        )

    async def list_timers(args: Mapping[str, Any], evidence: TimelineView) -> ToolResult:
        jobs = schedule.pending()
        now = schedule.wall()
        if not jobs:
            return ToolResult("You have no timers set.", {"jobs": []})
        parts = [f"the {j.name} with {say_duration(j.due_t - now)} left" for j in jobs]
        head = "You have one timer:" if len(jobs) == 1 else f"You have {len(jobs)} timers:"
        return ToolResult(
            f"{head} {and_list(parts)}.",
            {"jobs": [{"job_id": j.id, "label": j.label, "due_t": j.due_t} for j in jobs]},
        )

    async def cancel_timer(args: Mapping[str, Any], evidence: TimelineView) -> ToolResult:
        jobs = schedule.pending()
        seconds = args.get("seconds")
        job = pick_job(jobs, str(args.get("label", "")), float(seconds) if seconds else None)
        if job is None:
            what = "no timers set" if not jobs else "no timer like that"
            raise ToolError(f"There is {what} to cancel.")
        cancelled = schedule.cancel(job.id)
        if cancelled is None:
            raise ToolError(f"The {job.name} has just rung; there is nothing left to cancel.")
        rest = [j for j in jobs if j.id != job.id]
        text = f"Okay, I cancelled the {job.name}."
        if rest:
            text += f" Still set: {and_list([j.name for j in rest])}."
        return ToolResult(text, {"job_id": job.id, "remaining": [j.id for j in rest]})

    return (
        Tool(
            name="timer",
            description="Sets a timer or reminder that speaks when it is due.",
            schema=TIMER_SCHEMA,
            run=set_timer,
            timeout_s=2.0,
            cancellable=False,
        ),
        Tool(
            name="list_timers",
            description="Lists the timers and reminders that are set and the time left on each.",
            schema=LIST_SCHEMA,
            run=list_timers,
            timeout_s=2.0,
            idempotent=True,
        ),
        Tool(
            name="cancel_timer",
            description="Cancels a timer or reminder that is set, by its name or duration.",
            schema=CANCEL_SCHEMA,
            run=cancel_timer,
            timeout_s=2.0,
            side_effects=True,
            cancellable=False,
        ),
    )
