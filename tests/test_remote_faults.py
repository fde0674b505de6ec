"""Network faults and hostile servers never stall the robot's foreground.

Real ``venus-ros serve`` processes (threads) and hand-written hostile servers on 127.0.0.1; the
robot side is the real duplex loop around ``frontends/remote``.
"""

from __future__ import annotations

import base64
import json
import logging

import numpy as np
from remote_helpers import (
    FakeServer,
    drive,
    free_port,
    scripted_factory,
    units,
    wait_until,
    write_script,
)

from venus_ros.core.clock import MonotonicClock
from venus_ros.frontends import make_frontend
from venus_ros.frontends.remote import RemoteFrontend
from venus_ros.frontends.scripted import ScriptedFrontend, load_script
from venus_ros.serve import ServeConfig, ServerThread

SLOW = """\
words_per_unit: 3
slow_units: {4: 1200}
replies:
  - after_speech: true
    text: "Sure, let me check. <delegate>weather in Paris today</delegate> One moment please."
"""


def remote(url: str, options: str = "") -> RemoteFrontend:
    frontend = make_frontend(f"remote:{url}{options}")
    assert isinstance(frontend, RemoteFrontend)
    return frontend


def errors_from_remote(caplog) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name == "venus_ros.frontends.remote" and r.levelno >= logging.ERROR
    ]


def test_a_slow_server_drops_units_but_never_blocks_the_loop(tmp_path) -> None:
    path = write_script(tmp_path, SLOW)
    local = drive(ScriptedFrontend(load_script(path)), units("sss" + "." * 9))
    with ServerThread(scripted_factory(path, real_time=True)) as server:
        frontend = remote(server.url, ",deadline_ms=250")
        try:
            run = drive(frontend, units("sss" + "." * 9), clock=MonotonicClock())
        finally:
            frontend.close()
    stats = frontend.stats
    assert stats.dropped >= 1 and stats.late >= 1  # unit 4 took 1.2 s on the server
    assert max(run.step_s) < 1.0  # the 1.2 s stall never reached the foreground
    assert run.missed == 0
    # nothing the model wrote was lost: late answers were folded into later units
    assert "".join(run.spoken).split() == "".join(local.spoken).split()
    assert run.delegates == ["weather in Paris today"]
    assert run.protocol_errors == [] and run.frontend_errors == 0


def test_disconnect_mid_turn_ends_the_turn_and_reconnects(tmp_path) -> None:
    path = write_script(tmp_path)
    port = free_port()
    config = ServeConfig(port=port)
    servers: dict[str, ServerThread] = {"now": ServerThread(scripted_factory(path), config)}
    servers["now"].__enter__()
    frontend = remote(servers["now"].url, ",deadline_ms=2000,backoff_s=0.05,backoff_max_s=0.2")

    def on_unit(index: int, loop) -> None:
        if index == 5:  # the turn began at unit 3; unit 4 opened the <delegate> span
            servers["now"].__exit__(None, None, None)
            assert wait_until(lambda: not frontend.link.connected, 5)
        if index == 9:
            servers["now"] = ServerThread(scripted_factory(path), config)
            servers["now"].__enter__()
            assert wait_until(lambda: frontend.link.connected, 10)

    try:
        run = drive(frontend, units("sss" + "." * 7 + "ss" + "." * 6), on_unit)
        connects = frontend.link.stats.connects
    finally:
        frontend.close()
        servers["now"].__exit__(None, None, None)
    assert run.decisions[5] == ("listen", True) and run.flushes == 1  # the turn ended at once
    spoken = "".join(run.spoken)
    assert "weather" not in spoken and "Paris" not in spoken  # the open private span stayed private
    assert run.protocol_errors == ["unclosed_span"]
    assert frontend.stats.turns_cut == 1 and connects == 2
    # after reconnecting, the new session answers (the second speech starts a new reply)
    assert frontend.stats.answered >= 9 and run.decisions[-4][0] == "speak"


def test_a_dead_server_gives_one_clear_error_and_the_robot_stays_up(caplog) -> None:
    caplog.set_level(logging.INFO)
    url = f"ws://127.0.0.1:{free_port()}"
    frontend = remote(url, ",connect_timeout_s=0.3,backoff_s=0.02,backoff_max_s=0.05")
    try:
        run = drive(frontend, units("ss" + "." * 6))
        assert wait_until(lambda: frontend.link.stats.failures >= 4, 5)
    finally:
        frontend.close()
    assert run.decisions == [("listen", False)] * 8
    assert frontend.stats.dropped == 8 and run.frontend_errors == 0
    errors = errors_from_remote(caplog)
    assert len(errors) == 1 and url in errors[0].getMessage()
    assert "answered 'listen' locally" in errors[0].getMessage()


def test_the_fallback_takes_over_from_a_dead_server(tmp_path, caplog) -> None:
    path = write_script(tmp_path)
    local = drive(ScriptedFrontend(load_script(path)), units("sss" + "." * 7))
    url = f"ws://127.0.0.1:{free_port()}"
    frontend = remote(url, f",connect_timeout_s=0.3,fallback=scripted:{path}")
    try:
        run = drive(frontend, units("sss" + "." * 7))
        again = drive(frontend, units("sss" + "." * 7))  # a second session falls back too
    finally:
        frontend.close()
    assert run.decisions == local.decisions and run.delegates == local.delegates
    assert again.decisions == local.decisions and again.delegates == local.delegates
    assert frontend.stats.fallback_units == 20 and len(errors_from_remote(caplog)) == 2


def test_a_queue_that_never_clears_is_reported_once_and_the_fallback_answers(
    tmp_path, caplog
) -> None:
    from websockets.sync.client import connect

    path = write_script(tmp_path)
    with ServerThread(scripted_factory(path), ServeConfig(port=0, max_sessions=1)) as server:
        with connect(server.url + "/v1/realtime") as holder:  # takes the only session slot
            assert json.loads(holder.recv(5))["type"] == "session.queue_done"
            frontend = remote(
                server.url,
                f",connect_timeout_s=0.3,queue_timeout_s=0.6,fallback=scripted:{path}",
            )
            try:
                run = drive(frontend, units("sss" + "." * 5))
                assert wait_until(lambda: frontend.link.stats.failures >= 2, 10)
            finally:
                frontend.close()
        assert server.server.stats.queued_max >= 1
    assert frontend.stats.fallback_units == 8 and run.decisions[3][0] == "speak"
    queued = [r for r in caplog.records if "is busy; queued at position 1" in r.getMessage()]
    errors = errors_from_remote(caplog)
    assert len(queued) == 1 and len(errors) == 1
    assert "still queued at position 1" in errors[0].getMessage()


def _hostile_handler(state: dict):
    """A MiniCPM-o Realtime server that answers every unit with garbage, then an error."""

    async def handler(ws) -> None:
        state["connections"] = state.get("connections", 0) + 1
        await ws.send(json.dumps({"type": "session.queue_done"}))
        await ws.recv()  # session.init
        await ws.send(json.dumps({"type": "session.created", "session_id": "x", "venus": {}}))
        n = 0
        async for message in ws:
            if json.loads(message).get("type") != "input.append":
                continue
            n += 1
            for bad in (
                "{not json",
                json.dumps([1, 2, 3]),
                json.dumps({"type": "venus.unit", "decision": "dance", "audio_samples": 1}),
                json.dumps({"type": "venus.unit", "decision": "speak", "audio_samples": -5}),
                json.dumps(
                    {
                        "type": "venus.unit",
                        "decision": "speak",
                        "text": "x" * 20000,
                        "audio_samples": 0,
                        "sample_rate_hz": 24000,
                    }
                ),
                json.dumps({"type": "response.output_audio.delta", "audio": "%%%"}),
                json.dumps(
                    {
                        "type": "response.output_audio.delta",
                        "audio": base64.b64encode(b"abc").decode(),
                    }
                ),
                json.dumps({"type": "no.such.event", "payload": {"deep": [1] * 100}}),
            ):
                await ws.send(bad)
            nan = np.array([np.nan, np.inf, 0.1], "<f4").tobytes()
            await ws.send(
                json.dumps(
                    {
                        "type": "venus.unit",
                        "decision": "speak",
                        "text": "Hi ",
                        "audio_samples": 3,
                        "sample_rate_hz": 24000,
                    }
                )
            )
            await ws.send(
                json.dumps(
                    {"type": "response.output_audio.delta", "audio": base64.b64encode(nan).decode()}
                )
            )
            if n == 3:  # the SDK ends a session on any error event: the link must reconnect
                await ws.send(json.dumps({"type": "error", "error": {"code": "boom"}}))

    return handler


def test_hostile_server_events_are_counted_and_survived() -> None:
    state: dict = {}
    with FakeServer(_hostile_handler(state)) as server:
        frontend = remote(server.url, ",deadline_ms=1500,backoff_s=0.05")
        try:
            run = drive(frontend, units("." * 6))
            assert wait_until(lambda: state.get("connections", 0) >= 2, 5)
            link = frontend.link.stats
        finally:
            frontend.close()
    assert run.frontend_errors == 0 and run.protocol_errors == []
    assert frontend.stats.answered >= 3 and link.errors == 1
    assert link.bad_events >= 3 * 5  # per unit: 3 bad headers, 2 bad audio deltas
    for text in run.spoken:
        assert text.startswith("Hi")


def test_the_remote_model_takes_the_floor_back_when_the_server_returns(tmp_path) -> None:
    path = write_script(tmp_path)
    port = free_port()
    url = f"ws://127.0.0.1:{port}"
    frontend = remote(
        url, f",connect_timeout_s=0.3,backoff_s=0.05,backoff_max_s=0.1,fallback=scripted:{path}"
    )
    started: list[ServerThread] = []

    def on_unit(index: int, loop) -> None:
        if index == 8:  # the fallback has answered the first request by now
            started.append(ServerThread(scripted_factory(path), ServeConfig(port=port)))
            started[0].__enter__()
            assert wait_until(lambda: frontend.link.connected, 10)

    try:
        run = drive(frontend, units("sss" + "." * 7 + "sss" + "." * 7), on_unit)
    finally:
        frontend.close()
        for server in started:
            server.__exit__(None, None, None)
    assert frontend.stats.fallback_units == 8  # units 0-7, then the server had the floor
    assert frontend.stats.answered == 12 and started[0].server.stats.units == 12
    assert run.delegates == ["weather in Paris today"] * 2  # one from each side
    assert run.protocol_errors == []
