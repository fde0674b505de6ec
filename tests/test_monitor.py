"""Tests for venus_ros.core.monitor: the session panel and diagnostics, fed real timelines."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile
import yaml

from venus_ros.core.clock import FakeClock
from venus_ros.core.monitor import (
    ELLIPSIS,
    NO_TRANSCRIPT,
    PANEL_MAX_CHARS,
    PANEL_MAX_LINES,
    FloorState,
    Level,
    SessionMonitor,
)
from venus_ros.core.session import SessionResult, run_offline
from venus_ros.core.timeline import Kind, Record, Timeline
from venus_ros.frontends.scripted import Script, ScriptedFrontend, load_script

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "venus_ros/samples/hello"
RATE = 16000


def feed(monitor: SessionMonitor, record: Record) -> bool:
    return monitor.on_event(record.seq, record.t, record.kind.value, record.payload)


def replay_sample(on_delegate=None) -> SessionResult:
    audio, rate = soundfile.read(str(SAMPLE / "input.wav"), dtype="float32")
    clock = FakeClock()
    frontend = ScriptedFrontend(load_script(SAMPLE / "script.yaml"), clock=clock)
    return run_offline(audio, rate, frontend, clock=clock, on_delegate=on_delegate)


def run_script(seconds: float, **script: object) -> SessionResult:
    """A session of ``seconds`` of silence with a scripted assistant."""
    clock = FakeClock()
    frontend = ScriptedFrontend(Script.model_validate(script), clock=clock)
    audio = np.zeros(round(seconds * RATE), dtype=np.float32)
    return run_offline(audio, RATE, frontend, clock=clock)


def assert_panel_shape(text: str) -> None:
    lines = text.split("\n")
    assert 1 <= len(lines) <= PANEL_MAX_LINES
    assert all(len(line) <= PANEL_MAX_CHARS for line in lines), lines


def levels(monitor: SessionMonitor) -> dict[str, Level]:
    return {name: level for name, level, _, _ in monitor.diagnostics()}


def values(monitor: SessionMonitor, name: str) -> dict[str, str]:
    return {entry[0]: entry[3] for entry in monitor.diagnostics()}[name]


# ---------------------------------------------------------------------------- the sample session


def test_sample_session_states_follow_the_floor_record_by_record() -> None:
    session = replay_sample()
    monitor = SessionMonitor()
    seen: list[tuple[str, FloorState]] = []
    for record in session.timeline.snapshot():
        assert feed(monitor, record)
        seen.append((record.kind.value, monitor.floor))
        assert_panel_shape(monitor.panel_text())
    states = [floor for _, floor in seen]
    # Turn 1 speaks, is delegating while its <delegate> span is open and finishes; turn 2 starts
    # and yields to the user's barge-in.
    compact = [s for i, s in enumerate(states) if i == 0 or s is not states[i - 1]]
    assert compact == [
        FloorState.LISTENING,
        FloorState.SPEAKING,
        FloorState.DELEGATING,
        FloorState.SPEAKING,
        FloorState.LISTENING,
        FloorState.SPEAKING,
        FloorState.LISTENING,
    ]
    first_delegating = states.index(FloorState.DELEGATING)
    assert seen[first_delegating][0] == "delegate_open"
    assert seen[states.index(FloorState.SPEAKING, first_delegating)][0] == "delegate_close"


def test_sample_session_panel_and_counters_match_the_session() -> None:
    session = replay_sample()
    loop = session.loop
    monitor = SessionMonitor()
    for record in session.timeline.snapshot():
        feed(monitor, record)

    assert monitor.units == len(session.results) == 16
    assert monitor.missed == loop.missed_units == 0
    assert monitor.debt_s == loop.debt_s == 0.0
    assert monitor.turn == loop.turn_id == 2
    assert monitor.malformed == 0
    # The latest turn (the barged-in one): its words, and what the user heard of them.
    turn_text = "".join(
        r.payload["text"]
        for r in session.timeline.snapshot().of_kind(Kind.ASSISTANT_TEXT)
        if r.payload["turn"] == loop.turn_id
    )
    assert monitor.assistant_words == " ".join(turn_text.split()) == "While we wait,"
    assert monitor.heard_words == loop.heard_text(loop.turn_id)
    assert monitor.heard_fraction == pytest.approx(1.0)
    assert monitor.user_words == NO_TRANSCRIPT

    panel = monitor.panel_text()
    assert_panel_shape(panel)
    lines = panel.split("\n")
    assert lines[0].startswith("state: listening | turn 2 | unit 15")
    assert "user: (no transcript yet)" in lines
    assert "venus: While we wait," in lines
    assert "heard 100% (cut off): While we wait," in lines
    assert "units 16 | missed 0 | debt 0.00s (peak 0.00)" in lines
    assert levels(monitor) == {
        "session": Level.OK,
        "realtime": Level.OK,
        "errors": Level.OK,
        "tasks": Level.OK,
    }
    assert monitor.level() is Level.OK
    realtime = values(monitor, "realtime")
    assert realtime["units"] == "16" and realtime["missed_deadlines"] == "0"
    assert realtime["dropped_units"] == "0"


def test_heard_fraction_follows_playback_acks_of_the_latest_turn() -> None:
    session = replay_sample()
    monitor = SessionMonitor()
    fractions = []
    for record in session.timeline.snapshot():
        feed(monitor, record)
        if record.kind is Kind.ASSISTANT_TEXT or record.kind is Kind.PLAYBACK_ACK:
            fractions.append((record.kind, monitor.heard_fraction))
        if record.kind is Kind.PLAYBACK_ACK and record.payload["turn"] == 1:
            # What was heard so far is a prefix of all the user finally heard of the turn.
            assert session.loop.heard_text(1).startswith(monitor.heard_words)
    # New text lowers the heard fraction until its audio is acknowledged.
    assert any(f < 1.0 for kind, f in fractions if kind is Kind.ASSISTANT_TEXT)
    assert all(f == pytest.approx(1.0) for kind, f in fractions if kind is Kind.PLAYBACK_ACK)


# ---------------------------------------------------------------------------- real-time health


def test_missed_deadlines_warn_and_debt_over_a_second_is_an_error() -> None:
    # Unit 3 takes 2.6 s: 1.6 s of debt, paid back at 0.9 s per unit (0.1 s compute each).
    session = run_script(
        18.0, compute_ms=100, slow_units={3: 2600}, replies=[{"at_unit": 100, "text": "hi"}]
    )
    monitor = SessionMonitor()
    history = []
    for record in session.timeline.snapshot():
        feed(monitor, record)
        if record.kind is Kind.UNIT_STATS:
            history.append((monitor.units, monitor.debt_s, levels(monitor)["realtime"]))
    assert monitor.units == len(session.results)
    assert monitor.missed == session.loop.missed_units >= 2
    assert monitor.peak_debt_s == pytest.approx(1.6)
    by_unit = {units: (debt, level) for units, debt, level in history}
    assert by_unit[3] == (0.0, Level.OK)
    assert by_unit[4] == (pytest.approx(1.6), Level.ERROR)  # unit index 3 is the 4th unit
    assert by_unit[5] == (pytest.approx(0.7), Level.WARN)  # no error, but a recent miss
    # The 5th unit is the last to miss: the warning lasts for it and the nine units after it.
    assert [level for units, _, level in history if 5 <= units <= 14] == [Level.WARN] * 10
    assert {level for units, _, level in history if units >= 15} == {Level.OK}
    p50, p99 = monitor.compute_percentiles()
    assert p50 == pytest.approx(0.1) and p99 == pytest.approx(2.6)
    assert "peak 1.60" in monitor.panel_text()


def test_dropped_units_are_summed_and_warned() -> None:
    clock = FakeClock()
    timeline = Timeline(clock)
    monitor = SessionMonitor()
    for unit, dropped in [(0, 0), (3, 2), (4, 0), (9, 4)]:
        feed(monitor, timeline.append(Kind.USER_AUDIO, {"unit": unit, "dropped_before": dropped}))
        feed(
            monitor,
            timeline.append(
                Kind.UNIT_STATS,
                {"unit": unit, "compute_s": 0.01, "debt_s": 0.0, "missed": False, "unit_s": 1.0},
            ),
        )
    assert monitor.dropped_units == 6
    assert values(monitor, "realtime")["dropped_units"] == "6"
    assert levels(monitor)["realtime"] is Level.WARN
    assert "drop 6" in monitor.panel_text()


def test_a_frontend_error_is_an_error_for_ten_units() -> None:
    clock = FakeClock()
    timeline = Timeline(clock)
    monitor = SessionMonitor()

    def unit(index: int) -> None:
        feed(
            monitor,
            timeline.append(
                Kind.UNIT_STATS,
                {"unit": index, "compute_s": 0.01, "debt_s": 0.0, "missed": False, "unit_s": 1.0},
            ),
        )

    unit(0)
    feed(monitor, timeline.append(Kind.FRONTEND_ERROR, {"unit": 1, "error": "RuntimeError"}))
    feed(monitor, timeline.append(Kind.PROTOCOL_ERROR, {"unit": 1, "code": "listen_mid_turn"}))
    feed(monitor, timeline.append(Kind.INPUT_ERROR, {"field": "audio.samples", "message": "NaN"}))
    assert levels(monitor)["errors"] is Level.ERROR
    errors = values(monitor, "errors")
    assert (errors["frontend_errors"], errors["protocol_errors"], errors["input_errors"]) == (
        "1",
        "1",
        "1",
    )
    for index in range(1, 11):
        unit(index)
    assert levels(monitor)["errors"] is Level.ERROR  # the error's unit plus nine more
    unit(11)
    assert levels(monitor)["errors"] is Level.OK
    assert "err 3" in monitor.panel_text()


# ---------------------------------------------------------------------------- tasks and words


def test_tasks_hold_the_floor_in_delegating_until_they_end() -> None:
    monitor = SessionMonitor()
    monitor.on_event(1, 1.0, "decision", {"unit": 0, "decision": "listen", "end_of_turn": False})
    assert monitor.floor is FloorState.LISTENING
    monitor.on_task("task-1", "web_search", "QUEUED", 0.0)
    monitor.on_task("task-1", "web_search", "RUNNING", 0.25, "searching")
    monitor.on_task("task-2", "calendar", "RUNNING", 0.0)
    assert monitor.floor is FloorState.DELEGATING
    panel = monitor.panel_text()
    assert "state: delegating" in panel
    assert "task task-1 web_search RUNNING 25%" in panel
    assert "task task-2 calendar RUNNING" in panel
    assert monitor.task_counts == {"RUNNING": 2}

    monitor.on_task("task-2", "calendar", "CANCELLING", 0.0, "cancel requested")
    assert monitor.floor is FloorState.DELEGATING  # task-1 still runs
    monitor.on_task("task-1", "web_search", "COMPLETED", 1.0)
    assert monitor.floor is FloorState.LISTENING
    assert [(t.task_id, t.state) for t in monitor.tasks] == [("task-2", "CANCELLING")]
    monitor.on_task("task-2", "calendar", "FAILED", 0.0, "timeout")
    assert monitor.tasks == []  # execution over (delivery is the frontend's business)
    assert monitor.task_counts == {"COMPLETED": 1, "FAILED": 1}
    assert values(monitor, "tasks") == {"state.COMPLETED": "1", "state.FAILED": "1"}
    assert "task " not in monitor.panel_text()


def test_task_state_records_of_the_harness_are_tasks_and_the_frontends_are_counted() -> None:
    monitor = SessionMonitor()
    # The frontend's record of its request (its own id, no tool) and the harness's of its task.
    frontend = {"task_id": "s-1-ab12", "state": "QUEUED", "reason": "sent", "query": "weather"}
    harness = {
        "source": "harness",
        "task_id": "9f3e",
        "state": "RUNNING",
        "previous": "QUEUED",
        "tool": "search",
        "reason": "",
        "turn": 1,
        "cutoff_seq": 26,
    }
    assert monitor.on_event(1, 0.5, "task_state", frontend)
    assert monitor.on_event(1, 0.6, "task_state", harness)
    monitor.on_task("9f3e", "search", "RUNNING", 0.5, "")
    # A record without progress keeps the progress the topic reported.
    assert monitor.on_event(2, 0.7, "task_state", {**harness, "reason": "still going"})
    assert [(t.task_id, t.state, t.progress, t.message) for t in monitor.tasks] == [
        ("9f3e", "RUNNING", 0.5, "still going")
    ]
    assert monitor.floor is FloorState.DELEGATING
    assert values(monitor, "tasks")["requests.QUEUED"] == "1"
    assert levels(monitor)["tasks"] is Level.OK
    # A delegation the harness never got is a warning.
    failed = {"task_id": "s-2-cd34", "state": "FAILED", "reason": "harness_unavailable"}
    assert monitor.on_event(3, 0.8, "task_state", failed)
    assert levels(monitor)["tasks"] is Level.WARN
    assert [t.task_id for t in monitor.tasks] == ["9f3e"]


def test_many_tasks_and_long_words_fit_the_panel() -> None:
    clock = FakeClock()
    timeline = Timeline(clock)
    monitor = SessionMonitor()
    long_user = "please tell me " + "a very long story " * 10 + "about dragons"
    feed(monitor, timeline.append(Kind.USER_TEXT, {"unit": 0, "text": long_user}))
    words = "word " * 40 + "the final words"
    feed(monitor, timeline.append(Kind.ASSISTANT_TEXT, {"unit": 1, "turn": 1, "text": words}))
    feed(
        monitor,
        timeline.append(Kind.DECISION, {"unit": 1, "decision": "speak", "end_of_turn": False}),
    )
    for i in range(5):
        monitor.on_task(f"task-with-a-rather-long-identifier-{i}", "a_tool_name", "RUNNING", 0.5)
    panel = monitor.panel_text()
    assert_panel_shape(panel)
    lines = panel.split("\n")
    assert len(lines) == PANEL_MAX_LINES
    # Last words are kept, the start is cut; other lines are cut at the end.
    assert lines[1].startswith("user: " + ELLIPSIS) and lines[1].endswith("about dragons")
    assert lines[2].startswith("venus: " + ELLIPSIS) and lines[2].endswith("the final words")
    assert sum("task-with" in line for line in lines) == 2
    assert any(line.endswith(ELLIPSIS) for line in lines if "task-with" in line)
    assert monitor.user_words == " ".join(long_user.split())


def test_user_text_and_latest_turn_words() -> None:
    clock = FakeClock()
    timeline = Timeline(clock)
    monitor = SessionMonitor()
    feed(monitor, timeline.append(Kind.USER_TEXT, {"unit": 0, "text": "  what's the\nweather? "}))
    feed(monitor, timeline.append(Kind.ASSISTANT_TEXT, {"unit": 1, "turn": 1, "text": "Old "}))
    feed(monitor, timeline.append(Kind.ASSISTANT_TEXT, {"unit": 4, "turn": 2, "text": "New "}))
    feed(monitor, timeline.append(Kind.ASSISTANT_TEXT, {"unit": 5, "turn": 2, "text": "words."}))
    feed(monitor, timeline.append(Kind.ASSISTANT_TEXT, {"unit": 2, "turn": 1, "text": "late"}))
    ack = {"unit": 4, "turn": 2, "heard_chars": 4, "samples_played": 1, "samples_total": 1}
    feed(monitor, timeline.append(Kind.PLAYBACK_ACK, ack))
    assert monitor.user_words == "what's the weather?"
    assert monitor.assistant_words == "New words."
    assert monitor.heard_words == "New"
    assert monitor.heard_fraction == pytest.approx(3 / 9)  # whitespace aside
    assert "heard 33%: New" in monitor.panel_text()


# ---------------------------------------------------------------------------- robustness


@pytest.mark.parametrize(
    ("kind", "payload"),
    [
        ("unit_stats", {"unit": 0, "compute_s": "fast", "debt_s": 0.0, "missed": False}),
        ("unit_stats", {"unit": 0, "compute_s": float("nan"), "debt_s": 0.0, "missed": False}),
        ("unit_stats", {"unit": 0, "compute_s": 0.1, "debt_s": -1.0, "missed": False}),
        ("unit_stats", {"unit": 0}),
        ("decision", {"unit": 0, "decision": "shout", "end_of_turn": False}),
        ("decision", {"unit": 0, "decision": "speak", "end_of_turn": 1}),
        ("assistant_text", {"unit": 0, "turn": 1, "text": 5}),
        ("playback_ack", {"unit": 0, "turn": True, "heard_chars": 3}),
        ("user_audio", {"unit": 0, "dropped_before": -2}),
        ("task_state", {"task_id": "", "tool": "search", "state": "RUNNING"}),
        ("task_state", {"task_id": "t", "tool": "search", "state": "RUNNING", "progress": None}),
        ("task_state", {"task_id": 5, "state": "QUEUED", "reason": "sent"}),
        ("task_state", {"task_id": "s-1-ab", "state": "", "reason": "sent"}),
        ("delegate_open", {}),
        ("frontend_error", ["not", "a", "dict"]),
        ("protocol_error", None),
    ],
)
def test_malformed_payloads_are_counted_not_raised(kind: str, payload: object) -> None:
    monitor = SessionMonitor()
    assert monitor.on_event(1, 0.0, kind, payload) is False  # type: ignore[arg-type]
    assert monitor.malformed == 1
    assert monitor.units == 0 and monitor.frontend_errors == 0 and monitor.tasks == []
    assert values(monitor, "errors")["malformed_records"] == "1"
    assert levels(monitor)["errors"] is Level.WARN
    assert_panel_shape(monitor.panel_text())


def test_unknown_kinds_are_ignored_and_undecodable_records_counted() -> None:
    monitor = SessionMonitor()
    assert monitor.on_event(1, 0.0, "weather_report", {"anything": [1, 2]})
    assert monitor.on_event(2, 0.0, "video_frame", {"unit": 0, "shape": [48, 64, 3]})
    assert monitor.malformed == 0 and monitor.events == 2 and monitor.last_seq == 2
    monitor.on_malformed()
    assert monitor.malformed == 1
    assert not monitor.on_task("", "tool", "RUNNING", 0.0)
    assert not monitor.on_task("t1", "tool", "", 0.0)
    assert not monitor.on_task("t1", "tool", "RUNNING", float("inf"))
    assert monitor.malformed == 4 and monitor.tasks == []


def test_an_empty_monitor_renders() -> None:
    monitor = SessionMonitor()
    panel = monitor.panel_text()
    assert_panel_shape(panel)
    assert panel.split("\n")[0] == "state: listening | turn 0 | unit -"
    assert NO_TRANSCRIPT in panel
    assert monitor.level() is Level.OK
    session = {e[0]: e for e in monitor.diagnostics()}["session"]
    assert session[2] == "waiting for the first unit"
    assert all(isinstance(v, str) for entry in monitor.diagnostics() for v in entry[3].values())


def test_records_from_an_exported_timeline_feed_the_same_state(tmp_path: Path) -> None:
    session = replay_sample()
    session.timeline.export_jsonl(tmp_path / "t.jsonl")
    direct, exported = SessionMonitor(), SessionMonitor()
    for record in session.timeline.snapshot():
        feed(direct, record)
    for line in (tmp_path / "t.jsonl").read_text().splitlines():
        row = json.loads(line)
        exported.on_event(row["seq"], row["t"], row["kind"], row["payload"])
    assert exported.panel_text() == direct.panel_text()
    assert exported.diagnostics() == direct.diagnostics()


# ---------------------------------------------------------------------------- RViz config


def test_rviz_config_shows_the_markers_in_base_link() -> None:
    config = yaml.safe_load((ROOT / "config/venus.rviz").read_text(encoding="utf-8"))
    manager = config["Visualization Manager"]
    assert manager["Global Options"]["Fixed Frame"] == "base_link"
    displays = {d["Class"]: d for d in manager["Displays"]}
    assert set(displays) >= {
        "rviz_default_plugins/Grid",
        "rviz_default_plugins/TF",
        "rviz_default_plugins/MarkerArray",
    }
    topic = displays["rviz_default_plugins/MarkerArray"]["Topic"]
    # Relative: RViz started in the robot's namespace (launch: rviz:=true) finds its markers.
    assert topic["Value"] == "markers"
    topics = [d["Topic"]["Value"] for d in manager["Displays"] if "Topic" in d]
    assert topics and not [t for t in topics if t.startswith("/")], topics
    # The monitor latches its markers: RViz must ask for them the same way.
    assert topic["Durability Policy"] == "Transient Local"
    assert topic["Reliability Policy"] == "Reliable"
