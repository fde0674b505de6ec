"""Evaluation metrics on hand-built runs with known answers.

``played`` arrays are silence with full-scale-free tone bursts at exact times (multiples of the
10 ms voice-activity frame), so every segment boundary, latency and rate below is known exactly.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from venus_ros.core.clock import FakeClock
from venus_ros.core.timeline import Kind, Record, Timeline
from venus_ros.eval.metrics import (
    MetricsConfig,
    SampleRun,
    compute_metrics,
    normalize_value,
    score_overlap,
    score_tool_calls,
    values_equal,
    voice_segments,
)
from venus_ros.eval.scenario import Sample, ToolCall, Turn

RATE = 16000
#: The tone bursts below are not speech: these tests measure with the energy detector.
ENERGY = MetricsConfig(detector="energy")


def energy_metrics(runs: Any, *args: Any, config: MetricsConfig | None = None, **kw: Any) -> dict:
    """compute_metrics with the energy detector (the tones of these tests are not speech)."""
    return compute_metrics(runs, *args, config=config or ENERGY, **kw)


def played(spans: list[tuple[float, float]], total_s: float = 12.0, rate: int = RATE) -> np.ndarray:
    """Silence with a 200 Hz tone (RMS 0.21, about -13.5 dBFS) in each ``(start, end)`` span."""
    audio = np.zeros(round(total_s * rate), np.float32)
    for start, end in spans:
        a, b = round(start * rate), round(end * rate)
        t = np.arange(b - a) / rate
        audio[a:b] = 0.3 * np.sin(2 * np.pi * 200.0 * t)
    return audio


def sample(
    sample_id: str,
    category: str,
    *,
    overlap: tuple[float, float] | None = None,
    expected: str | None = None,
    turns: tuple[tuple[float, float], ...] = ((0.0, 1.0),),
    needs_delegation: bool | None = None,
    calls: tuple[ToolCall, ...] = (),
    extra: dict[str, Any] | None = None,
) -> Sample:
    return Sample(
        id=sample_id,
        folder=Path("/nonexistent") / sample_id,
        category=category,
        turns=tuple(Turn(a, b, "words") for a, b in turns),
        overlap=overlap,
        expected=expected,
        needs_delegation=needs_delegation,
        expected_tool_calls=calls,
        tools=None,
        assistant_turns=(),
        extra=extra or {},
    )


def run(
    s: Sample,
    spans: list[tuple[float, float]] = (),
    *,
    error: str = "",
    delegations: tuple[str, ...] = (),
    tool_calls: tuple[ToolCall, ...] = (),
    compute: tuple[float, ...] = (),
    missed: int = 0,
    records: tuple = (),
) -> SampleRun:
    return SampleRun(
        sample=s,
        records=records,
        played=played(list(spans)),
        played_rate=RATE,
        delegations=delegations,
        tool_calls=tool_calls,
        unit_compute_s=compute,
        missed_units=missed,
        error=error,
    )


def segments(spans: list[tuple[float, float]], rate: int = RATE) -> list[tuple[float, float]]:
    return [
        tuple(round(v, 9) for v in seg)
        for seg in voice_segments(played(spans, rate=rate), rate, ENERGY)
    ]


# --- voice activity ---------------------------------------------------------------------------


def test_voice_segments_bridge_short_gaps_and_split_at_the_hangover() -> None:
    # As FDB merges the model channel: gaps up to 0.5 s are bridged, longer ones split, so
    # the 0.3-0.5 s pauses between the sentences of one answer do not end it.
    assert segments([(0.5, 1.5), (1.7, 2.0), (2.6, 3.0)]) == [(0.5, 2.0), (2.6, 3.0)]
    assert segments([(1.0, 2.0), (2.5, 3.0)]) == [(1.0, 3.0)]
    assert segments([(1.0, 2.0), (2.3, 3.0)]) == [(1.0, 3.0)]
    assert segments([(1.0, 2.0), (2.51, 3.0)]) == [(1.0, 2.0), (2.51, 3.0)]


def test_voice_segments_drop_clicks_and_handle_edges() -> None:
    assert segments([(1.0, 1.02)]) == []  # 20 ms < min_segment_s
    assert segments([(1.0, 1.06)]) == [(1.0, 1.06)]
    assert segments([]) == []
    assert voice_segments(np.zeros(0, np.float32), RATE, ENERGY) == ()
    # Speech up to the last (partial) frame ends at the last sample.
    audio = played([(0.0, 1.0)], total_s=1.0)[: RATE - 37]
    assert voice_segments(audio, RATE, ENERGY) == ((0.0, (RATE - 37) / RATE),)
    # Another rate: 24 kHz gives the same times.
    assert segments([(0.5, 1.5)], rate=24000) == [(0.5, 1.5)]


def test_voice_threshold_is_minus_45_dbfs() -> None:
    t = np.arange(RATE) / RATE
    tone = np.sin(2 * np.pi * 200.0 * t) * math.sqrt(2)  # RMS 1.0
    loud = (tone * 10 ** (-44.0 / 20)).astype(np.float32)
    quiet = (tone * 10 ** (-46.0 / 20)).astype(np.float32)
    assert voice_segments(loud, RATE, ENERGY) == ((0.0, 1.0),)
    assert voice_segments(quiet, RATE, ENERGY) == ()
    louder = MetricsConfig(threshold_dbfs=-50.0, detector="energy")
    assert voice_segments(quiet, RATE, louder) == ((0.0, 1.0),)


def test_metrics_config_rejects_bad_values() -> None:
    with pytest.raises(ValueError, match="stop_window_s"):
        MetricsConfig(stop_window_s=0)
    with pytest.raises(ValueError, match="threshold_dbfs"):
        MetricsConfig(threshold_dbfs=3.0)
    with pytest.raises(ValueError, match="speaking_tolerance_s"):
        MetricsConfig(speaking_tolerance_s=-0.1)


# --- overlap behaviour ------------------------------------------------------------------------


def test_respond_stop_and_response_latency() -> None:
    result = score_overlap(segments([(1.0, 4.0), (5.0, 7.0)]), (3.0, 3.6))
    assert result.outcome == "respond"
    assert result.stopped and result.new_response and result.speaking_at_overlap
    assert result.stop_latency_s == pytest.approx(1.0)
    assert result.response_latency_s == pytest.approx(1.4)


def test_resume_when_speech_runs_past_the_stop_window() -> None:
    result = score_overlap(segments([(1.0, 9.0)]), (3.0, 3.6))
    assert result.outcome == "resume"
    assert not result.stopped and result.stop_latency_s is None


def test_stop_exactly_at_the_window_end_counts_as_stopped() -> None:
    # overlap ends at 3.5, stop window 2.0 s: a segment ending at 5.5 stopped (inclusive) ...
    at_end = score_overlap(segments([(1.0, 5.5)]), (3.0, 3.5))
    assert at_end.outcome == "stop"
    assert at_end.stop_latency_s == pytest.approx(2.5)
    # ... one frame later it did not.
    assert score_overlap(segments([(1.0, 5.51)]), (3.0, 3.5)).outcome == "resume"


def test_a_turn_that_finishes_by_itself_in_the_window_continued_unless_it_was_flushed() -> None:
    # The turn's audio ends 1 s after the overlap, inside the stop window, and nothing follows.
    spans, overlap = segments([(1.0, 4.5)]), (3.0, 3.5)
    finished = score_overlap(spans, overlap, flushes=[])
    assert finished.outcome == "resume" and not finished.stopped
    assert finished.stop_latency_s is None
    # A yield (a flush at the next unit boundary) is what makes it a stop ...
    yielded = score_overlap(spans, overlap, flushes=[5.0])
    assert yielded.outcome == "stop" and yielded.stop_latency_s == pytest.approx(1.5)
    # ... not one from before the overlap, or long after the audio ended.
    assert score_overlap(spans, overlap, flushes=[2.0, 5.6]).outcome == "resume"
    # A new response after it is a response either way (the timeline is not needed).
    answered = segments([(1.0, 4.5), (5.5, 6.0)])
    assert score_overlap(answered, overlap, flushes=[]).outcome == "respond"


def test_response_exactly_at_the_window_end_counts() -> None:
    inside = score_overlap(segments([(1.0, 4.0), (8.5, 9.0)]), (3.0, 3.5))
    assert inside.outcome == "respond"
    assert inside.response_latency_s == pytest.approx(5.0)
    late = score_overlap(segments([(1.0, 4.0), (8.51, 9.0)]), (3.0, 3.5))
    assert late.outcome == "stop" and late.response_latency_s is None


def test_overlap_at_a_unit_boundary_between_unit_chunks() -> None:
    # Unit-sized chunks with 0.1 s gaps between them (as the playback queue plays one-second
    # units holding 0.9 s of speech) are one segment; an overlap starting exactly at a unit
    # boundary, or inside the gap before it, finds the assistant speaking.
    spans = [(1.0, 1.9), (2.0, 2.9), (3.0, 3.9), (4.0, 4.5)]
    assert segments(spans) == [(1.0, 4.5)]
    for start in (3.0, 2.95):
        result = score_overlap(segments(spans), (start, start + 0.5))
        assert result.speaking_at_overlap and result.outcome == "stop"
        assert result.stop_latency_s == pytest.approx(4.5 - start)


def test_not_speaking_at_overlap_start_and_the_tolerance() -> None:
    assert score_overlap(segments([(1.0, 2.0)]), (3.0, 3.5)).outcome == "not_speaking"
    # Speech that ended up to pause_s (0.8 s) before the onset: the onset fell in a pause of
    # the assistant's turn, so it was speaking; it stopped there (latency 0) ...
    ended = score_overlap(segments([(1.0, 2.3)]), (3.0, 3.5))
    assert ended.outcome == "stop" and ended.speaking_at_overlap and ended.stop_latency_s == 0.0
    assert score_overlap(segments([(1.0, 2.1)]), (3.0, 3.5)).outcome == "not_speaking"
    # ... or its turn went on after the pause and through the overlap: it continued.
    went_on = score_overlap(segments([(1.0, 2.6), (3.2, 9.0)]), (3.0, 3.5))
    assert went_on.outcome == "resume" and went_on.segment == (3.2, 9.0)
    # Speech beginning 50 ms after the onset is within the 0.1 s tolerance; 0.2 s is not.
    assert score_overlap(segments([(3.05, 9.0)]), (3.0, 3.5)).outcome == "resume"
    assert score_overlap(segments([(3.2, 9.0)]), (3.0, 3.5)).outcome == "not_speaking"


def test_response_before_the_overlap_ends_has_negative_latency() -> None:
    result = score_overlap(segments([(1.0, 3.2), (3.8, 5.0)]), (3.0, 4.0))
    assert result.outcome == "respond"
    assert result.response_latency_s == pytest.approx(-0.2)


# --- argument normalisation and tool use ------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("10", 10),
        (10, 10.0),
        ("600", 600.0),
        ("ten", 10),
        ("twenty-five", 25),
        ("one hundred and five", 105),
        ("  Kitchen   LIGHT ", "kitchen light"),
        (True, "true"),
        ("10 minutes", "600 seconds"),
        ("ten minutes", "10 min"),
        ("2 km", "2000 m"),
        ({"Room": "Kitchen"}, {"room": "kitchen"}),
        (["A", 1], ["a", "1"]),
        (None, None),
    ],
)
def test_values_equal_after_normalisation(a: Any, b: Any) -> None:
    assert values_equal(a, b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("10", 11),
        ("10", "10 minutes"),
        (True, 1),
        (False, 0),
        ("kitchen", "kitchen light"),
        ("10 minutes", "10 hours"),
        (["a", "b"], ["b", "a"]),
        (None, "none"),
    ],
)
def test_values_differ_after_normalisation(a: Any, b: Any) -> None:
    assert not values_equal(a, b)


def test_normalize_value_forms() -> None:
    assert normalize_value("10 minutes") == ("quantity", 600.0, "s")
    assert normalize_value(" Hello\tWorld ") == "hello world"
    assert normalize_value("false") is False


def test_tool_calls_exact_match_passes() -> None:
    expected = [ToolCall("set_timer", {"seconds": 600, "label": "Pasta"})]
    actual = [ToolCall("Set_Timer", {"seconds": "600", "label": " pasta"})]
    score = score_tool_calls(expected, actual)
    assert (score.tp, score.fp, score.fn) == (1, 0, 0)
    assert score.passed
    assert (score.arguments_matched, score.arguments_expected) == (2, 2)


def test_extra_tool_call_fails_pass_at_1_and_counts_as_false_positive() -> None:
    expected = [ToolCall("set_timer", {"seconds": 600})]
    actual = [ToolCall("set_timer", {"seconds": 600}), ToolCall("get_weather", {})]
    score = score_tool_calls(expected, actual)
    assert (score.tp, score.fp, score.fn) == (1, 1, 0)
    assert not score.passed
    assert (score.arguments_matched, score.arguments_expected) == (1, 1)


def test_missing_and_wrong_arguments() -> None:
    expected = [ToolCall("move", {"x": 1.5, "y": 2, "frame": "map"})]
    actual = [ToolCall("move", {"x": "1.5", "frame": "odom"})]
    score = score_tool_calls(expected, actual)
    assert (score.arguments_matched, score.arguments_expected) == (1, 3)
    assert score.tp == 1 and not score.passed


def test_extra_argument_fails_unless_null() -> None:
    expected = [ToolCall("lights", {"on": True})]
    assert not score_tool_calls(expected, [ToolCall("lights", {"on": True, "room": "x"})]).passed
    assert score_tool_calls(expected, [ToolCall("lights", {"on": "true", "room": None})]).passed


def test_tool_names_are_multisets_and_pairing_prefers_matching_arguments() -> None:
    expected = [ToolCall("timer", {"seconds": 60}), ToolCall("timer", {"seconds": 300})]
    actual = [ToolCall("timer", {"seconds": 300}), ToolCall("timer", {"seconds": "60"})]
    score = score_tool_calls(expected, actual)
    assert score.passed and (score.tp, score.fp, score.fn) == (2, 0, 0)
    short = score_tool_calls(expected, actual[:1])
    assert (short.tp, short.fp, short.fn) == (1, 0, 1)
    assert (short.arguments_matched, short.arguments_expected) == (1, 1)
    assert not short.passed


def test_wrong_tool_name() -> None:
    score = score_tool_calls([ToolCall("a", {"k": 1})], [ToolCall("b", {"k": 1})])
    assert (score.tp, score.fp, score.fn, score.pairs) == (0, 1, 1, 0)
    assert not score.passed and score.arguments_expected == 0


# --- the whole suite ---------------------------------------------------------------------------


def overlap_runs() -> list[SampleRun]:
    ov = (3.0, 3.5)
    return [
        run(
            sample("int_respond", "interruption", overlap=ov, expected="respond"),
            [(1.0, 4.0), (5.0, 6.0)],
        ),
        run(sample("int_resume", "interruption", overlap=ov, expected="respond"), [(1.0, 9.0)]),
        run(sample("int_silent", "interruption", overlap=ov, expected="respond"), [(5.0, 6.0)]),
        run(sample("int_failed", "interruption", overlap=ov, expected="respond"), error="boom"),
        run(
            sample("int_stop", "interruption", overlap=ov, expected="respond"),
            [(1.0, 4.5)],
            records=(Record(1, 5.0, Kind.FLUSH, '{"unit": 4, "turn": 1}'),),  # it yielded
        ),
        run(sample("bc_resume", "backchannel", overlap=ov, expected="resume"), [(1.0, 9.0)]),
        run(
            sample("bc_respond", "backchannel", overlap=ov, expected="resume"),
            [(1.0, 4.2), (6.0, 7.0)],
        ),
    ]


def test_overlap_rates_latencies_and_counts() -> None:
    m = energy_metrics(overlap_runs(), "scripted", "hand")
    inter = m["overlap"]["interruption"]
    # Scored: respond, resume, failed, stop (not_speaking excluded; the failure counts).
    assert inter["n"] == 5 and inter["scored"] == 4
    assert inter["not_speaking"] == 1 and inter["errors"] == 1
    assert inter["outcomes"] == {"respond": 1, "resume": 1, "stop": 1}
    assert inter["response_rate"] == pytest.approx(1 / 4)
    assert inter["correct_rate"] == pytest.approx(1 / 4)
    assert inter["stop_latency_s"]["values"] == pytest.approx([1.0, 1.5])
    assert inter["stop_latency_s"]["p50"] == pytest.approx(1.25)
    assert inter["response_latency_s"]["values"] == pytest.approx([1.5])
    bc = m["overlap"]["backchannel"]
    assert bc["continuation_rate"] == pytest.approx(0.5)
    assert bc["response_latency_s"]["values"] == pytest.approx([2.5])
    assert m["overlap"]["other_directed"]["n"] == 0
    assert m["overlap"]["other_directed"]["continuation_rate"] is None
    assert m["overlap"]["all"]["not_speaking"] == 1
    assert m["overlap"]["by_expected"]["resume"]["continuation_rate"] == pytest.approx(0.5)
    head = m["headline"]
    assert head["interruption.response_rate"] == pytest.approx(0.25)
    assert head["backchannel.continuation_rate"] == pytest.approx(0.5)
    assert head["other_directed.continuation_rate"] is None
    assert head["overlap.stop_latency_p50_s"] == pytest.approx(1.25)
    assert head["errors"] == 1
    assert m["errors"] == [{"id": "int_failed", "category": "interruption", "error": "boom"}]
    rows = {r["id"]: r for r in m["per_sample"]}
    assert rows["int_silent"]["outcome"] == "not_speaking"
    assert rows["int_silent"]["speaking_at_overlap"] is False
    assert rows["int_silent"]["correct"] is None
    assert rows["int_failed"]["outcome"] == "error" and rows["int_failed"]["correct"] is False
    assert rows["int_respond"]["correct"] is True and rows["bc_respond"]["correct"] is False
    json.dumps(m, allow_nan=False)  # JSON-able, no NaN


def test_pause_takeover_rate() -> None:
    turns = ((0.5, 2.0), (3.5, 5.0))
    runs = [
        # Starts in the pause (2.0..3.5).
        run(sample("p_take", "pause", turns=turns), [(2.8, 4.0)]),
        # Starts after the pause, within the 1 s grace and before the next turn ends.
        run(sample("p_grace", "pause", turns=turns), [(4.2, 5.5)]),
        # Starts after the user's next turn ended: a reply, not a takeover.
        run(sample("p_reply", "pause", turns=turns), [(5.6, 7.0)]),
        # Was already speaking before the pause began: not a takeover.
        run(sample("p_before", "pause", turns=turns), [(1.0, 2.5)]),
        # The pause given explicitly overrides the gaps between turns.
        run(
            sample("p_extra", "pause", turns=((0.5, 5.0),), extra={"pause": [6.0, 7.0]}),
            [(6.5, 8.0)],
        ),
        # One turn and no pause key: nothing to measure.
        run(sample("p_none", "pause", turns=((0.5, 2.0),)), [(2.5, 3.0)]),
        run(sample("p_failed", "pause", turns=turns), error="crash"),
    ]
    m = energy_metrics(runs, "x")
    pause = m["pause"]
    assert pause["n"] == 7 and pause["scored"] == 6 and pause["no_pause"] == 1
    assert pause["errors"] == 1
    # Takeovers: p_take, p_grace, p_extra and the failed run.
    assert pause["takeovers"] == 4
    assert pause["takeover_rate"] == pytest.approx(4 / 6)
    rows = {r["id"]: r for r in m["per_sample"]}
    assert rows["p_take"]["takeover_t"] == pytest.approx(2.8)
    assert rows["p_reply"]["outcome"] == "held" and rows["p_before"]["takeover"] is False


def test_malformed_pause_key_names_the_sample() -> None:
    bad = run(sample("p_bad", "pause", extra={"pause": [3.0]}), [])
    with pytest.raises(ValueError, match=r"p_bad.*pause"):
        energy_metrics([bad], "x")


def test_turn_taking_response_rate_and_latency() -> None:
    turns = ((0.5, 3.0),)
    runs = [
        run(sample("t_fast", "turn_taking", turns=turns), [(3.8, 5.0)]),
        run(sample("t_slow", "turn_taking", turns=turns), [(5.0, 6.0)]),
        run(sample("t_late", "turn_taking", turns=turns), [(8.1, 9.0)]),  # after the 5 s window
        run(sample("t_none", "turn_taking", turns=turns), []),
        # Talking over the user the whole time is not a reply after the turn.
        run(sample("t_over", "turn_taking", turns=turns), [(1.0, 4.0)]),
    ]
    m = energy_metrics(runs, "x")
    tt = m["turn_taking"]
    assert tt["scored"] == 5 and tt["responded"] == 2
    assert tt["response_rate"] == pytest.approx(0.4)
    assert tt["latency_s"]["values"] == pytest.approx([0.8, 2.0])
    assert m["headline"]["turn_taking.latency_p50_s"] == pytest.approx(1.4)


def test_delegation_confusion_matrix() -> None:
    runs = [
        run(sample("d1", "delegation", needs_delegation=True), delegations=("weather",)),
        run(sample("d2", "delegation", needs_delegation=True), delegations=("a", "b")),
        run(sample("d3", "delegation", needs_delegation=True)),
        run(sample("d4", "delegation", needs_delegation=False), delegations=("x",)),
        run(sample("d5", "delegation", needs_delegation=False)),
        run(sample("d6", "delegation", needs_delegation=False)),
        run(sample("d7", "delegation", needs_delegation=False), error="timeout"),
    ]
    d = energy_metrics(runs, "x")["delegation"]
    # The failed d7 counts as the wrong answer: a false positive.
    assert d["confusion"] == {"tp": 2, "fn": 1, "fp": 2, "tn": 2}
    assert d["recall"] == pytest.approx(2 / 3)
    assert d["specificity"] == pytest.approx(2 / 4)
    assert d["precision"] == pytest.approx(2 / 4)
    assert d["errors"] == 1


def test_delegation_rates_undefined_without_positives_or_negatives() -> None:
    only_negative = [run(sample("d", "delegation", needs_delegation=False))]
    d = energy_metrics(only_negative, "x")["delegation"]
    assert d["recall"] is None and d["specificity"] == 1.0
    empty = energy_metrics([], "x")
    assert empty["delegation"]["recall"] is None and empty["delegation"]["specificity"] is None
    assert empty["tool_use"]["selection_f1"] is None and empty["tool_use"]["pass_at_1"] is None
    assert empty["compute"]["p50_ms"] is None
    json.dumps(empty, allow_nan=False)


def test_tool_use_micro_f1_pass_at_1_and_argument_accuracy() -> None:
    timer = ToolCall("set_timer", {"seconds": 600})
    lights = ToolCall("lights", {"room": "kitchen", "on": True})
    runs = [
        # Exact (numeric string vs number): pass.
        run(
            sample("u1", "tool_use", calls=(timer,)),
            tool_calls=(ToolCall("set_timer", {"seconds": "600"}),),
        ),
        # Right call plus an extra one: tp 1, fp 1, fail.
        run(sample("u2", "tool_use", calls=(timer,)), tool_calls=(timer, ToolCall("get_time", {}))),
        # Name right, one of two arguments missing: tp 1, args 1/2, fail.
        run(
            sample("u3", "tool_use", calls=(lights,)),
            tool_calls=(ToolCall("lights", {"room": "Kitchen"}),),
        ),
        # No call at all: fn 1.
        run(sample("u4", "tool_use", calls=(lights,))),
        # Failed run: its expected call is missed.
        run(sample("u5", "tool_use", calls=(timer,)), error="x"),
    ]
    m = energy_metrics(runs, "x")
    tu = m["tool_use"]
    assert (tu["tp"], tu["fp"], tu["fn"]) == (3, 1, 2)
    precision, recall = 3 / 4, 3 / 5
    assert tu["selection_precision"] == pytest.approx(precision)
    assert tu["selection_recall"] == pytest.approx(recall)
    assert tu["selection_f1"] == pytest.approx(2 * precision * recall / (precision + recall))
    assert tu["pass_at_1"] == pytest.approx(1 / 5) and tu["passed"] == 1
    # Paired calls u1 (1/1), u2 (1/1), u3 (1/2).
    assert (tu["arguments_matched"], tu["arguments_expected"]) == (3, 4)
    assert tu["argument_accuracy"] == pytest.approx(0.75)
    assert tu["errors"] == 1
    rows = {r["id"]: r for r in m["per_sample"]}
    assert rows["u1"]["outcome"] == "pass" and rows["u2"]["tool_fp"] == 1
    assert rows["u5"]["outcome"] == "error" and rows["u5"]["tool_pass"] is False


def test_tool_use_f1_is_zero_when_no_name_matches() -> None:
    runs = [
        run(sample("u", "tool_use", calls=(ToolCall("a", {}),)), tool_calls=(ToolCall("b", {}),))
    ]
    assert energy_metrics(runs, "x")["tool_use"]["selection_f1"] == 0.0


def test_compute_percentiles_missed_deadlines_and_timeline_counts() -> None:
    clock = FakeClock()
    timeline = Timeline(clock)
    timeline.append(Kind.DECISION, {"unit": 0})
    clock.advance(1.0)
    timeline.append(Kind.FLUSH, {"unit": 1, "turn": 1})
    timeline.append(Kind.PROTOCOL_ERROR, {"unit": 1, "code": "x", "detail": ""})
    records = tuple(timeline.snapshot())
    runs = [
        run(sample("c1", "turn_taking"), compute=(0.01, 0.02), missed=1, records=records),
        run(sample("c2", "turn_taking"), compute=(0.03, 0.04), missed=2),
    ]
    m = energy_metrics(runs, "x")
    assert m["compute"]["units"] == 4
    assert m["compute"]["p50_ms"] == pytest.approx(25.0)
    assert m["compute"]["p99_ms"] == pytest.approx(39.7)
    assert m["compute"]["max_ms"] == pytest.approx(40.0)
    assert m["compute"]["missed_deadlines"] == 3
    row = m["per_sample"][0]
    assert row["flushes"] == 1 and row["protocol_errors"] == 1 and row["missed_units"] == 1


def test_metadata_and_config_are_reported() -> None:
    m = energy_metrics(
        overlap_runs(),
        "venus",
        "suite-a",
        config=MetricsConfig(stop_window_s=1.0, detector="energy"),
    )
    assert m["frontend"] == "venus" and m["suite"] == "suite-a"
    assert m["n_samples"] == 7
    assert m["categories"] == {"backchannel": 2, "interruption": 5}
    assert m["config"]["stop_window_s"] == 1.0
    # With a 1 s window the 4.5 s stop (1.0 s after the overlap's end) still counts; 4.2 too.
    assert m["overlap"]["interruption"]["outcomes"]["stop"] == 1


def test_duplicate_ids_and_bad_runs_are_rejected() -> None:
    s = sample("dup", "turn_taking")
    with pytest.raises(ValueError, match="duplicate sample ids"):
        energy_metrics([run(s), run(s)], "x")
    with pytest.raises(ValueError, match=r"'bad'.*1-D"):
        SampleRun(sample("bad", "pause"), (), np.zeros((2, 2)), RATE, (), (), (), 0)
    with pytest.raises(ValueError, match=r"'bad'.*played_rate"):
        SampleRun(sample("bad", "pause"), (), np.zeros(2), 0, (), (), (), 0)


def test_numpy_integer_rate_is_accepted() -> None:
    ok = SampleRun(
        sample("np", "pause"), (), np.zeros(4, np.float32), np.int64(RATE), (), (), (), 0
    )
    assert ok.played_rate == RATE


# --- idle samples -----------------------------------------------------------------------------


def idle_sample(
    sample_id: str,
    category: str,
    remark: str = "Sam, close the garage door please.",
    request: tuple[float, float, str] | None = None,
    span: tuple[float, float] = (1.0, 3.0),
) -> Sample:
    from venus_ros.eval.scenario import IdleSpeech

    turns = [] if category == "background_idle" else [Turn(span[0], span[1], remark)]
    if request is not None:
        turns.append(Turn(*request))
    kind = "tv" if category == "background_idle" else "vocative"
    return Sample(
        id=sample_id,
        folder=Path("/nonexistent") / sample_id,
        category=category,
        turns=tuple(turns),
        overlap=None,
        expected=None,
        needs_delegation=None,
        expected_tool_calls=(),
        tools=None,
        assistant_turns=(),
        extra={},
        idle=IdleSpeech(span[0], span[1], remark, kind),
    )


def test_content_words_leave_out_function_words() -> None:
    from venus_ros.eval.metrics import content_words

    assert content_words("Sam, could you close the garage door, please?") == {
        "sam",
        "clos",
        "gara",
        "door",
    }
    assert content_words("Oh, it is so.") == frozenset()
    # stems survive a recogniser's garbling of endings
    assert content_words("pass me the charge") == content_words("pass me the charger")


def test_idle_answered_within_the_window_and_before_the_request() -> None:
    ask = (6.0, 7.0, "What is the weather in Leeds tomorrow?")
    runs = [
        # silent: ignored
        run(idle_sample("od_quiet", "other_directed_idle")),
        # speaks 1.0 s after the remark: answered
        run(idle_sample("od_answer", "other_directed_idle"), [(4.0, 5.0)]),
        # speaks 5.5 s after the remark (past the 5 s window): not an answer to it
        run(idle_sample("od_late", "other_directed_idle"), [(8.5, 9.0)]),
        # answers the request only: the remark is ignored, the request responded
        run(idle_sample("bg_req", "background_idle", request=ask), [(7.6, 9.0)]),
        # answers during the gap before the request: answered; the request too
        run(idle_sample("bg_both", "background_idle", request=ask), [(3.5, 4.5), (7.5, 8.0)]),
        # a failed run counts as answered
        run(idle_sample("bg_err", "background_idle"), error="boom"),
    ]
    m = energy_metrics(runs, "x")
    rows = {r["id"]: r for r in m["per_sample"]}
    assert [rows[i]["idle_answered"] for i in rows] == [False, True, False, False, True, True]
    assert rows["od_answer"]["idle_answer_latency_s"] == pytest.approx(1.0)
    assert rows["od_quiet"]["outcome"] == "ignored" and rows["od_answer"]["outcome"] == "answered"
    assert rows["bg_req"]["request_responded"] is True
    assert rows["bg_req"]["request_latency_s"] == pytest.approx(0.6)
    assert rows["od_quiet"]["request_responded"] is None  # no request after it
    od, bg = m["idle"]["other_directed_idle"], m["idle"]["background_idle"]
    assert (od["n"], od["answered"], od["answered_rate"]) == (3, 1, pytest.approx(1 / 3))
    assert (bg["n"], bg["answered"], bg["errors"]) == (3, 2, 1)
    assert bg["with_request"] == 2 and bg["request_response_rate"] == 1.0
    assert m["idle"]["all"]["answered_rate"] == pytest.approx(3 / 6)
    assert m["headline"]["other_directed_idle.answered_rate"] == pytest.approx(1 / 3)
    assert m["headline"]["background_idle.answered_rate"] == pytest.approx(2 / 3)
    assert m["headline"]["idle.request_response_rate"] == 1.0
    json.dumps(m, allow_nan=False)


def test_idle_remark_merged_into_the_delegated_request() -> None:
    ask = (6.0, 7.0, "Please check whether the back door is locked.")
    merged = run(
        idle_sample("m", "other_directed_idle", request=ask),
        [(7.5, 8.0)],
        delegations=("Sam close the garage door. Please check whether the back door is locked.",),
    )
    clean = run(
        idle_sample("c", "other_directed_idle", request=ask),
        [(7.5, 8.0)],
        delegations=("check whether the back door is locked",),  # "door" is the request's word
    )
    alone = run(
        idle_sample("a", "other_directed_idle"),
        [(3.5, 4.0)],
        delegations=("close the garage door for Sam",),
    )
    m = energy_metrics([merged, clean, alone], "x")
    rows = {r["id"]: r for r in m["per_sample"]}
    assert rows["m"]["merged"] is True and rows["m"]["correct"] is False
    assert rows["c"]["merged"] is False and rows["c"]["remark_delegated"] is False
    assert rows["c"]["correct"] is True
    assert rows["a"]["merged"] is None and rows["a"]["remark_delegated"] is True
    block = m["idle"]["other_directed_idle"]
    assert block["merged"] == 1 and block["merged_rate"] == 0.5
    assert block["remark_delegated"] == 2 and block["remark_delegated_rate"] == pytest.approx(2 / 3)
    assert m["headline"]["idle.merged_rate"] == 0.5
    # idle samples never enter the delegation confusion matrix
    assert m["delegation"]["n"] == 0


def test_idle_window_is_configurable() -> None:
    with pytest.raises(ValueError, match="idle_window_s"):
        MetricsConfig(idle_window_s=0)
    late = run(idle_sample("l", "other_directed_idle"), [(8.5, 9.0)])
    wide = MetricsConfig(detector="energy", idle_window_s=6.0)
    assert compute_metrics([late], "x", config=wide)["per_sample"][0]["idle_answered"] is True
