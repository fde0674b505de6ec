"""The whole system as real ROS 2 processes: every node in its own process, loopback-only
discovery, a private domain and namespace.

A WAV with two spoken requests goes into mic_node. The scripted frontend answers the first with
a delegation of a 10-minute timer (the harness's clock for timers runs 30 times faster: it
rings after 20 s); once the timer is set, the harness process is killed: the frontend keeps
deciding every unit without a missed deadline. The harness is started again; the second request
(arithmetic) round-trips through the Delegate action, and the reply is inserted as a backend
span, spoken, played by speaker_node and acknowledged, and only then recorded DELIVERED by the
harness. The timer set before the crash rings on time through the restarted harness and is
spoken once. The timeline on the topic shows what the user actually heard.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import numpy as np
import soundfile as sf
from rosproc import NodeProcess, Probe, start_node
from speech import espeak_16k

from venus_interfaces.msg import TimelineEvent, UnitDecision
from venus_ros.nodes.qos import TOPICS, reliable

ROOT = Path(__file__).resolve().parents[1]
PARAMS = ROOT / "config" / "venus.yaml"
RATE = 16000

SCRIPT = """\
replies:
  - after_speech: true
    text: "Okay. <delegate>set a timer for ten minutes</delegate> Starting it now."
  - on_backend: true
    text: "{backend}"
  - after_speech: true
    text: "Sure. <delegate>what is 12 times 7</delegate> Let me work it out."
  - on_backend: true
    text: "{backend}"
  - on_backend: true
    text: "{backend}"
"""


def _conversation(tmp_path: Path) -> Path:
    """Request 1 at 0.5 s, request 2 at 11 s, then silence (the mic keeps publishing it)."""
    first = espeak_16k("Please set a timer for ten minutes.", tmp_path / "a.wav")
    second = espeak_16k("What is twelve times seven?", tmp_path / "b.wav")
    track = np.zeros(14 * RATE, np.float32)
    track[RATE // 2 : RATE // 2 + len(first)] = first
    track[11 * RATE : 11 * RATE + len(second)] = second
    path = tmp_path / "conversation.wav"
    sf.write(str(path), track, RATE, subtype="PCM_16")
    return path


class Session:
    """What the probe saw on the timeline and decision topics."""

    def __init__(self, probe: Probe) -> None:
        self.events: list[tuple[str, dict]] = []
        self.decisions: list[UnitDecision] = []
        node = probe.node
        node.create_subscription(TimelineEvent, TOPICS["timeline"], self._event, reliable(1000))
        node.create_subscription(
            UnitDecision, TOPICS["decision"], self.decisions.append, reliable(50)
        )

    def _event(self, msg: TimelineEvent) -> None:
        self.events.append((msg.kind, json.loads(msg.payload_json)))

    def of(self, kind: str, **match: object) -> list[dict]:
        return [
            p for k, p in self.events if k == kind and all(p.get(f) == v for f, v in match.items())
        ]

    def heard(self) -> str:
        return "".join(p["heard"] for p in self.of("playback_ack"))


def test_a_conversation_survives_a_harness_crash_and_delegates_again(
    probe: Probe, tmp_path: Path
) -> None:
    script = tmp_path / "script.yaml"
    script.write_text(SCRIPT)
    wav = _conversation(tmp_path)
    played = tmp_path / "played.wav"
    session = Session(probe)
    ns = probe.namespace

    def start(module: str, *params: str, tag: str = "") -> NodeProcess:
        node = start_node(module, tmp_path, *params, namespace=ns, params_file=PARAMS, tag=tag)
        probe.watched.append(node)
        return node

    timers = "time_scale:=30.0"  # the 10-minute timer rings after 20 s
    nodes = [
        start("harness", timers),
        start("speaker", f"sink:=file:{played}"),
        start("frontend", f"frontend:=scripted:{script}"),
        start("mic", f"source:=file:{wav}"),
    ]
    harness = nodes[0]
    try:
        # 1. The timer delegation reaches the harness: the timer is set (a scheduled job).
        probe.wait_for(
            lambda: bool(session.of("task_state", source="harness", state="COMPLETED")),
            30,
            "the timer to be set in the harness",
        )
        probe.wait_for(
            lambda: "10 minute timer" in session.heard(), 30, "the user to hear it is set"
        )
        # 2. The harness dies (no goodbye) while the timer is pending.
        probe.watched.remove(harness)
        harness.proc.send_signal(signal.SIGKILL)
        harness.proc.wait(10)
        # 3. The harness comes back; the second request round-trips and its reply is heard.
        nodes[0] = start("harness", timers, tag="2")
        probe.wait_for(lambda: "84" in session.heard(), 40, "the user to hear the answer 84")
        # 4. Played and acknowledged: the frontend reports it delivered, the harness records it.
        probe.wait_for(
            lambda: bool(session.of("task_state", source="harness", state="DELIVERED")),
            15,
            "the harness to record the reply delivered",
        )
        # 5. The timer set before the crash rings through the restarted harness, once.
        probe.wait_for(
            lambda: "timer is done" in session.heard(), 40, "the user to hear the timer ring"
        )
        probe.wait_for(
            lambda: bool(session.of("task_state", source="harness", state="DELIVERED", job=True)),
            15,
            "the harness to record the ring delivered",
        )
        for node in nodes:
            assert node.stop() == 0, node.err()
    finally:
        for node in nodes:
            node.stop()

    delegates = [p["query"] for p in session.of("delegate_close")]
    assert delegates == ["set a timer for ten minutes", "what is 12 times 7"]
    assert session.of("task_state", source="harness", state="COMPLETED", tool="calculator")
    (calc,) = session.of("task_state", source="harness", state="COMPLETED", tool="calculator")
    inserted = {p["task_id"] for p in session.of("backend_insert", inserted=True)}
    (ring,) = session.of("task_state", source="harness", state="DELIVERING", job=True)
    assert {calc["task_id"], ring["task_id"]} <= inserted
    outcomes = {p["task_id"]: p["outcome"] for p in session.of("delivery")}
    assert outcomes[calc["task_id"]] == outcomes[ring["task_id"]] == "delivered"
    delivered = session.of("task_state", source="harness", state="DELIVERED", previous="DELIVERING")
    assert calc["task_id"] in {p["task_id"] for p in delivered}
    heard = session.heard()
    assert "84" in heard and "Starting it now" in heard and "10 minute timer" in heard
    assert heard.count("timer is done") == 1  # rung once
    assert not session.of("frontend_error") and not session.of("protocol_error")

    # The foreground never paused: one decision per unit, in order, none late.
    indices = [d.unit_index for d in session.decisions]
    assert indices == list(range(indices[0], indices[0] + len(indices)))
    assert not any(d.deadline_missed for d in session.decisions)
    assert not [p for p in session.of("unit_stats") if p["missed"]]

    # The speaker wrote exactly what it acknowledged.
    acked = {}
    for p in session.of("playback_ack"):
        acked[p["unit"]] = p["samples_played"]
    assert sf.info(str(played)).frames == sum(acked.values())
