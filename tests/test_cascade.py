"""The cascade frontend (venus_ros/frontends/cascade/frontend.py) and the simulated robot node.

The responder is checked on transcripts; the whole frontend through run_offline on espeak-ng
speech (fake clock); sim_robot_node as a process of its own, through an rclpy action client.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from rclpy.action import ActionClient
from rosproc import Probe
from speech import espeak_16k

from venus_interfaces.action import GoTo
from venus_ros.core.clock import FakeClock
from venus_ros.core.session import SessionResult, run_offline
from venus_ros.frontends import DEFAULT_FRONTEND, make_frontend
from venus_ros.frontends.cascade.frontend import CLARIFY_PHRASE, CascadeResponder
from venus_ros.frontends.policy import UserRequest
from venus_ros.nodes.sim_robot import normalise_place, parse_places

RATE = 16000


def request(text: str, asr: bool = True) -> UserRequest:
    return UserRequest(text, 0.0, 1.0, 1.0, asr)


# ---------------------------------------------------------------------------- responder


def test_responder_answers_fixed_phrases_locally_and_delegates_the_rest() -> None:
    asked: list[str] = []

    def delegator(text: str) -> bool:
        asked.append(text)
        return "kitchen" in text

    responder = CascadeResponder(delegator, query_of=lambda t: t.replace("um, ", ""))
    greet = responder.respond(request("Hi there, robot!"))
    assert greet is not None and greet.spoken == "Hi! What can I do for you?"
    responder.heard(greet.spoken, interrupted=False)
    assert responder.respond(request("Thank you.")).spoken == "You're welcome!"
    assert responder.respond(request("Say that again.")).spoken == greet.spoken
    assert asked == []  # fixed phrases never ask the router
    go = responder.respond(request("Could you, um, go to the kitchen?"))
    # The acknowledgement names the request (from the cleaned query), then defers.
    assert go is not None and go.kind == "delegate"
    assert go.spoken == "Okay, go to the kitchen. Let me check."
    assert go.text == f"{go.spoken} <delegate>Could you, go to the kitchen?</delegate>"
    # No engine: what no fixed phrase covers is acknowledged (with one, it is generated).
    name = responder.respond(request("So, do you like music?"))
    assert name is not None and name.kind == "ack" and name.spoken == "Okay."
    assert asked == ["Could you, um, go to the kitchen?", "So, do you like music?"]


def test_responder_clarifies_unclear_speech_and_ignores_back_channels() -> None:
    responder = CascadeResponder(lambda _: True)
    assert responder.respond(request("")).spoken == CLARIFY_PHRASE
    assert responder.respond(request("...")).spoken == CLARIFY_PHRASE
    assert responder.respond(request("Yeah, okay.")) is None
    assert responder.respond(request("Uh...")) is None
    assert responder.last_intent == "user_ack"
    # A greeting with a real request is not just a greeting.
    mixed = responder.respond(request("Hi, can you go to the door?"))
    assert mixed is not None and mixed.kind == "delegate"


def test_responder_speaks_backend_replies_first() -> None:
    responder = CascadeResponder(lambda _: True)
    reply = responder.respond(request("Hello!"), backend="I have <b>arrived</b>.")
    assert reply is not None and reply.kind == "backend" and reply.spoken == "I have arrived."


def test_the_cascade_is_the_default_frontend_and_options_are_checked() -> None:
    assert DEFAULT_FRONTEND == "cascade"
    from venus_ros.core.frontend import FrontendError

    with pytest.raises(FrontendError, match="unknown option 'loud'"):
        make_frontend("cascade:loud")
    with pytest.raises(FrontendError, match="unknown policy 'eager'"):
        make_frontend("cascade:policy=eager")


# ---------------------------------------------------------------------------- whole frontend


def place(total_s: float, *items: tuple[float, np.ndarray]) -> np.ndarray:
    audio = np.zeros(round(total_s * RATE), dtype=np.float32)
    for start, clip in items:
        first = round(start * RATE)
        audio[first : first + clip.size] += clip
    return audio


def turns(session: SessionResult) -> list[str]:
    said: dict[int, str] = {}
    for record in session.timeline.records_after(0, 100_000):
        payload = record.payload
        if record.kind.value == "assistant_text":
            said[payload["turn"]] = said.get(payload["turn"], "") + payload["text"]
    return [" ".join(text.split()) for _, text in sorted(said.items())]


def test_cascade_greets_locally_delegates_a_clean_query_and_speaks_the_reply(
    tmp_path: Path,
) -> None:
    hello = espeak_16k("Hi there, robot!", tmp_path / "hi.wav", voice="en-us+m3", wpm=160)
    go = espeak_16k(
        "Um, could you go to the kitchen, please?", tmp_path / "go.wav", voice="en-us+m3", wpm=160
    )
    audio = place(
        16.0, (0.5, 0.5 * hello / np.abs(hello).max()), (5.0, 0.5 * go / np.abs(go).max())
    )
    frontend = make_frontend("cascade", clock=FakeClock())
    queries: list[str] = []

    def harness(req: object) -> tuple[float, str]:
        queries.append(getattr(req, "query", ""))
        return 2.0, "I have arrived at the kitchen."

    session = run_offline(audio, RATE, frontend, clock=FakeClock(), on_delegate=harness)
    said = turns(session)
    assert said[0] == "Hi! What can I do for you?"
    assert len(queries) == 1
    assert "kitchen" in queries[0].lower() and "um" not in queries[0].lower().split()
    assert any("Let me check" in text for text in said)
    assert said[-1] == "I have arrived at the kitchen."


def test_overlapped_speech_the_policy_talked_through_is_not_answered(tmp_path: Path) -> None:
    ask = espeak_16k("What time is it?", tmp_path / "ask.wav", voice="en-us+m3", wpm=160)
    aside = espeak_16k("Sam, can you grab the mail?", tmp_path / "aside.wav", voice="en-us+m3")
    audio = place(
        24.0, (0.5, 0.5 * ask / np.abs(ask).max()), (6.0, 0.4 * aside / np.abs(aside).max())
    )
    long_reply = (
        "I can drive to places in the house, set timers, tell you the time and do quick sums, "
        "and I keep talking with you while a helper works in the background."
    )

    def harness(req: object) -> tuple[float, str]:
        return 0.5, long_reply

    spec = "cascade:policy=never-yield,router=all"
    frontend = make_frontend(spec, clock=FakeClock())
    session = run_offline(audio, RATE, frontend, clock=FakeClock(), on_delegate=harness)
    said = turns(session)
    # the aside during the reply: no answer
    assert said == ["Let me check what time it is.", long_reply]
    assert frontend.ignored_overlaps == 1  # type: ignore[attr-defined]
    # The policy frontend without the rule answers the aside once the turn is over.
    baseline = make_frontend("never-yield", clock=FakeClock())
    baseline.responder = CascadeResponder(lambda _: True)  # type: ignore[attr-defined]
    base = run_offline(audio, RATE, baseline, clock=FakeClock(), on_delegate=harness)
    assert len(turns(base)) >= 3


# ---------------------------------------------------------------------------- sim robot


def test_places_are_parsed_and_matched_loosely() -> None:
    assert parse_places(["kitchen=4,1.5", "Front Door=-3,2"]) == {
        "kitchen": (4.0, 1.5),
        "front door": (-3.0, 2.0),
    }
    assert normalise_place("The Kitchen.") == "kitchen"
    with pytest.raises(ValueError, match="'garage' is not 'name=x,y'"):
        parse_places(["garage"])


class GoToClient:
    def __init__(self, probe: Probe) -> None:
        self.client = ActionClient(probe.node, GoTo, "go_to")
        self.feedback: list[tuple[float, str]] = []
        self.lock = threading.Lock()

    def on_feedback(self, msg: object) -> None:
        fb = msg.feedback  # type: ignore[attr-defined]
        with self.lock:
            self.feedback.append((fb.progress, fb.message))

    def warm_up(self, probe: Probe, attempts: int = 3) -> None:
        """One goal to where the robot already stands, until its response comes back.

        Fast DDS matches each direction of a client/server pair on its own: right after the
        client sees the server, the server may not have matched the client's response reader
        yet and drops the first goal response ("client will not receive response"). Tests check
        behaviour, not discovery, so a lost warm-up goal is simply sent again.
        """
        for _ in range(attempts):
            future = self.client.send_goal_async(GoTo.Goal(location="living room"))
            try:
                probe.wait_for(future.done, 3.0, "the warm-up goal response")
            except pytest.fail.Exception:
                continue
            result = future.result().get_result_async()
            probe.wait_for(result.done, 10.0, "the warm-up goal's result")
            self.feedback.clear()
            return
        pytest.fail(f"no goal response in {attempts} warm-up attempts")

    def send(self, probe: Probe, location: str) -> object:
        future = self.client.send_goal_async(
            GoTo.Goal(location=location), feedback_callback=self.on_feedback
        )
        probe.wait_for(future.done, 10.0, "the goal response")
        handle = future.result()
        assert handle.accepted
        return handle


def test_sim_robot_drives_with_progress_and_can_be_cancelled(probe: Probe, tmp_path: Path) -> None:
    robot = probe.start("sim_robot", tmp_path, "speed_mps:=4.0", "rate_hz:=20.0")
    client = GoToClient(probe)
    probe.wait_for(client.client.server_is_ready, 20.0, "the go_to action server")
    client.warm_up(probe)

    handle = client.send(probe, "the kitchen")  # 4.27 m at 4 m/s: about 1.1 s
    result = handle.get_result_async()  # type: ignore[attr-defined]
    probe.wait_for(result.done, 20.0, "the kitchen result")
    assert result.result().result.success
    assert result.result().result.message == "I have arrived at the kitchen."
    progress = [p for p, _ in client.feedback]
    assert len(progress) >= 5 and progress == sorted(progress) and progress[-1] == 1.0
    assert client.feedback[0][1].endswith("metres to go")

    client.feedback.clear()
    handle = client.send(probe, "front door")  # 7.5 m away: ~1.9 s
    probe.wait_for(lambda: len(client.feedback) >= 3, 10.0, "feedback on the way")
    cancel = handle.cancel_goal_async()  # type: ignore[attr-defined]
    probe.wait_for(cancel.done, 10.0, "the cancel response")
    result = handle.get_result_async()  # type: ignore[attr-defined]
    probe.wait_for(result.done, 10.0, "the cancelled result")
    assert not result.result().result.success
    assert result.result().status == 5  # GoalStatus.STATUS_CANCELED
    assert client.feedback[-1][0] < 1.0

    handle = client.send(probe, "garage")
    result = handle.get_result_async()  # type: ignore[attr-defined]
    probe.wait_for(result.done, 10.0, "the unknown place's result")
    assert result.result().result.message == "I don't know where the garage is."
    assert result.result().status == 6  # GoalStatus.STATUS_ABORTED
    assert "outcome: go to 'garage': abort" in robot.log()
