"""The crash-safe task journal: every task and transition in SQLite, written before it is acted on.

The runner (:class:`~venus_ros.harness.runner.HarnessRunner`) writes a task's row when it picks
the task up (before any listener hears of it) and every transition before the task's state
changes in memory, before listeners are notified and before a tool starts. So after a crash
the journal is never behind what anyone was told: whatever a listener, a Delegate client or a
tool saw is on disk. (A task submitted in the instant before a crash and not yet picked up by
the runner thread is not there; only its Delegate client had heard of it, and that client sees
its goal die with the server.) What a restart does with what it finds is the runner's
:meth:`~venus_ros.harness.runner.HarnessRunner.recover`.

Storage:

- SQLite in WAL mode: a commit appends to the ``-wal`` file, readers (``venus-ros tasks``)
  never block the writer, and a process killed mid-write leaves the last committed
  transaction intact.
- ``synchronous=NORMAL`` by default. In WAL mode a NORMAL commit is written to the ``-wal`` file
  (the OS page cache) before the call returns, so it survives the failure the journal exists
  for: the harness process dying (``kill -9``, a segfault, the OOM killer). It is not fsynced,
  so a power loss or kernel crash may lose the newest commits (never corrupting the file).
  ``FULL`` fsyncs every commit and survives power loss too, at a price measured on this
  project's VM disk (ext4; 1000 transitions a run, several runs; median / p99 / max): NORMAL
  0.02-0.04 / 0.05-4 / 5-35 ms (the spikes are WAL checkpoints), FULL 0.25-4 / 8 / 12-536 ms.
  Submit to RUNNING (two writes) measured p99 1-5 ms with NORMAL and 1.6-16 ms with FULL,
  against a goal of 20 ms. And after a power loss the whole robot restarts: the conversation
  those last transitions belonged to is gone, and their replies would mostly be too old to
  speak. Choose ``FULL`` (harness_node: ``journal_synchronous``) where losing them matters
  more.
- One process owns a journal: :class:`Journal` takes an exclusive ``flock`` on
  ``<file>.lock`` (released by the kernel when the process dies, even by ``kill -9``), so a
  second harness cannot "recover" the tasks a live one is running. :func:`read_journal` and
  :func:`format_journal` only read and take no lock.
- Thread safety: one connection, every access under a lock; the runner writes from its own
  thread only.
- Schema: a ``schema_version`` table (one row per applied migration) and :data:`MIGRATIONS`,
  applied in order inside one transaction; a journal written by a newer version is refused.
  Tables ``tasks`` (one row per task, its current state and results) and ``transitions``
  (task_id, seq, state, t, wall_t, reason: ``seq`` is the index in the task's history, ``t``
  the session clock of the process that wrote it, ``wall_t`` Unix time, comparable across
  restarts). ``created_t``/``updated_t`` are Unix time. ``handed_off_t`` says when the reply
  left the harness (in a Delegate result, or offered for delivery): a COMPLETED task without
  it is *undelivered*, and a restart offers it again.
- Secrets are never written: an argument whose schema says ``"writeOnly": true``, or whose
  name looks like a secret (:data:`SECRET_NAME`: ``api_key``, ``token``, ``password``...), is
  stored as :data:`REDACTED`, in arguments and in payloads, at any depth; such a task is never
  re-run from the journal (its arguments are gone).
- Private: the files are created readable by their owner only (queries are the user's words).
- Bounded: on open, the oldest tasks that need nothing more (terminal, or handed off) beyond
  ``max_tasks`` are deleted with their transitions.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from venus_ros.core.protocol import clean_text
from venus_ros.harness.tasks import SETTLED, Task, TaskState, Transition
from venus_ros.harness.tools import Tool

#: What a secret argument is stored as.
REDACTED = "[redacted]"
#: Argument and payload keys treated as secrets whatever their schema says.
SECRET_NAME = re.compile(
    r"(?:^|[_\-.])(?:api[_\-]?key|apikey|secret|password|passwd|passphrase|token|"
    r"credentials?|authorization|private[_\-]?key|cookie)$",
    re.IGNORECASE,
)
#: The states a restart must resolve (execution had not ended).
UNSETTLED: frozenset[TaskState] = frozenset(TaskState) - SETTLED
#: The ``synchronous`` settings a journal accepts.
SYNCHRONOUS = ("FULL", "NORMAL", "EXTRA")
#: Tasks kept at most by default (only those that need nothing more are ever deleted).
MAX_TASKS = 10_000

_TASKS_V1 = """
CREATE TABLE tasks (
    id TEXT PRIMARY KEY,
    query TEXT NOT NULL,
    session_id TEXT NOT NULL,
    turn_id INTEGER NOT NULL,
    cutoff_seq INTEGER NOT NULL,
    tool TEXT NOT NULL,
    args_json TEXT NOT NULL,
    state TEXT NOT NULL,
    result_text TEXT NOT NULL,
    payload_json TEXT NOT NULL,
    error TEXT NOT NULL,
    note TEXT NOT NULL,
    created_t REAL NOT NULL,
    updated_t REAL NOT NULL,
    idempotent INTEGER NOT NULL,
    redacted INTEGER NOT NULL,
    handed_off_t REAL,
    handed_off_via TEXT NOT NULL
)"""
_TRANSITIONS_V1 = """
CREATE TABLE transitions (
    task_id TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    state TEXT NOT NULL,
    t REAL NOT NULL,
    wall_t REAL NOT NULL,
    reason TEXT NOT NULL,
    PRIMARY KEY (task_id, seq)
) WITHOUT ROWID"""

#: ``MIGRATIONS[v]`` takes the schema from version ``v`` to ``v + 1`` (statements, in order).
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (_TASKS_V1, _TRANSITIONS_V1, "CREATE INDEX tasks_by_state ON tasks(state)"),
)
#: The schema version this code writes.
SCHEMA_VERSION = len(MIGRATIONS)

_COLUMNS = (
    "id, query, session_id, turn_id, cutoff_seq, tool, args_json, state, result_text, "
    "payload_json, error, note, created_t, updated_t, idempotent, redacted, handed_off_t, "
    "handed_off_via"
)


class JournalError(RuntimeError):
    """The journal cannot be opened, read or written; the message names the file."""


@dataclass(frozen=True)
class JournalTransition:
    """One row of ``transitions``."""

    seq: int
    state: TaskState
    t: float
    wall_t: float
    reason: str


@dataclass(frozen=True)
class JournalRow:
    """One task as the journal holds it (arguments and payload already redacted)."""

    id: str
    query: str
    session_id: str
    turn_id: int
    cutoff_seq: int
    tool: str
    args: dict[str, Any]
    state: TaskState
    result_text: str
    payload: dict[str, Any]
    error: str
    note: str
    created_t: float
    updated_t: float
    idempotent: bool
    redacted: bool
    handed_off_t: float | None
    handed_off_via: str
    transitions: tuple[JournalTransition, ...]

    @property
    def undelivered(self) -> bool:
        """COMPLETED, and its reply never left the harness."""
        return self.state is TaskState.COMPLETED and self.handed_off_t is None

    def to_task(self) -> Task:
        """The task rebuilt from the row, its history from the transitions."""
        history = [Transition(tr.state, tr.t, tr.reason) for tr in self.transitions]
        return Task(
            id=self.id,
            query=self.query,
            session_id=self.session_id,
            turn_id=self.turn_id,
            cutoff_seq=self.cutoff_seq,
            t=history[0].t if history else 0.0,
            tool=self.tool,
            args=dict(self.args),
            state=self.state,
            history=history or [Transition(self.state, 0.0, "recovered")],
            result_text=self.result_text,
            payload=dict(self.payload),
            error=self.error,
            note=self.note,
            progress=1.0 if self.state.settled else 0.0,
        )


def redact(value: Any, schema: Mapping[str, Any] | None = None) -> tuple[Any, bool]:
    """``value`` with secrets replaced by :data:`REDACTED`, and whether any were.

    A mapping key is secret when its property schema says ``"writeOnly": true`` or its name
    matches :data:`SECRET_NAME`; nested objects and arrays are walked with their sub-schemas.
    """
    schema = schema if isinstance(schema, Mapping) else {}
    if isinstance(value, Mapping):
        properties = schema.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        out: dict[str, Any] = {}
        hidden = False
        for key, item in value.items():
            sub = properties.get(key)
            sub = sub if isinstance(sub, Mapping) else {}
            if sub.get("writeOnly") is True or SECRET_NAME.search(str(key)):
                out[str(key)] = REDACTED
                hidden = True
            else:
                out[str(key)], inner = redact(item, sub)
                hidden = hidden or inner
        return out, hidden
    if isinstance(value, (list, tuple)):
        items = schema.get("items")
        items = items if isinstance(items, Mapping) else {}
        pairs = [redact(item, items) for item in value]
        return [p[0] for p in pairs], any(p[1] for p in pairs)
    return value, False


def default_journal_path(namespace: str = "/") -> Path:
    """Where harness_node keeps its journal unless told: one file per ROS namespace.

    ``$XDG_STATE_HOME/venus_ros/harness.sqlite3`` (``~/.local/state`` when unset), with the
    namespace joined by dots before the suffix for any namespace but ``/``
    (``/robot1/voice`` -> ``harness.robot1.voice.sqlite3``), so graphs in different
    namespaces on one machine never share (and never fight over) a journal.
    """
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    parts = [p for p in namespace.split("/") if p]
    name = ".".join(["harness", *parts, "sqlite3"])
    return Path(base).expanduser() / "venus_ros" / name


class Journal:
    """The task journal in one SQLite file (see the module docstring).

    Args:
        path: the database file; its folder is created if missing.
        synchronous: ``NORMAL`` (default: survives a killed process), ``FULL`` (fsync per
            commit: survives power loss too) or ``EXTRA``.
        max_tasks: on open, delete the oldest tasks that need nothing more beyond this many.
        wall: Unix time source for ``created_t``/``updated_t``/``wall_t`` (tests inject one).

    Raises:
        JournalError: naming the file, when it cannot be created or opened, is not a journal,
            was written by a newer version, or is in use by another process.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: str = "NORMAL",
        max_tasks: int = MAX_TASKS,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path).expanduser()
        self.synchronous = str(synchronous).upper()
        if self.synchronous not in SYNCHRONOUS:
            raise ValueError(
                f"journal synchronous must be one of {', '.join(SYNCHRONOUS)}, got {synchronous!r}"
            )
        if max_tasks < 1:
            raise ValueError(f"journal max_tasks must be >= 1, got {max_tasks}")
        #: the Unix time source (``created_t``, ``updated_t``, ``wall_t``)
        self.wall = wall
        self._lock = threading.Lock()
        self._lock_fd: int | None = None
        self._db: sqlite3.Connection | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._lock_fd = _claim(self.path)
            # Queries are the user's words: owner-only (SQLite gives -wal/-shm the same mode).
            os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
            self._db = sqlite3.connect(
                str(self.path), isolation_level=None, check_same_thread=False, timeout=5.0
            )
            mode = self._db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise JournalError(f"the task journal {self.path} cannot use WAL mode ({mode})")
            self._db.execute(f"PRAGMA synchronous={self.synchronous}")
            self._db.execute("PRAGMA foreign_keys=ON")
            self.schema_version = self._migrate()
            self._prune(max_tasks)
        except JournalError:
            self.close()
            raise
        except (OSError, sqlite3.Error) as exc:
            self.close()
            raise JournalError(f"cannot open the task journal {self.path}: {_why(exc)}") from exc

    # --- writes (the runner thread) ----------------------------------------------------------

    def record_task(self, task: Task, tool: Tool | None = None) -> None:
        """Insert a new task with its history so far (normally the QUEUED entry).

        ``tool`` (the one it will run, if known) gives the schema that marks secret arguments
        and the ``idempotent`` declaration.
        """
        args, hidden = redact(task.args, tool.schema if tool is not None else None)
        payload, hidden_payload = redact(task.payload)
        now = self.wall()
        row = (
            task.id,
            clean_text(task.query),
            clean_text(task.session_id),
            int(task.turn_id),
            int(task.cutoff_seq),
            task.tool,
            _dumps(args),
            task.state.value,
            clean_text(task.result_text),
            _dumps(payload),
            clean_text(task.error),
            clean_text(task.note),
            now,
            now,
            int(bool(tool is not None and tool.idempotent)),
            int(hidden or hidden_payload),
            None,
            "",
        )
        marks = ", ".join("?" * len(row))
        with self._write("record a task"):
            db = self._conn()
            db.execute(f"INSERT INTO tasks ({_COLUMNS}) VALUES ({marks})", row)
            db.executemany(
                "INSERT INTO transitions (task_id, seq, state, t, wall_t, reason) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (task.id, seq, entry.state.value, float(entry.t), now, clean_text(entry.reason))
                    for seq, entry in enumerate(task.history)
                ],
            )

    def record_transition(
        self, task: Task, old: TaskState, new: TaskState, t: float, reason: str
    ) -> None:
        """Record that ``task`` moves from ``old`` to ``new`` at session time ``t``, with the
        task's current results (call *before* the task itself changes state).

        ``old == new`` records a resume (a recovered task picked up again). Entering DELIVERING
        or DELIVERED marks the reply handed off; entering COMPLETED clears that mark (a reply
        back from an interrupted delivery is undelivered again).

        Raises:
            JournalError: if the journal does not hold the task in state ``old``.
        """
        payload, hidden = redact(task.payload)
        now = self.wall()
        with self._write("record a transition"):
            db = self._conn()
            updated = db.execute(
                "UPDATE tasks SET state = :new, result_text = :result, payload_json = :payload,"
                " error = :error, note = :note, updated_t = :now,"
                " redacted = MAX(redacted, :hidden),"
                " handed_off_t = CASE WHEN :new IN ('DELIVERING', 'DELIVERED')"
                "   THEN COALESCE(handed_off_t, :now)"
                "   WHEN :new = 'COMPLETED' THEN NULL ELSE handed_off_t END,"
                " handed_off_via = CASE WHEN :new IN ('DELIVERING', 'DELIVERED')"
                "   THEN CASE WHEN handed_off_t IS NULL THEN 'delivery' ELSE handed_off_via END"
                "   WHEN :new = 'COMPLETED' THEN '' ELSE handed_off_via END"
                " WHERE id = :id AND state = :old",
                {
                    "new": new.value,
                    "old": old.value,
                    "id": task.id,
                    "result": clean_text(task.result_text),
                    "payload": _dumps(payload),
                    "error": clean_text(task.error),
                    "note": clean_text(task.note),
                    "now": now,
                    "hidden": int(hidden),
                },
            ).rowcount
            if updated != 1:
                raise JournalError(
                    f"task journal {self.path}: task {task.id} is not {old.value} there"
                )
            db.execute(
                "INSERT INTO transitions (task_id, seq, state, t, wall_t, reason) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (task.id, len(task.history), new.value, float(t), now, clean_text(reason)),
            )

    def mark_handed_off(self, task_id: str, via: str) -> None:
        """Record that the task's reply left the harness (e.g. ``"delegate_result"``)."""
        with self._write("mark a reply handed off"):
            self._conn().execute(
                "UPDATE tasks SET handed_off_t = COALESCE(handed_off_t, ?),"
                " handed_off_via = CASE WHEN handed_off_t IS NULL THEN ? ELSE handed_off_via END"
                " WHERE id = ?",
                (self.wall(), via, task_id),
            )

    # --- reads -------------------------------------------------------------------------------

    def pending(self) -> list[JournalRow]:
        """Tasks whose execution had not ended (QUEUED, RUNNING, CANCELLING), oldest first."""
        marks = ", ".join("?" * len(UNSETTLED))
        return self._select(f"state IN ({marks})", tuple(s.value for s in UNSETTLED))

    def undelivered(self) -> list[JournalRow]:
        """COMPLETED tasks whose reply never left the harness, oldest first."""
        return self._select("state = 'COMPLETED' AND handed_off_t IS NULL", ())

    def rows(self) -> list[JournalRow]:
        """Every task, oldest first."""
        return self._select("1", ())

    def get(self, task_id: str) -> JournalRow | None:
        """The task with this id, or None."""
        found = self._select("id = ?", (task_id,))
        return found[0] if found else None

    def close(self) -> None:
        """Close the database and release the file. Idempotent."""
        with self._lock:
            if self._db is not None:
                try:
                    self._db.close()
                except sqlite3.Error:
                    pass
                self._db = None
            if self._lock_fd is not None:
                os.close(self._lock_fd)  # releases the flock
                self._lock_fd = None

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- internals ---------------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise JournalError(f"the task journal {self.path} is closed")
        return self._db

    def _write(self, what: str) -> _Transaction:
        return _Transaction(self, what)

    def _select(self, where: str, params: Sequence[Any]) -> list[JournalRow]:
        with self._lock:
            try:
                return _load(self._conn(), where, params)
            except sqlite3.Error as exc:
                raise JournalError(f"task journal {self.path}: read failed: {_why(exc)}") from exc

    def _migrate(self) -> int:
        db = self._conn()
        db.execute("BEGIN IMMEDIATE")
        try:
            version = _version(db)
            if version == 0 and _tables(db) - {"schema_version"}:
                raise JournalError(f"{self.path} is an SQLite file but not a venus_ros journal")
            if version > SCHEMA_VERSION:
                raise JournalError(
                    f"the task journal {self.path} has schema version {version}, newer than "
                    f"this venus_ros reads ({SCHEMA_VERSION})"
                )
            db.execute(
                "CREATE TABLE IF NOT EXISTS schema_version "
                "(version INTEGER PRIMARY KEY, applied_t REAL NOT NULL)"
            )
            for step in range(version, SCHEMA_VERSION):
                for statement in MIGRATIONS[step]:
                    db.execute(statement)
                db.execute(
                    "INSERT INTO schema_version (version, applied_t) VALUES (?, ?)",
                    (step + 1, self.wall()),
                )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return SCHEMA_VERSION

    def _prune(self, max_tasks: int) -> None:
        with self._write("prune old tasks"):
            db = self._conn()
            total = db.execute("SELECT COUNT(*) FROM tasks").fetchone()[0]
            if total <= max_tasks:
                return
            db.execute(
                "DELETE FROM tasks WHERE rowid IN (SELECT rowid FROM tasks"
                " WHERE state IN ('DELIVERED', 'FAILED', 'CANCELLED')"
                " OR (state IN ('COMPLETED', 'DELIVERING') AND handed_off_t IS NOT NULL)"
                " ORDER BY rowid LIMIT ?)",
                (total - max_tasks,),
            )


#: What a write may raise besides JournalError: SQLite's errors, and data it cannot store
#: (an integer beyond 64 bits, text it cannot encode).
_WRITE_ERRORS = (sqlite3.Error, UnicodeError, OverflowError, ValueError, TypeError)


class _Transaction:
    """``with journal._write(what):`` one IMMEDIATE transaction under the journal lock."""

    def __init__(self, journal: Journal, what: str) -> None:
        self._journal = journal
        self._what = what

    def __enter__(self) -> None:
        self._journal._lock.acquire()
        try:
            self._journal._conn().execute("BEGIN IMMEDIATE")
        except BaseException as exc:
            self._journal._lock.release()
            if isinstance(exc, _WRITE_ERRORS):
                raise self._error(exc) from exc
            raise

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        db = self._journal._db
        try:
            if db is None:
                return
            if kind is None:
                try:
                    db.execute("COMMIT")
                    return
                except sqlite3.Error as error:
                    _rollback(db)
                    raise self._error(error) from error
            _rollback(db)
            if isinstance(exc, _WRITE_ERRORS):
                raise self._error(exc) from exc
        finally:
            self._journal._lock.release()

    def _error(self, exc: BaseException) -> JournalError:
        return JournalError(f"task journal {self._journal.path}: {self._what} failed: {_why(exc)}")


def _rollback(db: sqlite3.Connection) -> None:
    try:
        if db.in_transaction:
            db.execute("ROLLBACK")
    except sqlite3.Error:
        pass


def _claim(path: Path) -> int:
    """Take the exclusive lock beside the journal; the open descriptor holds it."""
    lock_path = path.with_name(path.name + ".lock")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise JournalError(
            f"the task journal {path} is in use by another process (pid {holder}); "
            f"give each harness its own journal_path"
        ) from None
    except OSError:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def _version(db: sqlite3.Connection) -> int:
    if "schema_version" not in _tables(db):
        return 0
    value = db.execute("SELECT MAX(version) FROM schema_version").fetchone()[0]
    return int(value or 0)


def _tables(db: sqlite3.Connection) -> set[str]:
    return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _load(db: sqlite3.Connection, where: str, params: Sequence[Any]) -> list[JournalRow]:
    rows = db.execute(
        f"SELECT {_COLUMNS} FROM tasks WHERE {where} ORDER BY rowid", tuple(params)
    ).fetchall()
    if not rows:
        return []
    ids = [r[0] for r in rows]
    history: dict[str, list[JournalTransition]] = {i: [] for i in ids}
    for start in range(0, len(ids), 500):  # stay below SQLite's bound-parameter limit
        chunk = ids[start : start + 500]
        marks = ", ".join("?" * len(chunk))
        for task_id, seq, state, t, wall_t, reason in db.execute(
            "SELECT task_id, seq, state, t, wall_t, reason FROM transitions"
            f" WHERE task_id IN ({marks}) ORDER BY task_id, seq",
            chunk,
        ):
            history.setdefault(task_id, []).append(
                JournalTransition(
                    _int(seq), _state(_text(state)), _float(t), _float(wall_t), _text(reason)
                )
            )
    return [_row(r, history.get(r[0], [])) for r in rows]


def _row(r: Sequence[Any], transitions: Iterable[JournalTransition]) -> JournalRow:
    """A row as read, whatever another writer (or a damaged file) put in its columns: text
    columns become text, numbers numbers, so a reader never fails on a row's types."""
    return JournalRow(
        id=_text(r[0]),
        query=_text(r[1]),
        session_id=_text(r[2]),
        turn_id=_int(r[3]),
        cutoff_seq=_int(r[4]),
        tool=_text(r[5]),
        args=_loads(_text(r[6])),
        state=_state(_text(r[7])),
        result_text=_text(r[8]),
        payload=_loads(_text(r[9])),
        error=_text(r[10]),
        note=_text(r[11]),
        created_t=_float(r[12]),
        updated_t=_float(r[13]),
        idempotent=bool(_int(r[14])),
        redacted=bool(_int(r[15])),
        handed_off_t=None if r[16] is None else _float(r[16]),
        handed_off_via=_text(r[17]),
        transitions=tuple(transitions),
    )


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return clean_text(value.decode("utf-8", errors="replace"))
    return clean_text(str(value))


def _float(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return 0.0
    return number if number == number else 0.0  # NaN reads as 0


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return 0


def _state(value: str) -> TaskState:
    try:
        return TaskState(value)
    except ValueError:
        raise sqlite3.DataError(f"unknown task state {value!r}") from None


def _dumps(value: Any) -> str:
    try:
        return clean_text(json.dumps(value, ensure_ascii=False, default=str))
    except RecursionError:
        return json.dumps({"error": "too deeply nested to store"})


def _loads(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _why(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


# --- reading a journal from outside (the CLI) ---------------------------------------------------


def read_journal(path: str | os.PathLike[str]) -> list[JournalRow]:
    """Every task in the journal at ``path``, oldest first, without locking or writing it.

    Safe while a harness is writing it (WAL readers see the last committed state).

    Raises:
        JournalError: naming the file, if it does not exist, is not a journal, or is newer.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise JournalError(f"no task journal at {path}")
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise JournalError(f"cannot read the task journal {path}: {_why(exc)}") from exc
    try:
        version = _version(db)
        if version == 0:
            raise JournalError(f"{path} is not a venus_ros task journal")
        if version > SCHEMA_VERSION:
            raise JournalError(
                f"the task journal {path} has schema version {version}, newer than this "
                f"venus_ros reads ({SCHEMA_VERSION})"
            )
        return _load(db, "1", ())
    except sqlite3.Error as exc:
        raise JournalError(f"cannot read the task journal {path}: {_why(exc)}") from exc
    finally:
        db.close()


#: The longest query shown by :func:`format_journal` (longer ones end with "…").
QUERY_CHARS = 60


def format_journal(path: str | os.PathLike[str], verbose: bool = False) -> str:
    """The journal as text for ``venus-ros tasks [--db FILE] [--verbose]``.

    The first line names the file, its schema version and the task count; then one line per
    task, oldest first::

        <id, 8 chars>  <STATE>  <tool>  <created, local time>  <last change - created>  "<query>"

    followed by ``  error: ...``, ``  note: ...`` and ``  [reply not handed off]`` (an
    undelivered reply) when they apply. With ``verbose``, each task is followed by its
    transitions, one a line: ``    <seq>  +<seconds since created>  <STATE>  <reason>``.

    Raises:
        JournalError: naming the file (see :func:`read_journal`).
    """
    path = Path(path).expanduser()
    rows = read_journal(path)
    count = f"{len(rows)} task{'s' if len(rows) != 1 else ''}" if rows else "no tasks"
    lines = [f"journal {path} (schema {SCHEMA_VERSION}): {count}"]
    for row in rows:
        created = _local_time(row.created_t)
        took = _seconds(row.updated_t - row.created_t)
        query = " ".join(row.query.split())
        if len(query) > QUERY_CHARS:
            query = query[: QUERY_CHARS - 1] + "…"
        line = (
            f"{row.id[:8]:<8}  {row.state.value:<10}  {row.tool or '-':<14}  {created}  "
            f"{took:>9}  {json.dumps(query, ensure_ascii=False)}"
        )
        if row.error:
            line += f"  error: {_one_line(row.error)}"
        if row.note:
            line += f"  note: {_one_line(row.note)}"
        if row.undelivered:
            line += "  [reply not handed off]"
        lines.append(line)
        if verbose:
            for tr in row.transitions:
                offset = "+" + _seconds(tr.wall_t - row.created_t)
                lines.append(
                    f"    {tr.seq:>2}  {offset:>9}  {tr.state.value:<10}  {_one_line(tr.reason)}"
                )
    return "\n".join(lines)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _local_time(t: float) -> str:
    """A Unix time as local ``YYYY-mm-dd HH:MM:SS``; ``(bad time <t>)`` beyond the calendar."""
    try:
        return datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S")
    except (OverflowError, OSError, ValueError):
        return f"(bad time {t:.6g})"


def _seconds(value: float) -> str:
    """A duration as ``1.234s`` (never negative); huge or invalid ones in ``g`` form."""
    value = max(0.0, value)
    return f"{value:.3f}s" if value < 1e9 else f"{value:.3g}s"
