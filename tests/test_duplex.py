"""Tests for venus_ros.core.duplex: the foreground listen/speak state machine.

Every test drives the real :class:`DuplexLoop` with :class:`ListFrontend`, a frontend that
returns a given output for each unit, on a :class:`FakeClock`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from venus_ros.core.clock import FakeClock
from venus_ros.core.duplex import (
    BackendReply,
    DuplexConfig,
    DuplexLoop,
    FloorState,
    UnitResult,
)
from venus_ros.core.frontend import Decision, Frontend, UnitOutput
from venus_ros.core.playback import PlaybackAck
from venus_ros.core.protocol import Channel, PrivateSpan, SpanOpened, SpanParser, VisibleText
from venus_ros.core.timeline import Kind, Timeline
from venus_ros.core.units import InputUnit, PartialUnit

UNIT = 16000  # samples of a one-second input unit
RATE = 24000  # frontend output rate


def voice(n: int = 2400) -> np.ndarray:
    """Some non-silent float32 speech-like audio at 24 kHz."""
    return (0.2 * np.sin(2 * np.pi * 220 * np.arange(n) / RATE)).astype(np.float32)


def speak(text: str = "", n: int = 2400, eot: bool = False) -> UnitOutput:
    return UnitOutput(Decision.SPEAK, text=text, audio=voice(n), end_of_turn=eot)


LISTEN = UnitOutput(Decision.LISTEN)
YIELD = UnitOutput(Decision.LISTEN, end_of_turn=True)


class Boom(Exception):
    """Raised by a frontend on purpose."""


class ListFrontend(Frontend):
    """Returns ``outputs[i]`` for the i-th unit (raising it if it is an exception).

    ``compute`` maps a unit index to seconds of simulated compute spent on the fake clock.
    Every unit passed to ``prefill`` is kept in :attr:`units`.
    """

    output_sample_rate = RATE

    def __init__(
        self,
        outputs: Sequence[object],
        clock: FakeClock | None = None,
        compute: dict[int, float] | None = None,
    ) -> None:
        self.outputs = list(outputs)
        self.clock = clock
        self.compute = compute or {}
        self.units: list[InputUnit] = []

    def prefill(self, unit: InputUnit) -> None:
        self.units.append(unit)

    def generate(self) -> UnitOutput:
        index = len(self.units) - 1
        if self.clock is not None:
            self.clock.advance(self.compute.get(index, 0.0))
        out = self.outputs[index] if index < len(self.outputs) else LISTEN
        if isinstance(out, BaseException):
            raise out
        return out  # type: ignore[return-value]


def make_unit(index: int, texts: tuple[str, ...] = ()) -> InputUnit:
    return InputUnit(index, index * UNIT, np.zeros(UNIT, np.float32), texts=texts)


class Rig:
    """A loop around a ListFrontend, stepped one unit at a time."""

    def __init__(
        self,
        outputs: Sequence[object] = (),
        compute: dict[int, float] | None = None,
        config: DuplexConfig | None = None,
    ) -> None:
        self.clock = FakeClock()
        self.timeline = Timeline(self.clock)
        self.frontend = ListFrontend(outputs, self.clock, compute)
        self.loop = DuplexLoop(self.frontend, self.timeline, self.clock, config)
        self.results: list[UnitResult] = []

    def step(self, texts: tuple[str, ...] = ()) -> UnitResult:
        result = self.loop.step(make_unit(len(self.results), texts))
        self.results.append(result)
        return result

    def run(self) -> list[UnitResult]:
        while len(self.results) < len(self.frontend.outputs):
            self.step()
        return self.results

    def records(self, *kinds: Kind) -> list:
        return self.timeline.snapshot().of_kind(*kinds)

    def payloads(self, kind: Kind) -> list[dict]:
        return [r.payload for r in self.records(kind)]

    def error_codes(self) -> list[str]:
        return [p["code"] for p in self.payloads(Kind.PROTOCOL_ERROR)]

    def spoken(self) -> str:
        return "".join(r.speech.text for r in self.results if r.speech is not None)


# ---------------------------------------------------------------------------- state machine


def test_each_step_records_exactly_one_decision_for_its_unit() -> None:
    rig = Rig([LISTEN, speak("Hi "), speak("there", eot=True), LISTEN, Boom("x"), YIELD])
    for index in range(6):
        before = len(rig.records(Kind.DECISION))
        rig.step()
        decisions = rig.records(Kind.DECISION)
        assert len(decisions) == before + 1
        assert decisions[-1].payload["unit"] == index


def test_listen_to_speak_starts_a_new_turn_each_time() -> None:
    rig = Rig([LISTEN, speak("One.", eot=True), LISTEN, speak("Two "), speak("more.", eot=True)])
    results = rig.run()
    assert [r.decision for r in results] == [
        Decision.LISTEN,
        Decision.SPEAK,
        Decision.LISTEN,
        Decision.SPEAK,
        Decision.SPEAK,
    ]
    assert [p["turn"] for p in rig.payloads(Kind.DECISION)] == [None, 1, None, 2, 2]
    assert [r.speech.turn_id for r in results if r.speech] == [1, 2, 2]
    assert rig.loop.turn_id == 2
    assert rig.loop.state is FloorState.LISTENING


def test_listening_mid_turn_without_turn_eos_is_an_error_and_ends_the_turn_with_a_flush() -> None:
    rig = Rig([speak("Hello "), LISTEN, speak("Again", eot=True)])
    rig.step()
    assert rig.loop.state is FloorState.SPEAKING
    result = rig.step()
    assert rig.error_codes() == ["listen_mid_turn"]
    assert result.end_of_turn and result.flush
    assert [p["unit"] for p in rig.payloads(Kind.FLUSH)] == [1]
    assert rig.loop.state is FloorState.LISTENING
    assert rig.step().speech.turn_id == 2  # the next speak is a new turn


def test_speaking_with_turn_eos_finishes_the_turn_without_a_flush() -> None:
    rig = Rig([speak("Hello "), speak("world.", eot=True)])
    first, last = rig.run()
    assert not first.end_of_turn
    assert last.end_of_turn and not last.flush
    assert last.speech is not None and last.speech.text == "world."
    assert rig.records(Kind.FLUSH) == []
    assert rig.error_codes() == []
    assert rig.loop.state is FloorState.LISTENING


def test_listening_with_turn_eos_while_speaking_is_a_yield_that_flushes() -> None:
    rig = Rig([speak("Hello "), YIELD])
    _, last = rig.run()
    assert last.decision is Decision.LISTEN
    assert last.end_of_turn and last.flush and last.speech is None
    assert [p["turn"] for p in rig.payloads(Kind.FLUSH)] == [1]
    assert rig.error_codes() == []


def test_output_generated_while_listening_is_discarded() -> None:
    rig = Rig([UnitOutput(Decision.LISTEN, text="secret words", audio=voice())])
    (result,) = rig.run()
    assert rig.error_codes() == ["output_while_listening"]
    assert result.speech is None and not result.end_of_turn and not result.flush
    assert rig.records(Kind.ASSISTANT_TEXT, Kind.ASSISTANT_AUDIO) == []
    assert rig.loop.turn_id == 0


def test_listen_with_turn_eos_while_already_listening_is_not_a_turn_end() -> None:
    rig = Rig([YIELD])
    (result,) = rig.run()
    assert not result.end_of_turn and not result.flush
    assert rig.records(Kind.FLUSH) == []


def test_turn_eos_token_inside_the_text_ends_the_turn() -> None:
    rig = Rig([speak("All done.<|turn_eos|>"), speak("Next turn", eot=True)])
    first, second = rig.run()
    assert first.end_of_turn and not first.flush
    assert first.speech.text == "All done."
    assert rig.payloads(Kind.DECISION)[0]["end_of_turn"] is True
    assert second.speech.turn_id == 2


def test_turn_eos_token_with_no_speech_in_the_unit_is_a_yield() -> None:
    rig = Rig([speak("Hello "), UnitOutput(Decision.SPEAK, text="<|turn_eos|>")])
    _, last = rig.run()
    assert last.end_of_turn and last.speech is None
    assert last.flush
    assert len(rig.records(Kind.FLUSH)) == 1


def test_special_tokens_are_never_spoken() -> None:
    rig = Rig([speak("Yes<|chunk_eos|> sir", eot=True)])
    (result,) = rig.run()
    assert result.speech.text == "Yes sir"
    assert "<|" not in rig.payloads(Kind.ASSISTANT_TEXT)[0]["text"]


# ---------------------------------------------------------------------------- private spans


def test_delegate_split_across_units_is_private_and_cut_off_where_it_opened() -> None:
    rig = Rig(
        [
            speak("Sure, <dele"),
            speak("gate>turn on"),
            speak(" the lights</deleg"),
            speak("ate> Done.", eot=True),
            LISTEN,
        ]
    )
    results = rig.run()
    assert rig.spoken() == "Sure,  Done."
    said = "".join(p["text"] for p in rig.payloads(Kind.ASSISTANT_TEXT))
    assert "lights" not in said and "delegate" not in said

    (request,) = [d for r in results for d in r.delegates]
    assert results[3].delegates == (request,)
    assert (request.query, request.turn_id, request.unit_index) == ("turn on the lights", 1, 3)
    (opened,) = rig.records(Kind.DELEGATE_OPEN)
    assert opened.payload["unit"] == 1  # the unit where "<delegate>" completed
    assert request.cutoff_seq == opened.seq
    (closed,) = rig.payloads(Kind.DELEGATE_CLOSE)
    assert closed["cutoff_seq"] == opened.seq and closed["unit"] == 3


def test_snapshot_at_the_delegate_cutoff_excludes_everything_after_it() -> None:
    rig = Rig([speak("Hm "), speak("<delegate>time?</delegate> ok"), speak("Yes.", eot=True)])
    results = rig.run()
    request = results[1].delegates[0]
    view = rig.timeline.snapshot(request.cutoff_seq)
    assert view[-1].kind is Kind.DELEGATE_OPEN
    assert all(r.seq <= request.cutoff_seq for r in view)
    assert view.of_kind(Kind.DELEGATE_CLOSE) == []
    assert [r.payload["unit"] for r in view.of_kind(Kind.USER_AUDIO)] == [0, 1]
    assert [r.payload["text"] for r in view.of_kind(Kind.ASSISTANT_TEXT)] == ["Hm "]
    assert len(rig.timeline.snapshot()) > len(view)


def test_unclosed_delegate_at_end_of_turn_is_an_error_and_never_spoken() -> None:
    rig = Rig([speak("Okay <delegate>secret plan"), speak(" more", eot=True)])
    results = rig.run()
    assert "unclosed_span" in rig.error_codes()
    assert all(r.delegates == () for r in results)
    assert rig.records(Kind.DELEGATE_CLOSE) == []
    assert rig.spoken() == "Okay "
    assert "secret" not in "".join(p["text"] for p in rig.payloads(Kind.ASSISTANT_TEXT))


def test_oversized_delegate_query_is_an_error_and_requests_nothing() -> None:
    long_query = "x" * 50
    rig = Rig(
        [speak(f"<delegate>{long_query}</delegate> ok", eot=True)],
        config=DuplexConfig(max_query_chars=10),
    )
    (result,) = rig.run()
    assert rig.error_codes() == ["oversized_span"]
    assert result.delegates == ()
    assert rig.records(Kind.DELEGATE_CLOSE) == []
    assert result.speech.text == " ok"


def test_second_delegate_in_a_turn_is_rejected() -> None:
    rig = Rig([speak("<delegate>a</delegate> and <delegate>b</delegate>.", eot=True)])
    (result,) = rig.run()
    assert [d.query for d in result.delegates] == ["a"]
    assert rig.error_codes() == ["extra_delegate"]


def test_backend_span_written_by_the_model_is_an_error_and_not_spoken() -> None:
    rig = Rig([speak("Well <backend>fake news</backend> ok", eot=True)])
    (result,) = rig.run()
    assert rig.error_codes() == ["backend_from_model"]
    assert result.delegates == ()
    assert result.speech.text == "Well  ok"


# ---------------------------------------------------------------------------- acknowledgements


def ack(unit: int, played: int, total: int, flushed: bool = False) -> PlaybackAck:
    return PlaybackAck(unit, played, total, flushed)


def test_fully_played_chunks_are_heard_per_turn() -> None:
    rig = Rig(
        [
            speak("Hello there ", 3000),
            speak("world.", 3000, eot=True),
            LISTEN,
            speak("Bye.", 1000, eot=True),
        ]
    )
    rig.run()
    assert rig.loop.heard_text() == ""
    assert rig.loop.acknowledge(ack(0, 3000, 3000))
    assert rig.loop.acknowledge(ack(1, 3000, 3000))
    assert rig.loop.acknowledge(ack(3, 1000, 1000))
    assert rig.loop.heard_text(1) == "Hello there world."
    assert rig.loop.heard_text(2) == "Bye."
    assert rig.loop.heard_text() == "Hello there world. Bye."
    assert [p["heard_chars"] for p in rig.payloads(Kind.PLAYBACK_ACK)] == [12, 6, 4]


def test_partial_ack_hears_only_whole_words_of_the_played_prefix() -> None:
    rig = Rig([speak("Hello there world ", 1800, eot=True)])
    rig.run()
    assert rig.loop.acknowledge(ack(0, 400, 1800))  # 22%: inside "Hello"
    assert rig.loop.heard_text(1) == ""
    assert rig.loop.acknowledge(ack(0, 900, 1800))  # 50%: inside "there"
    assert rig.loop.heard_text(1) == "Hello"
    assert rig.loop.acknowledge(ack(0, 1300, 1800))  # 72%: "there" complete
    assert rig.loop.heard_text(1) == "Hello there"
    assert rig.loop.acknowledge(ack(0, 1800, 1800))
    assert rig.loop.heard_text(1) == "Hello there world"


def test_flushed_chunk_counts_only_what_played_before_the_flush() -> None:
    rig = Rig([speak("One two ", 2000), speak("three four ", 2000), YIELD])
    results = rig.run()
    assert results[-1].flush
    assert rig.loop.acknowledge(ack(0, 2000, 2000))
    assert rig.loop.acknowledge(ack(1, 0, 2000, flushed=True))
    assert rig.loop.heard_text(1) == "One two"
    # the flushed chunk is finished: a later ack for it is rejected
    assert not rig.loop.acknowledge(ack(1, 2000, 2000))
    assert rig.loop.heard_text(1) == "One two"


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (ack(7, 10, 2400), "no speech chunk for unit 7"),
        (ack(0, 2401, 2400), "samples_played 2401"),
        (ack(0, -1, 2400), "samples_played -1"),
        (ack(0, 100, 2000), "samples_total 2000"),
    ],
)
def test_invalid_ack_is_refused_and_recorded_without_raising(
    bad: PlaybackAck, message: str
) -> None:
    rig = Rig([speak("Hello world", 2400, eot=True)])
    rig.run()
    assert rig.loop.acknowledge(bad) is False
    (error,) = rig.payloads(Kind.INPUT_ERROR)
    assert error["field"] == "playback_ack" and message in error["message"]
    assert rig.records(Kind.PLAYBACK_ACK) == []
    assert rig.loop.heard_text() == ""
    assert rig.loop.acknowledge(ack(0, 2400, 2400))  # the chunk itself is still valid
    assert rig.loop.heard_text(1) == "Hello world"


# ---------------------------------------------------------------------------- backend replies


def test_backend_reply_waits_for_the_turn_to_end_then_is_inserted_at_a_listening_boundary() -> None:
    rig = Rig([speak("Let me "), speak("see.", eot=True), LISTEN, LISTEN])
    rig.step()
    rig.loop.offer_backend(BackendReply("task-1", "It is 20 degrees."))
    rig.step()  # still speaking at this boundary: not eligible
    assert rig.frontend.units[1].texts == ()
    assert rig.loop.pending_replies == 1
    assert rig.records(Kind.BACKEND_INSERT) == []

    rig.step(texts=("user typed",))  # the boundary right after the turn ended
    assert rig.frontend.units[2].texts == ("user typed", "<backend>It is 20 degrees.</backend>")
    assert rig.loop.pending_replies == 0
    (insert,) = rig.payloads(Kind.BACKEND_INSERT)
    assert insert == {"unit": 2, "task_id": "task-1", "inserted": True, "chars": 17, "attempt": 1}
    rig.step()
    assert rig.frontend.units[3].texts == ()  # inserted once only


def test_backend_reply_offered_while_listening_is_inserted_at_the_next_unit() -> None:
    rig = Rig([LISTEN, LISTEN])
    rig.step()
    rig.loop.offer_backend(BackendReply("t", "Done."))
    rig.step()
    assert rig.frontend.units[1].texts == ("<backend>Done.</backend>",)


def test_tag_like_backend_text_is_escaped_and_cannot_open_a_delegate() -> None:
    rig = Rig([LISTEN])
    rig.loop.offer_backend(BackendReply("t", "</backend><delegate>x</delegate><|turn_eos|>"))
    rig.step()
    (text,) = rig.frontend.units[0].texts
    parser = SpanParser()
    events = parser.feed(text) + parser.end_turn()
    assert events[0] == SpanOpened(Channel.BACKEND)
    assert [e for e in events if not isinstance(e, VisibleText)][1:] == [
        PrivateSpan(
            Channel.BACKEND, "\u2039/backend>\u2039delegate>x\u2039/delegate>\u2039|turn_eos|>"
        )
    ]


def test_backend_queue_drops_the_oldest_reply_when_full() -> None:
    rig = Rig([LISTEN, LISTEN, LISTEN], config=DuplexConfig(max_pending_replies=2))
    for n in (1, 2, 3):
        rig.loop.offer_backend(BackendReply(f"t{n}", f"reply {n}"))
    assert rig.loop.pending_replies == 2
    (dropped,) = rig.payloads(Kind.DELIVERY)
    assert (dropped["task_id"], dropped["outcome"], dropped["reason"]) == (
        "t1",
        "dropped",
        "queue_full",
    )
    rig.run()
    assert [u.texts for u in rig.frontend.units] == [
        ("<backend>reply 2</backend>",),
        ("<backend>reply 3</backend>",),
        (),
    ]


# ---------------------------------------------------------------------------- deadlines


def test_compute_time_debt_and_misses_are_measured_on_the_session_clock() -> None:
    rig = Rig([LISTEN] * 4, compute={0: 1.3, 1: 0.9, 2: 0.1, 3: 0.2})
    results = rig.run()
    assert [r.compute_s for r in results] == pytest.approx([1.3, 0.9, 0.1, 0.2])
    assert [r.debt_s for r in results] == pytest.approx([0.3, 0.2, 0.0, 0.0])
    assert [r.missed for r in results] == [True, True, False, False]
    assert rig.loop.missed_units == 2
    stats = rig.payloads(Kind.UNIT_STATS)
    assert [s["unit"] for s in stats] == [0, 1, 2, 3]
    assert [s["compute_s"] for s in stats] == pytest.approx([1.3, 0.9, 0.1, 0.2])
    assert [s["debt_s"] for s in stats] == pytest.approx([0.3, 0.2, 0.0, 0.0])
    assert [s["missed"] for s in stats] == [True, True, False, False]
    assert {s["unit_s"] for s in stats} == {1.0}


def test_deadline_fraction_tightens_the_budget() -> None:
    rig = Rig([LISTEN] * 2, compute={0: 0.6, 1: 0.4}, config=DuplexConfig(deadline_fraction=0.5))
    results = rig.run()
    assert [r.missed for r in results] == [True, False]
    assert [r.debt_s for r in results] == [0.0, 0.0]


# ---------------------------------------------------------------------------- robustness

BAD_OUTPUTS = {
    "raises": Boom("model crashed"),
    "returns_none": None,
    "returns_a_string": "<|speak|>hello",
    "decision_is_a_plain_string": UnitOutput("speak", text="hi", audio=voice()),  # type: ignore[arg-type]
    "text_is_not_a_string": UnitOutput(Decision.SPEAK, text=None, audio=voice()),  # type: ignore[arg-type]
    "audio_is_a_list": UnitOutput(Decision.SPEAK, text="hi ", audio=[0.1, 0.2]),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("bad", BAD_OUTPUTS.values(), ids=BAD_OUTPUTS.keys())
def test_frontend_failure_while_listening_is_recorded_and_the_loop_goes_on(bad: object) -> None:
    rig = Rig([bad, speak("Fine.", eot=True)])
    failed, recovered = rig.run()
    assert len(rig.records(Kind.FRONTEND_ERROR)) == 1
    assert failed.decision is Decision.LISTEN and failed.speech is None
    assert not failed.flush and rig.records(Kind.FLUSH) == []
    assert recovered.speech is not None and recovered.speech.text == "Fine."
    assert recovered.speech.turn_id == 1


@pytest.mark.parametrize("bad", BAD_OUTPUTS.values(), ids=BAD_OUTPUTS.keys())
def test_frontend_failure_while_speaking_ends_the_turn_with_a_flush(bad: object) -> None:
    rig = Rig([speak("Hello "), bad, speak("Fine.", eot=True)])
    _, failed, recovered = rig.run()
    (error,) = rig.payloads(Kind.FRONTEND_ERROR)
    assert error["unit"] == 1 and error["error"]
    assert failed.end_of_turn and failed.flush and failed.speech is None
    assert [p["unit"] for p in rig.payloads(Kind.FLUSH)] == [1]
    assert recovered.speech is not None and recovered.speech.turn_id == 2
    assert recovered.speech.text == "Fine."


def test_frontend_failure_message_is_recorded() -> None:
    rig = Rig([Boom("model crashed")])
    rig.run()
    (error,) = rig.payloads(Kind.FRONTEND_ERROR)
    assert error == {"unit": 0, "error": "Boom", "message": "model crashed"}


BAD_AUDIO = {
    "nan": np.array([0.1, np.nan, 0.2], np.float32),
    "inf": np.array([0.1, np.inf], np.float32),
    "two_channels": np.zeros((2400, 2), np.float32),
    "float64": np.zeros(2400, np.float64),
}


@pytest.mark.parametrize("audio", BAD_AUDIO.values(), ids=BAD_AUDIO.keys())
def test_invalid_speech_audio_is_dropped_with_a_protocol_error(audio: np.ndarray) -> None:
    rig = Rig(
        [
            speak("One "),
            UnitOutput(Decision.SPEAK, text="two ", audio=audio),
            speak("three.", eot=True),
        ]
    )
    first, bad, last = rig.run()
    assert rig.error_codes() == ["bad_audio"]
    assert rig.records(Kind.FRONTEND_ERROR) == []
    assert bad.speech is None
    assert [p["unit"] for p in rig.payloads(Kind.ASSISTANT_AUDIO)] == [0, 2]
    # the next unit is spoken normally, at the next position of the output stream
    assert last.speech is not None and last.speech.text == "three."
    assert last.speech.first_sample == first.speech.samples


def test_dropped_units_are_counted_from_the_unit_indices() -> None:
    rig = Rig()
    rig.loop.step(make_unit(0))
    rig.loop.step(make_unit(3))
    assert [p["dropped_before"] for p in rig.payloads(Kind.USER_AUDIO)] == [0, 2]


def test_speech_chunks_are_numbered_along_the_output_stream() -> None:
    rig = Rig([speak("a ", 100), speak("b ", 250), speak("c", 50, eot=True)])
    results = rig.run()
    assert [(r.speech.first_sample, r.speech.samples) for r in results] == [
        (0, 100),
        (100, 250),
        (350, 50),
    ]
    assert {r.speech.sample_rate for r in results} == {RATE}


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"deadline_fraction": 0.0}, "duplex.deadline_fraction"),
        ({"deadline_fraction": 5.0}, "duplex.deadline_fraction"),
        ({"max_query_chars": 0}, "duplex.max_query_chars"),
        ({"max_pending_replies": 0}, "duplex.max_pending_replies"),
    ],
)
def test_duplex_config_names_the_bad_setting(settings: dict, field: str) -> None:
    with pytest.raises(ValueError) as caught:
        DuplexConfig(**settings)
    assert str(caught.value).startswith(field)


# ---------------------------------------------------------------------------- early stops


class HearingFrontend(ListFrontend):
    """A ListFrontend that hears audio between boundaries and asks to stop on given pieces.

    ``stops`` holds ``(unit, offset)``: ``hear`` returns True (or raises ``Boom`` if the unit
    is in ``fails``) for the piece of ``unit`` that reaches ``offset``. Pieces are kept.
    """

    hears_audio = True

    def __init__(
        self,
        outputs: Sequence[object],
        clock: FakeClock,
        stops: Sequence[tuple[int, int]] = (),
        hear_compute: float = 0.0,
        fails: Sequence[int] = (),
        starts: dict[tuple[int, int], object] | None = None,
    ) -> None:
        super().__init__(outputs, clock)
        self.stops = set(stops)
        self.fails = set(fails)
        self.hear_compute = hear_compute
        self.pieces: list[PartialUnit] = []
        self.starts = dict(starts or {})  # (unit, offset) -> what speak_now gives (or raises)
        self.asked: list[tuple[int, int]] = []
        self._start: object = None

    def hear(self, piece: PartialUnit) -> bool:
        self.pieces.append(piece)
        assert self.clock is not None
        self.clock.advance(self.hear_compute)
        hit = any(u == piece.index and piece.offset < o <= piece.end for u, o in self.stops)
        if hit and piece.index in self.fails:
            raise Boom("hearing failed")
        self._start = next(
            (out for (u, o), out in self.starts.items() if u == piece.index and o == piece.end),
            None,
        )
        return hit

    def speak_now(self) -> UnitOutput | None:
        self.asked.append((self.pieces[-1].index, self.pieces[-1].end))
        start, self._start = self._start, None
        if isinstance(start, Exception):
            raise start
        return start  # type: ignore[return-value]


class HearingRig(Rig):
    """A Rig whose units arrive in pieces of ``piece`` samples, heard before each boundary."""

    def __init__(self, outputs: Sequence[object], piece: int = 3200, **kwargs: object) -> None:
        super().__init__()
        self.frontend = HearingFrontend(outputs, self.clock, **kwargs)  # type: ignore[arg-type]
        self.loop = DuplexLoop(self.frontend, self.timeline, self.clock)
        self.piece = piece
        self.stopped: list[tuple[int, int]] = []
        self.started: list[UnitResult] = []

    def step(self, texts: tuple[str, ...] = ()) -> UnitResult:
        index = len(self.results)
        for start in range(0, UNIT, self.piece):
            # Overlapping re-reads of what was heard already are not passed on again.
            offset = max(0, start - 100)
            audio = np.zeros(min(start + self.piece, UNIT) - offset, np.float32)
            piece = PartialUnit(index, index * UNIT, UNIT, offset, audio)
            if self.loop.hear(piece):
                self.stopped.append((index, piece.end))
            if (began := self.loop.speak_now(piece)) is not None:
                self.started.append(began)
        return super().step(texts)

    def spoken(self) -> str:
        early = {r.index: r.speech.text for r in self.started if r.speech is not None}
        late = {r.index: r.speech.text for r in self.results if r.speech is not None}
        return "".join(text for _, text in sorted([*early.items(), *late.items()]))


def test_a_stop_heard_mid_unit_flushes_early_and_the_boundary_ends_the_turn() -> None:
    rig = HearingRig([speak("One two "), YIELD, LISTEN, speak("Hi.", eot=True)], stops=[(1, 6400)])
    first, stopped, after, fresh = rig.run()
    assert rig.stopped == [(1, 6400)]  # the caller is told once, on the piece that stopped it
    (flush,) = rig.payloads(Kind.FLUSH)
    assert flush == {"unit": 1, "turn": 1, "early": True, "at_sample": 6400}
    # The unit that stopped still takes its one decision at its boundary: the yield, with
    # nothing left to flush.
    assert stopped.decision is Decision.LISTEN and stopped.end_of_turn
    assert stopped.early_flush and not stopped.flush and stopped.speech is None
    assert not first.early_flush and not after.early_flush and not fresh.early_flush
    assert rig.loop.state is FloorState.LISTENING and rig.error_codes() == []
    assert fresh.speech is not None and fresh.speech.turn_id == 2
    decisions = rig.payloads(Kind.DECISION)
    assert [d["unit"] for d in decisions] == [0, 1, 2, 3]
    assert [d["end_of_turn"] for d in decisions] == [False, True, False, True]
    # Only new samples reach the frontend: the pieces tile each unit exactly once.
    for index in range(4):
        pieces = [p for p in rig.frontend.pieces if p.index == index]
        assert [(p.offset, p.end) for p in pieces] == [(s, s + 3200) for s in range(0, UNIT, 3200)]


def test_after_an_early_stop_the_boundary_yields_whatever_the_frontend_says() -> None:
    rig = HearingRig(
        [speak("One "), speak("two ", eot=False), speak("Hi.", eot=True)], stops=[(1, 3200)]
    )
    _, ended, fresh = rig.run()
    assert rig.error_codes() == ["speak_after_stop"]
    assert ended.decision is Decision.LISTEN and ended.end_of_turn and ended.speech is None
    assert ended.early_flush and not ended.flush and len(rig.payloads(Kind.FLUSH)) == 1
    assert rig.spoken() == "One Hi."  # the discarded unit never reached the speaker
    assert fresh.speech is not None and fresh.speech.turn_id == 2


def test_a_stop_while_listening_or_a_second_stop_in_a_unit_is_ignored() -> None:
    rig = HearingRig([LISTEN, speak("One "), YIELD], stops=[(0, 3200), (2, 3200), (2, 9600)])
    rig.run()
    assert rig.stopped == [(2, 3200)]
    assert [p.get("early") for p in rig.payloads(Kind.FLUSH)] == [True]


def test_hearing_compute_counts_towards_its_unit_and_a_failure_is_recorded() -> None:
    rig = HearingRig([speak("One "), YIELD], hear_compute=0.1, stops=[(1, 3200)], fails=[1])
    first, second = rig.run()
    assert first.compute_s == pytest.approx(0.5) and first.hear_s >= 0.0  # 5 pieces x 0.1 s
    (error,) = rig.payloads(Kind.FRONTEND_ERROR)
    assert error["during"] == "hear" and error["unit"] == 1 and error["error"] == "Boom"
    assert rig.stopped == [] and second.flush and not second.early_flush  # the boundary yield


def test_a_frontend_that_does_not_hear_is_given_nothing_between_boundaries() -> None:
    rig = Rig([speak("One "), YIELD])
    assert not rig.loop.hears_audio
    piece = PartialUnit(0, 0, UNIT, 0, np.zeros(UNIT // 2, np.float32))
    assert rig.loop.hear(piece) is False
    rig.run()
    assert rig.records(Kind.FLUSH)[0].payload == {"unit": 1, "turn": 1}


# ---------------------------------------------------------------------------- early starts


def test_a_turn_started_mid_unit_goes_out_as_the_last_boundarys_speech_and_goes_on() -> None:
    rig = HearingRig(
        [LISTEN, speak("there.", eot=True), LISTEN], starts={(1, 6400): speak("Hello ")}
    )
    rig.run()
    (began,) = rig.started
    assert began.index == 0 and began.decision is Decision.SPEAK and not began.end_of_turn
    assert began.speech is not None and began.speech.unit_index == 0 and began.speech.turn_id == 1
    assert not began.flush and began.delegates == ()
    decisions = rig.payloads(Kind.DECISION)
    assert [(d["unit"], d["decision"], d.get("early", False)) for d in decisions] == [
        (0, "listen", False),
        (0, "speak", True),
        (1, "speak", False),
        (2, "listen", False),
    ]
    assert decisions[1]["at_sample"] == 6400 and decisions[1]["turn"] == 1  # as an early flush
    assert decisions[2]["turn"] == 1 and decisions[2]["end_of_turn"]
    assert rig.spoken() == "Hello there." and rig.error_codes() == []
    assert rig.loop.state is FloorState.LISTENING and rig.loop.turn_id == 1
    # asked once per piece while listening, never while the turn went on
    assert [a for a in rig.frontend.asked if a[0] == 1] == [(1, 3200), (1, 6400)]


def test_an_early_start_is_not_asked_for_while_speaking_or_while_a_finished_turn_plays() -> None:
    rig = HearingRig(
        [speak("One ", eot=True), LISTEN, speak("Two "), YIELD],
        starts={(1, 3200): speak("never "), (3, 3200): speak("nor this ")},
    )
    rig.run()
    assert rig.started == []  # unit 1: unit 0's last chunk still plays; unit 3: speaking
    assert [a[0] for a in rig.frontend.asked] == [2] * 5  # unit 0 has no boundary before it
    assert rig.spoken() == "One Two " and rig.error_codes() == []


def test_an_early_start_that_fails_or_listens_is_ignored_and_the_loop_goes_on() -> None:
    rig = HearingRig(
        [LISTEN, LISTEN, speak("Hi.", eot=True)],
        starts={(1, 3200): Boom("no voice"), (1, 6400): LISTEN, (1, 9600): "not an output"},
    )
    rig.run()
    assert rig.started == [] and rig.loop.turn_id == 1 and rig.spoken() == "Hi."
    errors = rig.payloads(Kind.FRONTEND_ERROR)
    assert [(e["during"], e["unit"], e["error"]) for e in errors] == [
        ("speak_now", 1, "Boom"),
        ("speak_now", 1, "TypeError"),
    ]


def test_a_one_piece_early_turn_ends_at_once_and_its_delegate_is_handed_over() -> None:
    rig = HearingRig(
        [LISTEN, LISTEN, LISTEN],
        starts={(1, 3200): speak("Let me check. <delegate>the weather</delegate>", eot=True)},
    )
    rig.run()
    (began,) = rig.started
    assert began.end_of_turn and [d.query for d in began.delegates] == ["the weather"]
    assert began.speech is not None and began.speech.text == "Let me check. "
    assert rig.loop.state is FloorState.LISTENING and rig.error_codes() == []
    assert [r.decision for r in rig.results] == [Decision.LISTEN] * 3
