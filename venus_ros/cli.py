"""``venus-ros``: run, replay and measure venus_ros from the command line."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from venus_ros.core.clock import FakeClock
from venus_ros.core.frontend import FrontendError
from venus_ros.core.playback import render_played
from venus_ros.core.session import SessionConfig, run_offline, summarize
from venus_ros.core.units import InputError, UnitConfig, VideoFrame, resample
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

    demo = commands.add_parser(
        "demo", help="run the whole ROS 2 system on the bundled multi-turn session"
    )
    demo.add_argument("--out", type=Path, default=Path("out/demo"), help="output folder")
    demo.add_argument(
        "--live", action="store_true", help="use the microphone, speaker and camera (Ctrl-C ends)"
    )
    demo.add_argument(
        "--offline",
        action="store_true",
        help="instead: the old fast replay of the hello sample, scripted frontend, no ROS",
    )
    demo.add_argument("--frontend", default="", help="frontend spec (default: cascade)")

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
    run.add_argument(
        "--video",
        default=None,
        help='camera: device or file:PATH; "" = no camera (default: device; none with --demo)',
    )
    run.add_argument("--sink", default="", help="speaker sink: device or file:PATH")
    run.add_argument("--record", default="", help="record every topic to this rosbag2 (mcap)")
    run.add_argument("--duration", type=float, default=0.0, help="stop after this many s")
    run.add_argument("--params-file", default="", help="parameter YAML (default: venus.yaml)")

    bench = commands.add_parser("bench", help="print performance figures")
    bench.add_argument(
        "suite",
        choices=["core", "ros", "speech", "harness", "frontend", "soak", "fuzz", "gpu", "serve"],
        help="what to measure (soak: the real graph for --minutes, default 60; fuzz: the "
        "fuzz campaign for --minutes, default 10)",
    )
    bench.add_argument("--out", type=Path, default=None, help="soak/fuzz: output folder")
    bench.add_argument(
        "--minutes",
        type=float,
        default=None,
        help="core: simulated length (default 60); frontend: session length (default 10)",
    )
    bench.add_argument(
        "--seconds",
        type=float,
        default=None,
        help="ros: measuring window (default 60); harness: each window (default 20)",
    )
    bench.add_argument("--tasks", type=int, default=64, help="harness: concurrent tasks")
    bench.add_argument("--heavy", type=int, default=16, help="harness: CPU-heavy tool tasks")
    bench.add_argument(
        "--tiny", action="store_true", help="gpu: the same code on CPU in seconds (tiny backbone)"
    )
    bench.add_argument("--units", type=int, default=5, help="gpu: units timed per mode")
    bench.add_argument("--bandwidth", type=float, default=None, help="gpu: GPU memory GB/s")
    bench.add_argument("--engines-root", type=Path, default=None, help="gpu: engines folder")

    bench.add_argument(
        "--sessions",
        default="1,4,8",
        help="serve: concurrent sessions per row, comma-separated (default 1,4,8)",
    )
    bench.add_argument(
        "--frontend",
        default="cascade",
        help="frontend: the frontend measured (cascade:aec: the live configuration's); "
        "serve: the frontend behind the server",
    )
    bench.add_argument(
        "--deadline-ms", type=float, default=600.0, help="serve: the robots' unit deadline"
    )
    bench.add_argument(
        "--parity",
        type=Path,
        default=None,
        help="serve: instead, compare decisions in process and behind serve on this suite",
    )

    serve = commands.add_parser(
        "serve", help="serve a frontend over the MiniCPM-o Realtime protocol (WebSocket)"
    )
    from venus_ros.serve.run import add_arguments as add_serve_arguments

    add_serve_arguments(serve)

    engines = commands.add_parser("engines", help="build, list and verify engines/ (ONNX)")
    engines_sub = engines.add_subparsers(dest="engines_command", required=True)
    for name, text in (
        ("build", "export, quantise, check parity, write build/ and manifest.json"),
        ("verify", "re-hash a built engine and re-check its parity on this host"),
    ):
        action = engines_sub.add_parser(name, help=text)
        action.add_argument("names", nargs="*", help="engines (default: every network spec)")
        action.add_argument("--root", type=Path, default=None, help="engines folder")
        if name == "build":
            action.add_argument(
                "--checkpoint", type=Path, default=None, help="recipe engines: the checkpoint"
            )
            action.add_argument(
                "--dry-run", action="store_true", help="recipe engines: print the plan only"
            )
    listing = engines_sub.add_parser("list", help="every spec and whether it is built")
    listing.add_argument("--root", type=Path, default=None, help="engines folder")

    _add_eval_parser(commands)

    train = commands.add_parser("train", help="train the cascade's models (reproducibly)")
    models = train.add_subparsers(dest="model", required=True)
    floor = models.add_parser("floor", help="the floor-control policy (ONNX, ~10 min, 2 cores)")
    floor.add_argument("--seed", type=int, default=1, help="run seed (default 1)")
    floor.add_argument(
        "--out", type=Path, default=None, help="output folder (default: the package's models)"
    )
    floor.add_argument("--n", type=int, default=None, help="samples per category")
    floor.add_argument(
        "--echo-share",
        type=float,
        default=0.0,
        help="share of samples heard through the echo path with echo cancellation (default 0)",
    )
    floor.add_argument("--no-progress", action="store_true", help="no progress bars on stderr")
    router = models.add_parser("router", help="the delegation router (~20 s)")
    from venus_ros.training.router import add_arguments as add_router_arguments

    add_router_arguments(router)

    args = parser.parse_args(argv)
    if args.command == "serve":
        from venus_ros.serve.run import run_from_args

        return run_from_args(args)
    if args.command == "engines":
        return _engines(args)
    if args.command == "eval":
        return _eval(args)
    if args.command == "train":
        return _train(args)
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
        if args.command == "demo" and args.offline:
            spec = args.frontend or f"scripted:{sample_path('script.yaml')}"
            return _replay(sample_path("input.wav"), None, spec, args.out)
        if args.command == "demo":
            from venus_ros.demo import DemoOptions, run_demo

            return run_demo(DemoOptions(out=args.out, live=args.live, frontend=args.frontend))
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
        if args.suite == "serve" and args.parity is not None:
            from venus_ros.bench.remote import bench_parity

            return bench_parity(str(args.parity), spec=args.frontend)
        if args.suite == "serve":
            from venus_ros.bench.remote import bench_serve

            counts = tuple(int(n) for n in args.sessions.split(",") if n.strip())
            return bench_serve(
                sessions=counts,
                spec=args.frontend,
                seconds=20.0 if args.seconds is None else args.seconds,
                deadline_ms=args.deadline_ms,
            )
        if args.suite == "gpu":
            from venus_ros.bench.gpu import bench_gpu

            return bench_gpu(
                tiny=args.tiny,
                units=args.units,
                bandwidth_gb_s=args.bandwidth,
                engines_root=args.engines_root,
            )
        if args.suite == "ros":
            from venus_ros.bench.ros import bench_ros

            return bench_ros(seconds=60.0 if args.seconds is None else args.seconds)
        if args.suite == "soak":
            from venus_ros.bench.soak import bench_soak

            return bench_soak(minutes=60.0 if args.minutes is None else args.minutes, out=args.out)
        if args.suite == "fuzz":
            from venus_ros.bench.fuzz import bench_fuzz

            return bench_fuzz(minutes=10.0 if args.minutes is None else args.minutes, out=args.out)
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
        if args.suite == "frontend":
            from venus_ros.bench.frontend import bench_frontend

            return bench_frontend(
                minutes=10.0 if args.minutes is None else args.minutes, spec=args.frontend
            )
        from venus_ros.bench.core import bench_core

        return bench_core(minutes=60.0 if args.minutes is None else args.minutes)
    except (FrontendError, InputError, OSError, ValueError) as exc:
        print(f"venus-ros {args.command}: {exc}", file=sys.stderr)
        return 2


def _engines(args: argparse.Namespace) -> int:
    """``venus-ros engines build|list|verify``."""
    import logging

    from venus_ros.engines.build import (
        EngineError,
        build_engine,
        default_root,
        list_engines,
        verify_engine,
    )

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger().setLevel(logging.WARNING)  # quantisation chatter
    logging.getLogger("venus_ros").setLevel(logging.INFO)  # the one providers line
    root = args.root or default_root()
    try:
        statuses = list_engines(root)
    except OSError as exc:
        print(f"venus-ros engines: {exc}", file=sys.stderr)
        return 2
    if args.engines_command == "list":
        for status in statuses:
            state = "built" if status.built else "not built"
            if status.error:
                state = f"invalid: {status.error}"
            print(f"{status.name:14} {status.network:24} {','.join(status.variants):16} {state}")
        return 0
    recipes = {s.name for s in statuses if s.network.startswith("recipe:")}
    names = args.names or [s.name for s in statuses if s.name not in recipes]
    unknown = sorted(set(names) - {s.name for s in statuses})
    if unknown:
        print(f"venus-ros engines: no spec for {', '.join(unknown)} in {root}", file=sys.stderr)
        return 2
    status = 0
    for name in names:
        if args.engines_command == "build" and name in recipes:
            try:
                plan = build_engine(root / name, checkpoint=args.checkpoint, dry_run=args.dry_run)
            except EngineError as exc:
                print(f"{name}: FAILED: {exc}", file=sys.stderr)
                status = 1
                continue
            for step in plan["steps"]:
                print(f"{name}: {step['name']}: {' '.join(step['argv'])}")
            for tool in plan["missing"]:
                print(f"{name}: missing {tool['tool']} ({tool['how']})")
            print(f"{name}: {'planned (dry run)' if args.dry_run else 'built'}")
            continue
        if args.engines_command == "build":
            try:
                manifest = build_engine(root / name)
            except EngineError as exc:
                print(f"{name}: FAILED: {exc}", file=sys.stderr)
                status = 1
                continue
            ref = manifest["reference"]
            same = "no reference" if ref is None else f"identical to reference: {ref['identical']}"
            parts = [
                f"{v}: {e['bytes'] / 1e6:.2f} MB parity {e['parity']['max_abs_diff']:.1e}"
                for v, e in manifest["variants"].items()
            ]
            print(
                f"{name}: built ({same}; reproducible: {manifest['reproducible']}); "
                + "; ".join(parts)
            )
        else:
            problems = verify_engine(root / name)
            print(f"{name}: " + ("ok" if not problems else "FAILED: " + "; ".join(problems)))
            status = status or (1 if problems else 0)
    return status


def _add_eval_parser(commands: argparse._SubParsersAction) -> None:
    """The ``eval`` command: synthesize suites, run frontends over them, compare results."""
    evaluate = commands.add_parser(
        "eval", help="evaluation suites: synthesize one, run a frontend over it, compare runs"
    )
    sub = evaluate.add_subparsers(dest="eval_command", required=True)

    synth = sub.add_parser("synth", help="synthesize a scenario suite with espeak-ng voices")
    synth.add_argument("--out", type=Path, required=True, help="suite folder to write")
    synth.add_argument("--n", type=int, default=10, help="samples per category (default 10)")
    synth.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    synth.add_argument("--categories", nargs="+", help="only these categories (default: all)")
    synth.add_argument("--noise", action="store_true", help="add room noise")
    synth.add_argument(
        "--split",
        choices=("eval", "train"),
        default=None,
        help="which part of the phrase families, voices and seeds to draw from: eval (default; "
        "nothing the trained models saw) or train",
    )
    synth.add_argument("--purpose", choices=("eval", "train"), help=argparse.SUPPRESS)
    synth.add_argument(
        "--voices",
        choices=("auto", "espeak", "piper"),
        default="auto",
        help="auto: espeak-ng voices and the piper voice when installed (default); a committed "
        "suite should use espeak, which reproduces without the optional GPL extra",
    )
    synth.add_argument(
        "--compact", action="store_true", help="short timings and trailing silence (small files)"
    )
    synth.add_argument(
        "--overwrite", action="store_true", help="replace the samples of an existing suite"
    )
    synth.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")

    real = sub.add_parser(
        "real", help="build the real-speech suite from recordings inside installed packages"
    )
    real.add_argument("--out", type=Path, required=True, help="suite folder to write")
    real.add_argument("--n", type=int, default=6, help="samples per overlap category (max)")
    real.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    real.add_argument("--noise", action="store_true", help="add room noise")
    real.add_argument("--overwrite", action="store_true", help="replace an existing suite")

    run = sub.add_parser("run", help="play a suite through the duplex loop and score it")
    run.add_argument("--scenarios", type=Path, required=True, help="the suite folder")
    run.add_argument(
        "--frontend", required=True, help="frontend spec, e.g. scripted:FILE or vad-bargein"
    )
    run.add_argument("--categories", nargs="+", help="only these categories (default: all)")
    run.add_argument(
        "--echo", action="store_true", help="mix the assistant's played audio into the mic"
    )
    run.add_argument(
        "--json",
        type=Path,
        help="write the metrics here (with --baselines also OUT's name + .BASELINE.json)",
    )
    run.add_argument("--report", type=Path, help="write a Markdown report with plots here")
    run.add_argument(
        "--baselines",
        action="store_true",
        help=f"also run the {' and '.join(BASELINES)} baselines over the suite",
    )
    run.add_argument(
        "--judge",
        default="offline",
        help="behaviour labels by content: offline (default; deterministic, word-timed "
        "faster-whisper transcripts + MiniLM), openai:MODEL (any OpenAI-compatible endpoint: "
        "$VENUS_EVAL_JUDGE_BASE_URL or $OPENAI_BASE_URL, key in $OPENAI_API_KEY), or none "
        "(acoustic labels only)",
    )
    run.add_argument(
        "--asr", default="tiny.en", help="faster-whisper model for the transcripts (tiny.en, base)"
    )
    run.add_argument(
        "--detector",
        choices=("silero", "energy"),
        default="silero",
        help="voice activity on the played audio: silero (default, as FDB) or energy (for "
        "frontends that play tones instead of speech, such as scripted)",
    )
    run.add_argument(
        "--fdb-out",
        type=Path,
        help="also write Full-Duplex-Bench's layout here (output.wav, clean_output.wav from a "
        "second run on the clean input, transcript JSONs) for FDB's own scripts",
    )
    run.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")

    compare = sub.add_parser("compare", help="print the differences between two metrics JSONs")
    compare.add_argument("a", type=Path, help="metrics JSON (eval run --json)")
    compare.add_argument("b", type=Path, help="metrics JSON to compare with")


def _train(args: argparse.Namespace) -> int:
    """``venus-ros train floor|router``: the cascade's models, from our own data and seeds."""
    if args.model == "router":
        from venus_ros.training.router import run as train_router

        return train_router(args)
    from venus_ros.frontends.cascade.floor import MODEL_PATH
    from venus_ros.training.floor import DEFAULT_N_PER_CATEGORY, train_floor

    out = args.out or MODEL_PATH.parent
    summary = train_floor(
        args.seed,
        out,
        n_per_category=args.n or DEFAULT_N_PER_CATEGORY,
        progress=not args.no_progress,
        echo_share=args.echo_share,
    )
    print(f"floor policy written to {out} ({summary.get('total_s', 0):.0f} s); see floor_report.md")
    return 0


#: Baseline frontends run by ``venus-ros eval run --baselines``.
BASELINES = ("vad-bargein", "never-yield")


def _eval(args: argparse.Namespace) -> int:
    """Run one ``venus-ros eval`` command; clear errors exit 2."""
    from venus_ros.audio.vad import ModelPackageMissing
    from venus_ros.eval.judge import JudgeError
    from venus_ros.eval.scenario import ScenarioError

    name = f"venus-ros eval {args.eval_command}"
    try:
        if args.eval_command == "synth":
            return _eval_synth(args)
        if args.eval_command == "run":
            return _eval_run(args)
        if args.eval_command == "real":
            return _eval_real(args)
        return _eval_compare(args.a, args.b)
    except (
        ScenarioError,
        FrontendError,
        InputError,
        OSError,
        ValueError,
        JudgeError,
        ModelPackageMissing,
    ) as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 2


def _eval_synth(args: argparse.Namespace) -> int:
    import time

    from venus_ros.eval.synth import synthesize

    if args.n < 1:
        raise ValueError(f"--n must be >= 1, got {args.n}")
    start = time.perf_counter()
    suite = synthesize(
        args.out,
        args.n,
        args.seed,
        args.categories,
        noise=args.noise,
        progress=not args.no_progress,
        split=args.split,
        purpose=args.purpose,
        voices=args.voices,
        compact=args.compact,
        overwrite=args.overwrite,
    )
    counts: dict[str, int] = {}
    for sample in suite.samples:
        counts[sample.category] = counts.get(sample.category, 0) + 1
    seconds = time.perf_counter() - start
    print(
        f"wrote {len(suite.samples)} samples to {suite.root} in {seconds:.1f} s "
        f"(seed {args.seed}, noise {'on' if args.noise else 'off'}): "
        + ", ".join(f"{c} {n}" for c, n in counts.items())
        + (f"; tools.json: {len(suite.tools)} tools" if suite.tools else "")
    )
    return 0


def _eval_run(args: argparse.Namespace) -> int:
    import json
    import time

    from venus_ros.eval.fdb import load_any_suite
    from venus_ros.eval.metrics import MetricsConfig, compute_metrics
    from venus_ros.eval.runner import check_frontend, content_judge, export_fdb, run_suite

    suite = load_any_suite(args.scenarios, args.categories)
    judge = transcriber = None
    if args.judge != "none":
        judge, transcriber = content_judge(args.judge, args.asr)
    frontends = [args.frontend]
    if args.baselines:
        # With the speaker in the microphone the baselines cancel their own echo, as live.
        baselines = [f"{b}:aec" if args.echo else b for b in BASELINES]
        frontends += [b for b in baselines if b != args.frontend]
    for spec in frontends:
        check_frontend(spec)  # every frontend must build before anything runs
    results = []
    for spec in frontends:
        start = time.perf_counter()
        runs = run_suite(suite, spec, echo=args.echo, progress=not args.no_progress)
        seconds = time.perf_counter() - start
        metrics = compute_metrics(
            runs,
            spec,
            str(args.scenarios),
            config=MetricsConfig(detector=args.detector),
            judge=judge,
            transcriber=transcriber,
        )
        metrics["run"] = {"echo": args.echo, "seconds": round(seconds, 3), "judge": args.judge}
        if args.fdb_out is not None:
            from venus_ros.eval.judge import WhisperTranscriber

            target = args.fdb_out if spec == args.frontend else args.fdb_out / _safe_name(spec)
            written = export_fdb(
                suite,
                runs,
                spec,
                target,
                transcriber or WhisperTranscriber(args.asr),
                echo=args.echo,
                config=MetricsConfig(detector=args.detector),
                progress=not args.no_progress,
            )
            print(f"wrote {len(written)} FDB sample folders to {target}")
        results.append(metrics)
        print("\n".join(eval_summary(metrics, seconds)))
    main_metrics, baselines = results[0], results[1:]
    if args.json is not None:
        paths = [args.json] + [
            args.json.with_name(
                f"{args.json.stem}.{_safe_name(m['frontend'])}{args.json.suffix or '.json'}"
            )
            for m in baselines
        ]
        for path, metrics in zip(paths, results, strict=True):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
            print(f"wrote {path}")
    if args.report is not None:
        from venus_ros.eval.report import write_report

        print(f"wrote {write_report(main_metrics, args.report, baselines=baselines)}")
    return 0


def _eval_real(args: argparse.Namespace) -> int:
    from venus_ros.eval.realspeech import build_real_suite, sources

    suite = build_real_suite(
        args.out, args.n, args.seed, noise=args.noise, overwrite=args.overwrite
    )
    counts: dict[str, int] = {}
    for sample in suite.samples:
        counts[sample.category] = counts.get(sample.category, 0) + 1
    print(
        f"wrote {len(suite.samples)} real-speech samples to {suite.root}: "
        + ", ".join(f"{c} {n}" for c, n in counts.items())
        + "; sources: "
        + "; ".join(f"{k}: {v}" for k, v in sources().items())
    )
    return 0


def _safe_name(spec: str) -> str:
    """A frontend spec as a file-name part."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", spec)


def _eval_compare(a_path: Path, b_path: Path) -> int:
    import json

    from venus_ros.eval.report import compare

    loaded = []
    for path in (a_path, b_path):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path} is not valid JSON: {exc}") from exc
        if not isinstance(data, dict) or "headline" not in data:
            raise ValueError(f"{path} is not a metrics JSON (venus-ros eval run --json)")
        loaded.append(data)
    print(compare(loaded[0], loaded[1]))
    return 0


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.0f}%"


def _secs(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f} s"


def eval_summary(metrics: dict, seconds: float | None = None) -> list[str]:
    """A few lines on a metrics dict: rates, delegation, tool use, compute, errors."""
    n = metrics["n_samples"]
    categories = ", ".join(f"{c} {k}" for c, k in metrics.get("categories", {}).items())
    timing = "" if seconds is None else f" in {seconds:.1f} s ({seconds / max(n, 1):.2f} s/sample)"
    echo = " with echo" if metrics.get("run", {}).get("echo") else ""
    lines = [f"{metrics['frontend']}{echo}: {n} samples ({categories}){timing}"]
    overlap = metrics["overlap"]
    if overlap["all"]["n"]:
        rates = [f"interruption response {_pct(overlap['interruption']['response_rate'])}"]
        rates += [
            f"{c} continuation {_pct(overlap[c]['continuation_rate'])}"
            for c in ("backchannel", "other_directed", "background")
            if overlap[c]["n"]
        ]
        respond = overlap["by_expected"]["respond"]
        basis = overlap["all"].get("basis", "acoustic")
        lines.append(
            f"  overlap ({basis} labels): "
            + ", ".join(rates)
            + f"; not speaking at overlap start: {overlap['all']['not_speaking']}"
        )
        if basis == "content":
            acoustic = [
                f"interruption {_pct(overlap['interruption']['acoustic_response_rate'])}"
            ] + [
                f"{c} {_pct(overlap[c]['acoustic_continuation_rate'])}"
                for c in ("backchannel", "other_directed", "background")
                if overlap[c]["n"]
            ]
            lines.append("  acoustic outcome (secondary): " + ", ".join(acoustic))
        lines.append(
            f"  latency (respond): stop p50 {_secs(respond['stop_latency_s'].get('p50'))}, "
            f"response p50 {_secs(respond['response_latency_s'].get('p50'))}; FDB double talk "
            f"p50 {_secs(respond.get('fdb_stop_s', {}).get('p50'))}, response gap p50 "
            f"{_secs(respond.get('fdb_resp_s', {}).get('p50'))}"
        )
    if metrics["pause"]["n"] or metrics["turn_taking"]["n"]:
        lines.append(
            f"  pause takeover {_pct(metrics['pause']['takeover_rate'])}; turn-taking response "
            f"{_pct(metrics['turn_taking']['response_rate'])}, p50 "
            f"{_secs(metrics['turn_taking']['latency_s'].get('p50'))}"
        )
    delegation = metrics["delegation"]
    if delegation["n"]:
        c = delegation["confusion"]
        lines.append(
            f"  delegation: recall {_pct(delegation['recall'])} ({c['tp']}/{c['tp'] + c['fn']}), "
            f"specificity {_pct(delegation['specificity'])} ({c['tn']}/{c['tn'] + c['fp']})"
        )
    tools = metrics["tool_use"]
    if tools["n"]:
        lines.append(
            f"  tool use: selection F1 {_pct(tools['selection_f1'])}, Pass@1 "
            f"{_pct(tools['pass_at_1'])} ({tools['passed']}/{tools['n']}), argument accuracy "
            f"{_pct(tools['argument_accuracy'])}"
        )
    compute = metrics["compute"]
    p50, p99 = compute["p50_ms"], compute["p99_ms"]
    lines.append(
        f"  compute per unit: p50 {'n/a' if p50 is None else f'{p50:.1f} ms'}, p99 "
        f"{'n/a' if p99 is None else f'{p99:.1f} ms'}, missed deadlines "
        f"{compute['missed_deadlines']} of {compute['units']} units"
    )
    errors = metrics["errors"]
    if errors:
        lines.append(f"  errors: {len(errors)} sample(s) could not be run")
        lines += [f"    {e['id']}: {e['error']}" for e in errors[:5]]
        if len(errors) > 5:
            lines.append(f"    ... and {len(errors) - 5} more (see the JSON)")
    return lines


#: Sample rates ``replay`` resamples from (below 8 kHz a recording cannot carry speech well).
MIN_REPLAY_RATE, MAX_REPLAY_RATE = 8000, 384000


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
    if audio.size == 0:
        raise InputError("audio.samples", f"{audio_path} holds no samples")
    if rate not in UnitConfig().supported_rates:
        if not MIN_REPLAY_RATE <= rate <= MAX_REPLAY_RATE:
            raise InputError(
                "audio.sample_rate",
                f"{audio_path} is sampled at {rate} Hz; replay reads "
                f"{MIN_REPLAY_RATE}..{MAX_REPLAY_RATE} Hz (resample it first)",
            )
        print(f"replay: resampling {audio_path} from {rate} Hz to 16000 Hz", file=sys.stderr)
        audio, rate = resample(audio, rate, 16000), 16000
    clock = FakeClock()
    frontend = make_frontend(spec, clock=clock)
    frames = _read_video(video, duration) if video else ()
    config = SessionConfig(timeline_window_s=max(600.0, duration + 120.0))
    session = run_offline(audio, rate, frontend, clock=clock, frames=frames, config=config)

    out.mkdir(parents=True, exist_ok=True)
    session.timeline.export_jsonl(out / "timeline.jsonl")
    played = render_played(session.playback.played_audio, session.playback.sample_rate)
    soundfile.write(str(out / "assistant.wav"), played, session.playback.sample_rate)
    lines = [f"input: {audio_path} ({duration:.2f} s at {rate} Hz), frontend: {spec}"]
    lines += summarize(session)
    lines.append(f"wrote {out / 'timeline.jsonl'}, {out / 'assistant.wav'}, {out / 'summary.txt'}")
    (out / "summary.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


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
