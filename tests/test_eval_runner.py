"""Tests for venus_ros.eval.runner: scenarios played end to end through the duplex loop.

A small suite is written here with real espeak-ng speech (tests/speech.py) and played with the
scripted frontend, whose script yields to a barge-in of 300 ms, delegates "set a timer for ten
minutes" after the user has spoken, speaks the harness's reply, and spends 1.5 s of simulated
compute in unit 2 (so that a flush at unit 3 discards audio that was generated but never played).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from speech import espeak_16k

import venus_ros.frontends
from venus_ros.core.frontend import Decision, Frontend, UnitOutput
from venus_ros.core.playback import render_played
from venus_ros.core.timeline import Kind, Record
from venus_ros.core.units import InputUnit, resample
from venus_ros.eval.metrics import SampleRun, compute_metrics
from venus_ros.eval.runner import run_sample, run_suite
from venus_ros.eval.scenario import Suite, ToolCall, ToolSpec, load_suite, write_sample, write_tools
from venus_ros.frontends.scripted import Script, ScriptedFrontend

RATE = 16000
LONG_TEXT = (
    "Let me tell you about the weather in Paris, the long walks along the river, the small "
    "cafes, the markets and the parks in the spring."
)
SCRIPT = """\
barge_in_ms: 300
slow_units: {2: 1500}
replies:
  - after_speech: true
    text: "Sure. <delegate>set a timer for ten minutes</delegate> One moment."
  - on_backend: true
    text: "{backend}"
"""
#: Never yields and never answers: it only speaks the scenario's assistant turns.
TALKER = """\
replies:
  - at_unit: 1000
    text: never
"""
TIMER = ToolSpec(
    "timer",
    "Sets a timer.",
    {
        "type": "object",
        "properties": {"seconds": {"type": "number", "minimum": 1}},
        "required": ["seconds"],
    },
    "Timer set for ten minutes.",
)


def _speech(folder: Path, total_s: float, start: float, text: str) -> tuple[np.ndarray, float]:
    """``text`` spoken from ``start`` in ``total_s`` of silence; the signal and its end time."""
    voice = espeak_16k(text, folder / f"{abs(hash(text))}.wav")
    out = np.zeros(round(total_s * RATE), np.float32)
    at = round(start * RATE)
    out[at : at + len(voice)] = voice[: len(out) - at]
    return out, start + len(voice) / RATE


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Suite:
    root = tmp_path_factory.mktemp("suite")
    wavs = root.parent / "wavs"
    audio, end = _speech(wavs, 10.0, 4.6, "wait, stop, I have a question")
    write_sample(
        root,
        "a_interrupt",
        audio,
        RATE,
        {
            "category": "interruption",
            "turns": [{"start": 4.6, "end": end, "text": "wait, stop, I have a question"}],
            "overlap": [4.6, end],
            "expected": "respond",
            "assistant_turns": [{"start": 0.0, "text": LONG_TEXT}],
        },
    )
    audio, end = _speech(wavs, 10.0, 0.3, "what will the weather be in Paris tomorrow")
    write_sample(
        root,
        "b_delegate",
        audio,
        RATE,
        {
            "category": "delegation",
            "turns": [{"start": 0.3, "end": end, "text": "what will the weather be"}],
            "needs_delegation": True,
            "tools": [],
        },
    )
    audio, end = _speech(wavs, 10.0, 0.3, "please set a timer for ten minutes")
    write_sample(
        root,
        "c_tool",
        audio,
        RATE,
        {
            "category": "tool_use",
            "turns": [{"start": 0.3, "end": end, "text": "please set a timer for ten minutes"}],
            "tools": ["timer"],
            "expected_tool_calls": [{"name": "timer", "arguments": {"seconds": 600}}],
        },
    )
    write_sample(
        root,
        "d_broken",
        audio,
        RATE,
        {
            "category": "turn_taking",
            "turns": [{"start": 0.3, "end": end, "text": "please set a timer for ten minutes"}],
            "tools": ["stopwatch"],
        },
    )
    write_tools(root, [TIMER])
    return load_suite(root)


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("script") / "script.yaml"
    path.write_text(SCRIPT, encoding="utf-8")
    return f"scripted:{path}"


@pytest.fixture(scope="module")
def runs(suite: Suite, script: str) -> dict[str, SampleRun]:
    return {run.sample.id: run for run in run_suite(suite, script)}


def of_kind(run: SampleRun, kind: Kind) -> list[Record]:
    return [r for r in run.records if r.kind is kind]


def rms(signal: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(signal, dtype=np.float64)))) if signal.size else 0.0


def window(run: SampleRun, start: float, end: float) -> np.ndarray:
    return run.played[round(start * run.played_rate) : round(end * run.played_rate)]


# --- the runs ---------------------------------------------------------------------------------


def test_every_sample_is_run_in_order_and_only_the_broken_one_fails(
    runs: dict[str, SampleRun],
) -> None:
    assert list(runs) == ["a_interrupt", "b_delegate", "c_tool", "d_broken"]
    assert [bool(r.error) for r in runs.values()] == [False, False, False, True]
    error = runs["d_broken"].error
    assert "'stopwatch'" in error and "tools.json" in error and "timer" in error
    for run in list(runs.values())[:3]:
        assert run.played_rate == 24000 and run.played.dtype == np.float32
        assert len(run.unit_compute_s) == len(of_kind(run, Kind.UNIT_STATS)) >= 8
        assert run.missed_units == 1  # the 1.5 s of simulated compute in unit 2


def test_interruption_plays_the_scheduled_turn_then_flushes_and_answers(
    runs: dict[str, SampleRun],
) -> None:
    run = runs["a_interrupt"]
    said = [r.payload["text"] for r in of_kind(run, Kind.ASSISTANT_TEXT) if r.payload["turn"] == 1]
    assert "".join(said).startswith("Let me tell you about the weather")
    # Units 0 and 1 play from their boundaries (1.035 s, 2.035 s); unit 2's slow compute
    # delays its audio to 4.535 s; unit 3's is queued behind it.
    assert rms(window(run, 1.1, 2.9)) > 0.02
    assert not window(run, 2.95, 4.5).any()
    assert rms(window(run, 4.6, 5.0)) > 0.02
    # The user talks over it from 4.6 s: at unit 4's boundary (5.035 s) it yields and flushes.
    (flush,) = of_kind(run, Kind.FLUSH)
    assert flush.payload == {"unit": 4, "turn": 1} and flush.t == pytest.approx(5.035)
    acks = {a.payload["unit"]: a.payload for a in of_kind(run, Kind.PLAYBACK_ACK)}
    assert acks[2]["flushed"] and 0 < acks[2]["samples_played"] < acks[2]["samples_total"]
    assert acks[3]["flushed"] and acks[3]["samples_played"] == 0 < acks[3]["samples_total"]
    answer = [a for a in of_kind(run, Kind.ASSISTANT_AUDIO) if a.payload["turn"] == 2]
    assert answer, "after the barge-in the assistant answers the user"
    resumed = answer[0].t
    assert resumed > flush.t + 1.0
    # What the flush discarded was never played: silence until the answer starts.
    assert not window(run, flush.t, resumed).any()
    assert rms(window(run, resumed, resumed + 0.5)) > 0.02


def test_played_audio_is_exactly_what_the_acks_say_was_played(
    runs: dict[str, SampleRun],
) -> None:
    run = runs["a_interrupt"]
    generated = sum(a.payload["samples"] for a in of_kind(run, Kind.ASSISTANT_AUDIO))
    acked: dict[int, int] = {}
    for ack in of_kind(run, Kind.PLAYBACK_ACK):
        acked[ack.payload["unit"]] = ack.payload["samples_played"]
    played = sum(acked.values())
    assert played < generated  # the flush threw some away
    assert np.count_nonzero(np.abs(run.played) > 0) <= played
    assert rms(run.played) > 0.01


def test_a_delegation_goes_through_the_harness_and_its_reply_is_spoken(
    runs: dict[str, SampleRun],
) -> None:
    run = runs["b_delegate"]
    assert run.delegations == ("set a timer for ten minutes",)
    assert run.tool_calls == ()  # the sample offers no tools: the task fails, honestly
    (insert,) = [r for r in of_kind(run, Kind.BACKEND_INSERT) if r.payload.get("inserted")]
    spoken = "".join(r.payload["text"] for r in of_kind(run, Kind.ASSISTANT_TEXT))
    assert "Sorry, I could not do that: no tool can answer this yet." in spoken
    assert insert.payload["chars"] == len(
        "Sorry, I could not do that: no tool can answer this yet."
    )


def test_a_tool_request_is_routed_recorded_and_answered_with_the_canned_result(
    runs: dict[str, SampleRun],
) -> None:
    run = runs["c_tool"]
    assert run.delegations == ("set a timer for ten minutes",)
    assert run.tool_calls == (ToolCall("timer", {"seconds": 600}),)
    spoken = "".join(r.payload["text"] for r in of_kind(run, Kind.ASSISTANT_TEXT))
    assert "Timer set for ten minutes." in spoken


def test_metrics_of_the_runs(runs: dict[str, SampleRun], script: str) -> None:
    metrics = compute_metrics(list(runs.values()), script, "test-suite")
    rows = {row["id"]: row for row in metrics["per_sample"]}
    assert rows["a_interrupt"]["outcome"] == "respond" and rows["a_interrupt"]["correct"]
    assert rows["a_interrupt"]["speaking_at_overlap"] is True
    assert 0 < rows["a_interrupt"]["stop_latency_s"] < 2.0
    assert rows["b_delegate"]["delegated"] is True
    assert rows["c_tool"]["tool_pass"] is True
    assert [e["id"] for e in metrics["errors"]] == ["d_broken"]
    headline = metrics["headline"]
    assert headline["interruption.response_rate"] == 1.0
    assert headline["delegation.recall"] == 1.0
    assert headline["tool_use.pass_at_1"] == 1.0 and headline["tool_use.selection_f1"] == 1.0
    assert headline["compute.missed_deadlines"] == 3
    assert headline["compute.p99_ms"] >= 1500.0


def test_runs_are_deterministic(suite: Suite, script: str, runs: dict[str, SampleRun]) -> None:
    again = run_sample(suite.samples[0], script, tools=suite.tools)
    first = runs["a_interrupt"]
    assert [r.to_json() for r in again.records if r.kind is not Kind.UNIT_STATS] == [
        r.to_json() for r in first.records if r.kind is not Kind.UNIT_STATS
    ]
    assert np.array_equal(again.played, first.played)


def test_a_router_is_a_parameter_and_only_registered_tools_count(suite: Suite, script: str) -> None:
    tool = suite.samples[2]
    asked: list[str] = []

    def router(query: str) -> tuple[str, dict] | None:
        asked.append(query)
        return "timer", {"seconds": 42}

    run = run_sample(tool, script, tools=suite.tools, router=router)
    assert asked == ["set a timer for ten minutes"]
    assert run.tool_calls == (ToolCall("timer", {"seconds": 42}),)

    run = run_sample(tool, script, tools=suite.tools, router=lambda q: ("clock", {}))
    assert run.tool_calls == () and not run.error
    spoken = "".join(r.payload["text"] for r in of_kind(run, Kind.ASSISTANT_TEXT))
    assert "no tool can answer this yet" in spoken


# --- echo -------------------------------------------------------------------------------------


def _capture_units(monkeypatch: pytest.MonkeyPatch) -> list[InputUnit]:
    """Make the runner's frontends record every unit they are fed."""
    seen: list[InputUnit] = []
    build = venus_ros.frontends.make_frontend

    def make(spec: str, clock=None) -> Frontend:
        frontend = build(spec, clock=clock)
        prefill = frontend.prefill

        def recording(unit: InputUnit) -> None:
            seen.append(unit)
            prefill(unit)

        frontend.prefill = recording  # type: ignore[method-assign]
        return frontend

    monkeypatch.setattr(venus_ros.frontends, "make_frontend", make)
    return seen


def _microphone(units: list[InputUnit], length: int) -> np.ndarray:
    mic = np.zeros(max(u.start_sample + len(u.audio) for u in units), np.float32)
    for unit in units:
        mic[unit.start_sample : unit.start_sample + len(unit.audio)] = unit.audio
    return mic[:length]


@pytest.mark.parametrize("echo", [False, True])
def test_echo_feeds_the_played_audio_back_into_the_microphone(
    suite: Suite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, echo: bool
) -> None:
    path = tmp_path / "talker.yaml"
    path.write_text(TALKER, encoding="utf-8")
    units = _capture_units(monkeypatch)
    sample = suite.samples[0]
    run = run_sample(sample, f"scripted:{path}", echo=echo, echo_delay_s=0.06, echo_gain_db=-12)
    assert not run.error
    user, rate = sample.load_audio()
    residual = _microphone(units, len(user)) - user
    if not echo:
        assert not residual.any()
        return
    speaker = resample(run.played, run.played_rate, rate)
    speaker = np.pad(speaker, (0, max(0, len(user) - len(speaker))))
    delay = round(0.06 * rate)
    expected = np.zeros_like(residual)
    expected[delay:] = speaker[: len(residual) - delay]
    expected *= 10 ** (-12 / 20)
    loud = np.abs(user) < 0.5  # leave out any sample the mix may have clipped
    corr = np.corrcoef(residual[loud], expected[loud])[0, 1]
    assert corr > 0.98
    assert rms(residual[loud]) == pytest.approx(rms(expected[loud]), rel=0.05)
    # The echo is delayed, not early: shifted by 40 ms it matches far worse.
    early = np.zeros_like(residual)
    early[delay - 640 :] = speaker[: len(residual) - delay + 640] * 10 ** (-12 / 20)
    assert np.corrcoef(residual[loud], early[loud])[0, 1] < corr - 0.2


def test_an_echo_delay_shorter_than_a_frame_is_refused(suite: Suite, script: str) -> None:
    run = run_sample(suite.samples[0], script, echo=True, echo_delay_s=0.015)
    assert "echo delay" in run.error and "20 ms" in run.error


def test_with_echo_a_barge_in_policy_interrupts_itself(suite: Suite, script: str) -> None:
    run = run_sample(suite.samples[0], script, echo=True)
    (flush, *_) = [r for r in run.records if r.kind is Kind.FLUSH]
    assert flush.payload["unit"] < 3  # it hears itself before the user ever speaks


# --- frontends that cannot be made to speak ---------------------------------------------------


class _Listener(Frontend):
    """Always listens; has no schedule_turns."""

    def prefill(self, unit: InputUnit) -> None:
        pass

    def generate(self) -> UnitOutput:
        return UnitOutput(Decision.LISTEN)


def test_assistant_turns_need_a_frontend_that_can_be_made_to_speak(
    suite: Suite, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(venus_ros.frontends, "make_frontend", lambda spec, clock=None: _Listener())
    runs = run_suite(suite, "listener")
    errors = [r.error for r in runs]
    assert "cannot be made to speak" in errors[0] and "assistant_turns" in errors[0]
    assert errors[1:3] == ["", ""]
    assert runs[1].played.size == 0 and len(runs[1].unit_compute_s) >= 8


def test_an_unknown_frontend_fails_the_suite_before_any_sample(suite: Suite) -> None:
    with pytest.raises(venus_ros.frontends.FrontendError, match="unknown frontend 'nope'"):
        run_suite(suite, "nope")


# --- the scripted frontend's scheduled turns --------------------------------------------------


def _units(count: int) -> list[InputUnit]:
    units, start = [], 0
    for index in range(count):
        n = 16560 if index == 0 else 16000
        units.append(InputUnit(index, start, np.zeros(n, np.float32)))
        start += n
    return units


def _texts(frontend: ScriptedFrontend, count: int) -> list[tuple[str, str, bool]]:
    out = []
    for unit in _units(count):
        frontend.prefill(unit)
        result = frontend.generate()
        out.append((result.decision.value, result.text, result.end_of_turn))
    return out


def test_scheduled_turns_start_at_the_first_boundary_at_or_after_their_start() -> None:
    script = Script.model_validate({"replies": [{"at_unit": 1000, "text": "never"}]})
    frontend = ScriptedFrontend(script)
    frontend.schedule_turns(
        [(5.5, "nine"), (2.5, "seven eight"), (1.5, "one two three four five six")]
    )
    frontend.prepare()  # the loop prepares after scheduling: the schedule survives
    assert _texts(frontend, 7) == [
        ("listen", "", False),  # unit 0 ends at 1.035 s, before 1.5 s
        ("speak", "one two three ", False),
        ("speak", "four five six ", False),  # 2.5 s is due at 3.035 s: it joins the turn
        ("speak", "seven eight", True),
        ("listen", "", False),  # 5.035 s: "nine" is not due yet
        ("speak", "nine", True),  # a turn of its own
        ("listen", "", False),
    ]
    frontend.prepare()
    assert _texts(frontend, 2)[1] == ("speak", "one two three ", False)


def test_scheduled_turns_reject_bad_times_and_empty_text() -> None:
    frontend = ScriptedFrontend(Script.model_validate({"replies": [{"at_unit": 0, "text": "x"}]}))
    with pytest.raises(ValueError, match="finite time >= 0"):
        frontend.schedule_turns([(-1.0, "hello")])
    with pytest.raises(ValueError, match="no text"):
        frontend.schedule_turns([(1.0, "  ")])


def test_render_played_places_pieces_at_their_session_time() -> None:
    track = render_played([(0.5, np.ones(3, np.float32)), (1.0, np.full(2, 2.0, np.float32))], 10)
    assert track.tolist() == [0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 2, 2]
