"""Scaling with existing parts: several ``serve`` processes behind one endpoint.

A WebSocket connection *is* a session, so any layer-4 balancer (HAProxy ``mode tcp``, nginx
``stream``) pins a session to one process for its whole life. The balancer here is a minimal
round-robin TCP relay standing in for HAProxy/nginx (only in the test): two servers with one
slot each take one robot each, and every unit of a session is answered by the same server.
"""

from __future__ import annotations

import asyncio
import itertools
import threading

from remote_helpers import drive, scripted_factory, units, write_script

from venus_ros.frontends import make_frontend
from venus_ros.serve import ServeConfig, ServerThread


class TcpRoundRobin:
    """Relays each TCP connection to the next backend in turn (a stand-in for an L4 balancer)."""

    def __init__(self, backends: list[int]) -> None:
        self._backends = itertools.cycle(backends)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="tcp-rr")
        self.port = 0

    async def _relay(self, reader, writer) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", next(self._backends))

        async def pipe(src, dst) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except ConnectionError:
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def __enter__(self) -> TcpRoundRobin:
        self._thread.start()

        async def start():
            return await asyncio.start_server(self._relay, "127.0.0.1", 0)

        self._server = asyncio.run_coroutine_threadsafe(start(), self._loop).result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.close()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


def test_two_serve_processes_behind_one_endpoint_pin_sessions(tmp_path) -> None:
    path = write_script(tmp_path)
    config = ServeConfig(port=0, max_sessions=1, max_queue=0)
    with (
        ServerThread(scripted_factory(path), config) as a,
        ServerThread(scripted_factory(path), config) as b,
    ):
        backends = [int(s.url.rsplit(":", 1)[1]) for s in (a, b)]
        with TcpRoundRobin(backends) as balancer:
            url = f"ws://127.0.0.1:{balancer.port}"
            runs = {}

            def robot(i: int) -> None:
                frontend = make_frontend(f"remote:{url},deadline_ms=4000,connect_timeout_s=10")
                try:
                    runs[i] = (drive(frontend, units("sss" + "." * 5)), frontend.stats.answered)
                finally:
                    frontend.close()

            threads = [threading.Thread(target=robot, args=(i,)) for i in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
        served = [s.server.stats for s in (a, b)]
    assert [s.sessions for s in served] == [1, 1]  # one robot per process
    assert [s.units for s in served] == [8, 8]  # every unit of a session on its own process
    assert all(answered == 8 for _, answered in runs.values())
    assert all(run.delegates == ["weather in Paris today"] for run, _ in runs.values())
