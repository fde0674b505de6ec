"""Scoring evaluation runs: overlap behaviour, pauses, turn taking, delegation, tool use, compute.

Every timing metric is measured on the assistant's voice activity in the audio the speaker
actually PLAYED (flushes applied), on the session time axis, as Full-Duplex-Bench v1.5 measures
it on the model's output channel. The definitions below are the ones ``docs/eval.md`` states;
every threshold and window is a field of :class:`MetricsConfig` and is echoed in the result.

Voice activity (:func:`voice_segments`, :mod:`venus_ros.eval.timing`): the packaged Silero VAD
(``detector="silero"``, as FDB) or a 10 ms RMS gate at ``threshold_dbfs`` (``"energy"``), then
assistant segments merged across gaps of at most ``assistant_merge_s`` (0.5 s, FDB's model
merge) and user segments across ``user_merge_s`` (0.6 s); so the 0.3-0.5 s pauses between the
sentences of one answer do not end it.

Overlap samples (``overlap = [s, e]``):

* the assistant is *speaking at the overlap* when a segment ``[a, b]`` has
  ``a <= s + speaking_tolerance_s`` and ``b > s`` (0.1 s: speech that began just after the
  user's onset, e.g. at the next unit boundary, still counts); that is the *running* segment;
  or when the onset falls in a pause of the turn (a segment ended at most ``pause_s`` before
  ``s``; if the next one starts within ``pause_s`` of that end, it is the running segment);
* it *stopped* when ``b <= e + stop_window_s`` (2.0 s, inclusive; a 1e-9 s slack absorbs float
  rounding); ``stop_latency = b - s``;
* a *new response* is the next segment, when it starts at ``a2 <= e + response_window_s``
  (5.0 s, inclusive); ``response_latency = a2 - e`` (negative when the assistant answered
  before the user's overlapping speech ended; not clipped);
* outcome: ``respond`` (stopped and a new response), ``stop`` (stopped, no new response),
  ``resume`` (did not stop: the response continued), ``not_speaking`` (no running segment:
  counted and reported, excluded from the rates), ``error`` (the run failed: counted as a
  failure in the rates). This acoustic outcome is secondary: with a judge, the rates come from
  the content labels (:mod:`venus_ros.eval.judge`), and FDB's ``latency_stop_list`` /
  ``latency_resp_list`` are computed from ``input.wav`` and the played audio.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from venus_ros.core.timeline import Kind, Record
from venus_ros.eval.judge import LABELS, Judge, JudgeCase, Transcriber, judge_window
from venus_ros.eval.numbers import parse_duration, parse_number
from venus_ros.eval.scenario import IDLE_CATEGORIES, OVERLAP_CATEGORIES, Sample, ToolCall
from venus_ros.eval.timing import (
    DETECTORS,
    double_talk,
    energy_segments,
    merge_segments,
    response_gaps,
    speech_segments,
)

__all__ = [
    "METRICS_VERSION",
    "MetricsConfig",
    "OverlapResult",
    "SampleRun",
    "ToolScore",
    "compute_metrics",
    "content_words",
    "normalize_value",
    "score_overlap",
    "score_tool_calls",
    "values_equal",
    "voice_segments",
]

#: Bumped when a definition changes, so reports from different definitions are not compared.
METRICS_VERSION = 2

_EPS = 1e-9  # slack for comparisons of times that are exact in decimal but not in binary
_LATENCY_QUANTILES = (50, 90)


@dataclass(frozen=True)
class MetricsConfig:
    """Thresholds and windows of every metric (see the module docstring for their use).

    Attributes:
        frame_s: energy detector: frame length.
        threshold_dbfs: energy detector: frame RMS at or above which a frame is voiced (dBFS).
        assistant_merge_s: assistant segments separated by at most this are one (FDB: 0.5 s).
        user_merge_s: user segments separated by at most this are one (FDB: 0.6 s).
        min_segment_s: energy detector: voiced runs shorter than this are dropped.
        pause_s: a user onset at most this long after an assistant segment ended falls inside
            the assistant's turn (a pause between its sentences): the assistant was speaking.
        speaking_tolerance_s: speech may begin this long after the overlap's start and still be
            "speaking at the overlap"; for turn taking, a reply may begin this long before the
            user's last turn ends.
        stop_window_s: a stop counts when the running segment ends by ``overlap end + this``.
        response_window_s: a new response counts when it starts by ``overlap end + this`` (and,
            for turn taking, by ``last turn end + this``).
        pause_grace_s: a pause takeover counts when assistant speech starts in
            ``[pause start, min(pause end + this, end of the next user turn))``.
        detector: voice activity detector, ``"silero"`` (FDB's, the default) or ``"energy"``.
        idle_window_s: idle samples: speech starting by ``idle end + this`` (and before the
            next user turn) answers the speech not addressed to the assistant.
    """

    frame_s: float = 0.010
    threshold_dbfs: float = -45.0
    assistant_merge_s: float = 0.5
    user_merge_s: float = 0.6
    min_segment_s: float = 0.05
    speaking_tolerance_s: float = 0.10
    pause_s: float = 0.8
    stop_window_s: float = 2.0
    response_window_s: float = 5.0
    pause_grace_s: float = 1.0
    detector: str = "silero"
    idle_window_s: float = 5.0

    def __post_init__(self) -> None:
        if self.detector not in DETECTORS:
            raise ValueError(
                f"metrics.detector must be one of {', '.join(DETECTORS)}, got {self.detector!r}"
            )
        positive = ("frame_s", "stop_window_s", "response_window_s", "idle_window_s")
        for name in positive:
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"metrics.{name} must be a finite number > 0, got {value!r}")
        nonnegative = ("assistant_merge_s", "user_merge_s", "min_segment_s", "pause_s")
        for name in (*nonnegative, "speaking_tolerance_s", "pause_grace_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"metrics.{name} must be a finite number >= 0, got {value!r}")
        if not (math.isfinite(self.threshold_dbfs) and self.threshold_dbfs < 0):
            raise ValueError(
                f"metrics.threshold_dbfs must be a finite number < 0, got {self.threshold_dbfs!r}"
            )


@dataclass(frozen=True)
class SampleRun:
    """One sample played through the duplex loop: what the metrics are computed from.

    Attributes:
        sample: the scenario sample.
        records: the session's timeline (session time 0 = the input's sample 0).
        played: the assistant's audio as the speaker PLAYED it (flushes applied), float32 mono
            on the session time axis, index 0 = time 0 (silence where nothing played).
        played_rate: the rate of ``played`` in Hz.
        delegations: queries of the closed ``<delegate>`` spans, in order.
        tool_calls: calls received by the suite's recording tools, in order.
        unit_compute_s: frontend compute per unit, seconds.
        missed_units: units that missed their deadline.
        error: why the sample could not be run; empty when it ran.
    """

    sample: Sample
    records: tuple[Record, ...]
    played: np.ndarray
    played_rate: int
    delegations: tuple[str, ...]
    tool_calls: tuple[ToolCall, ...]
    unit_compute_s: tuple[float, ...]
    missed_units: int
    error: str = ""

    def __post_init__(self) -> None:
        played = np.asarray(self.played)
        if played.ndim != 1:
            raise ValueError(
                f"sample {self.sample.id!r}: played must be 1-D mono audio, got shape "
                f"{played.shape}"
            )
        if not np.issubdtype(played.dtype, np.floating):
            raise ValueError(
                f"sample {self.sample.id!r}: played must be float audio, got {played.dtype}"
            )
        rate = self.played_rate
        if isinstance(rate, bool) or not isinstance(rate, (int, np.integer)) or rate <= 0:
            raise ValueError(
                f"sample {self.sample.id!r}: played_rate must be a positive int, "
                f"got {self.played_rate!r}"
            )
        if self.missed_units < 0:
            raise ValueError(
                f"sample {self.sample.id!r}: missed_units must be >= 0, got {self.missed_units}"
            )


# --- voice activity ---------------------------------------------------------------------------


def voice_segments(
    played: np.ndarray, rate: int, config: MetricsConfig | None = None
) -> tuple[tuple[float, float], ...]:
    """The assistant's voice segments in played audio: the configured detector's segments
    merged across gaps of at most ``assistant_merge_s`` (:mod:`venus_ros.eval.timing`).

    Args:
        played: mono audio, index 0 = session time 0.
        rate: its sample rate in Hz.
        config: detector and thresholds; the defaults when None.

    Returns:
        ``(start_s, end_s)`` pairs, sorted, disjoint, more than ``assistant_merge_s`` apart.
    """
    config = config or MetricsConfig()
    return tuple(merge_segments(_raw_segments(played, rate, config), config.assistant_merge_s))


def user_segments(
    audio: np.ndarray, rate: int, config: MetricsConfig | None = None
) -> tuple[tuple[float, float], ...]:
    """The user channel's speech segments merged across gaps of at most ``user_merge_s``."""
    config = config or MetricsConfig()
    return tuple(merge_segments(_raw_segments(audio, rate, config), config.user_merge_s))


def _raw_segments(audio: np.ndarray, rate: int, config: MetricsConfig) -> list[tuple[float, float]]:
    x = np.asarray(audio)
    if x.ndim != 1:
        raise ValueError(f"played must be 1-D mono audio, got shape {x.shape}")
    if rate <= 0:
        raise ValueError(f"played rate must be > 0, got {rate}")
    if config.detector == "energy":
        return energy_segments(
            x,
            int(rate),
            frame_s=config.frame_s,
            threshold_dbfs=config.threshold_dbfs,
            min_segment_s=config.min_segment_s,
        )
    return speech_segments(x, int(rate), config.detector)


# --- overlap behaviour ------------------------------------------------------------------------


@dataclass(frozen=True)
class OverlapResult:
    """How the assistant handled one overlap (definitions in the module docstring).

    Attributes:
        outcome: ``respond``, ``stop``, ``resume`` or ``not_speaking``.
        speaking_at_overlap: a segment was running at the overlap's start.
        stopped: the running segment ended within the stop window.
        new_response: a new segment started within the response window after the stop.
        stop_latency_s: end of the running segment minus the overlap's start (when stopped).
        response_latency_s: start of the new segment minus the overlap's end (when any).
        segment: the running segment, or None.
    """

    outcome: str
    speaking_at_overlap: bool
    stopped: bool
    new_response: bool
    stop_latency_s: float | None
    response_latency_s: float | None
    segment: tuple[float, float] | None


#: A flush this long after a voice segment's end still counts as the yield that ended it (the
#: flush comes at the next unit boundary; the chunk's audio may have ended before it).
FLUSH_SLACK_S = 1.0


def score_overlap(
    segments: Sequence[tuple[float, float]],
    overlap: tuple[float, float],
    config: MetricsConfig | None = None,
    flushes: Sequence[float] | None = None,
) -> OverlapResult:
    """Classify the assistant's behaviour around one overlap from its voice segments.

    Args:
        segments: sorted voice segments (from :func:`voice_segments`).
        overlap: ``(start, end)`` of the user's overlapping speech, seconds.
        config: windows; the defaults when None.
        flushes: times of the loop's flushes (yields), when the timeline is known. A running
            segment that ends inside the stop window without a flush in
            ``[overlap start, its end + FLUSH_SLACK_S]`` and with no new response after it
            finished its turn by itself: that is a continuation, not a stop.
    """
    config = config or MetricsConfig()
    start, end = overlap
    index = next(
        (
            i
            for i, (a, b) in enumerate(segments)
            if a <= start + config.speaking_tolerance_s + _EPS and b > start
        ),
        None,
    )
    if index is None:
        # An onset inside a pause of the assistant's turn: it was speaking.
        index = next(
            (
                i
                for i in range(len(segments) - 1, -1, -1)
                if segments[i][1] <= start and start - segments[i][1] <= config.pause_s + _EPS
            ),
            None,
        )
        if index is None:
            return OverlapResult("not_speaking", False, False, False, None, None, None)
        nxt = index + 1
        if nxt < len(segments) and segments[nxt][0] - segments[index][1] <= config.pause_s + _EPS:
            index = nxt  # the turn went on after the pause
    running = segments[index]
    stopped = running[1] <= end + config.stop_window_s + _EPS
    if not stopped:
        return OverlapResult("resume", True, False, False, None, None, running)
    stop_latency = max(0.0, running[1] - start)
    following = segments[index + 1] if index + 1 < len(segments) else None
    if following is not None and following[0] <= end + config.response_window_s + _EPS:
        latency = following[0] - end
        return OverlapResult("respond", True, True, True, stop_latency, latency, running)
    if flushes is not None and not any(
        start - _EPS <= t <= running[1] + FLUSH_SLACK_S for t in flushes
    ):
        return OverlapResult("resume", True, False, False, None, None, running)
    return OverlapResult("stop", True, True, False, stop_latency, None, running)


# --- argument normalisation -------------------------------------------------------------------

_QUANTITY_RE = re.compile(r"^(?P<number>.+?)\s*(?P<unit>[a-z%°]+)$")
#: Units folded to one canonical unit and factor (durations to seconds, lengths to metres).
_UNITS: dict[str, tuple[str, float]] = {
    **{u: ("s", 1.0) for u in ("s", "sec", "secs", "second", "seconds")},
    **{u: ("s", 60.0) for u in ("min", "mins", "minute", "minutes")},
    **{u: ("s", 3600.0) for u in ("h", "hr", "hrs", "hour", "hours")},
    **{u: ("s", 0.001) for u in ("ms", "millisecond", "milliseconds")},
    **{u: ("m", 1.0) for u in ("m", "meter", "meters", "metre", "metres")},
    **{u: ("m", 0.01) for u in ("cm", "centimeter", "centimeters", "centimetre", "centimetres")},
    **{u: ("m", 1000.0) for u in ("km", "kilometer", "kilometers", "kilometre", "kilometres")},
    **{u: ("%", 1.0) for u in ("%", "percent", "pct")},
    **{u: ("deg", 1.0) for u in ("°", "deg", "degree", "degrees")},
}


def normalize_value(value: Any) -> Any:
    """Canonical form of a tool argument, for comparison.

    * booleans stay booleans; the strings ``"true"``/``"false"`` become booleans;
    * numbers (int or float) become floats; numeric strings (``"10"``, ``"10.0"``) and English
      number words up to 999 (``"ten"``, ``"twenty-five"``) become the same float;
    * strings are case-folded, stripped and their whitespace collapsed;
    * a number with a unit (``"10 minutes"``, ``"600 s"``, ``"5 km"``) becomes
      ``("quantity", value, unit)`` with durations in seconds and lengths in metres, so
      ``"10 minutes" == "600 seconds"``; a bare number never equals a quantity;
    * lists become tuples of normalised items; objects become sorted tuples of
      (normalised key, normalised value); None stays None.
    """
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, (int, float, np.integer, np.floating)):
        return float(value)
    if isinstance(value, str):
        text = " ".join(value.casefold().split())
        if text in ("true", "false"):
            return text == "true"
        number = parse_number(text)
        if number is not None:
            return number
        seconds = parse_duration(text)
        if seconds is not None:
            return ("quantity", seconds, "s")
        match = _QUANTITY_RE.match(text)
        if match and match["unit"] in _UNITS:
            amount = parse_number(match["number"].strip())
            if amount is not None:
                unit, factor = _UNITS[match["unit"]]
                return ("quantity", amount * factor, unit)
        return text
    if isinstance(value, Mapping):
        return tuple(
            sorted(((_normalize_key(k), normalize_value(v)) for k, v in value.items()), key=repr)
        )
    if isinstance(value, (list, tuple)):
        return tuple(normalize_value(v) for v in value)
    return repr(value)


def _normalize_key(key: Any) -> str:
    return " ".join(str(key).casefold().split())


def values_equal(a: Any, b: Any) -> bool:
    """Whether two tool-argument values are equal after :func:`normalize_value`.

    Floats compare with a relative and absolute tolerance of 1e-9.
    """
    return _same(normalize_value(a), normalize_value(b))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


# --- tool use -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolScore:
    """Tool use on one sample.

    Attributes:
        tp: tool names both expected and called (multiset intersection).
        fp: calls beyond the expected ones, by name (extra calls).
        fn: expected calls not made, by name.
        pairs: expected calls paired with a call of the same name.
        arguments_expected: expected arguments over the paired calls.
        arguments_matched: those the paired call gave with an equal value.
        passed: Pass@1: every expected call made with correct arguments and no other call.
    """

    tp: int
    fp: int
    fn: int
    pairs: int
    arguments_expected: int
    arguments_matched: int
    passed: bool


def _arguments(call: ToolCall) -> dict[str, Any]:
    return {_normalize_key(k): v for k, v in dict(call.arguments).items()}


def _matched_arguments(expected: Mapping[str, Any], actual: Mapping[str, Any]) -> int:
    return sum(1 for k, v in expected.items() if k in actual and values_equal(v, actual[k]))


def score_tool_calls(expected: Sequence[ToolCall], actual: Sequence[ToolCall]) -> ToolScore:
    """Score the calls made against the calls expected.

    Names compare case-folded and stripped, as multisets. Expected and actual calls of the same
    name are paired greedily, the pair with the most matching arguments first (ties: the earlier
    expected call, then the earlier actual call), each call in at most one pair. A paired call
    is *correct* when every expected argument is present with an equal value
    (:func:`values_equal`) and it has no other argument except ones set to null.
    """
    names_expected = Counter(_normalize_key(c.name) for c in expected)
    names_actual = Counter(_normalize_key(c.name) for c in actual)
    tp = sum((names_expected & names_actual).values())
    want = [_arguments(c) for c in expected]
    got = [_arguments(c) for c in actual]
    candidates = sorted(
        (
            (-_matched_arguments(want[i], got[j]), i, j)
            for i, e in enumerate(expected)
            for j, a in enumerate(actual)
            if _normalize_key(e.name) == _normalize_key(a.name)
        )
    )
    paired: dict[int, int] = {}
    used: set[int] = set()
    for _, i, j in candidates:  # best-matching pairs first; ties by position
        if i not in paired and j not in used:
            paired[i] = j
            used.add(j)
    matched_total = expected_total = 0
    all_correct = len(paired) == len(expected)
    for i, j in paired.items():
        matched = _matched_arguments(want[i], got[j])
        expected_total += len(want[i])
        matched_total += matched
        extra = [k for k, v in got[j].items() if k not in want[i] and v is not None]
        all_correct &= matched == len(want[i]) and not extra
    pairs = len(paired)
    passed = all_correct and len(actual) == len(expected)
    return ToolScore(
        tp=tp,
        fp=sum(names_actual.values()) - tp,
        fn=sum(names_expected.values()) - tp,
        pairs=pairs,
        arguments_expected=expected_total,
        arguments_matched=matched_total,
        passed=passed,
    )


# --- aggregation helpers ----------------------------------------------------------------------


def _ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator else None


def _summary(values: Iterable[float], quantiles: Sequence[int] = _LATENCY_QUANTILES) -> dict:
    data = [float(v) for v in values]
    out: dict[str, Any] = {"n": len(data)}
    arr = np.asarray(data, dtype=np.float64)
    for q in quantiles:
        out[f"p{q}"] = float(np.percentile(arr, q)) if data else None
    out["mean"] = float(arr.mean()) if data else None
    out["values"] = data
    return out


def pause_intervals(sample: Sample) -> list[tuple[float, float]]:
    """The pause intervals of a pause sample: ``extra["pause"]`` or the gaps between turns."""
    given = sample.extra.get("pause")
    if given is None:
        turns = sample.turns
        return [
            (turns[i].end, turns[i + 1].start)
            for i in range(len(turns) - 1)
            if turns[i + 1].start > turns[i].end
        ]
    items = given if given and isinstance(given[0], (list, tuple)) else [given]
    pauses = []
    for item in items:
        ok = (
            isinstance(item, (list, tuple))
            and len(item) == 2
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in item)
            and 0 <= item[0] < item[1]
        )
        if not ok:
            raise ValueError(
                f"sample {sample.id!r}: extra key 'pause' must be [start, end] (start < end) or "
                f"a list of them, got {given!r}"
            )
        pauses.append((float(item[0]), float(item[1])))
    return pauses


def _takeover(
    segments: Sequence[tuple[float, float]], sample: Sample, config: MetricsConfig
) -> tuple[bool | None, float | None]:
    pauses = pause_intervals(sample)
    if not pauses:
        return None, None
    for p0, p1 in pauses:
        limit = p1 + config.pause_grace_s
        later = [t.end for t in sample.turns if t.start >= p1 - _EPS]
        if later:
            limit = min(limit, min(later))
        for a, _ in segments:
            if p0 - _EPS <= a < limit - _EPS:
                return True, a
    return False, None


def _turn_response(
    segments: Sequence[tuple[float, float]], sample: Sample, config: MetricsConfig
) -> tuple[bool | None, float | None]:
    if not sample.turns:
        return None, None
    last = max(t.end for t in sample.turns)
    for a, _ in segments:
        if a < last - config.speaking_tolerance_s - _EPS:
            continue
        if a <= last + config.response_window_s + _EPS:
            return True, a - last
        break
    return False, None


#: Function words left out of :func:`content_words` (a general English list, not a suite's).
_STOPWORDS = frozenset(
    """a an the and or but so if then than that this these those there here is are was were be
    been being am do does did have has had having will would shall should can could may might
    must i me my mine you your yours he him his she her hers it its we us our they them their
    what which who whom whose when where why how not no yes oh ah hey hi ok okay please to of
    in on at by for with from up down out off over into onto about just now too very also all
    any some one let lets get got go going come say said tell like well um uh er hmm""".split()
)


#: Content words are compared by their first letters (a crude stem that also survives a
#: recogniser's "charge" for "charger" or "move" for "moved").
STEM_LETTERS = 4


def content_words(text: str) -> frozenset[str]:
    """The stems (first :data:`STEM_LETTERS` letters) of the lower-cased words of ``text`` of
    three letters or more that are not function words (names included); what merging is
    judged on."""
    words = (w.strip("'") for w in re.findall(r"[a-z0-9']+", text.lower()))
    return frozenset(w[:STEM_LETTERS] for w in words if len(w) >= 3 and w not in _STOPWORDS)


def _holds(query: str, remark: frozenset[str]) -> bool:
    """Whether ``query`` holds at least a third (and at least one) of the ``remark`` stems."""
    if not remark:
        return False
    shared = len(remark & content_words(query))
    return shared >= max(1, math.ceil(len(remark) / 3))


def _idle_scores(
    segments: Sequence[tuple[float, float]], run: SampleRun, config: MetricsConfig
) -> dict[str, Any]:
    """Answered, request response and merging of one idle sample (see the module docstring)."""
    sample = run.sample
    idle = sample.idle
    assert idle is not None
    followups = sample.followups()
    out: dict[str, Any] = {"has_request": bool(followups)}
    if run.error:
        return {**out, "idle_answered": True}
    limit = idle.end + config.idle_window_s
    if followups:
        limit = min(limit, followups[0].start)
    answer = next((a for a, _ in segments if idle.start - _EPS <= a < limit - _EPS), None)
    out.update(
        idle_answered=answer is not None,
        idle_answer_latency_s=None if answer is None else round(answer - idle.end, 6),
    )
    request_words = frozenset().union(*(content_words(t.text) for t in followups))
    remark = content_words(idle.text) - request_words
    out["remark_delegated"] = any(_holds(q, remark) for q in run.delegations)
    if followups:
        responded, latency = _turn_response(segments, replace(sample, turns=followups), config)
        out.update(
            request_responded=responded,
            request_latency_s=latency,
            merged=any(
                _holds(q, remark) and bool(content_words(q) & request_words)
                for q in run.delegations
            ),
        )
    return out


def _idle_block(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    answered = sum(1 for r in rows if r["idle_answered"])
    ran = [r for r in rows if not r["error"]]
    delegated = sum(1 for r in ran if r["remark_delegated"])
    with_request = [r for r in rows if r["has_request"]]
    scored = [r for r in with_request if not r["error"]]
    responded = sum(1 for r in with_request if r["request_responded"])
    merged = sum(1 for r in scored if r["merged"])

    def latencies(key: str) -> dict:
        return _summary(r[key] for r in rows if r[key] is not None)

    return {
        "n": len(rows),
        "errors": sum(1 for r in rows if r["error"]),
        "answered": answered,
        "answered_rate": _ratio(answered, len(rows)),
        "answer_latency_s": latencies("idle_answer_latency_s"),
        "remark_delegated": delegated,
        "remark_delegated_rate": _ratio(delegated, len(ran)),
        "with_request": len(with_request),
        "request_responded": responded,
        "request_response_rate": _ratio(responded, len(with_request)),
        "request_latency_s": latencies("request_latency_s"),
        "merged": merged,
        "merged_rate": _ratio(merged, len(scored)),
    }


def _count(records: Sequence[Record], *kinds: Kind) -> int:
    wanted = set(kinds)
    return sum(1 for r in records if r.kind in wanted)


# --- the whole suite ---------------------------------------------------------------------------


def _row(run: SampleRun) -> dict[str, Any]:
    sample = run.sample
    return {
        "id": sample.id,
        "category": sample.category,
        "error": run.error,
        "outcome": "error" if run.error else None,
        "expected": sample.expected,
        "correct": None,
        "overlap": list(sample.overlap) if sample.overlap else None,
        "speaking_at_overlap": None,
        "stop_latency_s": None,
        "response_latency_s": None,
        "takeover": None,
        "takeover_t": None,
        "responded": None,
        "turn_latency_s": None,
        "idle": None if sample.idle is None else [sample.idle.start, sample.idle.end],
        "has_request": None,
        "idle_answered": None,
        "idle_answer_latency_s": None,
        "request_responded": None,
        "request_latency_s": None,
        "merged": None,
        "remark_delegated": None,
        "needs_delegation": sample.needs_delegation,
        "delegated": bool(run.delegations) if not run.error else None,
        "delegations": list(run.delegations),
        "tool_calls": [{"name": c.name, "arguments": dict(c.arguments)} for c in run.tool_calls],
        "tool_pass": None,
        "tool_tp": None,
        "tool_fp": None,
        "tool_fn": None,
        "arguments_expected": None,
        "arguments_matched": None,
        "voice_segments": [],
        "label": None,
        "label_reason": None,
        "judged_text": None,
        "transcript": None,
        "latency_stop_list": None,
        "latency_resp_list": None,
        "fdb_stop_s": None,
        "fdb_resp_s": None,
        "flushes": _count(run.records, Kind.FLUSH),
        "protocol_errors": _count(run.records, Kind.PROTOCOL_ERROR, Kind.FRONTEND_ERROR),
        "units": len(run.unit_compute_s),
        "missed_units": run.missed_units,
    }


def _overlap_block(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    outcomes = Counter(r["outcome"] for r in rows)
    scored = [r for r in rows if r["outcome"] != "not_speaking"]
    n_scored = len(scored)
    labels = Counter(r["label"] for r in scored if r["label"] is not None)
    basis = "content" if labels else "acoustic"
    if basis == "content":
        respond, resume = labels["respond"], labels["resume"]
    else:
        respond, resume = outcomes["respond"], outcomes["resume"]
    correct = [r for r in scored if r["correct"]]
    return {
        "n": len(rows),
        "scored": n_scored,
        "not_speaking": outcomes["not_speaking"],
        "errors": outcomes["error"],
        "basis": basis,
        "labels": {k: labels[k] for k in LABELS},
        "outcomes": {k: outcomes[k] for k in ("respond", "resume", "stop")},
        "response_rate": _ratio(respond, n_scored),
        "continuation_rate": _ratio(resume, n_scored),
        "acoustic_response_rate": _ratio(outcomes["respond"], n_scored),
        "acoustic_continuation_rate": _ratio(outcomes["resume"], n_scored),
        "correct_rate": _ratio(len(correct), n_scored),
        "stop_latency_s": _summary(
            r["stop_latency_s"] for r in rows if r["stop_latency_s"] is not None
        ),
        "response_latency_s": _summary(
            r["response_latency_s"] for r in rows if r["response_latency_s"] is not None
        ),
        "fdb_stop_s": _summary(r["fdb_stop_s"] for r in rows if r["fdb_stop_s"] is not None),
        "fdb_resp_s": _summary(r["fdb_resp_s"] for r in rows if r["fdb_resp_s"] is not None),
    }


def overlap_text(sample: Sample) -> str:
    """What was said over the assistant: the user's turns meeting the overlap, else the
    background line (``extra["background"]["text"]``), else ``extra["current_turn_text"]``."""
    if sample.overlap is None:
        return ""
    start, end = sample.overlap
    texts = [t.text for t in sample.turns if t.start < end and t.end > start and t.text]
    if texts:
        return " ".join(texts)
    background = sample.extra.get("background")
    if isinstance(background, dict) and isinstance(background.get("text"), str):
        return background["text"]
    current = sample.extra.get("current_turn_text")
    return current if isinstance(current, str) else ""


def answer_reference(sample: Sample) -> str:
    """The answer in progress at the overlap: the scripted assistant turn that started last
    before the overlap's onset, else ``extra["reference"]``; empty when unknown."""
    if sample.overlap is not None:
        started = [a for a in sample.assistant_turns if a.start <= sample.overlap[0]]
        if started:
            return started[-1].text
    reference = sample.extra.get("reference")
    return reference if isinstance(reference, str) else ""


def _fdb_timing(
    row: dict[str, Any],
    run: SampleRun,
    segments: Sequence[tuple[float, float]],
    config: MetricsConfig,
) -> None:
    """FDB's two lists for one sample, and the values read from them at the overlap:
    ``fdb_stop_s`` = length of the first double-talk interval that starts in the overlap,
    ``fdb_resp_s`` = the response gap whose user end is the overlap's merged user segment."""
    sample = run.sample
    if not sample.input_path.is_file():
        return
    audio, rate = sample.load_audio()
    user = user_segments(audio, rate, config)
    stops = double_talk(user, segments)
    gaps = response_gaps(user, segments)
    row["latency_stop_list"] = [list(x) for x in stops]
    row["latency_resp_list"] = [list(x) for x in gaps]
    if sample.overlap is None:
        return
    start, end = sample.overlap
    slack = config.speaking_tolerance_s
    stop = next((b - a for a, b in stops if start - slack <= a <= end + _EPS), None)
    row["fdb_stop_s"] = None if stop is None else round(stop, 3)
    merged_end = next((b for a, b in user if a <= end + slack and b >= end - slack), end)
    resp = next((b - a for a, b in gaps if abs(a - merged_end) <= slack + _EPS), None)
    row["fdb_resp_s"] = None if resp is None else round(resp, 3)


def _content_label(
    row: dict[str, Any],
    run: SampleRun,
    segments: Sequence[tuple[float, float]],
    judge: Judge,
    transcriber: Transcriber,
    config: MetricsConfig,
) -> None:
    sample = run.sample
    assert sample.overlap is not None
    words = transcriber.words(run.played, run.played_rate, segments)
    before, after = judge_window(
        words,
        segments,
        sample.overlap,
        stop_window_s=config.stop_window_s,
        response_window_s=config.response_window_s,
        pause_s=config.pause_s,
        flushes=[r.t for r in run.records if r.kind is Kind.FLUSH] if run.records else None,
        flush_slack_s=FLUSH_SLACK_S,
    )
    case = JudgeCase(
        overlap_text=overlap_text(sample),
        before=before,
        after=after,
        reference=answer_reference(sample),
        category=sample.category,
        words=words,
        overlap=sample.overlap,
    )
    verdict = judge.label(case)
    row.update(
        label=verdict.label,
        label_reason=verdict.reason,
        judged_text=after,
        transcript=[[w.text, w.start, w.end] for w in words],
    )


def compute_metrics(
    runs: Sequence[SampleRun],
    frontend: str,
    suite: str = "",
    *,
    config: MetricsConfig | None = None,
    judge: Judge | None = None,
    transcriber: Transcriber | None = None,
    fdb_timing: bool = True,
) -> dict[str, Any]:
    """Score a suite's runs.

    Args:
        runs: one run per sample (ids must be unique).
        frontend: the frontend's name (reported).
        suite: the suite's name or path (reported).
        config: thresholds and windows; the defaults when None.
        judge: labels overlap behaviour by content (with ``transcriber``); without one the
            overlap rates are acoustic (``basis`` says which).
        transcriber: word-timed transcripts of the played audio, for the judge.
        fdb_timing: compute FDB's ``latency_stop_list`` / ``latency_resp_list`` from the
            sample's ``input.wav`` (when the file exists).

    Returns:
        A JSON-serialisable dict (no NaN): ``headline`` (flat, the numbers the report compares
        with the published anchors), ``overlap``, ``pause``, ``turn_taking``, ``idle``,
        ``delegation``, ``tool_use``, ``compute``, ``errors`` and ``per_sample`` rows; undefined
        ratios are None.

    Raises:
        ValueError: duplicate sample ids, or a malformed ``pause`` extra key.
    """
    config = config or MetricsConfig()
    ids = Counter(run.sample.id for run in runs)
    duplicates = sorted(i for i, n in ids.items() if n > 1)
    if duplicates:
        raise ValueError(f"compute_metrics: duplicate sample ids {duplicates}")

    rows: list[dict[str, Any]] = []
    tool_scores: list[ToolScore] = []
    confusion = {"tp": 0, "fn": 0, "fp": 0, "tn": 0}
    for run in runs:
        sample = run.sample
        row = _row(run)
        rows.append(row)
        segments = () if run.error else voice_segments(run.played, run.played_rate, config)
        row["voice_segments"] = [[a, b] for a, b in segments]
        if fdb_timing and not run.error:
            _fdb_timing(row, run, segments, config)
        category = sample.category
        if sample.overlap is not None and category in OVERLAP_CATEGORIES:
            if run.error:
                row["correct"] = False
            else:
                flushes = [r.t for r in run.records if r.kind is Kind.FLUSH]
                result = score_overlap(segments, sample.overlap, config, flushes)
                row.update(
                    outcome=result.outcome,
                    speaking_at_overlap=result.speaking_at_overlap,
                    stop_latency_s=result.stop_latency_s,
                    response_latency_s=result.response_latency_s,
                )
                if judge is not None and transcriber is not None:
                    _content_label(row, run, segments, judge, transcriber, config)
                if result.outcome != "not_speaking" and sample.expected is not None:
                    got = row["label"] if row["label"] is not None else result.outcome
                    row["correct"] = got == sample.expected
        elif category == "pause":
            taken, at = (True, None) if run.error else _takeover(segments, sample, config)
            row.update(takeover=taken, takeover_t=at)
            if not run.error:
                row["outcome"] = {True: "takeover", False: "held", None: "no_pause"}[taken]
        elif category == "turn_taking":
            responded, latency = (
                (False, None) if run.error else _turn_response(segments, sample, config)
            )
            row.update(responded=responded, turn_latency_s=latency)
            if not run.error:
                row["outcome"] = {True: "responded", False: "silent", None: "no_turns"}[responded]
        elif category in IDLE_CATEGORIES and sample.idle is not None:
            row.update(_idle_scores(segments, run, config))
            row["correct"] = not row["idle_answered"] and not row["merged"]
            if not run.error:
                row["outcome"] = "answered" if row["idle_answered"] else "ignored"
        if sample.needs_delegation is not None:
            delegated = bool(run.delegations)
            # A failed run counts as the wrong answer, whichever that is.
            predicted = (not sample.needs_delegation) if run.error else delegated
            if sample.needs_delegation:
                confusion["tp" if predicted else "fn"] += 1
            else:
                confusion["fp" if predicted else "tn"] += 1
            if category == "delegation":
                row["correct"] = predicted == sample.needs_delegation
                if not run.error:
                    row["outcome"] = "delegated" if delegated else "kept"
        if category == "tool_use":
            score = score_tool_calls(
                sample.expected_tool_calls, () if run.error else run.tool_calls
            )
            if run.error:
                score = replace(score, passed=False)
            tool_scores.append(score)
            row.update(
                tool_pass=score.passed,
                correct=score.passed,
                tool_tp=score.tp,
                tool_fp=score.fp,
                tool_fn=score.fn,
                arguments_expected=score.arguments_expected,
                arguments_matched=score.arguments_matched,
            )
            if not run.error:
                row["outcome"] = "pass" if score.passed else "fail"

    overlap: dict[str, Any] = {}
    for category in OVERLAP_CATEGORIES:
        cat_rows = [r for r in rows if r["category"] == category and r["overlap"] is not None]
        overlap[category] = _overlap_block(cat_rows)
    overlap_rows = [r for r in rows if r["category"] in OVERLAP_CATEGORIES and r["overlap"]]
    overlap["all"] = _overlap_block(overlap_rows)
    overlap["by_expected"] = {
        want: _overlap_block([r for r in overlap_rows if r["expected"] == want])
        for want in ("respond", "resume")
    }

    pause_rows = [r for r in rows if r["category"] == "pause"]
    pause_scored = [r for r in pause_rows if r["takeover"] is not None]
    pause = {
        "n": len(pause_rows),
        "scored": len(pause_scored),
        "no_pause": sum(1 for r in pause_rows if r["outcome"] == "no_pause"),
        "errors": sum(1 for r in pause_rows if r["error"]),
        "takeovers": sum(1 for r in pause_scored if r["takeover"]),
        "takeover_rate": _ratio(sum(1 for r in pause_scored if r["takeover"]), len(pause_scored)),
    }

    turn_rows = [r for r in rows if r["category"] == "turn_taking"]
    turn_scored = [r for r in turn_rows if r["responded"] is not None]
    turn_taking = {
        "n": len(turn_rows),
        "scored": len(turn_scored),
        "errors": sum(1 for r in turn_rows if r["error"]),
        "responded": sum(1 for r in turn_scored if r["responded"]),
        "response_rate": _ratio(sum(1 for r in turn_scored if r["responded"]), len(turn_scored)),
        "latency_s": _summary(
            r["turn_latency_s"] for r in turn_rows if r["turn_latency_s"] is not None
        ),
    }

    idle: dict[str, Any] = {}
    for category in IDLE_CATEGORIES:
        idle[category] = _idle_block(
            [r for r in rows if r["category"] == category and r["idle"] is not None]
        )
    idle["all"] = _idle_block(
        [r for r in rows if r["category"] in IDLE_CATEGORIES and r["idle"] is not None]
    )

    tp, fn, fp, tn = (confusion[k] for k in ("tp", "fn", "fp", "tn"))
    delegation = {
        "n": tp + fn + fp + tn,
        "errors": sum(1 for r in rows if r["error"] and r["needs_delegation"] is not None),
        "confusion": dict(confusion),
        "recall": _ratio(tp, tp + fn),
        "specificity": _ratio(tn, tn + fp),
        "precision": _ratio(tp, tp + fp),
        "accuracy": _ratio(tp + tn, tp + fn + fp + tn),
    }

    s_tp = sum(s.tp for s in tool_scores)
    s_fp = sum(s.fp for s in tool_scores)
    s_fn = sum(s.fn for s in tool_scores)
    precision = _ratio(s_tp, s_tp + s_fp)
    recall = _ratio(s_tp, s_tp + s_fn)
    if precision is None or recall is None:
        f1 = None
    else:
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    tool_use = {
        "n": len(tool_scores),
        "errors": sum(1 for r in rows if r["error"] and r["category"] == "tool_use"),
        "tp": s_tp,
        "fp": s_fp,
        "fn": s_fn,
        "selection_precision": precision,
        "selection_recall": recall,
        "selection_f1": f1,
        "pass_at_1": _ratio(sum(s.passed for s in tool_scores), len(tool_scores)),
        "passed": sum(s.passed for s in tool_scores),
        "argument_accuracy": _ratio(
            sum(s.arguments_matched for s in tool_scores),
            sum(s.arguments_expected for s in tool_scores),
        ),
        "arguments_expected": sum(s.arguments_expected for s in tool_scores),
        "arguments_matched": sum(s.arguments_matched for s in tool_scores),
    }

    compute_ms = [1000.0 * c for run in runs for c in run.unit_compute_s]
    summary = _summary(compute_ms, (50, 99))
    compute = {
        "units": len(compute_ms),
        "p50_ms": summary["p50"],
        "p99_ms": summary["p99"],
        "max_ms": max(compute_ms) if compute_ms else None,
        "missed_deadlines": sum(run.missed_units for run in runs),
    }

    errors = [
        {"id": r["id"], "category": r["category"], "error": r["error"]} for r in rows if r["error"]
    ]
    headline = {
        "interruption.response_rate": overlap["interruption"]["response_rate"],
        "backchannel.continuation_rate": overlap["backchannel"]["continuation_rate"],
        "other_directed.continuation_rate": overlap["other_directed"]["continuation_rate"],
        "background.continuation_rate": overlap["background"]["continuation_rate"],
        "interruption.acoustic_response_rate": overlap["interruption"]["acoustic_response_rate"],
        "backchannel.acoustic_continuation_rate": overlap["backchannel"][
            "acoustic_continuation_rate"
        ],
        "other_directed.acoustic_continuation_rate": overlap["other_directed"][
            "acoustic_continuation_rate"
        ],
        "background.acoustic_continuation_rate": overlap["background"][
            "acoustic_continuation_rate"
        ],
        "overlap.not_speaking": overlap["all"]["not_speaking"],
        "overlap.fdb_stop_p50_s": overlap["by_expected"]["respond"]["fdb_stop_s"]["p50"],
        "overlap.fdb_resp_p50_s": overlap["by_expected"]["respond"]["fdb_resp_s"]["p50"],
        "overlap.stop_latency_p50_s": overlap["by_expected"]["respond"]["stop_latency_s"]["p50"],
        "overlap.response_latency_p50_s": overlap["by_expected"]["respond"]["response_latency_s"][
            "p50"
        ],
        "pause.takeover_rate": pause["takeover_rate"],
        "turn_taking.response_rate": turn_taking["response_rate"],
        "turn_taking.latency_p50_s": turn_taking["latency_s"]["p50"],
        "other_directed_idle.answered_rate": idle["other_directed_idle"]["answered_rate"],
        "background_idle.answered_rate": idle["background_idle"]["answered_rate"],
        "idle.answered_rate": idle["all"]["answered_rate"],
        "idle.request_response_rate": idle["all"]["request_response_rate"],
        "idle.merged_rate": idle["all"]["merged_rate"],
        "delegation.recall": delegation["recall"],
        "delegation.specificity": delegation["specificity"],
        "tool_use.selection_f1": tool_use["selection_f1"],
        "tool_use.pass_at_1": tool_use["pass_at_1"],
        "tool_use.argument_accuracy": tool_use["argument_accuracy"],
        "compute.p50_ms": compute["p50_ms"],
        "compute.p99_ms": compute["p99_ms"],
        "compute.missed_deadlines": compute["missed_deadlines"],
        "errors": len(errors),
    }
    return {
        "version": METRICS_VERSION,
        "frontend": frontend,
        "suite": suite,
        "n_samples": len(runs),
        "categories": dict(sorted(Counter(r["category"] for r in rows).items())),
        "config": asdict(config),
        "overlap_basis": overlap["all"]["basis"],
        "headline": headline,
        "overlap": overlap,
        "pause": pause,
        "turn_taking": turn_taking,
        "idle": idle,
        "delegation": delegation,
        "tool_use": tool_use,
        "compute": compute,
        "errors": errors,
        "per_sample": rows,
    }
