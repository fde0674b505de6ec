"""Late answers, turn boundaries and remote yields, made deterministic at the protocol level.

The server below speaks MiniCPM-o Realtime V1 with our ``venus.unit`` headers and answers from
a table; an answer marked *held* is sent only when the next unit's ``input.append`` arrives, so
the robot's deadline passes for that unit without any timing race.
"""

from __future__ import annotations

import base64
import json

import numpy as np
from remote_helpers import FakeServer, drive, units

from venus_ros.frontends import make_frontend

WORD = np.full(2400, 0.05, np.float32)  # 0.1 s of "speech" at 24 kHz


def _answer(decision: str, text: str = "", eot: bool = False) -> list[str]:
    speak = decision == "speak"
    head = {"type": "venus.unit", "decision": decision, "end_of_turn": eot, "text": text,
            "audio_samples": WORD.size if speak else 0, "sample_rate_hz": 24000}  # fmt: skip
    if not speak:
        return [json.dumps(head), json.dumps({"type": "response.listen"})]
    audio = base64.b64encode(WORD.astype("<f4").tobytes()).decode()
    return [
        json.dumps(head),
        json.dumps({"type": "response.output_text.delta", "text": text, "end_of_turn": eot}),
        json.dumps({"type": "response.output_audio.delta", "audio": audio}),
    ]


def table_server(table: list[tuple[str, str, bool, bool]]):
    """Answers unit k with ``table[k]`` = (decision, text, end_of_turn, held).

    Held answers wait for the next answer that is not held and go out with it, in order, as one
    burst of frames.
    """

    async def handler(ws) -> None:
        await ws.send(json.dumps({"type": "session.queue_done"}))
        await ws.recv()
        await ws.send(json.dumps({"type": "session.created", "session_id": "t", "venus": {}}))
        held: list[str] = []
        k = 0
        async for message in ws:
            kind = json.loads(message).get("type")
            if kind == "session.close":
                await ws.send(json.dumps({"type": "session.closed", "reason": "bye"}))
                return
            if kind != "input.append" or k >= len(table):
                continue
            decision, text, eot, hold = table[k]
            k += 1
            frames = _answer(decision, text, eot)
            if hold:
                held += frames
                continue
            for frame in held + frames:
                await ws.send(frame)
            held = []

    return handler


def play(table):
    with FakeServer(table_server(table)) as server:
        frontend = make_frontend(f"remote:{server.url},deadline_ms=200,video=0")
        try:
            run = drive(frontend, units("." * len(table)))
        finally:
            frontend.close()
    return run, frontend.stats


def test_a_late_answer_mid_turn_is_folded_into_the_next_unit() -> None:
    run, stats = play([
        ("listen", "", False, False),
        ("speak", "Hello ", False, False),
        ("speak", "there ", False, True),  # late: the robot keeps the turn, says nothing new
        ("speak", "friend.", True, False),
        ("listen", "", False, False),
    ])  # fmt: skip
    assert run.decisions == [
        ("listen", False), ("speak", False), ("speak", False), ("speak", True), ("listen", False)
    ]  # fmt: skip
    assert run.spoken == ["Hello ", "there friend."] and run.flushes == 0
    assert stats.dropped == 1 and stats.late == 1 and run.protocol_errors == []


def test_a_late_turn_end_is_never_merged_with_the_next_turn() -> None:
    run, stats = play([
        ("listen", "", False, False),
        ("speak", "Bye.", True, True),  # a whole turn, late
        ("speak", "Hi ", False, False),  # the next turn, on time
        ("speak", "again.", True, False),
        ("listen", "", False, False),
    ])  # fmt: skip
    assert run.decisions == [
        ("listen", False), ("listen", False), ("speak", True), ("speak", True), ("listen", False)
    ]  # fmt: skip
    assert run.spoken == ["Bye.", "Hi again."]  # two turns, each whole, in order
    # unit 1 was dropped; unit 2's answer came in time but its new turn waited one unit
    assert stats.dropped == 1 and stats.answered == 4 and run.protocol_errors == []


def test_a_remote_yield_ends_the_turn_with_a_flush() -> None:
    run, _ = play([
        ("speak", "Let me ", False, False),
        ("listen", "", False, False),  # the model stopped (user barged in)
        ("listen", "", False, False),
    ])  # fmt: skip
    assert run.decisions == [("speak", False), ("listen", True), ("listen", False)]
    assert run.flushes == 1 and run.protocol_errors == []  # no listen_mid_turn error


def test_answers_that_arrive_in_a_burst_keep_their_order() -> None:
    # The SDK's reader parses frames ahead of the events we take from it: a listening unit's
    # header (no audio to wait for) must not overtake the speaking units' audio before it, or
    # the turn ends mid-span and the delegation is lost (stop 44's CI, a slow server's burst).
    run, stats = play([
        ("listen", "", False, False),
        ("speak", "Sure, <delegate>weather ", False, True),
        ("speak", "in Paris</delegate> one ", False, True),
        ("speak", "moment.", True, True),
        ("listen", "", False, False),  # the four answers arrive together
        ("listen", "", False, False),
    ])  # fmt: skip
    assert run.delegates == ["weather in Paris"]
    assert "".join(run.spoken).split() == ["Sure,", "one", "moment."]
    assert run.protocol_errors == [] and stats.late == 3
