"""Regression tests for the reliability and security defects of issue #13.

Each test drives the real :class:`HarnessRunner` over a real SQLite journal (or the real
foreground loop) with a tool or frontend that misbehaves the way the probe found, and checks
that every task still settles, nothing private is spoken and nothing secret leaks.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from venus_ros.core.clock import FakeClock
from venus_ros.core.duplex import DuplexLoop
from venus_ros.core.frontend import Decision, Frontend, UnitOutput
from venus_ros.core.timeline import Kind, Timeline, TimelineView
from venus_ros.core.units import InputUnit
from venus_ros.harness.journal import Journal, format_journal, read_journal
from venus_ros.harness.polish import reply_text
from venus_ros.harness.runner import MAX_PAYLOAD_BYTES, HarnessRunner
from venus_ros.harness.secrets import SCRUBBED, scrub
from venus_ros.harness.tasks import Task, TaskState
from venus_ros.harness.tools import Tool, ToolError, ToolRegistry, ToolResult, builtin_tools

S = TaskState
WAIT_S = 10.0
EMPTY = TimelineView((), 0)
SECRET = "sk-test-9f8e7d6c5b4a39281706"


def tool(name: str, run: Callable[..., Any], **options: Any) -> Tool:
    options.setdefault("schema", {"type": "object"})
    return Tool(name=name, description=f"test tool {name}", run=run, **options)


async def _answer(args: Mapping[str, Any], evidence: TimelineView) -> ToolResult:
    return ToolResult("done")


@pytest.fixture
def make_runner(tmp_path: Path) -> Iterator[Callable[..., HarnessRunner]]:
    made: list[tuple[HarnessRunner, Journal]] = []

    def make(*tools: Tool, **options: Any) -> HarnessRunner:
        journal = Journal(tmp_path / f"journal{len(made)}.sqlite3")
        registry = ToolRegistry([*builtin_tools(), *tools])
        runner = HarnessRunner(registry, FakeClock(start=1.0), journal=journal, **options)
        made.append((runner, journal))
        return runner

    yield make
    for runner, journal in made:
        runner.close()
        journal.close()


def submit(runner: HarnessRunner, query: str = "q", **options: Any) -> Task:
    return runner.submit(query, "s", 1, 0, EMPTY, **options)


def settle(runner: HarnessRunner, task: Task, timeout: float = WAIT_S) -> Task:
    return runner.future(task.id).result(timeout)


# --- (1) lone surrogates ---------------------------------------------------------------------


def test_a_lone_surrogate_in_a_result_or_query_never_hangs_a_task(
    make_runner: Callable[..., HarnessRunner],
) -> None:
    async def odd(args: Mapping[str, Any], evidence: TimelineView) -> ToolResult:
        return ToolResult("half a pair \ud800 here", {"note": "\udfff", "\ud801": 1})

    runner = make_runner(tool("odd", odd))
    done = settle(runner, submit(runner, tool="odd"))
    assert done.state is S.COMPLETED
    assert "\ud800" not in done.result_text and "\ufffd" in done.result_text
    queried = settle(runner, submit(runner, "what is 2 plus \ud800 2", tool="odd"))
    assert queried.state is S.COMPLETED
    assert runner.journal_errors == 0
    rows = {row.id: row for row in read_journal(runner._journal.path)}  # type: ignore[union-attr]
    assert rows[done.id].state is S.COMPLETED and rows[queried.id].state is S.COMPLETED
    assert rows[queried.id].query == "what is 2 plus \ufffd 2"
    runner.close()  # must not raise


def test_a_journal_write_that_cannot_encode_is_a_journal_error_not_a_crash(
    tmp_path: Path,
) -> None:
    journal = Journal(tmp_path / "j.sqlite3")
    task = Task("t1", "q", "s", 1, 0, t=0.0, tool="x")
    task.note = "\ud800"
    journal.record_task(task)  # cleaned, stored
    assert journal.get("t1") is not None and journal.get("t1").note == "\ufffd"  # type: ignore[union-attr]
    journal.close()


# --- (4) tools that kill, stall or talk too much -------------------------------------------


def test_a_tool_raising_system_exit_fails_alone_and_the_runner_goes_on(
    make_runner: Callable[..., HarnessRunner],
) -> None:
    async def leave(args: Mapping[str, Any], evidence: TimelineView) -> ToolResult:
        raise SystemExit(3)

    runner = make_runner(tool("leave", leave), tool("ok", _answer))
    assert settle(runner, submit(runner, tool="leave")).state is S.FAILED
    later = [submit(runner, tool="ok") for _ in range(5)]
    assert all(settle(runner, t).state is S.COMPLETED for t in later)
    assert runner.thread.is_alive()


def test_a_synchronously_blocking_tool_times_out_and_stalls_nobody(
    make_runner: Callable[..., HarnessRunner],
) -> None:
    release = threading.Event()

    async def block(args: Mapping[str, Any], evidence: TimelineView) -> ToolResult:
        release.wait(20)  # blocks its event loop: no await
        return ToolResult("finished late")

    runner = make_runner(tool("block", block, timeout_s=0.2), tool("ok", _answer))
    try:
        blocked = submit(runner, tool="block")
        others = [submit(runner, tool="ok") for _ in range(3)]
        assert all(settle(runner, t).state is S.COMPLETED for t in others), "others stalled"
        ended = settle(runner, blocked)
        assert ended.state is S.FAILED and ended.error.startswith("timeout")
        assert not release.is_set(), "the blocked tool had not returned: the runner moved on"
        # A second call of the wedged tool gets a fresh loop and times out on its own.
        again = settle(runner, submit(runner, tool="block"))
        assert again.state is S.FAILED
    finally:
        release.set()


def test_tool_failure_messages_are_scrubbed_short_and_markup_free(
    make_runner: Callable[..., HarnessRunner],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)

    async def leak(args: Mapping[str, Any], evidence: TimelineView) -> ToolResult:
        raise RuntimeError(f"request failed with key {SECRET}")

    async def page(args: Mapping[str, Any], evidence: TimelineView) -> ToolResult:
        html = "<html><body><h1>502 Bad Gateway</h1>" + "x" * 5000 + "</body></html>"
        raise ToolError(f"the service said {html} (key {SECRET})")

    async def deep(args: Mapping[str, Any], evidence: TimelineView) -> ToolResult:
        raise RecursionError("maximum recursion depth exceeded while calling a Python object")

    async def echo(args: Mapping[str, Any], evidence: TimelineView) -> ToolResult:
        return ToolResult(f"Authorization: Bearer {SECRET}", {"headers": {"auth": SECRET}})

    runner = make_runner(tool("leak", leak), tool("page", page), tool("deep", deep))
    runner.registry._tools["echo"] = tool("echo", echo)
    with caplog.at_level(logging.ERROR):
        outcomes = [settle(runner, submit(runner, tool=name)) for name in ("leak", "page", "deep")]
        echoed = settle(runner, submit(runner, tool="echo"))
    spoken = [reply_text(t) for t in outcomes]
    assert outcomes[0].error == "the leak tool failed unexpectedly"
    assert outcomes[2].error == "the deep tool failed unexpectedly"
    assert "<" not in outcomes[1].error and len(outcomes[1].error) <= 160
    assert "RecursionError" not in " ".join(spoken)
    everything = " ".join(spoken) + caplog.text + echoed.result_text + str(echoed.payload)
    everything += format_journal(runner._journal.path, verbose=True)  # type: ignore[union-attr]
    assert SECRET not in everything and SCRUBBED in echoed.result_text


# --- (5) size limits ----------------------------------------------------------------------


def test_a_ten_megabyte_payload_fails_instead_of_being_stored_and_sent(
    make_runner: Callable[..., HarnessRunner],
) -> None:
    async def huge(args: Mapping[str, Any], evidence: TimelineView) -> ToolResult:
        return ToolResult("ok", {"blob": "x" * 10_000_000})

    runner = make_runner(tool("huge", huge))
    task = settle(runner, submit(runner, tool="huge"))
    assert task.state is S.FAILED and "too much data" in task.error
    row = read_journal(runner._journal.path)[0]  # type: ignore[union-attr]
    assert len(str(row.payload)) < MAX_PAYLOAD_BYTES


# --- (8) many unsettled tasks -------------------------------------------------------------


def test_settled_tasks_are_forgotten_oldest_first_and_unsettled_never(
    make_runner: Callable[..., HarnessRunner],
) -> None:
    gate = threading.Event()

    async def wait(args: Mapping[str, Any], evidence: TimelineView) -> ToolResult:
        while not gate.is_set():
            await asyncio.sleep(0.01)
        return ToolResult("ok")

    runner = make_runner(tool("wait", wait, timeout_s=60), max_retained=8, max_concurrent=64)
    quick = [settle(runner, submit(runner, "what is 1 plus 1")) for _ in range(4)]
    waiting = [submit(runner, tool="wait") for _ in range(30)]
    known = {t.id for t in runner.tasks()}
    assert {t.id for t in waiting} <= known, "an unsettled task was forgotten"
    assert not {t.id for t in quick} & known, "settled tasks beyond the limit were kept"
    gate.set()
    for t in waiting:
        assert settle(runner, t).state is S.COMPLETED


# --- (9) a tool called "cancel" -----------------------------------------------------------


def test_stop_cancels_a_running_tool_that_happens_to_be_called_cancel(
    make_runner: Callable[..., HarnessRunner],
) -> None:
    started = threading.Event()

    async def slow(args: Mapping[str, Any], evidence: TimelineView) -> ToolResult:
        started.set()
        await asyncio.sleep(30)
        return ToolResult("never")

    runner = make_runner(tool("cancel", slow, timeout_s=60))
    running = submit(runner, tool="cancel")
    assert started.wait(WAIT_S)
    stop = settle(runner, submit(runner, "stop"))
    assert settle(runner, running).state is S.CANCELLED
    assert stop.result_text == "Okay, I stopped that."


# --- (2) a frontend raising mid-span -------------------------------------------------------


class _Raising(Frontend):
    """Opens a delegate span, raises mid-span, then continues the span's text."""

    output_sample_rate = 24000

    def __init__(self) -> None:
        self.i = -1
        self.script: list[object] = [
            UnitOutput(Decision.SPEAK, "Sure. <delegate>open the front", _voice(), False),
            RuntimeError("model crashed"),
            UnitOutput(Decision.SPEAK, " door, PIN 4711</delegate> Okay.", _voice(), True),
        ]

    def prefill(self, unit: InputUnit) -> None:
        self.i += 1

    def generate(self) -> UnitOutput:
        out = self.script[self.i] if self.i < len(self.script) else UnitOutput(Decision.LISTEN)
        if isinstance(out, BaseException):
            raise out
        return out  # type: ignore[return-value]


def _voice() -> np.ndarray:
    return (0.1 * np.sin(np.arange(2400) / 5.0)).astype(np.float32)


def test_private_text_is_not_spoken_when_the_frontend_raises_mid_span() -> None:
    clock = FakeClock()
    timeline = Timeline(clock)
    loop = DuplexLoop(_Raising(), timeline, clock)
    said = []
    for index in range(4):
        unit = InputUnit(index, index * 16000, np.zeros(16000, np.float32))
        result = loop.step(unit)
        if result.speech is not None:
            said.append(result.speech.text)
    spoken = "".join(said) + " ".join(
        str(r.payload.get("text", "")) for r in timeline.snapshot() if r.kind == Kind.ASSISTANT_TEXT
    )
    assert "4711" not in spoken and "door" not in spoken
    assert "Okay." in spoken


# --- secrets ------------------------------------------------------------------------------


def test_scrub_removes_environment_secrets_and_bearer_shapes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-abcdefghijkl")
    monkeypatch.setenv("HOME_DIR", "/root-but-not-a-secret")
    text = "tok-abcdefghijkl and Bearer abc.def-1234567 and /root-but-not-a-secret"
    assert scrub(text) == f"{SCRUBBED} and {SCRUBBED} and /root-but-not-a-secret"


# --- (6) journal rows that are not what we wrote -------------------------------------------


def test_tasks_of_a_journal_with_huge_times_and_blob_text_are_listed(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    journal = Journal(path)
    journal.record_task(Task("t1", "hello", "s", 1, 0, t=0.0, tool="x"))
    journal.close()
    db = sqlite3.connect(path)
    db.execute("UPDATE tasks SET created_t = 1e300, updated_t = -1e300, query = ?", (b"\xff\x00",))
    db.execute("UPDATE transitions SET reason = ?, wall_t = 1e308", (b"\x80blob",))
    db.commit()
    db.close()
    text = format_journal(path, verbose=True)
    assert "bad time" in text and "t1" in text


# --- (7) replay of files at rates the assembler does not take ------------------------------


@pytest.mark.parametrize("rate", [96000, 11025])
def test_replay_resamples_an_uncommon_rate_once(
    rate: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import soundfile

    from venus_ros.cli import main

    path = tmp_path / f"in{rate}.wav"
    soundfile.write(str(path), np.zeros(rate * 3, np.float32), rate)
    assert main(["replay", str(path), "--out", str(tmp_path / "out")]) == 0
    captured = capsys.readouterr()
    assert "resampling" in captured.err and captured.err.count("\n") == 1
    assert "units" in captured.out and " 0 units" not in captured.out


def test_replay_of_a_7_khz_file_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import soundfile

    from venus_ros.cli import main

    path = tmp_path / "in7k.wav"
    soundfile.write(str(path), np.zeros(7000 * 3, np.float32), 7000)
    assert main(["replay", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "7000 Hz" in err


def test_an_offline_session_at_an_unsupported_rate_fails_once(tmp_path: Path) -> None:
    from venus_ros.core.session import run_offline
    from venus_ros.core.units import InputError
    from venus_ros.frontends.scripted import Reply, Script, ScriptedFrontend

    frontend = ScriptedFrontend(Script(replies=[Reply(text="hi", at_unit=1)]))
    with pytest.raises(InputError, match="not supported"):
        run_offline(np.zeros(96000 * 3, np.float32), 96000, frontend, clock=FakeClock())


# --- (8) memory of long sessions ---------------------------------------------------------


def test_a_long_offline_session_keeps_no_audio_and_a_bounded_heard_record() -> None:
    from venus_ros.core.duplex import MAX_HEARD_TURNS
    from venus_ros.core.session import SessionConfig, run_offline
    from venus_ros.frontends.scripted import Reply, Script, ScriptedFrontend

    turns = MAX_HEARD_TURNS + 20
    script = Script(replies=[Reply(text=f"Turn {i} here.", at_unit=2 * i) for i in range(turns)])
    clock = FakeClock()
    session = run_offline(
        np.zeros(16000 * (2 * turns + 4), np.float32),
        16000,
        ScriptedFrontend(script, clock),
        clock=clock,
        config=SessionConfig(keep_played_audio=False),
    )
    spoken = [r.speech for r in session.results if r.speech is not None]
    assert len(spoken) >= turns
    assert all(s.audio.strides in ((0,), ()) for s in spoken), "results still hold audio"
    assert sum(s.samples for s in spoken) > 0 and not session.playback.played_audio
    assert session.loop.heard_text(1) == ""  # forgotten: beyond the last MAX_HEARD_TURNS
    assert session.loop.heard_text(turns) == f"Turn {turns - 1} here."
    assert len(session.loop.heard_text().split("Turn")) - 1 == MAX_HEARD_TURNS


# --- (6) configuration and model files that are not what they claim ------------------------


@pytest.mark.parametrize(
    "text",
    [
        "version: 1\n? [a, b]\n: 1\n",
        "version: 1\n? {a: 1}\n: 1\n",
        "version: 1\nenabled: " + "[" * 5000 + "]" * 5000 + "\n",
        "version: 1\ntools: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n",
        "version: 1\ntools: " + "- " * 200 + "x\n",
    ],
    ids=["list-key", "mapping-key", "deep-list", "deep-mapping", "deep-block"],
)
def test_odd_tool_configs_are_clear_errors(text: str, tmp_path: Path) -> None:
    from venus_ros.harness.toolconfig import ToolConfigError, load_tool_config

    path = tmp_path / "tools.yaml"
    path.write_text(text)
    with pytest.raises(ToolConfigError, match=str(path)):
        load_tool_config(path)


def test_a_file_that_is_not_onnx_as_the_floor_model_is_a_clear_error(tmp_path: Path) -> None:
    from venus_ros.core.frontend import FrontendError
    from venus_ros.frontends import make_frontend

    path = tmp_path / "floor.onnx"
    path.write_bytes(b"this is not a protobuf")
    with pytest.raises((FrontendError, ValueError), match="not a valid ONNX model"):
        make_frontend(f"floor:model={path}")


# --- (10) the test suite leaves no process behind ------------------------------------------


def test_a_probe_stops_the_processes_it_watched(tmp_path: Path) -> None:
    from rosproc import make_probe, start_process

    with make_probe() as probe:
        sleeper = start_process(["sleep", "60"], tmp_path, "sleeper")
        probe.watched.append(sleeper)
    assert sleeper.proc.poll() is not None, "the probe's teardown left its process running"


def test_the_session_fails_when_a_test_leaves_a_child_running(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    (tmp_path / "test_leak.py").write_text(
        "import subprocess\n"
        "from rosproc import start_process\n\n"
        "def test_leaks(tmp_path):\n"
        "    start_process(['sleep', '60'], tmp_path, 'leaked_sleeper')\n"
        "    subprocess.Popen(['sleep', '61'])\n"
    )
    tests = Path(__file__).resolve().parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tests), str(tests.parent)])}
    options = ["-q", "-p", "no:cacheprovider", "-p", "conftest", "--rootdir", str(tmp_path)]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", *options, str(tmp_path / "test_leak.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "still running at the end of the run" in run.stdout
    assert "leaked_sleeper" in run.stdout and "sleep 61" in run.stdout
    assert "1 passed" in run.stdout  # the test itself passed: only the leak fails the run


# --- a tool-timeout storm ------------------------------------------------------------------


def test_a_storm_of_timeouts_ends_every_task_and_the_harness_goes_on(
    make_runner: Callable[..., HarnessRunner],
) -> None:
    release = threading.Event()

    async def overrun(args: Mapping[str, Any], evidence: TimelineView) -> ToolResult:
        await asyncio.sleep(30)
        return ToolResult("never")

    async def wedge(args: Mapping[str, Any], evidence: TimelineView) -> ToolResult:
        release.wait(30)
        return ToolResult("never")

    runner = make_runner(
        tool("overrun", overrun, timeout_s=0.05),
        tool("wedge", wedge, timeout_s=0.05),
        tool("ok", _answer),
        max_concurrent=4,
    )
    try:
        storm = [submit(runner, tool="overrun") for _ in range(40)]
        storm += [submit(runner, tool="wedge") for _ in range(3)]
        ended = [settle(runner, t, timeout=30) for t in storm]
        assert all(t.state is S.FAILED and t.error.startswith("timeout") for t in ended)
        assert settle(runner, submit(runner, tool="ok")).state is S.COMPLETED
        assert runner.journal_errors == 0
    finally:
        release.set()
