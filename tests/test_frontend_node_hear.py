"""frontend_node stops and starts the assistant between boundaries: the live path of an early
flush and an early start.

One process, one context: a real FrontendNode around the VAD barge-in policy frontend at five
sub-steps per unit (Silero VAD, espeak-ng speech), its microphone callback fed 20 ms chunks of
a recording, and a listener on ``decision`` and ``audio_out``. The interruption starts in unit
3; the flush must reach the speaker's topic before that unit's boundary, as a ``UnitDecision``
with ``flush`` for the last unit decided, and the boundary that follows must not flush again.
The answer to it starts at the sub-step the policy takes the turn, as a ``speak`` for the last
unit decided, with its audio, before the next boundary.
"""

from __future__ import annotations

import time
import uuid

import numpy as np
import pytest
import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter
from speech import espeak_16k
from test_policy_frontend import place

from venus_interfaces.msg import AudioChunk, UnitDecision
from venus_ros.core.timeline import Kind
from venus_ros.nodes.convert import audio_to_msg
from venus_ros.nodes.frontend import FrontendNode
from venus_ros.nodes.qos import TOPICS, reliable

STORY = (
    "Here is a long story about a robot who lived in a small house by the sea. "
    "Every morning it walked along the beach and counted the waves."
)


@pytest.fixture(scope="module")
def interruption(tmp_path_factory: pytest.TempPathFactory) -> np.ndarray:
    folder = tmp_path_factory.mktemp("speech")
    return espeak_16k("Wait, stop, what time is it?", folder / "i.wav", "en-gb+f3")


def test_the_node_publishes_an_early_flush_before_the_boundary(interruption: np.ndarray) -> None:
    context = Context()
    rclpy.init(context=context)
    ns = f"/hear_{uuid.uuid4().hex[:8]}"
    node = FrontendNode(
        context=context,
        namespace=ns,
        parameter_overrides=[Parameter("frontend", value="vad-bargein:noasr,substeps=5")],
    )
    listener = rclpy.create_node("listener", namespace=ns, context=context)
    decisions: list[UnitDecision] = []
    listener.create_subscription(UnitDecision, TOPICS["decision"], decisions.append, reliable(50))
    said: list[int] = []  # unit index of each speech chunk, in order
    listener.create_subscription(
        AudioChunk, TOPICS["audio_out"], lambda m: said.append(m.unit_index), reliable(50)
    )
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(listener)
    try:
        node.trigger_configure()
        assert node.frontend is not None and node.loop is not None and node.loop.hears_audio
        node.frontend.schedule_turns([(1.0, STORY)])
        node.trigger_activate()
        audio = place(7.2, (3.3, interruption))
        for start in range(0, audio.size, 320):
            stamp = node.get_clock().now().to_msg()
            node._on_audio(audio_to_msg(audio[start : start + 320], 16000, start, stamp))
            executor.spin_once(timeout_sec=0.002)
            time.sleep(0.002)  # the foreground thread hears while the audio arrives
        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline and node.units_done < 7:
            executor.spin_once(timeout_sec=0.05)
        for _ in range(20):
            executor.spin_once(timeout_sec=0.02)
        assert node.units_done == 7
        flushes = [(m.unit_index, m.decision, m.end_of_turn) for m in decisions if m.flush]
        # Published at once, for the last unit decided (2), while the assistant still spoke...
        assert flushes == [(2, UnitDecision.SPEAK, False)]
        # ...between the boundaries of units 2 and 3; unit 3's own decision yields, unflushed.
        order = [(m.unit_index, m.flush) for m in decisions]
        early = order.index((2, True))
        assert order[early - 1] == (2, False) and order[early + 1] == (3, False)
        boundary = next(m for m in decisions if m.unit_index == 3)
        assert boundary.decision == UnitDecision.LISTEN and boundary.end_of_turn
        assert node.early_flushes == 1 and node.diagnostics()["early_flushes"] == "1"
        (record,) = node.timeline.snapshot().of_kind(Kind.FLUSH)
        assert record.payload["early"] and record.payload["unit"] == 3
        # The answer: an early speak for the last unit decided, right after its listen, with
        # its speech under that unit's index; the next boundary goes on with the turn.
        (start,) = [
            r for r in node.timeline.snapshot().of_kind(Kind.DECISION) if "early" in r.payload
        ]
        slot = start.payload["unit"]
        assert slot >= 4 and node.early_starts == 1 and node.diagnostics()["early_starts"] == "1"
        pair = [(m.decision, m.flush) for m in decisions if m.unit_index == slot]
        assert pair == [(UnitDecision.LISTEN, False), (UnitDecision.SPEAK, False)]
        assert said[:4] == [0, 1, 2, slot]  # the story (stopped in unit 3), then the answer
        after = next(m for m in decisions if m.unit_index == slot + 1)  # its next boundary
        ended = start.payload["end_of_turn"]  # a turn of one piece ("Let me check.") ended
        assert after.decision == (UnitDecision.LISTEN if ended else UnitDecision.SPEAK)
    finally:
        node.close()
        executor.shutdown()
        node.destroy_node()
        listener.destroy_node()
        rclpy.try_shutdown(context=context)
