"""``venus-ros serve`` as a process, TLS, the session pool, and the remote spec in make_frontend."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections import deque

import pytest
from remote_helpers import drive, scripted_factory, units, wait_until, write_script

from venus_ros.frontends import make_frontend
from venus_ros.serve import ServeConfig, ServerThread


def _remote(url: str, extra: str = ""):
    return make_frontend(f"remote:{url},deadline_ms=4000{extra}")


def test_serve_process_answers_a_robot_and_stops_on_sigterm(tmp_path) -> None:
    path = write_script(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "venus_ros.serve", "--port", "0", "--frontend", f"scripted:{path}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "VENUS_SERVE_TOKEN": ""},
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("serving ws://127.0.0.1:"), proc.stderr.read()
        frontend = _remote(line.split()[1])
        try:
            run = drive(frontend, units("sss" + "." * 5))
        finally:
            frontend.close()
        assert run.delegates == ["weather in Paris today"] and frontend.stats.answered == 8
    finally:
        proc.terminate()
        assert proc.wait(10) == 0


def test_serve_refuses_a_bad_frontend_spec() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "venus_ros.serve", "--frontend", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "unknown frontend 'nope'" in proc.stderr


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_tls_with_a_private_certificate(tmp_path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
         "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    path = write_script(tmp_path)
    config = ServeConfig(port=0, certfile=str(cert), keyfile=str(key))
    with ServerThread(scripted_factory(path), config) as server:
        assert server.url.startswith("wss://")
        frontend = _remote(server.url, f",ca={cert}")
        try:
            run = drive(frontend, units("sss...."))
        finally:
            frontend.close()
        untrusted = _remote(server.url, ",connect_timeout_s=0.5")
        try:
            untrusted.prepare()
            assert not untrusted.link.connected  # the system CAs do not know this certificate
        finally:
            untrusted.close()
    assert run.delegates == ["weather in Paris today"]


def test_sessions_are_isolated_and_queued_in_order(tmp_path) -> None:
    """Two slots, three robots: two served at once with separate state, the third waits."""
    from websockets.sync.client import connect

    path = write_script(tmp_path)
    with ServerThread(scripted_factory(path), ServeConfig(port=0, max_sessions=2)) as server:
        runs: dict[int, object] = {}

        def robot(i: int) -> None:
            frontend = _remote(server.url, ",queue_timeout_s=20,connect_timeout_s=20")
            try:
                runs[i] = drive(frontend, units("sss" + "." * 5))
            finally:
                frontend.close()

        with connect(server.url + "/v1/realtime") as holder:
            assert json.loads(holder.recv(5))["type"] == "session.queue_done"
            threads = [threading.Thread(target=robot, args=(i,)) for i in range(2)]
            for t in threads:
                t.start()
            # one robot gets the free slot, the other waits at position 1
            assert wait_until(lambda: server.server.stats.queued_max == 1, 10)
        for t in threads:
            t.join(30)
        assert server.server.stats.sessions == 2
    assert all(r.delegates == ["weather in Paris today"] for r in runs.values())
    assert runs[0].decisions == runs[1].decisions  # no state leaked between sessions


def test_busy_server_refuses_beyond_its_queue(tmp_path) -> None:
    from websockets.sync.client import connect

    path = write_script(tmp_path)
    config = ServeConfig(port=0, max_sessions=1, max_queue=0)
    with ServerThread(scripted_factory(path), config) as server:
        with connect(server.url + "/v1/realtime") as holder:
            holder.recv(5)
            with connect(server.url + "/v1/realtime") as second:
                event = json.loads(second.recv(5))
                assert event["type"] == "error" and event["error"]["code"] == "server_busy"
        assert server.server.stats.refused_busy == 1


def test_reuse_builds_the_frontends_once_and_prepares_them_per_session(tmp_path) -> None:
    path = write_script(tmp_path)
    built = []

    def factory():
        built.append(scripted_factory(path)())
        return built[-1]

    with ServerThread(factory, ServeConfig(port=0, max_sessions=1, reuse=True)) as server:
        assert len(built) == 1  # built at start, before any robot connects
        runs = []
        for _ in range(3):
            frontend = _remote(server.url)
            try:
                runs.append(drive(frontend, units("sss" + "." * 5)))
            finally:
                frontend.close()
        assert server.server.stats.sessions == 3
    assert len(built) == 1
    assert runs[0].decisions == runs[1].decisions == runs[2].decisions  # prepare() reset it
    assert all(r.delegates == ["weather in Paris today"] for r in runs)


def test_clients_that_vanish_never_keep_a_session_slot(tmp_path) -> None:
    from websockets.sync.client import connect

    path = write_script(tmp_path)
    config = ServeConfig(port=0, max_sessions=1, max_queue=4)
    with ServerThread(scripted_factory(path), config) as server:
        url = server.url + "/v1/realtime"
        for _ in range(5):  # gone before reading anything
            connect(url).close()
        with connect(url) as holder:
            assert json.loads(holder.recv(5))["type"] == "session.queue_done"
            for _ in range(3):  # queued, then gone
                waiting = connect(url)
                assert json.loads(waiting.recv(5))["type"] == "session.queued"
                waiting.close()
        assert wait_until(lambda: server.server.stats.active == 0, 10)
        frontend = _remote(server.url, ",connect_timeout_s=5")
        try:
            drive(frontend, units("ss.."))
        finally:
            frontend.close()
        assert frontend.stats.answered == 4 and server.server._pool.waiters == deque()
