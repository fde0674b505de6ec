"""``venus-ros``: run, replay and measure venus_ros from the command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from venus_ros.core.clock import FakeClock
from venus_ros.core.frontend import FrontendError
from venus_ros.core.session import SessionConfig, run_offline, summarize
from venus_ros.core.units import InputError, VideoFrame
from venus_ros.paths import sample_path


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``venus-ros`` console script."""
    parser = argparse.ArgumentParser(
        prog="venus-ros", description="Run, replay and measure venus_ros."
    )
    commands = parser.add_subparsers(dest="command", required=True)

    replay = commands.add_parser(
        "replay", help="run the foreground loop offline over a recording (fake clock)"
    )
    replay.add_argument(
        "input", type=Path, nargs="?", help="the user's audio (WAV/FLAC, any common rate)"
    )
    replay.add_argument("--bag", type=Path, help="instead: republish this rosbag2 into ROS")
    replay.add_argument("--rate", type=float, default=1.0, help="--bag: speed; 0 = at once")
    replay.add_argument("--loop", action="store_true", help="--bag: start over at the end")
    replay.add_argument("--topics", nargs="+", help="--bag: only these topics")
    replay.add_argument("--video", type=Path, help="a video file whose frames go with the audio")
    replay.add_argument(
        "--frontend",
        default=f"scripted:{sample_path('script.yaml')}",
        help="frontend spec, e.g. scripted:FILE (default: the bundled sample script)",
    )
    replay.add_argument("--out", type=Path, default=Path("out/replay"), help="output folder")

    demo = commands.add_parser("demo", help="replay the bundled sample session")
    demo.add_argument("--out", type=Path, default=Path("out/demo"), help="output folder")

    record = commands.add_parser("record", help="record the live graph to a rosbag2 (mcap)")
    record.add_argument("--bag", required=True, help="bag folder to create (must not exist)")
    record.add_argument("--topics", nargs="+", default=[], help="only these (default: all)")
    record.add_argument("--namespace", default="", help="namespace of the graph to record")

    tasks = commands.add_parser("tasks", help="list the harness's task journal")
    tasks.add_argument("--db", default="", help="journal file (default: the harness's own)")
    tasks.add_argument("--verbose", action="store_true", help="every transition too")

    run = commands.add_parser(
        "run", help="start the ROS 2 node set, each node in its own process (Ctrl-C stops)"
    )
    run.add_argument("--demo", action="store_true", help="file sources: the bundled sample")
    run.add_argument("--namespace", default="", help="ROS namespace for every node")
    run.add_argument("--frontend", default="", help="frontend spec (default: from the config)")
    run.add_argument("--audio", default="", help="mic source: device or file:PATH")
    run.add_argument("--video", default="", help="camera source: device or file:PATH")
    run.add_argument("--sink", default="", help="speaker sink: device or file:PATH")
    run.add_argument("--record", default="", help="record every topic to this rosbag2 (mcap)")
    run.add_argument("--duration", type=float, default=0.0, help="stop after this many s")
    run.add_argument("--params-file", default="", help="parameter YAML (default: venus.yaml)")

    bench = commands.add_parser("bench", help="print performance figures")
    bench.add_argument(
        "suite", choices=["core", "ros", "speech", "harness"], help="what to measure"
    )
    bench.add_argument("--minutes", type=float, default=60.0, help="core: simulated length")
    bench.add_argument(
        "--seconds",
        type=float,
        default=None,
        help="ros: measuring window (default 60); harness: each window (default 20)",
    )
    bench.add_argument("--tasks", type=int, default=64, help="harness: concurrent tasks")
    bench.add_argument("--heavy", type=int, default=16, help="harness: CPU-heavy tool tasks")

    args = parser.parse_args(argv)
    try:
        if args.command == "replay" and args.bag is not None:
            from venus_ros.nodes.bag_replay import main as bag_replay_main

            extra = ["--rate", str(args.rate)] + (["--loop"] if args.loop else [])
            extra += ["--topics", *args.topics] if args.topics else []
            return bag_replay_main(["--bag", str(args.bag), *extra])
        if args.command == "replay":
            if args.input is None:
                parser.error("replay: give an audio file, or --bag BAG")
            return _replay(args.input, args.video, args.frontend, args.out)
        if args.command == "record":
            from venus_ros.nodes.recorder import main as recorder_main

            ros = ["--ros-args", "-p", f"path:={args.bag}"]
            if args.topics:
                ros += ["-p", f"topics:=[{', '.join(args.topics)}]"]
            if args.namespace:
                ros += ["-r", f"__ns:=/{args.namespace.strip('/')}"]
            return recorder_main(["venus-ros", *ros])
        if args.command == "demo":
            spec = f"scripted:{sample_path('script.yaml')}"
            return _replay(sample_path("input.wav"), None, spec, args.out)
        if args.command == "tasks":
            from venus_ros.harness.journal import JournalError, default_journal_path, format_journal

            try:
                print(format_journal(args.db or default_journal_path(), verbose=args.verbose))
            except JournalError as exc:
                print(f"venus-ros tasks: {exc}", file=sys.stderr)
                return 2
            return 0
        if args.command == "run":
            from venus_ros.launcher import RunOptions, run as run_nodes

            return run_nodes(
                RunOptions(
                    demo=args.demo,
                    namespace=args.namespace,
                    frontend=args.frontend,
                    audio=args.audio,
                    video=args.video,
                    sink=args.sink,
                    record=args.record,
                    duration_s=args.duration,
                    params_file=args.params_file,
                )
            )
        if args.suite == "ros":
            from venus_ros.bench.ros import bench_ros

            return bench_ros(seconds=60.0 if args.seconds is None else args.seconds)
        if args.suite == "harness":
            from venus_ros.bench.harness import bench_harness

            return bench_harness(
                tasks=args.tasks,
                heavy=args.heavy,
                seconds=20.0 if args.seconds is None else args.seconds,
            )
        if args.suite == "speech":
            from venus_ros.bench.speech import bench_speech

            return bench_speech()
        from venus_ros.bench.core import bench_core

        return bench_core(minutes=args.minutes)
    except (FrontendError, InputError, OSError, ValueError) as exc:
        print(f"venus-ros {args.command}: {exc}", file=sys.stderr)
        return 2


def _replay(audio_path: Path, video: Path | None, spec: str, out: Path) -> int:
    import soundfile

    from venus_ros.frontends import make_frontend

    try:
        audio, rate = soundfile.read(str(audio_path), dtype="float32", always_2d=True)
    except (soundfile.LibsndfileError, RuntimeError) as exc:
        raise OSError(f"cannot read audio {audio_path}: {exc}") from exc
    if audio.shape[1] != 1:
        raise InputError(
            "audio.channels",
            f"{audio_path} has {audio.shape[1]} channels; "
            "the microphone input must be mono (downmix it first)",
        )
    audio = audio[:, 0]
    duration = len(audio) / rate
    clock = FakeClock()
    frontend = make_frontend(spec, clock=clock)
    frames = _read_video(video, duration) if video else ()
    config = SessionConfig(timeline_window_s=max(600.0, duration + 120.0))
    session = run_offline(audio, rate, frontend, clock=clock, frames=frames, config=config)

    out.mkdir(parents=True, exist_ok=True)
    session.timeline.export_jsonl(out / "timeline.jsonl")
    played = _render(session.playback.played_audio, session.playback.sample_rate)
    soundfile.write(str(out / "assistant.wav"), played, session.playback.sample_rate)
    lines = [f"input: {audio_path} ({duration:.2f} s at {rate} Hz), frontend: {spec}"]
    lines += summarize(session)
    lines.append(f"wrote {out / 'timeline.jsonl'}, {out / 'assistant.wav'}, {out / 'summary.txt'}")
    (out / "summary.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


def _render(pieces: list[tuple[float, np.ndarray]], rate: int) -> np.ndarray:
    """Place played audio at its session time: what a listener in the room heard."""
    end = max((round(t * rate) + len(a) for t, a in pieces), default=0)
    track = np.zeros(end, dtype=np.float32)
    for t, samples in pieces:
        start = round(t * rate)
        track[start : start + len(samples)] += samples
    return track


def _read_video(path: Path, duration: float) -> Iterator[VideoFrame]:
    """Frames of a video file at its own timestamps, up to ``duration`` seconds, as RGB.

    A generator: frames are decoded as the replay reaches them, never all held at once.
    """
    import cv2

    capture = cv2.VideoCapture(str(path))
    if not capture.isOpened():
        raise OSError(f"cannot open video {path}")
    try:
        seq = 0
        while True:
            ok, image = capture.read()
            t = capture.get(cv2.CAP_PROP_POS_MSEC) / 1000.0
            if not ok or t > duration:
                return
            yield VideoFrame(cv2.cvtColor(image, cv2.COLOR_BGR2RGB), t, seq=seq)
            seq += 1
    finally:
        capture.release()


if __name__ == "__main__":
    sys.exit(main())
