"""The policy frontend's session parts (:class:`~venus_ros.frontends.policy.SessionPart`).

Each part is composed into a real :class:`PolicyFrontend` (Silero VAD, espeak-ng) and run
through the real duplex loop on a fake clock: the hooks fire at the events they name, a part
can hold a request back, and the cascade's two parts (:class:`OverlapRule`,
:class:`AddresseeGate`) work alone and start over at ``prepare``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from speech import espeak_16k

from venus_ros.core.clock import FakeClock
from venus_ros.core.session import run_offline
from venus_ros.core.units import InputUnit
from venus_ros.frontends.cascade.frontend import AddresseeGate, OverlapRule
from venus_ros.frontends.cascade.state import AddresseeState, OverlapState
from venus_ros.frontends.policy import (
    FloorObservation,
    NeverYield,
    PolicyFrontend,
    SessionPart,
    VadBargeIn,
)

RATE = 16000
STORY = (
    "Here is a long story about a robot who lived in a small house by the sea. "
    "Every morning it walked along the beach and counted the waves."
)
REQUEST = "Wait, what is the weather in Paris today?"


@pytest.fixture(scope="module")
def request_audio(tmp_path_factory: pytest.TempPathFactory) -> np.ndarray:
    folder = tmp_path_factory.mktemp("speech")
    return espeak_16k(REQUEST, folder / "request.wav", "en-gb+f3")


def place(total_s: float, start: float, clip: np.ndarray) -> np.ndarray:
    """``total_s`` of digital silence with ``clip`` added at ``start``."""
    out = np.zeros(round(total_s * RATE), np.float32)
    i = round(start * RATE)
    out[i : i + clip.size] += clip[: out.size - i]
    return out


def started(frontend: PolicyFrontend) -> list[str]:
    return [s.started for s in frontend.steps if s.started]


class Recorder(SessionPart):
    """Records every hook call; admits requests only when ``admit`` is true."""

    def __init__(self, admit: bool = True) -> None:
        self.admit = admit
        self.events: list[str] = []
        self.observations: list[FloorObservation] = []
        self.resets = 0

    def reset(self) -> None:
        self.resets += 1
        self.events, self.observations = [], []

    def on_observation(self, frontend: PolicyFrontend, obs: FloorObservation) -> None:
        assert frontend.state.last_obs is obs
        self.observations.append(obs)

    def admit_request(self, frontend: PolicyFrontend) -> bool:
        self.events.append("request")
        return self.admit

    def on_turn_started(self, frontend: PolicyFrontend) -> None:
        assert frontend.state.turn is not None
        self.events.append("started")

    def on_turn_finished(self, frontend: PolicyFrontend, turn: Any) -> None:
        assert frontend.state.turn is None and turn.heard_text()
        self.events.append("finished")

    def on_turn_yielded(self, frontend: PolicyFrontend) -> None:
        assert frontend.state.turn is not None  # told before the turn is ended
        self.events.append("yielded")

    def on_unit_taken_in(self, frontend: PolicyFrontend, unit: InputUnit) -> None:
        self.events.append(f"unit{unit.index}")


def test_hooks_fire_at_their_events_and_prepare_resets_the_parts(
    request_audio: np.ndarray,
) -> None:
    part = Recorder()
    frontend = PolicyFrontend(NeverYield(), asr=False, substeps=2, session_parts=[part])
    assert part.resets == 1  # the constructor starts the first session
    frontend.schedule_turns([(1.0, "Hello there.")])
    run_offline(place(8.0, 4.0, request_audio), RATE, frontend, clock=FakeClock())
    units = len(frontend.steps)
    assert len(part.observations) == 2 * units  # one per sub-step, in time order
    assert [o.substep for o in part.observations[:4]] == [0, 1, 0, 1]
    assert [e for e in part.events if e.startswith("unit")] == [f"unit{i}" for i in range(units)]
    turns = [e for e in part.events if not e.startswith("unit") and e != "request"]
    # the scheduled greeting, then the answer to the request (a delegation): each played out
    assert turns == ["started", "finished", "started", "finished"]
    assert started(frontend) == ["scheduled", "delegate"]
    assert "request" in part.events
    resets = part.resets  # (the loop prepares the session too)
    frontend.prepare()
    assert part.resets == resets + 1 and part.events == [] and part.observations == []


def test_a_part_can_hold_every_request_back(request_audio: np.ndarray) -> None:
    audio = place(8.0, 1.5, request_audio)
    frontend = PolicyFrontend(VadBargeIn(), asr=False, session_parts=[Recorder(admit=False)])
    run_offline(audio, RATE, frontend, clock=FakeClock())
    assert started(frontend) == []  # the policy took the turn, but there was nothing to answer
    # ... and admitted, the same speech is answered
    frontend = PolicyFrontend(VadBargeIn(), asr=False, session_parts=[Recorder(admit=True)])
    run_offline(audio, RATE, frontend, clock=FakeClock())
    assert started(frontend) == ["delegate"]


def test_a_yield_is_told_to_the_parts(request_audio: np.ndarray) -> None:
    part = Recorder()
    frontend = PolicyFrontend(VadBargeIn(), asr=False, session_parts=[part])
    frontend.schedule_turns([(1.0, STORY)])
    run_offline(place(10.0, 3.3, request_audio), RATE, frontend, clock=FakeClock())
    assert any(s.yielded for s in frontend.steps)
    turns = [e for e in part.events if not e.startswith("unit") and e != "request"]
    assert turns[:2] == ["started", "yielded"]


class MarksAside(Recorder):
    """Admits every request, marking the user's turn aside."""

    def admit_request(self, frontend: PolicyFrontend) -> bool:
        frontend.state.user_turn_aside = True
        return super().admit_request(frontend)


def test_a_part_can_mark_the_request_aside(request_audio: np.ndarray) -> None:
    """What a part marks on the user's turn reaches the responder's request, and is gone
    once that turn was answered."""
    frontend = PolicyFrontend(VadBargeIn(), asr=False, session_parts=[MarksAside()])
    requests = []
    respond = frontend.responder.respond

    def recording(request: Any, backend: str | None = None) -> Any:
        requests.append(request)
        return respond(request, backend)

    frontend.responder.respond = recording  # type: ignore[method-assign]
    run_offline(place(8.0, 1.5, request_audio), RATE, frontend, clock=FakeClock())
    asked = [r for r in requests if r is not None]
    assert asked and all(r.aside for r in asked)
    assert started(frontend) == ["delegate"] and frontend.state.user_turn_aside is False


class YieldClock(Recorder):
    """Records how many observations it had seen at each yield it was told of."""

    def __init__(self) -> None:
        super().__init__()
        self.yields: list[int] = []

    def on_turn_yielded(self, frontend: PolicyFrontend) -> None:
        super().on_turn_yielded(frontend)
        self.yields.append(len(self.observations))


def test_a_yield_between_boundaries_is_told_to_the_parts_at_once(
    request_audio: np.ndarray,
) -> None:
    """A stop at a sub-step is told to the parts there, once: a final transcript that arrives
    later in the same unit is then judged as the speech the assistant stopped for."""
    part = YieldClock()
    frontend = PolicyFrontend(VadBargeIn(), asr=False, substeps=4, session_parts=[part])
    frontend.schedule_turns([(1.0, STORY)])
    run_offline(place(10.0, 3.3, request_audio), RATE, frontend, clock=FakeClock())
    assert any(s.yielded for s in frontend.steps)
    (at,) = part.yields  # told once, not again at the boundary
    stop = part.observations[at]  # the parts see the stopping observation after the yield
    assert stop.assistant_speaking and not stop.is_boundary
    assert not part.observations[at + 1].assistant_speaking


def test_session_parts_must_be_session_parts() -> None:
    with pytest.raises(TypeError, match="session_parts"):
        PolicyFrontend(VadBargeIn(), asr=False, session_parts=[object()])  # type: ignore[list-item]


def test_overlap_rule_alone_forgets_speech_over_a_turn_it_talked_through(
    request_audio: np.ndarray,
) -> None:
    audio = place(16.0, 3.3, request_audio)  # over the story, and over before the story ends
    rule = OverlapRule()
    frontend = PolicyFrontend(NeverYield(), asr=False, session_parts=[rule])
    frontend.schedule_turns([(1.0, STORY)])
    run_offline(audio, RATE, frontend, clock=FakeClock())
    assert started(frontend) == ["scheduled"]
    assert rule.state.ignored_overlaps == 1
    frontend.prepare()
    assert rule.state == OverlapState()
    # Without the rule the same speech is answered once the story is over.
    plain = PolicyFrontend(NeverYield(), asr=False)
    plain.schedule_turns([(1.0, STORY)])
    run_offline(audio, RATE, plain, clock=FakeClock())
    assert started(plain) == ["scheduled", "delegate"]


def test_addressee_gate_without_a_judge_or_asr_admits_and_resets(
    request_audio: np.ndarray,
) -> None:
    gate = AddresseeGate(None)
    frontend = PolicyFrontend(VadBargeIn(), asr=False, session_parts=[gate])
    run_offline(place(8.0, 1.5, request_audio), RATE, frontend, clock=FakeClock())
    assert started(frontend) == ["delegate"]
    assert gate.state == AddresseeState()  # no judge: nothing accounted
    gate.state.dropped = 3
    frontend.prepare()
    assert gate.state.dropped == 0


def test_overlap_rule_keeps_an_utterance_going_on_past_the_turn_but_not_what_came_before() -> None:
    from types import SimpleNamespace

    from venus_ros.frontends.cascade.state import SessionState

    rule = OverlapRule()
    state = SessionState(action=None, mic_pos=16000, frames_end=20 * 16000.0)
    frontend = SimpleNamespace(state=state, user_speaking=True)
    rule.on_turn_started(frontend)  # the turn began at 1 s
    state.play_end = 18 * 16000.0
    rule.on_turn_finished(frontend, None)  # and played out at 18 s
    state.user_turn_start, state.user_turn_speech = 10.5 * 16000, 40
    state.user_texts = ["Yeah, okay."]  # a backchannel over the turn; the user talks on
    rule.on_unit_taken_in(frontend, None)
    assert state.user_texts == [] and state.user_turn_speech == 40
    assert rule.state.ignored_overlaps == 1 and rule.state.finished_turn is None


def test_addressee_gate_admits_the_speech_the_policy_stopped_the_assistant_for() -> None:
    from types import SimpleNamespace

    from venus_ros.frontends.cascade.addressee import Addressee
    from venus_ros.frontends.cascade.state import SessionState

    def frontend_with(text: str) -> SimpleNamespace:
        state = SessionState(action=None, mic_pos=5 * 16000, frames_end=5 * 16000.0)
        state.play_end = 6 * 16000.0
        state.user_turn_start, state.user_turn_speech, state.user_texts = 4 * 16000, 30, [text]
        return SimpleNamespace(state=state, asr_enabled=True, user_speaking=False)

    remark = "Anna, could you close the door?"  # calls someone else by name: not for us
    gate = AddresseeGate(Addressee("Venus"))
    quiet = frontend_with(remark)
    assert gate.admit_request(quiet) is False and quiet.state.user_texts == []
    gate.reset()
    stopped = frontend_with(remark)
    gate.on_turn_yielded(stopped)  # the policy judged it an interruption and stopped for it
    assert gate.admit_request(stopped) is True and stopped.state.user_texts == [remark]
    # ... but its words, once made out, call someone else: the request is marked aside
    assert stopped.state.user_turn_aside is True
    gate.on_turn_started(stopped)  # answered: the next speech is judged again
    again = frontend_with(remark)
    assert gate.admit_request(again) is False
    gate.reset()
    cut_in = frontend_with("Wait, what time is it?")
    gate.on_turn_yielded(cut_in)
    assert gate.admit_request(cut_in) is True and cut_in.state.user_turn_aside is False
    cut_in.state.forget_user_turn()
    assert cut_in.state.user_turn_aside is False


def test_speech_the_assistant_stopped_for_is_aside_only_when_it_reads_clearly_so() -> None:
    """With the addressee's text head scoring below its aside bar (here :data:`ASIDE_SCORE`; a
    model file may hold its own), or a name that is not the assistant's, the stop was a false
    one, unless the floor's interruption head reads
    the words as a cut-in (:data:`CUT_IN_SCORE`); a score between it and the head's threshold
    drops speech the assistant did not stop for, but is not clear enough to take back a stop.
    Words the interruption head reads as a back-channel or a remark (below the floor's
    :data:`REMARK_SCORE`) take the stop back whatever the addressee's reading; speech that is,
    or opens with, a command to stop or wait never does, unless it calls someone else by name."""
    from types import SimpleNamespace

    from venus_ros.frontends.cascade.addressee import ASIDE_SCORE, Addressee, Verdict
    from venus_ros.frontends.cascade.floor import REMARK_SCORE
    from venus_ros.frontends.cascade.frontend import CUT_IN_SCORE
    from venus_ros.frontends.cascade.state import SessionState
    from venus_ros.frontends.cascade.texthead import TextHead

    class Zeros:
        name, dim = "zeros16", 16

        def embed(self, texts: list[str]) -> np.ndarray:
            return np.zeros((len(texts), 16), np.float32)

    def gate_scoring(p: float, cut_in: float | None = None) -> AddresseeGate:
        head = TextHead(np.zeros(16), float(np.log(p / (1 - p))), 0.5, "zeros16")
        scorer = None if cut_in is None else (lambda text: cut_in)
        return AddresseeGate(Addressee("Venus", head=head, embedder=Zeros()), cut_in=scorer)

    def stopped_for(gate: AddresseeGate, *texts: str) -> bool:
        state = SessionState(action=None, mic_pos=5 * 16000, frames_end=5 * 16000.0)
        state.user_turn_start, state.user_turn_speech = 4 * 16000, 30
        state.user_texts = list(texts)
        frontend = SimpleNamespace(state=state, asr_enabled=True, user_speaking=False)
        gate.reset()
        gate.on_turn_yielded(frontend)
        assert gate.admit_request(frontend) is True and state.user_texts == list(texts)
        return state.user_turn_aside

    below, between = ASIDE_SCORE / 2, (ASIDE_SCORE + 0.5) / 2
    assert stopped_for(gate_scoring(below), "Where did I put that pen?")
    assert stopped_for(gate_scoring(below), "Oh no.", "It's starting to rain.")
    assert not stopped_for(gate_scoring(between), "Where did I put that pen?")
    assert not stopped_for(gate_scoring(0.9), "How long does it take?")
    assert stopped_for(gate_scoring(0.9), "Tom, have you seen my glasses?")  # another's name
    assert not stopped_for(gate_scoring(below), "Venus, how long does it take?")  # its own
    assert not stopped_for(gate_scoring(below))  # no words made out: nothing to read
    # The floor's interruption head reading the words as a cut-in keeps the stop; a name
    # calling someone else still takes it back.
    assert not stopped_for(gate_scoring(below, CUT_IN_SCORE), "Sorry to cut in, but the")
    assert stopped_for(gate_scoring(below, CUT_IN_SCORE - 0.01), "Sorry to cut in, but the")
    assert stopped_for(gate_scoring(0.9, 0.99), "Tom, have you seen my glasses?")
    # Words the interruption head reads as a back-channel or a remark take the stop back
    # whatever the addressee's reading (a back-channel is said to the assistant, not a cut-in).
    assert stopped_for(gate_scoring(0.9, REMARK_SCORE - 0.01), "Oh, interesting.")
    assert not stopped_for(gate_scoring(0.9, REMARK_SCORE), "Oh, interesting.")
    # A command to stop or wait said over the assistant is said to it, however the rest reads;
    # a name calling someone else still takes the stop back.
    assert not stopped_for(gate_scoring(below, 0.1), "Wait, wait, is it still on the hill?")
    assert not stopped_for(gate_scoring(below, 0.1), "Actually, never mind, the kettle.")
    assert stopped_for(gate_scoring(below, 0.1), "Is it still on the hill?")
    assert stopped_for(gate_scoring(below, 0.1), "Tom, wait, is it still on the hill?")
    reads_as_aside = Addressee("Venus").reads_as_aside  # the default bar, ASIDE_SCORE
    assert not reads_as_aside(Verdict(False, "no_text", None))
    assert reads_as_aside(Verdict(False, "quiet", below)) and not reads_as_aside(
        Verdict(True, "answer", None)
    )


def test_addressee_gate_forgets_a_turn_whose_text_it_dropped_while_the_user_spoke_on() -> None:
    """The remark's final transcript came while the VAD still heard the user: the gate drops
    the text at once and holds the turn; once the user has stopped it forgets the turn rather
    than admitting a request with no words (which the responder would answer by asking to
    repeat a remark said to someone else)."""
    from types import SimpleNamespace

    from venus_ros.frontends.cascade.addressee import Addressee
    from venus_ros.frontends.cascade.state import SessionState

    state = SessionState(action=None, mic_pos=3 * 16000, frames_end=3 * 16000.0)
    state.user_turn_start, state.user_turn_speech = 16000, 60
    state.user_texts = ["Hey Sam, did you feed the cat?"]
    frontend = SimpleNamespace(state=state, asr_enabled=True, user_speaking=True)
    gate = AddresseeGate(Addressee("Venus"))
    assert gate.admit_request(frontend) is False and state.user_texts == []
    assert state.user_turn_speech == 60  # still speaking: held, not yet forgotten
    frontend.user_speaking = False
    assert gate.admit_request(frontend) is False
    assert state.user_turn_speech == 0 and state.user_turn_start is None
    assert gate.state.dropped == 1
    # a new turn with an addressed text is admitted again
    state.user_turn_start, state.user_turn_speech = 5 * 16000, 40
    state.user_texts = ["What time is it?"]
    assert gate.admit_request(frontend) is True and state.user_texts == ["What time is it?"]


def test_addressee_gate_drops_both_halves_of_a_sentence_the_vad_split() -> None:
    """ "Sam. | Dinner is ready!": the first half alone reads as speech to the assistant and is
    kept; the second, starting 0.3 s after it, is judged with it (a vocative): both are
    dropped, and nothing is asked of the responder."""
    from types import SimpleNamespace

    from venus_ros.frontends.cascade.addressee import Addressee
    from venus_ros.frontends.cascade.state import SessionState
    from venus_ros.frontends.cascade.texthead import TextHead

    class Hash16:
        name, dim = "hash16", 16

        def embed(self, texts: list[str]) -> np.ndarray:
            return np.zeros((len(texts), 16), np.float32)

    head = TextHead(np.zeros(16), float(np.log(0.8 / 0.2)), 0.4, "hash16")
    state = SessionState(action=None, mic_pos=2 * 16000, frames_end=2 * 16000.0)
    state.user_turn_start, state.user_turn_speech = 16000, 20
    state.user_texts = ["Sam."]
    frontend = SimpleNamespace(state=state, asr_enabled=True, user_speaking=True)
    gate = AddresseeGate(Addressee("Venus", head=head, embedder=Hash16()))
    gate.state.start_s, gate.state.end_s = 1.0, 1.4
    assert gate.admit_request(frontend) is True  # alone, "Sam." is kept
    assert gate.state.verdicts[0].addressed
    state.user_texts.append("Dinner is ready!")
    gate.state.start_s, gate.state.end_s = 1.7, 2.9
    frontend.user_speaking = False
    assert gate.admit_request(frontend) is False
    assert state.user_texts == [] and state.user_turn_speech == 0
    assert gate.state.dropped == 2


def test_addressee_gate_does_not_merge_what_it_talked_through_into_the_speech_it_stopped_for() -> (
    None
):
    """Words the floor policy talked through (here its own echo, "the fake manner.", left by
    the canceller 1.5 s before the user's "Hold on.") are not part of the request the yield
    makes; the first half of the cut-in itself (within :data:`JOIN_GAP_S`) and speech from
    before the turn are kept."""
    from types import SimpleNamespace

    from venus_ros.frontends.cascade.addressee import JOIN_GAP_S, Addressee
    from venus_ros.frontends.cascade.state import SessionState

    obs = SimpleNamespace(
        unit_index=0, vad_probs=(), frame_db=(), assistant_frames=(), frames_start_s=0.0
    )

    def stopped_for(*heard: tuple[str, float, float]) -> tuple[list[str], AddresseeGate]:
        """The texts left for the request when the turn, begun at 1 s, is stopped for the
        last of ``heard`` (text, start, end: each judged as it comes)."""
        state = SessionState(action=None, mic_pos=16000, frames_end=16000.0)
        frontend = SimpleNamespace(state=state, asr_enabled=True, user_speaking=False)
        gate = AddresseeGate(Addressee("Venus"))
        before = [h for h in heard if h[1] < 1.0]
        for text, start, end in before:  # said before the turn (a backend reply's)
            gate.state.start_s, gate.state.end_s = start, end
            state.user_texts.append(text)
            gate.on_observation(frontend, obs)
        gate.on_turn_started(frontend)
        for text, start, end in heard[len(before) :]:
            gate.state.start_s, gate.state.end_s = start, end
            state.user_texts.append(text)
            if (text, start, end) != heard[-1]:
                gate.on_observation(frontend, obs)
        gate.on_turn_yielded(frontend)  # the last one is going on as the policy stops
        assert gate.admit_request(frontend) is True
        return state.user_texts, gate

    texts, gate = stopped_for(("the fake manner.", 1.8, 2.2), ("Hold on.", 3.7, 4.2))
    assert texts == ["Hold on."] and gate.state.talked_through == 1
    assert len(gate.state.verdicts) == len(gate.state.spans) == 1
    split = 3.7 - JOIN_GAP_S + 0.1  # the VAD split the cut-in: "Hold on. | what was that?"
    texts, gate = stopped_for(("Hold on.", 3.0, split), ("What was that?", 3.7, 4.6))
    assert texts == ["Hold on.", "What was that?"] and gate.state.talked_through == 0
    texts, _ = stopped_for(("Turn on the lights.", 0.2, 0.9), ("Wait.", 3.7, 4.0))
    assert texts == ["Turn on the lights.", "Wait."]
