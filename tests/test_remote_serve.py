"""``venus-ros serve`` and ``frontends/remote`` end to end, over real WebSockets on 127.0.0.1.

The server runs our scripted frontend; the robot side is the real duplex loop around the remote
frontend, which speaks MiniCPM-o Realtime V1 through the ``openbmb-realtime`` SDK.
"""

from __future__ import annotations

import asyncio
import base64
import json

import numpy as np
import pytest
from remote_helpers import drive, scripted_factory, units, wait_until, write_script

from venus_ros.core.delivery import BackendReply
from venus_ros.frontends import make_frontend
from venus_ros.frontends.remote import RemoteFrontend, parse_options
from venus_ros.frontends.scripted import ScriptedFrontend, load_script
from venus_ros.serve import ServeConfig, ServerThread

PATTERN = "sss..." + "." * 8


def remote(url: str, extra: str = "") -> RemoteFrontend:
    frontend = make_frontend(f"remote:{url},deadline_ms=4000{extra}")
    assert isinstance(frontend, RemoteFrontend)
    return frontend


def test_remote_matches_the_frontend_in_process(tmp_path) -> None:
    path = write_script(tmp_path)
    local = drive(ScriptedFrontend(load_script(path)), units(PATTERN))
    with ServerThread(scripted_factory(path)) as server:
        frontend = remote(server.url)
        try:
            far = drive(frontend, units(PATTERN, with_frame=True))
        finally:
            frontend.close()
        stats = server.server.stats
    assert far.decisions == local.decisions
    assert far.delegates == local.delegates == ["weather in Paris today"]
    assert "".join(far.spoken) == "".join(local.spoken)
    assert far.audio_samples == local.audio_samples > 0
    assert far.protocol_errors == local.protocol_errors == []
    assert frontend.stats.dropped == 0 and frontend.stats.answered == len(PATTERN)
    assert stats.sessions == 1 and stats.units == len(PATTERN) and stats.bad_frames == 0


def test_backend_replies_reach_the_remote_model(tmp_path) -> None:
    path = write_script(tmp_path)
    local_reply = BackendReply(task_id="t1", text="It is sunny and 24 degrees.")

    def offer(index: int, loop) -> None:
        if index == 9:
            loop.offer_backend(local_reply)

    local = drive(ScriptedFrontend(load_script(path)), units(PATTERN), offer)
    with ServerThread(scripted_factory(path)) as server:
        frontend = remote(server.url)
        try:
            far = drive(frontend, units(PATTERN), offer)
        finally:
            frontend.close()
    assert "It is sunny and 24 degrees." in "".join(far.spoken)
    assert far.decisions == local.decisions
    assert frontend.stats.dropped_texts == 0


def test_the_sdk_client_completes_a_session(tmp_path) -> None:
    """The upstream SDK's own client against our server: queue_done, init, created, answers."""
    from openbmb_realtime import AudioDelta, RealtimeClient, TextDelta, TurnCompleted

    path = write_script(tmp_path)

    async def session(url: str) -> tuple[str, int, int, list[str]]:
        client = RealtimeClient(api_key="unused", base_url=url, connect_timeout=10)
        s = await client.audio.connect(model="venus", system_prompt="be brief")
        texts: list[str] = []
        audio_bytes = listens = 0
        for unit in units(PATTERN):
            await s.send_audio(unit.audio.astype("<f4").tobytes())

        async def consume() -> None:
            nonlocal audio_bytes, listens
            async for event in s.events():
                if isinstance(event, TextDelta):
                    texts.append(event.text)
                elif isinstance(event, AudioDelta):
                    audio_bytes += len(event.audio)
                elif isinstance(event, TurnCompleted):
                    listens += 1
                    if listens >= 10:
                        return

        await asyncio.wait_for(consume(), 20)
        sid = s.id
        await s.close()
        return sid, audio_bytes, listens, texts

    with ServerThread(scripted_factory(path)) as server:
        sid, audio_bytes, _, texts = asyncio.run(session(server.url))
    assert sid.startswith("venus-")
    assert audio_bytes > 0 and audio_bytes % 4 == 0
    text = "".join(texts)
    assert "Sure, let me check." in text and "One moment please." in text
    assert "delegate" not in text  # private spans travel only in venus.* events


def test_remote_without_extensions_still_speaks_and_listens(tmp_path) -> None:
    """``venus=off``: units are delimited from the SDK's own events, as with a hosted server."""
    path = write_script(tmp_path)
    local = drive(ScriptedFrontend(load_script(path)), units(PATTERN))
    with ServerThread(scripted_factory(path), ServeConfig(port=0, extensions=False)) as server:
        frontend = remote(server.url, ",venus=off")
        try:
            far = drive(frontend, units(PATTERN))
        finally:
            frontend.close()
    assert [d for d, _ in far.decisions] == [d for d, _ in local.decisions]
    assert "".join(far.spoken).replace(" ", "") in "".join(local.spoken).replace(" ", "")
    assert far.protocol_errors == []


def test_options_are_validated() -> None:
    opts = parse_options("ws://gpu:8765,deadline_ms=300,fallback=cascade,video=0")
    assert opts.protocol == "minicpmo" and opts.deadline_s == pytest.approx(0.3)
    assert opts.fallback == "cascade" and opts.video is False
    assert parse_options("ws://gpu:8000/v1/realtime?duplex=1").protocol == "vllm"
    from venus_ros.core.frontend import FrontendError

    for bad in (
        "",
        "ftp://x",
        "ws://x,bogus=1",
        "ws://x,deadline_ms=abc",
        "ws://x,fallback=remote:y",
    ):
        with pytest.raises(FrontendError):
            parse_options(bad)


def _frame(kind: str, **fields) -> str:
    return json.dumps({"type": kind, **fields})


def test_server_survives_malformed_frames_and_refuses_oversized_ones(tmp_path) -> None:
    from websockets.sync.client import connect

    path = write_script(tmp_path)
    with ServerThread(
        scripted_factory(path), ServeConfig(port=0, max_frame_bytes=200_000)
    ) as server:
        url = server.url + "/v1/realtime?mode=audio&model=m"
        with connect(url, subprotocols=["map.realtime"]) as ws:
            assert json.loads(ws.recv(5))["type"] == "session.queue_done"
            ws.send(_frame("session.init", payload={}))
            created = json.loads(ws.recv(5))
            assert created["type"] == "session.created" and created["venus"]["version"] == 1
            for bad in (
                "not json",
                "[1, 2]",
                _frame("input.append", input={"audio": "***"}),
                _frame("input.append", input={"audio": base64.b64encode(b"abc").decode()}),
                _frame(
                    "input.append",
                    input={
                        "audio": base64.b64encode(np.array([np.nan] * 8, "<f4").tobytes()).decode()
                    },
                ),
                _frame(
                    "input.append",
                    input={
                        "audio": base64.b64encode(np.zeros(16000, "<f4").tobytes()).decode(),
                        "video_frames": ["bm90IGpwZWc="],
                    },
                ),
                _frame("venus.input.text", text=""),
                _frame("what.is.this"),
            ):
                ws.send(bad)
                event = json.loads(ws.recv(5))
                assert event["type"] == "error", bad
            good = base64.b64encode(np.zeros(16000, "<f4").tobytes()).decode()
            ws.send(_frame("input.append", input={"audio": good}))
            kinds = [json.loads(ws.recv(5))["type"] for _ in range(2)]
            assert kinds == ["venus.unit", "response.listen"]  # the session survived
        with connect(url, subprotocols=["map.realtime"], max_size=None) as ws:
            ws.recv(5)
            ws.send(_frame("session.init", payload={}))
            ws.recv(5)
            ws.send("x" * 300_000)
            from websockets.exceptions import ConnectionClosed

            with pytest.raises(ConnectionClosed) as closed:
                for _ in range(50):  # events the server sent before it read the frame come first
                    ws.recv(5)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
        assert server.server.stats.bad_frames == 8


def test_token_is_required_when_set(tmp_path, monkeypatch) -> None:
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    monkeypatch.setenv("VENUS_TEST_TOKEN", "s3cret-token")
    monkeypatch.setenv("VENUS_REMOTE_TOKEN", "s3cret-token")
    path = write_script(tmp_path)
    config = ServeConfig(port=0, token_env="VENUS_TEST_TOKEN")
    with ServerThread(scripted_factory(path), config) as server:
        url = server.url + "/v1/realtime"
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret-token"}):
            with pytest.raises(InvalidStatus) as refused:
                connect(url, additional_headers=headers, open_timeout=5)
            assert refused.value.response.status_code == 401
        frontend = remote(server.url)  # takes the token from VENUS_REMOTE_TOKEN
        try:
            run = drive(frontend, units("ss.."))
        finally:
            frontend.close()
        assert frontend.stats.answered == 4 and run.decisions[0] == ("listen", False)
        assert server.server.stats.refused_auth == 3


def test_the_token_never_reaches_the_logs(tmp_path, monkeypatch, caplog) -> None:
    monkeypatch.setenv("VENUS_TEST_TOKEN", "s3cret-token")
    monkeypatch.setenv("VENUS_REMOTE_TOKEN", "wrong-token-value")
    path = write_script(tmp_path)
    caplog.set_level("DEBUG")
    with ServerThread(
        scripted_factory(path), ServeConfig(port=0, token_env="VENUS_TEST_TOKEN")
    ) as s:
        frontend = remote(s.url, ",connect_timeout_s=1")
        try:
            frontend.prepare()
            assert frontend.link is not None and not frontend.link.connected
            assert wait_until(lambda: frontend.link.stats.failures >= 2)
        finally:
            frontend.close()
    text = caplog.text
    assert "s3cret-token" not in text and "wrong-token-value" not in text
    assert "cannot open a session" in text


def test_the_sdk_client_completes_a_session_with_the_cascade() -> None:
    """The upstream SDK client against serve with the embedded cascade (real speech in)."""
    from pathlib import Path

    import soundfile
    from openbmb_realtime import AudioDelta, RealtimeClient, SessionClosed, TextDelta

    from venus_ros.core.units import resample

    wav = Path(__file__).parent / "data" / "eval_ref" / "delegation_000" / "input.wav"
    audio, rate = soundfile.read(wav, dtype="float32")
    speech = np.concatenate([resample(audio, rate, 16000), np.zeros(5 * 16000, np.float32)])

    async def session(url: str) -> tuple[int, str, str | None]:
        client = RealtimeClient(api_key="unused", base_url=url, connect_timeout=60)
        s = await client.audio.connect(model="cascade")
        for start in range(0, speech.size - 16000, 16000):
            await s.send_audio(speech[start : start + 16000].astype("<f4").tobytes())
        audio_bytes, texts = 0, []

        async def consume() -> str | None:
            nonlocal audio_bytes
            async for event in s.events():
                if isinstance(event, AudioDelta):
                    audio_bytes += len(event.audio)
                elif isinstance(event, TextDelta):
                    texts.append(event.text)
                    if event.end_of_turn:
                        return None
                elif isinstance(event, SessionClosed):
                    return event.reason
            return None

        await asyncio.wait_for(consume(), 60)
        await s.close()
        closed = None
        async for event in s.events():
            closed = event.reason if isinstance(event, SessionClosed) else closed
        return audio_bytes, "".join(texts), closed

    with ServerThread(lambda: make_frontend("cascade")) as server:
        audio_bytes, text, closed = asyncio.run(session(server.url))
        stats = server.server.stats
    assert audio_bytes > 16000 and text.strip()  # the cascade answered with speech
    assert closed is not None  # a clean session.closed, not a failure
    assert stats.sessions == 1 and stats.frontend_errors == 0 and stats.bad_frames == 0


def test_error_events_never_carry_a_secret(tmp_path, monkeypatch, caplog) -> None:
    from websockets.sync.client import connect

    monkeypatch.setenv("VENUS_TEST_API_KEY", "k3y-that-must-stay-home")
    script = load_script(write_script(tmp_path))

    class Failing(ScriptedFrontend):
        def prepare(self, *args, **kwargs) -> None:
            raise RuntimeError("model server said: bad key k3y-that-must-stay-home")

    caplog.set_level("DEBUG")
    with ServerThread(lambda: Failing(script), ServeConfig(port=0)) as server:
        url = server.url + "/v1/realtime?mode=audio&model=m"
        with connect(url, subprotocols=["map.realtime"]) as ws:
            assert json.loads(ws.recv(5))["type"] == "session.queue_done"
            ws.send(_frame("session.init", payload={}))
            event = json.loads(ws.recv(5))
    assert event["type"] == "error" and event["error"]["code"] == "frontend_unavailable"
    assert "k3y-that-must-stay-home" not in json.dumps(event) + caplog.text
