"""What an operator needs to see of a live session, folded from the timeline and task updates.

:class:`SessionMonitor` is fed the session timeline record by record (as the monitor node receives
them on the ``timeline`` topic) and the harness's task status updates, and keeps a small summary:
who holds the floor, the last words of each side, how much of the assistant's latest turn the
user actually heard, the background tasks, and the real-time health of the foreground loop. It
renders that as a compact text panel (for an RViz text marker) and as diagnostic statuses.

Records are applied in the order they arrive (the timeline topic has several publishers, each
with its own ``seq``). Unknown kinds are ignored; a record whose payload does not have the shape
:mod:`venus_ros.core.duplex` writes is counted as malformed and otherwise ignored, so a faulty
publisher can never stop the monitor. All methods are thread-safe.

Tasks: ``on_task`` updates and ``task_state`` records that carry a ``tool`` (the harness's) are
the tasks shown; ``task_state`` records without one (the frontend's bookkeeping of its delegation
requests, under its own ids) are only counted per state, and a FAILED one raises a warning.
"""

from __future__ import annotations

import enum
import math
import threading
from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Panel size limits: an RViz text marker stays readable at this size.
PANEL_MAX_LINES = 8
PANEL_MAX_CHARS = 60
#: What a truncated panel line ends (or, for "last words", starts) with. ASCII on purpose: RViz
#: text markers draw only the glyphs of their font.
ELLIPSIS = "..."
#: Units over which compute percentiles are taken.
COMPUTE_WINDOW_UNITS = 60
#: "Recent" for diagnostics: events in the last this-many units raise the level.
RECENT_UNITS = 10
#: Real-time debt above this is an error (s).
DEBT_ERROR_S = 1.0
#: Tasks in these states hold the floor in "delegating".
DELEGATING_TASK_STATES = frozenset({"QUEUED", "RUNNING"})
#: Tasks whose execution has not ended: the panel's task lines. (The harness leaves finished
#: tasks at COMPLETED; delivery is the frontend's business.)
ACTIVE_TASK_STATES = frozenset({"QUEUED", "RUNNING", "CANCELLING"})
#: Tasks remembered individually (the counts per state still cover every task).
MAX_TASKS = 64
#: Panel lines given to tasks.
PANEL_TASK_LINES = 2

NO_TRANSCRIPT = "(no transcript yet)"


class Level(str, enum.Enum):
    """Severity of a diagnostic entry (ordered: OK < WARN < ERROR)."""

    OK = "OK"
    WARN = "WARN"
    ERROR = "ERROR"

    @property
    def rank(self) -> int:
        """0 for OK, 1 for WARN, 2 for ERROR."""
        return _RANKS[self]


_RANKS = {Level.OK: 0, Level.WARN: 1, Level.ERROR: 2}


class FloorState(str, enum.Enum):
    """What the panel shows as the session's state."""

    LISTENING = "listening"
    SPEAKING = "speaking"
    DELEGATING = "delegating"


@dataclass(frozen=True)
class TaskView:
    """The newest known status of one background task."""

    task_id: str
    tool: str
    state: str
    progress: float
    message: str = ""


#: One diagnostic entry: (name, level, message, key/values).
Diagnostic = tuple[str, Level, str, dict[str, str]]


class _Malformed(ValueError):
    """A payload lacks a field or has one of the wrong type."""


class SessionMonitor:
    """Folds timeline records and task updates into a panel and diagnostics.

    Feed it with :meth:`on_event` (one timeline record) and :meth:`on_task` (one task status
    update); read it with :meth:`panel_text`, :meth:`diagnostics` and the properties. The unit
    count (``unit_stats`` records seen) is the monitor's notion of time for "recent".
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.events = 0
        self.last_seq = 0
        self.malformed = 0
        self.units = 0
        self.missed = 0
        self.debt_s = 0.0
        self.peak_debt_s = 0.0
        self.dropped_units = 0
        self.protocol_errors = 0
        self.frontend_errors = 0
        self.input_errors = 0
        self.speaking = False
        self.delegate_open = False
        self.turn = 0
        self.last_unit: int | None = None
        self._compute: deque[float] = deque(maxlen=COMPUTE_WINDOW_UNITS)
        self._recent_missed: deque[bool] = deque(maxlen=RECENT_UNITS)
        self._user_words = ""
        # The assistant's latest turn, per unit: visible text and characters heard.
        self._turn_text: dict[int, str] = {}
        self._turn_heard: dict[int, int] = {}
        self._turn_flushed = False
        self._tasks: dict[str, TaskView] = {}
        self._retired: Counter[str] = Counter()
        self._requests: Counter[str] = Counter()
        # Unit count at the newest event of each kind of trouble (absent: never).
        self._last_trouble: dict[str, int] = {}

    # ------------------------------------------------------------------ input
    def on_event(self, seq: int, t: float, kind: str, payload: Mapping[str, Any]) -> bool:
        """Apply one timeline record.

        Args:
            seq: the record's sequence number.
            t: its session time (s).
            kind: its :class:`~venus_ros.core.timeline.Kind` value; unknown kinds are ignored.
            payload: its decoded payload.

        Returns:
            False if the payload was malformed (counted, otherwise ignored), else True.
        """
        handler = _HANDLERS.get(kind)
        with self._lock:
            self.events += 1
            if isinstance(seq, int) and not isinstance(seq, bool):
                self.last_seq = max(self.last_seq, seq)
            if handler is None:
                return True
            if not isinstance(payload, Mapping):
                self._count_malformed()
                return False
            try:
                handler(self, payload)
            except (_Malformed, KeyError, TypeError, ValueError, AttributeError):
                self._count_malformed()
                return False
            return True

    def on_task(
        self, task_id: str, tool: str, state: str, progress: float, message: str = ""
    ) -> bool:
        """Apply one task status update (the ``task_status`` topic).

        Returns:
            False if the update was malformed (counted, otherwise ignored), else True.
        """
        with self._lock:
            try:
                self._set_task(
                    {
                        "task_id": task_id,
                        "tool": tool,
                        "state": state,
                        "progress": progress,
                        "message": message,
                    }
                )
            except _Malformed:
                self._count_malformed()
                return False
            return True

    def on_malformed(self) -> None:
        """Count a record that could not even be decoded (e.g. a payload that is not JSON)."""
        with self._lock:
            self._count_malformed()

    def _count_malformed(self) -> None:
        self.malformed += 1
        self._last_trouble["malformed"] = self.units

    # ------------------------------------------------------------------ handlers (lock held)
    def _on_user_audio(self, p: Mapping[str, Any]) -> None:
        dropped = _int(p, "dropped_before")
        if dropped < 0:
            raise _Malformed("dropped_before")
        if dropped:
            self.dropped_units += dropped
            self._last_trouble["dropped"] = self.units

    def _on_user_text(self, p: Mapping[str, Any]) -> None:
        text = _str(p, "text").strip()
        if text:
            self._user_words = " ".join(text.split())

    def _on_decision(self, p: Mapping[str, Any]) -> None:
        decision = _str(p, "decision")
        if decision not in ("speak", "listen"):
            raise _Malformed("decision")
        end_of_turn, unit = _bool(p, "end_of_turn"), _int(p, "unit")
        turn = None if p.get("turn") is None else _int(p, "turn")
        if turn is not None:
            self._start_turn(turn)
        self.last_unit = unit
        self.speaking = decision == "speak" and not end_of_turn
        if end_of_turn:
            self.delegate_open = False

    def _on_assistant_text(self, p: Mapping[str, Any]) -> None:
        text, unit, turn = _str(p, "text"), _int(p, "unit"), _int(p, "turn")
        if turn < self.turn:
            return
        self._start_turn(turn)
        self._turn_text[unit] = self._turn_text.get(unit, "") + text

    def _on_playback_ack(self, p: Mapping[str, Any]) -> None:
        unit, turn, heard = _int(p, "unit"), _int(p, "turn"), _int(p, "heard_chars")
        if heard < 0:
            raise _Malformed("heard_chars")
        if turn == self.turn and unit in self._turn_text:
            self._turn_heard[unit] = max(self._turn_heard.get(unit, 0), heard)

    def _on_flush(self, p: Mapping[str, Any]) -> None:
        if _int(p, "turn") == self.turn:
            self._turn_flushed = True

    def _on_delegate_open(self, p: Mapping[str, Any]) -> None:
        _int(p, "turn")
        self.delegate_open = True

    def _on_delegate_close(self, p: Mapping[str, Any]) -> None:
        _int(p, "turn")
        self.delegate_open = False

    def _on_task_state(self, p: Mapping[str, Any]) -> None:
        if "tool" in p:  # the harness's record of its task (as on the task_status topic)
            self._set_task(p)
            return
        # The frontend's record of its own delegation request, under its own id: not a task of
        # the harness, but its outcome (e.g. FAILED: harness unavailable) is worth counting.
        _str(p, "task_id")
        state = _str(p, "state").upper()
        if not state:
            raise _Malformed("state")
        self._requests[state] += 1
        if state == "FAILED":
            self._last_trouble["delegation"] = self.units

    def _on_protocol_error(self, p: Mapping[str, Any]) -> None:
        _str(p, "code")
        self.protocol_errors += 1
        self._last_trouble["protocol"] = self.units

    def _on_frontend_error(self, p: Mapping[str, Any]) -> None:
        _str(p, "error")
        self.frontend_errors += 1
        self._last_trouble["frontend"] = self.units

    def _on_input_error(self, p: Mapping[str, Any]) -> None:
        _str(p, "field")
        self.input_errors += 1
        self._last_trouble["input"] = self.units

    def _on_unit_stats(self, p: Mapping[str, Any]) -> None:
        compute, debt, missed = _float(p, "compute_s"), _float(p, "debt_s"), _bool(p, "missed")
        if compute < 0 or debt < 0:
            raise _Malformed("compute_s/debt_s")
        self.last_unit = _int(p, "unit")
        self.units += 1
        self.missed += int(missed)
        self.debt_s = debt
        self.peak_debt_s = max(self.peak_debt_s, debt)
        self._compute.append(compute)
        self._recent_missed.append(missed)

    def _start_turn(self, turn: int) -> None:
        if turn > self.turn:
            self.turn = turn
            self._turn_text.clear()
            self._turn_heard.clear()
            self._turn_flushed = False

    def _set_task(self, p: Mapping[str, Any]) -> None:
        task_id = _str(p, "task_id")
        if not task_id:
            raise _Malformed("task_id")
        old = self._tasks.get(task_id)
        progress = _float(p, "progress") if "progress" in p else (old.progress if old else 0.0)
        message_key = "message" if "message" in p else "reason"
        message = _str(p, message_key) if p.get(message_key) is not None else ""
        tool = _str(p, "tool") if "tool" in p else ""
        state = _str(p, "state").upper()
        if not state:
            raise _Malformed("state")
        self._tasks.pop(task_id, None)
        self._tasks[task_id] = TaskView(
            task_id, tool or (old.tool if old else ""), state, min(max(progress, 0.0), 1.0), message
        )
        ended = [tid for tid, task in self._tasks.items() if task.state not in ACTIVE_TASK_STATES]
        for tid in ended[: max(len(self._tasks) - MAX_TASKS, 0)]:
            self._retired[self._tasks.pop(tid).state] += 1
        while len(self._tasks) > 4 * MAX_TASKS:  # a publisher that never ends its tasks
            oldest = next(iter(self._tasks))
            self._retired[self._tasks.pop(oldest).state] += 1

    # ------------------------------------------------------------------ views
    @property
    def floor(self) -> FloorState:
        """Delegating while a delegate span is open or a task is queued or running; else
        speaking or listening, as the newest decision said."""
        with self._lock:
            return self._floor()

    def _floor(self) -> FloorState:
        tasks = self._tasks.values()
        if self.delegate_open or any(t.state in DELEGATING_TASK_STATES for t in tasks):
            return FloorState.DELEGATING
        return FloorState.SPEAKING if self.speaking else FloorState.LISTENING

    @property
    def user_words(self) -> str:
        """The newest user text seen, or ``(no transcript yet)``."""
        with self._lock:
            return self._user_words or NO_TRANSCRIPT

    @property
    def assistant_words(self) -> str:
        """The visible text of the assistant's latest turn so far ("" before the first turn)."""
        with self._lock:
            return self._assistant_words()

    def _assistant_words(self) -> str:
        return " ".join("".join(self._turn_text[u] for u in sorted(self._turn_text)).split())

    @property
    def heard_words(self) -> str:
        """What the user heard of the latest turn: each unit's text cut at its heard characters."""
        with self._lock:
            return self._heard_words()

    def _heard_words(self) -> str:
        parts = (self._turn_text[u][: self._turn_heard.get(u, 0)] for u in sorted(self._turn_text))
        return " ".join("".join(parts).split())

    @property
    def heard_fraction(self) -> float:
        """Fraction (0..1) of the latest turn's characters (whitespace aside) the user heard."""
        with self._lock:
            return self._heard_fraction()

    def _heard_fraction(self) -> float:
        total = sum(_visible(text) for text in self._turn_text.values())
        if not total:
            return 0.0
        heard = sum(_visible(t[: self._turn_heard.get(u, 0)]) for u, t in self._turn_text.items())
        return heard / total

    @property
    def tasks(self) -> list[TaskView]:
        """Tasks whose execution has not ended (queued, running, cancelling), oldest first."""
        with self._lock:
            return self._active_tasks()

    def _active_tasks(self) -> list[TaskView]:
        return [t for t in self._tasks.values() if t.state in ACTIVE_TASK_STATES]

    @property
    def task_counts(self) -> dict[str, int]:
        """How many tasks are (or ended) in each state, by their newest state."""
        with self._lock:
            return self._task_counts()

    def _task_counts(self) -> dict[str, int]:
        counts = Counter(self._retired)
        counts.update(t.state for t in self._tasks.values())
        return dict(sorted(counts.items()))

    def compute_percentiles(self) -> tuple[float, float]:
        """Compute time per unit (s), p50 and p99 over the last 60 units ((0, 0) before any)."""
        with self._lock:
            return _percentile(self._compute, 50), _percentile(self._compute, 99)

    def panel_text(self) -> str:
        """The operator panel: at most 8 lines of at most 60 characters."""
        with self._lock:
            floor = self._floor()
            state = floor.value
            if floor is FloorState.DELEGATING and self.speaking:
                state += " (speaking)"
            unit = "-" if self.last_unit is None else str(self.last_unit)
            lines = [
                _fit(f"state: {state} | turn {self.turn} | unit {unit}"),
                _fit_tail("user: ", self._user_words or NO_TRANSCRIPT),
                _fit_tail("venus: ", self._assistant_words() or "-"),
            ]
            if self._turn_text:
                cut = " (cut off)" if self._turn_flushed else ""
                percent = round(100 * self._heard_fraction())
                lines.append(_fit_tail(f"heard {percent}%{cut}: ", self._heard_words() or "-"))
            tasks = self._active_tasks()
            shown = tasks[-PANEL_TASK_LINES:]
            for task in shown:
                tool = f" {task.tool}" if task.tool else ""
                progress = f" {round(100 * task.progress)}%" if task.progress else ""
                lines.append(_fit(f"task {task.task_id}{tool} {task.state}{progress}"))
            if len(tasks) > len(shown):
                lines[-1] = _fit(f"{lines[-1]} (+{len(tasks) - len(shown)} more)")
            p50, p99 = _percentile(self._compute, 50), _percentile(self._compute, 99)
            lines.append(
                _fit(
                    f"units {self.units} | missed {self.missed} | debt {self.debt_s:.2f}s "
                    f"(peak {self.peak_debt_s:.2f})"
                )
            )
            errors = self.protocol_errors + self.frontend_errors + self.input_errors
            lines.append(
                _fit(
                    f"compute p50 {p50 * 1000:.0f}ms p99 {p99 * 1000:.0f}ms | "
                    f"drop {self.dropped_units} | err {errors}"
                )
            )
            return "\n".join(lines[:PANEL_MAX_LINES])

    def diagnostics(self) -> list[Diagnostic]:
        """Diagnostic entries ``(name, level, message, values)``.

        ``realtime`` is ERROR while the debt exceeds 1 s and WARN when a unit missed its deadline
        or units were dropped in the last 10 units; ``errors`` is ERROR after a frontend error
        and WARN after a protocol or input error (or a malformed record) in the last 10 units;
        ``tasks`` is WARN when a delegation request failed in the last 10 units; ``session`` is
        informational.
        """
        with self._lock:
            p50, p99 = _percentile(self._compute, 50), _percentile(self._compute, 99)
            return [
                self._session_status(),
                self._realtime_status(p50, p99),
                self._errors_status(),
                self._tasks_status(),
            ]

    def level(self) -> Level:
        """The worst level of :meth:`diagnostics`."""
        return max((entry[1] for entry in self.diagnostics()), key=lambda lv: lv.rank)

    def _recent(self, trouble: str) -> bool:
        at = self._last_trouble.get(trouble)
        return at is not None and self.units - at <= RECENT_UNITS

    def _session_status(self) -> Diagnostic:
        floor = self._floor()
        message = f"{floor.value}, turn {self.turn}" if self.units else "waiting for the first unit"
        return (
            "session",
            Level.OK,
            message,
            {
                "floor": floor.value,
                "turn": str(self.turn),
                "units": str(self.units),
                "last_seq": str(self.last_seq),
                "events": str(self.events),
                "user_words": self._user_words or NO_TRANSCRIPT,
                "assistant_words": self._assistant_words(),
                "heard_fraction": f"{self._heard_fraction():.2f}",
            },
        )

    def _realtime_status(self, p50: float, p99: float) -> Diagnostic:
        recent_missed = sum(self._recent_missed)
        if self.debt_s > DEBT_ERROR_S:
            level, message = Level.ERROR, f"{self.debt_s:.2f} s behind real time"
        elif recent_missed:
            level, message = Level.WARN, f"{recent_missed} deadline(s) missed in the last units"
        elif self._recent("dropped"):
            level, message = Level.WARN, "input units dropped recently"
        else:
            level, message = Level.OK, "keeping up"
        return (
            "realtime",
            level,
            message,
            {
                "units": str(self.units),
                "missed_deadlines": str(self.missed),
                "missed_recent": str(recent_missed),
                "debt_s": f"{self.debt_s:.3f}",
                "peak_debt_s": f"{self.peak_debt_s:.3f}",
                "compute_p50_s": f"{p50:.4f}",
                "compute_p99_s": f"{p99:.4f}",
                "dropped_units": str(self.dropped_units),
            },
        )

    def _errors_status(self) -> Diagnostic:
        if self._recent("frontend"):
            level, message = Level.ERROR, "frontend error in the last units"
        elif self._recent("protocol") or self._recent("input"):
            level, message = Level.WARN, "protocol or input errors in the last units"
        elif self._recent("malformed"):
            level, message = Level.WARN, "malformed timeline records in the last units"
        else:
            level, message = Level.OK, "no recent errors"
        return (
            "errors",
            level,
            message,
            {
                "protocol_errors": str(self.protocol_errors),
                "frontend_errors": str(self.frontend_errors),
                "input_errors": str(self.input_errors),
                "malformed_records": str(self.malformed),
            },
        )

    def _tasks_status(self) -> Diagnostic:
        active = self._active_tasks()
        values = {f"state.{state}": str(n) for state, n in self._task_counts().items()}
        values.update({f"requests.{state}": str(n) for state, n in sorted(self._requests.items())})
        for task in active:
            values[f"task.{task.task_id}"] = f"{task.tool} {task.state} {task.progress:.2f}"
        if self._recent("delegation"):
            return ("tasks", Level.WARN, "a delegation request failed recently", values)
        return ("tasks", Level.OK, f"{len(active)} active", values)


_HANDLERS = {
    "user_audio": SessionMonitor._on_user_audio,
    "user_text": SessionMonitor._on_user_text,
    "decision": SessionMonitor._on_decision,
    "assistant_text": SessionMonitor._on_assistant_text,
    "playback_ack": SessionMonitor._on_playback_ack,
    "flush": SessionMonitor._on_flush,
    "delegate_open": SessionMonitor._on_delegate_open,
    "delegate_close": SessionMonitor._on_delegate_close,
    "task_state": SessionMonitor._on_task_state,
    "protocol_error": SessionMonitor._on_protocol_error,
    "frontend_error": SessionMonitor._on_frontend_error,
    "input_error": SessionMonitor._on_input_error,
    "unit_stats": SessionMonitor._on_unit_stats,
}


def _str(p: Mapping[str, Any], key: str) -> str:
    value = p[key]
    if not isinstance(value, str):
        raise _Malformed(key)
    return value


def _int(p: Mapping[str, Any], key: str) -> int:
    value = p[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Malformed(key)
    return value


def _float(p: Mapping[str, Any], key: str) -> float:
    value = p[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _Malformed(key)
    return float(value)


def _bool(p: Mapping[str, Any], key: str) -> bool:
    value = p[key]
    if not isinstance(value, bool):
        raise _Malformed(key)
    return value


def _visible(text: str) -> int:
    """Characters of ``text`` that are not whitespace."""
    return len(text) - sum(c.isspace() for c in text)


def _percentile(values: deque[float] | list[float], q: float) -> float:
    """Nearest-rank percentile; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(math.ceil(q / 100 * len(ordered)), 1)
    return ordered[rank - 1]


def _fit(line: str) -> str:
    """One panel line: single-spaced, cut at the limit with a trailing ellipsis."""
    line = " ".join(line.split())
    if len(line) <= PANEL_MAX_CHARS:
        return line
    return line[: PANEL_MAX_CHARS - len(ELLIPSIS)].rstrip() + ELLIPSIS


def _fit_tail(label: str, text: str) -> str:
    """``label`` and the newest words of ``text``: the start is cut with a leading ellipsis."""
    text = " ".join(text.split())
    room = PANEL_MAX_CHARS - len(label)
    if len(text) <= room:
        return label + text
    return label + ELLIPSIS + text[len(text) - room + len(ELLIPSIS) :].lstrip()
