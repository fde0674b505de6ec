"""Long work through the whole graph: a delegation outlives the frontend's liveness window while
the harness reports it alive, and its result, arriving after the frontend gave up on a frozen
harness, still reaches the user.

Real processes in a private namespace: mic (a WAV asking to go to the kitchen), the scripted
frontend (``delegate_timeout_s`` 1.5 s, ``harness_timeout_s`` 3 s), the harness with the demo
tools (``go_to`` is a ROS action), sim_robot (a 6 m drive at 0.5 m/s) and the speaker. While
the robot drives, the harness is frozen (SIGSTOP) until the frontend gives the delegation up
(``harness_unavailable``); thawed, the harness finishes the drive and its result comes late but
fresh: it is offered, spoken, played, and recorded DELIVERED by the harness.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import numpy as np
import soundfile as sf
from rosproc import NodeProcess, Probe, start_node
from speech import espeak_16k

from venus_interfaces.msg import TimelineEvent
from venus_ros.nodes.qos import TOPICS, reliable

ROOT = Path(__file__).resolve().parents[1]
RATE = 16000
SCRIPT = """\
replies:
  - after_speech: true
    text: "Okay. <delegate>go to the kitchen</delegate> On my way."
  - on_backend: true
    text: "{backend}"
"""


def test_a_long_delegation_lives_and_its_late_result_is_still_heard(
    probe: Probe, tmp_path: Path
) -> None:
    script = tmp_path / "script.yaml"
    script.write_text(SCRIPT)
    request = espeak_16k("Please go to the kitchen.", tmp_path / "a.wav")
    track = np.zeros(30 * RATE, np.float32)
    track[RATE // 2 : RATE // 2 + len(request)] = request
    wav = tmp_path / "conversation.wav"
    sf.write(str(wav), track, RATE, subtype="PCM_16")
    played = tmp_path / "played.wav"
    events: list[tuple[str, dict]] = []
    probe.node.create_subscription(
        TimelineEvent,
        TOPICS["timeline"],
        lambda m: events.append((m.kind, json.loads(m.payload_json))),
        reliable(1000),
    )

    def of(kind: str, **match: object) -> list[dict]:
        return [p for k, p in events if k == kind and all(p.get(f) == v for f, v in match.items())]

    def heard() -> str:
        return "".join(p["heard"] for p in of("playback_ack"))

    def start(module: str, *params: str) -> NodeProcess:
        node = start_node(module, tmp_path, *params, namespace=probe.namespace)
        probe.watched.append(node)
        return node

    nodes = [
        start(
            "harness",
            f"tools_file:={ROOT / 'config' / 'demo_tools.yaml'}",
            "journal_path:=none",
        ),
        start(
            "sim_robot",
            "places:=['living room=0.0,0.0', 'kitchen=6.0,0.0']",
            "speed_mps:=0.5",
        ),
        start("speaker", f"sink:=file:{played}"),
        start(
            "frontend",
            f"frontend:=scripted:{script}",
            "delegate_timeout_s:=1.5",
            "harness_timeout_s:=3.0",
        ),
    ]
    harness = nodes[0]
    try:
        wanted = {"harness_node", "sim_robot_node", "speaker_node", "frontend_node"}
        probe.wait_for(lambda: wanted <= probe.node_names(), 30, "the nodes to be up")
        probe.spin_for(3.0)  # the frontend hears the harness's heartbeat before the request
        nodes.append(start("mic", f"source:=file:{wav}"))
        probe.wait_for(
            lambda: bool(of("task_state", source="harness", state="RUNNING", tool="go_to")),
            40,
            lambda: f"the drive to start in the harness; task states: {of('task_state')}",
        )
        running_at = time.monotonic()
        # 1. Long work stays awaited: well past delegate_timeout_s, the frontend still waits.
        probe.spin_for(3.0)
        assert not of("task_state", source="frontend", state="FAILED")
        # 2. The harness freezes mid-drive: the frontend gives the delegation up.
        harness.proc.send_signal(signal.SIGSTOP)
        try:
            probe.wait_for(
                lambda: bool(of("task_state", source="frontend", state="FAILED")),
                10,
                "the frontend to give the delegation up",
            )
        finally:
            harness.proc.send_signal(signal.SIGCONT)
        assert time.monotonic() - running_at < 12.0, "the drive ended before the freeze"
        (gave_up,) = of("task_state", source="frontend", state="FAILED")
        assert gave_up["reason"] == "harness_unavailable"
        # 3. Thawed, the harness finishes; the late result is offered, spoken and delivered.
        probe.wait_for(lambda: "kitchen" in heard().lower(), 40, "the user to hear the arrival")
        probe.wait_for(
            lambda: bool(of("task_state", source="harness", state="DELIVERED", tool="go_to")),
            15,
            "the harness to record the late reply delivered",
        )
        for node in nodes:
            assert node.stop() == 0, node.err()
    finally:
        for node in nodes:
            node.stop()
    late = [p for p in of("task_state", source="frontend") if p["reason"].startswith("late result")]
    assert len(late) == 1 and late[0]["state"] == "COMPLETED"
    assert late[0]["task_id"] == gave_up["task_id"]
    assert heard().count("arrived") <= 1 and "On my way" in heard()
