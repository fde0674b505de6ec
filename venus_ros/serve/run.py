"""Command line of ``venus-ros serve`` (also ``python -m venus_ros.serve``)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``serve`` (shared by ``venus-ros serve`` and ``python -m``)."""
    parser.add_argument(
        "--frontend", default="", help="frontend spec behind the server (default: cascade)"
    )
    parser.add_argument("--host", default="127.0.0.1", help="interface (default: loopback only)")
    parser.add_argument("--port", type=int, default=8765, help="TCP port (0: any free port)")
    parser.add_argument("--sessions", type=int, default=1, help="sessions served at once")
    parser.add_argument("--max-queue", type=int, default=8, help="connections allowed to wait")
    parser.add_argument(
        "--token-env",
        default="VENUS_SERVE_TOKEN",
        help="environment variable with the bearer token (auth is on when it is set)",
    )
    parser.add_argument("--cert", default=None, help="TLS certificate chain (PEM): serve wss://")
    parser.add_argument("--key", default=None, help="TLS private key (PEM)")
    parser.add_argument(
        "--max-frame-kb", type=int, default=1024, help="largest client message, KiB"
    )
    parser.add_argument(
        "--plain", action="store_true", help="no venus.* extension events (a plain server)"
    )
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="build a new frontend per connection (default: build --sessions frontends once "
        "and prepare() them for each session, so a checkpoint loads once)",
    )


def run_from_args(args: argparse.Namespace) -> int:
    """Serve until interrupted; prints ``serving URL`` once listening."""
    from venus_ros.core.clock import MonotonicClock
    from venus_ros.core.frontend import Frontend, FrontendError
    from venus_ros.frontends import make_frontend, resolve_spec
    from venus_ros.serve.server import RealtimeServer, ServeConfig

    spec = resolve_spec(args.frontend)
    if args.fresh:
        try:
            make_frontend(spec, clock=MonotonicClock()).close()  # fail now, not per connection
        except FrontendError as exc:
            print(f"venus-ros serve: {exc}", file=sys.stderr)
            return 2

    def factory() -> Frontend:
        return make_frontend(spec, clock=MonotonicClock())

    try:
        config = ServeConfig(
            host=args.host,
            port=args.port,
            max_sessions=args.sessions,
            max_queue=args.max_queue,
            token_env=args.token_env,
            certfile=args.cert,
            keyfile=args.key,
            max_frame_bytes=args.max_frame_kb * 1024,
            extensions=not args.plain,
            reuse=not args.fresh,
        )
    except ValueError as exc:
        print(f"venus-ros serve: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    server = RealtimeServer(factory, config)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        stop = loop.create_future()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, lambda: stop.done() or stop.set_result(None))
        await server.start()
        print(f"serving {server.url} ({spec})", flush=True)
        try:
            await stop
        finally:
            await server.stop()

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
    except FrontendError as exc:  # building the frontends at start
        print(f"venus-ros serve: {exc}", file=sys.stderr)
        return 2
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m venus_ros.serve``."""
    parser = argparse.ArgumentParser(prog="venus-ros serve", description=__doc__)
    add_arguments(parser)
    return run_from_args(parser.parse_args(argv))
