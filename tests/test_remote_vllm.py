"""``frontends/remote`` against a fake vLLM-omni duplex endpoint that speaks its real protocol."""

from __future__ import annotations

import logging

from fake_vllm_omni import FakeOptions, vllm_handler
from remote_helpers import FakeServer, drive, scripted_factory, units, write_script

from venus_ros.core.delivery import BackendReply
from venus_ros.frontends import make_frontend
from venus_ros.frontends.remote import RemoteFrontend
from venus_ros.frontends.remote.vllm_omni import duplex_url
from venus_ros.frontends.scripted import ScriptedFrontend, load_script

PATTERN = "sss" + "." * 9


def remote(url: str, extra: str = "") -> RemoteFrontend:
    frontend = make_frontend(f"remote:{url}/v1/realtime?duplex=1,deadline_ms=4000{extra}")
    assert isinstance(frontend, RemoteFrontend) and frontend.options.protocol == "vllm"
    return frontend


def _session(path, options: FakeOptions):
    """One robot session of PATTERN against a fake endpoint; (run, frontend, link stats)."""
    with FakeServer(vllm_handler(scripted_factory(path), options)) as server:
        frontend = remote(server.url)
        try:
            run = drive(frontend, units(PATTERN))
            link = frontend.link.stats
        finally:
            frontend.close()
    return run, frontend, link


def offer_at(index: int, text: str):
    def on_unit(i: int, loop) -> None:
        if i == index:
            loop.offer_backend(BackendReply(task_id="t1", text=text))

    return on_unit


def test_vllm_omni_session_matches_the_model_in_process(tmp_path) -> None:
    path = write_script(tmp_path)
    reply = offer_at(9, "It is sunny and 24 degrees.")
    local = drive(ScriptedFrontend(load_script(path)), units(PATTERN), reply)
    options = FakeOptions()
    with FakeServer(vllm_handler(scripted_factory(path), options)) as server:
        frontend = remote(server.url)
        try:
            far = drive(frontend, units(PATTERN, with_frame=True), reply)
        finally:
            frontend.close()
    assert far.decisions == local.decisions
    assert far.delegates == local.delegates == ["weather in Paris today"]
    assert "".join(far.spoken).split() == "".join(local.spoken).split()
    assert "It is sunny and 24 degrees." in "".join(far.spoken)
    assert options.texts == ["<backend>It is sunny and 24 degrees.</backend>"]
    assert options.appends == len(PATTERN) and options.frames == len(PATTERN)
    assert frontend.stats.dropped == 0 and far.protocol_errors == []


def test_error_events_do_not_end_a_vllm_session(tmp_path) -> None:
    path = write_script(tmp_path)
    options = FakeOptions(error_every=2)
    run, frontend, link = _session(path, options)
    assert link.errors == len(PATTERN) // 2 and link.connects == 1 and options.sessions == 1
    assert frontend.stats.answered == len(PATTERN) and run.delegates == ["weather in Paris today"]


def test_a_refused_vllm_session_gives_one_clear_error(tmp_path, caplog) -> None:
    path = write_script(tmp_path)
    options = FakeOptions(refuse_code="ref_audio_required")
    with FakeServer(vllm_handler(scripted_factory(path), options)) as server:
        frontend = remote(server.url, ",connect_timeout_s=0.5,backoff_s=0.05")
        try:
            run = drive(frontend, units("ss...."))
        finally:
            frontend.close()
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "ref_audio_required" in errors[0].getMessage()
    assert run.decisions == [("listen", False)] * 6 and run.frontend_errors == 0


def test_duplex_url_asks_for_the_duplex_endpoint() -> None:
    assert duplex_url("ws://gpu:8099", "m") == "ws://gpu:8099/v1/realtime?duplex=1&model=m"
    assert duplex_url("https://gpu/v1/realtime?duplex=1", "m").startswith(
        "wss://gpu/v1/realtime?duplex=1"
    )
    assert duplex_url("ws://gpu/v1/duplex", "m") == "ws://gpu/v1/duplex?duplex=1&model=m"


def test_hostile_vllm_events_are_counted_and_ignored(tmp_path) -> None:
    path = write_script(tmp_path)
    local = drive(ScriptedFrontend(load_script(path)), units(PATTERN))
    run, _, link = _session(path, FakeOptions(garbage=True))
    assert link.bad_events == 6 * len(PATTERN) and link.connects == 1
    assert run.decisions == local.decisions and run.delegates == local.delegates


def test_ref_audio_opens_a_session_that_requires_a_voice(tmp_path) -> None:
    import base64
    import io

    import numpy as np
    import soundfile

    path = write_script(tmp_path)
    voice = tmp_path / "voice.wav"
    soundfile.write(voice, 0.1 * np.sin(np.arange(8000) / 5), 16000)
    options = FakeOptions(require_ref_audio=True)
    with FakeServer(vllm_handler(scripted_factory(path), options)) as server:
        frontend = remote(server.url, f",ref_audio={voice}")
        try:
            run = drive(frontend, units("sss..."))
        finally:
            frontend.close()
    assert frontend.stats.answered == 6 and run.decisions[3][0] == "speak"
    prefix, _, data = options.ref_audio[0].partition(",")
    assert prefix == "data:audio/wav;base64"
    audio, rate = soundfile.read(io.BytesIO(base64.b64decode(data)))
    assert rate == 16000 and audio.size == 8000
