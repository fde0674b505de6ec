"""``venus-ros demo``: the whole ROS 2 system on the bundled multi-turn session, then its report.

The node set of ``venus-ros run`` plus the recorder and the simulated robot, each node in its
own process (:class:`venus_ros.launcher.Supervisor`, loopback-only discovery, a domain of its
own): ``mic_node`` plays ``venus_ros/samples/demo/input.wav`` in real time, ``frontend_node``
runs the cascade frontend, ``harness_node`` runs the tools of ``config/demo_tools.yaml`` (the
built-ins and ``go_to``, served by ``sim_robot_node``), ``speaker_node`` writes what it played
to a WAV file, ``monitor_node`` publishes the RViz panel and diagnostics, ``recorder_node``
records every topic into a rosbag2 (mcap). The microphone's process starts with the others but
stays inactive; it is activated only once the frontend (its models loaded) and the recorder both
subscribe to it (:func:`start_microphone`), so neither loses the session's first words.

The run ends when the recording has been played, every delegated task has settled and the
assistant has been quiet for a moment (at most ``max_tail_s`` after the recording). Then,
from the bag alone, the demo writes into the output folder:

- ``conversation.wav``: stereo, 16 kHz: the user's microphone left, the assistant's played
  speech right, placed by the speaker's playback acknowledgements on the microphone's clock;
- ``session/`` (``session/session.mcap`` + ``metadata.yaml``): the rosbag;
- ``timeline.png``: user and assistant speech, listen/speak bands, overlaps, delegations and
  backend insertions (and the session script's events, for the bundled session);
- ``summary.txt``: one screen: turns and what the user heard of them, what the assistant did
  about each scripted event, delegations and their outcomes, tool calls, latencies, compute per
  unit, missed deadlines;
- ``metrics.json``: the session scored by the evaluation's own code
  (:func:`venus_ros.eval.metrics.compute_metrics`, one sample per scripted event): Silero voice
  segments of the played audio with FDB's merging, the response latency (user's end ->
  assistant's next voice segment), stop latency and outcome of each overlap, FDB's double talk
  and response gaps, and the offline content judge's label of each overlap. The summary's
  latencies and event outcomes are read from it, so the demo and ``venus-ros eval run`` agree
  by construction.

``--live`` uses the sound card and camera instead of the files (with echo cancellation on) and
runs until Ctrl-C. This module imports rclpy only inside :func:`run_demo`.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from venus_ros.launcher import NodeSpec, Supervisor, ros_environment
from venus_ros.paths import share_path

#: The bundled session.
SESSION_DIR = Path(__file__).resolve().parent / "samples" / "demo"
#: Rate of the conversation WAV (the microphone's).
RATE = 16000
#: The assistant's output rate (the frontend's TTS).
OUT_RATE = 24000
#: Quiet time after the last assistant audio (and settled tasks) that ends the session.
QUIET_S = 3.0
#: Task states that end a task on the harness's side.
FINAL_STATES = frozenset({"DELIVERED", "FAILED", "CANCELLED"})
#: The nodes that must hear the microphone from its first sample.
LISTENERS = ("frontend_node", "recorder_node")
#: Once the demo sees every listener subscribed: time for the microphone's process (up since the
#: start, so its discovery of the other processes is long done) to match the newest of them.
MATCH_SETTLE_S = 0.5
#: A median delay from a unit's audio to the frontend's record of it above this is reported.
LATE_UNITS_S = 0.5


def _say(message: str) -> None:
    print(f"[demo] {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class DemoOptions:
    """What ``venus-ros demo`` was asked for.

    Attributes:
        out: Output folder (created; earlier outputs in it are replaced).
        live: Sound card, speaker and camera instead of the bundled files.
        frontend: Frontend spec ('' = ``cascade``, or ``cascade:aec`` live).
        session: The input WAV (16 kHz mono or any rate the mic node resamples).
        max_tail_s: Longest wait after the recording for tasks and replies to finish.
        start_timeout_s: Longest wait for the frontend to load its models and subscribe.
    """

    out: Path = Path("out/demo")
    live: bool = False
    frontend: str = ""
    session: Path = SESSION_DIR / "input.wav"
    max_tail_s: float = 30.0
    start_timeout_s: float = 120.0


def write_demo_params(path: Path) -> Path:
    """A copy of ``config/venus.yaml``: the harness uses ``config/demo_tools.yaml``, the mic
    waits for both of its listeners (frontend and recorder).

    For ``launch/demo.launch.py``, whose included venus.launch.py takes one parameter file.

    Returns:
        ``path`` (its folder is created).
    """
    import yaml

    params = yaml.safe_load(share_path("config/venus.yaml").read_text(encoding="utf-8"))
    harness = params["/**/harness_node"]["ros__parameters"]
    harness["tools_file"] = str(share_path("config/demo_tools.yaml"))
    # The recorder and the frontend both listen: the file starts once both matched.
    mic = params.setdefault("/**/mic_node", {}).setdefault("ros__parameters", {})
    mic["wait_for_subscribers"] = 2
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    return path


def demo_nodes(options: DemoOptions) -> tuple[list[NodeSpec], NodeSpec]:
    """The nodes of the demo (everything but the microphone) and the microphone node."""
    out = options.out.resolve()
    spec = options.frontend or ("cascade:aec" if options.live else "cascade")
    nodes = [
        NodeSpec("frontend", {"frontend": spec}),
        NodeSpec(
            "harness",
            {
                "tools_file": str(share_path("config/demo_tools.yaml")),
                "journal_path": str(out / "harness.sqlite3"),
            },
            respawn=True,
        ),
        NodeSpec("speaker", {"sink": "device" if options.live else f"file:{out / 'played.wav'}"}),
        NodeSpec("monitor"),
        NodeSpec("recorder", {"path": str(out / "session")}),
        NodeSpec("sim_robot"),
    ]
    if options.live:
        nodes.insert(0, NodeSpec("camera", {"source": "device"}))
    source = "device" if options.live else f"file:{options.session.resolve()}"
    # Unconfigured until the demo activates it, once every listener is subscribed (run_demo).
    return nodes, NodeSpec("mic", {"source": source, "autostart": "false"})


# ---------------------------------------------------------------------------------------------
# Running the system
# ---------------------------------------------------------------------------------------------


class _Watcher:
    """A node in the demo process that follows the session on ``timeline`` for progress lines
    and for the end of the session, and activates the microphone."""

    def __init__(self, context: Any = None, namespace: str = "") -> None:
        from rclpy.node import Node

        from venus_interfaces.msg import TimelineEvent
        from venus_ros.nodes.qos import TOPICS, qos_for

        self.node = Node("venus_demo_watcher", namespace=namespace, context=context)
        self.mic_s = 0.0  # how far the frontend's units have got in the recording
        self.last_audio_wall = 0.0
        self.open_tasks: set[str] = set()
        self.said: list[str] = []
        self.events: list[str] = []
        self.node.create_subscription(
            TimelineEvent, TOPICS["timeline"], self._on_event, qos_for("timeline")
        )
        self._audio_topic = TOPICS["audio_in"]

    def _on_event(self, msg: Any) -> None:
        try:
            payload = json.loads(msg.payload_json)
        except ValueError:
            return
        kind = msg.kind
        if kind == "user_audio":
            self.mic_s = (payload.get("start_sample", 0) + payload.get("samples", 0)) / RATE
        elif kind == "assistant_audio":
            self.last_audio_wall = time.monotonic()
        elif kind == "assistant_text" and payload.get("text"):
            self.said.append(payload["text"])
        elif kind == "task_state" and payload.get("source") == "harness":
            task, state = payload.get("task_id", ""), payload.get("state", "")
            if state in FINAL_STATES:
                self.open_tasks.discard(task)
            else:
                self.open_tasks.add(task)
            self.events.append(f"task {task[:8]} {state} ({payload.get('tool') or 'no tool'})")
        elif kind == "delegate_close":
            self.events.append(f"delegated: {payload.get('query', '')!r}")

    def frontend_subscribed(self) -> bool:
        """The frontend node subscribes to the microphone (its models are loaded)."""
        return "frontend_node" not in self.missing_listeners(("frontend_node",))

    def missing_listeners(self, names: Sequence[str] = LISTENERS) -> list[str]:
        """Those of ``names`` that do not subscribe to the microphone yet, and ``mic_node`` when
        its publisher is not seen yet."""
        topic = self._audio_topic
        subscribed = {i.node_name for i in self.node.get_subscriptions_info_by_topic(topic)}
        publishing = {i.node_name for i in self.node.get_publishers_info_by_topic(topic)}
        missing = [name for name in names if name not in subscribed]
        return missing + ([] if "mic_node" in publishing else ["mic_node"])

    def activate_microphone(self, timeout_s: float = 10.0) -> str:
        """Configure and activate ``mic_node`` (started with ``autostart`` off) through its
        lifecycle service; an empty string, or why it failed."""
        from lifecycle_msgs.msg import Transition
        from lifecycle_msgs.srv import ChangeState

        client = self.node.create_client(ChangeState, "mic_node/change_state")
        try:
            if not client.wait_for_service(timeout_sec=timeout_s):
                return "mic_node/change_state is not available"
            for name, transition in (
                ("configure", Transition.TRANSITION_CONFIGURE),
                ("activate", Transition.TRANSITION_ACTIVATE),
            ):
                request = ChangeState.Request(transition=Transition(id=transition))
                future = client.call_async(request)
                deadline = time.monotonic() + timeout_s
                while not future.done() and time.monotonic() < deadline:
                    time.sleep(0.02)
                result = future.result() if future.done() else None
                if result is None or not result.success:
                    return f"mic_node did not {name}"
            return ""
        finally:
            self.node.destroy_client(client)


def start_microphone(
    watcher: _Watcher,
    poll: Callable[[float], int],
    timeout_s: float,
    listeners: Sequence[str] = LISTENERS,
) -> tuple[int, str]:
    """Activate the microphone once every listener hears it, so none loses the first words.

    The microphone (``mic_node``, started with ``autostart`` off) starts playing its file as
    soon as it has one matched subscriber. Started while the frontend was still loading its
    models, it began at the recorder's subscription, and the frontend, subscribed seconds later
    and matched by the young process after a discovery delay that a cold first run makes long,
    heard the recording from its second second on: it lost the greeting's first word and put
    every later unit a second early (it counts samples from the first chunk it gets).

    Args:
        watcher: the demo's graph watcher.
        poll: waits up to the given seconds; a process's exit status (or 130 for a stop)
            ends the wait, 0 goes on.
        timeout_s: longest wait for the listeners.
        listeners: node names that must subscribe to ``audio/in`` first.

    Returns:
        ``(exit status, message)``: ``(0, "")`` once the microphone is active.
    """
    deadline = time.monotonic() + timeout_s
    while missing := watcher.missing_listeners(listeners):
        code = poll(0.25)
        if code:
            return code, ""
        if time.monotonic() > deadline:
            return 1, f"not ready after {timeout_s:.0f} s: {', '.join(missing)}"
    code = poll(MATCH_SETTLE_S)
    if code:
        return code, ""
    failed = watcher.activate_microphone()
    return (1, failed) if failed else (0, "")


def run_demo(options: DemoOptions) -> int:
    """Run the system on the session (or live until Ctrl-C), then write the outputs."""
    import signal

    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    started = time.monotonic()
    out = options.out
    duration = 0.0
    if not options.live:
        import soundfile

        try:
            info = soundfile.info(str(options.session))
        except RuntimeError as exc:
            raise OSError(f"cannot read the session audio {options.session}: {exc}") from exc
        duration = info.frames / info.samplerate
    out.mkdir(parents=True, exist_ok=True)
    for stale in ("session", "played.wav", "harness.sqlite3", "harness.sqlite3-wal"):
        path = out / stale
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()

    env = ros_environment()
    os.environ.update({k: env[k] for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")})
    nodes, mic = demo_nodes(options)
    params = share_path("config/venus.yaml")
    system = Supervisor(nodes, params)
    microphone = Supervisor([mic], params)
    stop = {"now": False}

    def request_stop(*_: object) -> None:
        stop["now"] = True

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    rclpy.init()
    watcher = _Watcher()
    executor = SingleThreadedExecutor()
    executor.add_node(watcher.node)
    spinner = threading.Thread(target=_spin, args=(executor,), name="demo-watcher", daemon=True)
    spinner.start()
    status = 0
    try:
        names = ", ".join(spec.name for spec in [*nodes, mic])
        _say(f"starting {names} (ROS_DOMAIN_ID={env['ROS_DOMAIN_ID']})")
        system.start()
        microphone.start()  # inactive: it publishes nothing until activate_microphone()
        _say("waiting for the frontend to load its models (speech stack, policy, router)")

        def poll(seconds: float) -> int:
            code = system.watch(seconds) or microphone.watch(0.01)
            return code or (130 if stop["now"] else 0)

        code, failed = start_microphone(watcher, poll, options.start_timeout_s)
        if failed:
            _say(failed)
        if code:
            return code
        _say(f"frontend ready after {time.monotonic() - started:.1f} s; microphone started")
        mic_started = time.monotonic()
        status = _follow(options, duration, system, microphone, watcher, stop)
        _say(f"session over after {time.monotonic() - mic_started:.1f} s; stopping the nodes")
    finally:
        codes = {**microphone.stop(), **system.stop()}
        executor.shutdown(timeout_sec=1.0)
        spinner.join(timeout=2.0)
        watcher.node.destroy_node()
        rclpy.try_shutdown()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    unclean = {name: code for name, code in codes.items() if code not in (0, None)}
    if unclean:
        _say(f"unclean exits: {unclean}")
    if status not in (0, 130):
        return status
    bag = out / "session"
    if not (bag / "metadata.yaml").is_file():
        _say(f"no complete bag at {bag}; nothing to report")
        return 1
    _say("reading the bag")
    session = load_session(bag)
    events = _script_events(options)
    _say("writing conversation.wav")
    write_conversation(session, out / "conversation.wav")
    metrics = None
    if events:
        _say("scoring the session with the evaluation's metrics (Silero VAD, content judge)")
        metrics = score_session(session, events, _input_folder(options))
        (out / "metrics.json").write_text(json.dumps(metrics, indent=1), encoding="utf-8")
    _say("drawing timeline.png")
    overlaps = _double_talk(metrics) if metrics else None
    plot_timeline(session, out / "timeline.png", events, overlaps)
    lines = summary_lines(session, events, options, time.monotonic() - started, metrics)
    (out / "summary.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


def _follow(
    options: DemoOptions,
    duration: float,
    system: Supervisor,
    microphone: Supervisor,
    watcher: _Watcher,
    stop: dict[str, bool],
) -> int:
    """Spin the watcher and print progress until the session is over; an exit status."""
    last_line = time.monotonic()
    shown_said = shown_events = 0
    tail_start: float | None = None
    while not stop["now"]:
        code = system.watch(0.15) or microphone.watch(0.15)
        if code:
            return code
        now = time.monotonic()
        for event in watcher.events[shown_events:]:
            _say(f"  {watcher.mic_s:5.1f} s  {event}")
        shown_events = len(watcher.events)
        if now - last_line >= 5.0:
            said = " ".join(watcher.said[shown_said:]).strip()
            shown_said = len(watcher.said)
            where = f"{watcher.mic_s:5.1f} s" + (f" of {duration:.1f} s" if duration else "")
            _say(f"{where}" + (f"; assistant said: {said!r}" if said else ""))
            last_line = now
        if options.live or watcher.mic_s < duration:
            continue
        tail_start = tail_start or now
        quiet = now - max(watcher.last_audio_wall, tail_start) >= QUIET_S
        if (quiet and not watcher.open_tasks) or now - tail_start > options.max_tail_s:
            if watcher.open_tasks:
                _say(f"stopping with {len(watcher.open_tasks)} task(s) still open")
            return 0
    return 130 if options.live else 0


def _spin(executor: Any) -> None:
    """Spin the watcher until the executor is shut down (a shutdown mid-spin is not an error)."""
    try:
        executor.spin()
    except Exception:  # the context went away under it at shutdown
        pass


def _input_folder(options: DemoOptions) -> Path:
    """A folder whose ``input.wav`` is the session's recording (the evaluation's user channel):
    the recording's own folder, or ``out/eval`` holding a link to it."""
    from venus_ros.eval.scenario import INPUT_WAV

    session = options.session.resolve()
    if session.name == INPUT_WAV:
        return session.parent
    folder = options.out / "eval"
    folder.mkdir(parents=True, exist_ok=True)
    link = folder / INPUT_WAV
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(session)
    return folder


def _double_talk(metrics: dict[str, Any]) -> list[tuple[float, float]]:
    """FDB's double-talk intervals of the session (the same in every sample's row)."""
    rows = [r for r in metrics["per_sample"] if r.get("latency_stop_list") is not None]
    return [(float(a), float(b)) for a, b in rows[0]["latency_stop_list"]] if rows else []


def _script_events(options: DemoOptions) -> list[dict[str, Any]]:
    """The session script's events (``events.json`` next to the WAV), if there is one."""
    path = options.session.with_name("events.json")
    if options.live or not path.is_file():
        return []
    return list(json.loads(path.read_text(encoding="utf-8")))


# ---------------------------------------------------------------------------------------------
# Reading the bag
# ---------------------------------------------------------------------------------------------


@dataclass
class Session:
    """What the bag holds, on the microphone's clock (seconds from its first sample).

    Attributes:
        user: The microphone signal, 16 kHz.
        assistant: The assistant's played speech, 16 kHz, aligned with ``user``.
        records: Timeline records ``(t_mic, kind, payload, source_t)`` in bag order; ``t_mic``
            is the unit boundary for unit records, else the receive time mapped to the mic.
        units: unit index -> (start, end) on the mic clock.
        played: (start, end, unit) of every stretch of assistant audio that was played.
        task_status: (t_mic, task_id, tool, state, message) from ``task_status``.
        unit_lag_s: median time from the end of a unit's audio on the microphone to the
            frontend's record of it (its compute, plus any audio it did not get: a frontend
            that missed the first second of the recording reports every unit a second late).
    """

    user: np.ndarray
    assistant: np.ndarray
    records: list[tuple[float, str, dict[str, Any]]] = field(default_factory=list)
    units: dict[int, tuple[float, float]] = field(default_factory=dict)
    played: list[tuple[float, float, int]] = field(default_factory=list)
    task_status: list[tuple[float, str, str, str, str]] = field(default_factory=list)
    unit_lag_s: float | None = None

    @property
    def duration(self) -> float:
        """Length of the session, s."""
        return max(self.user.size, self.assistant.size) / RATE


def _stamp(header: Any) -> float:
    return header.stamp.sec + header.stamp.nanosec * 1e-9


def load_session(bag: Path) -> Session:
    """Decode the bag into a :class:`Session`.

    Raises:
        venus_ros.bag.BagError: the bag cannot be read.
        ValueError: it holds no microphone audio.
    """
    from venus_ros.bag import read_bag, typestore
    from venus_ros.core.units import resample

    store = typestore()
    mic: list[tuple[int, np.ndarray, float, float]] = []  # first_sample, samples, stamp, log
    out_chunks: dict[int, np.ndarray] = {}
    acks: list[tuple[float, int, int, bool]] = []  # stamp, unit, samples_played, flushed
    raw_records: list[tuple[float, Any]] = []
    status: list[tuple[float, Any]] = []
    wanted = {"audio/in": "in", "audio/out": "out", "audio/played": "played"}
    wanted |= {"timeline": "timeline", "task_status": "task_status"}
    for topic, msgtype, raw, t_ns in read_bag(bag):
        name = next((v for k, v in wanted.items() if topic.endswith(k)), None)
        if name is None:
            continue
        msg = store.deserialize_cdr(raw, msgtype)
        if name == "in":
            samples = np.frombuffer(bytes(msg.data), dtype="<i2").astype(np.float32) / 32768.0
            if msg.encoding == "pcm_f32le":
                samples = np.frombuffer(bytes(msg.data), dtype="<f4").astype(np.float32)
            if msg.sample_rate != RATE:
                samples = resample(samples, int(msg.sample_rate), RATE)
            mic.append((int(msg.first_sample), samples, _stamp(msg.header), t_ns * 1e-9))
        elif name == "out":
            samples = np.frombuffer(bytes(msg.data), dtype="<f4").astype(np.float32)
            if msg.encoding == "pcm_s16le":
                samples = np.frombuffer(bytes(msg.data), dtype="<i2").astype(np.float32) / 32768
            out_chunks[int(msg.unit_index)] = samples
        elif name == "played":
            acks.append(
                (_stamp(msg.header), int(msg.unit_index), int(msg.samples_played), msg.flushed)
            )
        elif name == "timeline":
            raw_records.append((t_ns * 1e-9, msg))
        else:
            status.append((t_ns * 1e-9, msg))
    if not mic:
        raise ValueError(f"{bag}: no microphone audio (audio/in) in the bag")
    mic.sort(key=lambda m: m[0])
    # Wall clock -> mic clock: a chunk's stamp is the capture time of its first sample.
    offset = float(np.median([stamp - first / RATE for first, _, stamp, _ in mic]))
    log_offset = float(np.median([log - (first + s.size) / RATE for first, s, _, log in mic]))
    end = mic[-1][0] + mic[-1][1].size
    user = np.zeros(end, dtype=np.float32)
    for first, samples, _, _ in mic:
        user[first : first + samples.size] = samples
    session = Session(user, np.zeros(0, dtype=np.float32))

    records: list[tuple[float, str, dict[str, Any]]] = []
    lags = []
    for log_t, msg in raw_records:
        payload = json.loads(msg.payload_json or "{}")
        if msg.kind == "user_audio":
            start = payload["start_sample"] / RATE
            session.units[int(payload["unit"])] = (start, start + payload["samples"] / RATE)
            lags.append(log_t - log_offset - (start + payload["samples"] / RATE))
        records.append((log_t - log_offset, msg.kind, payload))
    for i, (_, kind, payload) in enumerate(records):  # unit records: at the unit's boundary
        unit = payload.get("unit")
        if isinstance(unit, int) and unit in session.units and kind != "user_audio":
            records[i] = (session.units[unit][1], kind, payload)
    session.records = records
    session.unit_lag_s = float(np.median(lags)) if lags else None
    session.task_status = [
        (log_t - log_offset, m.task_id, m.tool, m.state, m.message) for log_t, m in status
    ]

    # Assistant speech: each unit's chunk starts where its first acknowledgement says.
    first_ack: dict[int, tuple[float, int]] = {}
    played: dict[int, int] = {}
    for stamp, unit, count, _ in sorted(acks):
        if count > 0 and unit not in first_ack:
            first_ack[unit] = (stamp - offset - count / OUT_RATE, count)
        played[unit] = max(played.get(unit, 0), count)
    pieces = []
    for unit, (start, _) in first_ack.items():
        chunk = out_chunks.get(unit)
        if chunk is None:
            continue
        audio = resample(chunk[: played[unit]], OUT_RATE, RATE)
        pieces.append((max(start, 0.0), audio, unit))
    length = max([user.size] + [round(s * RATE) + a.size for s, a, _ in pieces])
    assistant = np.zeros(length, dtype=np.float32)
    for start, audio, unit in sorted(pieces, key=lambda p: p[0]):
        first = round(start * RATE)
        assistant[first : first + audio.size] += audio
        session.played.append((start, start + audio.size / RATE, unit))
    session.assistant = assistant
    if user.size < length:
        session.user = np.concatenate([user, np.zeros(length - user.size, np.float32)])
    return session


def write_conversation(session: Session, path: Path) -> None:
    """The conversation as one stereo WAV: user left, assistant right (16-bit, 16 kHz)."""
    import soundfile

    stereo = np.stack([session.user, session.assistant[: session.user.size]], axis=1)
    soundfile.write(str(path), np.clip(stereo, -1.0, 1.0), RATE, subtype="PCM_16")


# ---------------------------------------------------------------------------------------------
# Analysis
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    """One assistant turn as the user experienced it."""

    index: int
    start: float
    kind: str  # local | delegate | backend | yielded
    said: str
    heard: str
    cut: bool


def turns_of(session: Session) -> list[Turn]:
    """The assistant's turns: what was said, what was heard, how each began and ended."""
    said: dict[int, str] = {}
    heard: dict[int, str] = {}
    start: dict[int, float] = {}
    cut: dict[int, bool] = {}
    delegated: set[int] = set()
    backend_units: set[int] = set()
    unit_turn: dict[int, int] = {}
    for t, kind, p in session.records:
        turn = p.get("turn")
        if kind == "backend_insert" and p.get("inserted"):
            backend_units.add(int(p.get("unit", -1)))
        if not isinstance(turn, int):
            continue
        if kind == "assistant_text":
            said[turn] = said.get(turn, "") + p.get("text", "")
            start.setdefault(turn, t)
            unit_turn.setdefault(int(p.get("unit", -1)), turn)
        elif kind == "playback_ack":
            heard[turn] = heard.get(turn, "") + p.get("heard", "")
            cut[turn] = cut.get(turn, False) or bool(p.get("flushed"))
        elif kind in ("delegate_open", "delegate_close"):
            delegated.add(turn)
        elif kind == "flush":
            cut[turn] = True
    backend_turns = {unit_turn[u] for u in backend_units if u in unit_turn}
    turns = []
    for turn in sorted(said):
        kind = "delegate" if turn in delegated else "backend" if turn in backend_turns else "local"
        text = " ".join(said[turn].split())
        if "<delegate>" in text:
            text = text.split("<delegate>")[0].strip()
        turns.append(
            Turn(
                turn,
                start[turn],
                kind,
                text,
                " ".join(heard.get(turn, "").split()),
                cut.get(turn, False),
            )
        )
    return turns


@dataclass(frozen=True)
class Delegation:
    """One delegated request and what became of it."""

    t: float
    query: str
    task_id: str
    tool: str
    states: tuple[tuple[float, str], ...]
    reply: str

    @property
    def outcome(self) -> str:
        """The last state the harness reported."""
        return self.states[-1][1] if self.states else "UNKNOWN"


def delegations_of(session: Session) -> list[Delegation]:
    """Every delegation: query, task, tool, the harness's states in order, the reply spoken."""
    closes = [(t, p) for t, k, p in session.records if k == "delegate_close"]
    frontend_tasks = [
        (t, p) for t, k, p in session.records
        if k == "task_state" and p.get("source") == "frontend" and p.get("state") == "QUEUED"
    ]  # fmt: skip
    harness: dict[str, list[tuple[float, str, str]]] = {}
    for t, k, p in session.records:
        if k == "task_state" and p.get("source") == "harness":
            harness.setdefault(p.get("task_id", ""), []).append(
                (t, p.get("state", ""), p.get("tool") or "")
            )
    replies: dict[str, str] = {}
    turns = {turn.index: turn for turn in turns_of(session)}
    unit_turn = {
        p.get("unit"): p.get("turn") for _, k, p in session.records if k == "assistant_text"
    }
    for _, k, p in session.records:
        if k == "backend_insert" and p.get("inserted"):
            turn = turns.get(unit_turn.get(p.get("unit"), -1))
            if turn is not None:
                replies.setdefault(p.get("task_id", ""), turn.said)
    out = []
    for i, (t, p) in enumerate(closes):
        task_id = frontend_tasks[i][1].get("task_id", "") if i < len(frontend_tasks) else ""
        states = harness.get(task_id, [])
        tool = next((tool for _, _, tool in states if tool), "")
        out.append(
            Delegation(
                t,
                p.get("query", ""),
                task_id,
                tool,
                tuple((s_t, s) for s_t, s, _ in states),
                replies.get(task_id, ""),
            )
        )
    return out


# ---------------------------------------------------------------------------------------------
# Scoring: the evaluation's own metric code on the session
# ---------------------------------------------------------------------------------------------

#: Expected behaviour of the overlap kinds of a session script (the evaluation's categories).
EXPECTED = {"interruption": "respond", "backchannel": "resume", "other_directed": "resume"}
EXPECTED["background"] = "resume"


def eval_samples(events: Sequence[dict[str, Any]], session: Session, folder: Path) -> list[Any]:
    """The session script as evaluation samples (:class:`venus_ros.eval.scenario.Sample`), one
    per event, all on the session's time axis with ``folder``'s ``input.wav`` as the user channel.

    An event whose kind is an overlap category of the evaluation (``interruption``,
    ``backchannel``, ``other_directed``, ``background``) becomes an overlap sample of that
    category (the answer in progress, for the content judge, is what the assistant had started
    saying last before the onset); every other event is a ``turn_taking`` sample (response
    latency: the user's end to the assistant's next voice segment).

    Raises:
        ValueError: an event without ``start``, ``end``, ``kind`` or ``text``.
    """
    from venus_ros.eval.scenario import OVERLAP_CATEGORIES, Sample, Turn as UserTurn

    turns = turns_of(session)
    samples = []
    for i, event in enumerate(events):
        try:
            start, end = float(event["start"]), float(event["end"])
            kind, text = str(event["kind"]), str(event["text"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"session event {i}: needs start, end, kind and text: {exc}") from exc
        user = event.get("speaker", "user") == "user"
        said = (UserTurn(start, end, text),) if user else ()
        extra: dict[str, Any] = {"event": kind}
        overlap = kind in OVERLAP_CATEGORIES
        if overlap:
            before = [turn.said for turn in turns if turn.start <= start]
            if before:
                extra["reference"] = before[-1]
            if not user:
                extra["background"] = {"text": text}
        samples.append(
            Sample(
                id=f"{i:02d}_{kind}",
                folder=folder,
                category=kind if overlap else "turn_taking",
                turns=said,
                overlap=(start, end) if overlap else None,
                expected=EXPECTED.get(kind, "resume") if overlap else None,
                needs_delegation=None,
                expected_tool_calls=(),
                tools=None,
                assistant_turns=(),
                extra=extra,
            )
        )
    return samples


def timeline_records(session: Session) -> tuple[Any, ...]:
    """The session's timeline as :class:`venus_ros.core.timeline.Record` objects on the mic
    clock (kinds this version does not know are left out)."""
    from venus_ros.core.timeline import Kind, Record

    known = {kind.value: kind for kind in Kind}
    return tuple(
        Record(seq, t, known[kind], json.dumps(payload, separators=(",", ":")))
        for seq, (t, kind, payload) in enumerate(session.records)
        if kind in known
    )


class _OnceTranscriber:
    """A transcriber that transcribes the same audio and segments once for every sample."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self._cache: dict[tuple[int, int, tuple[tuple[float, float], ...]], Any] = {}

    def words(self, audio: np.ndarray, rate: int, segments: Sequence[tuple[float, float]]) -> Any:
        """The inner transcriber's words, computed at the first call for these inputs."""
        key = (id(audio), int(rate), tuple((float(a), float(b)) for a, b in segments))
        if key not in self._cache:
            self._cache[key] = self.inner.words(audio, rate, segments)
        return self._cache[key]


def score_session(
    session: Session,
    events: Sequence[dict[str, Any]],
    folder: Path,
    *,
    judge: bool = True,
    detector: str = "silero",
) -> dict[str, Any]:
    """Score the session with the evaluation's metric code (:func:`venus_ros.eval.metrics.
    compute_metrics`): the same voice activity (Silero on the played audio, FDB's merging), the
    same latency definitions and, with ``judge``, the same offline content judge (packaged
    MiniLM, faster-whisper ``tiny.en`` transcripts) as ``venus-ros eval run``.

    Args:
        session: the decoded bag.
        events: the session script's events.
        folder: holds ``input.wav``, the user channel (for FDB's double talk and response gaps).
        judge: label the overlap events by content.
        detector: ``"silero"`` (the evaluation's) or ``"energy"`` (tests on synthetic tones).

    Returns:
        :func:`~venus_ros.eval.metrics.compute_metrics`' result; its ``per_sample`` rows are in
        ``events``' order.
    """
    from venus_ros.eval.metrics import MetricsConfig, SampleRun, compute_metrics

    samples = eval_samples(events, session, folder)
    records = timeline_records(session)
    played = np.ascontiguousarray(session.assistant, dtype=np.float32)
    runs = [
        SampleRun(sample, records, played, RATE, (), (), (), 0) for sample in samples
    ]  # fmt: skip
    judging = transcriber = None
    if judge and any(s.overlap is not None for s in samples):
        from venus_ros.eval.judge import WhisperTranscriber, make_judge
        from venus_ros.frontends.cascade.embed import Embedder

        judging = make_judge("offline", embed=Embedder().embed)
        transcriber = _OnceTranscriber(WhisperTranscriber("tiny.en"))
    return compute_metrics(
        runs,
        "demo",
        str(folder),
        config=MetricsConfig(detector=detector),
        judge=judging,
        transcriber=transcriber,
    )


def _compute(session: Session) -> tuple[list[float], int]:
    stats = [p for _, k, p in session.records if k == "unit_stats"]
    return [float(p.get("compute_s", 0.0)) for p in stats], sum(
        bool(p.get("missed")) for p in stats
    )


def summary_lines(
    session: Session,
    events: Sequence[dict[str, Any]],
    options: DemoOptions,
    wall_s: float,
    metrics: dict[str, Any] | None = None,
) -> list[str]:
    """The one-screen summary; the events' outcomes and latencies are ``metrics``' (see
    :func:`score_session`), the evaluation's own figures."""
    turns = turns_of(session)
    delegations = delegations_of(session)
    source = "microphone (live)" if options.live else str(options.session)
    lines = [
        f"venus-ros demo: {session.duration:.1f} s session from {source}; wall time {wall_s:.0f} s",
    ]
    if session.unit_lag_s is not None and session.unit_lag_s > LATE_UNITS_S:
        lines.append(
            f"warning: the frontend reported its units {session.unit_lag_s:.2f} s after their "
            "audio (median): it missed the start of the recording or fell behind"
        )
    fallbacks = [p for _, k, p in session.records if k == "frontend_error"]
    if fallbacks:
        lines.append(f"frontend errors: {len(fallbacks)}")
    lines.append("turns (time on the microphone's clock; 'heard' = acknowledged by the speaker):")
    for turn in turns:
        note = " (cut off: the user took the floor)" if turn.cut else ""
        lines.append(f"  {turn.start:5.1f} s  {turn.kind:8} said {turn.said!r}{note}")
        if turn.heard != turn.said:
            lines.append(f"{'':18}heard {turn.heard!r}")
    rows = list(metrics["per_sample"]) if metrics else []
    if events and len(rows) == len(events):
        judged = metrics is not None and metrics.get("overlap_basis") == "content"
        lines.append(
            "the session's events and what the assistant did (venus_ros.eval.metrics: Silero "
            "voice segments of the played audio"
            + (", content judge labels marked [judge: ...]):" if judged else "):")
        )
        for event, row in zip(events, rows, strict=True):
            lines.append(
                f"  {event['start']:5.1f} s  {event['kind']:15} {_reaction(event, row, turns)}"
            )
    lines.append("delegations:")
    for d in delegations:
        states = " -> ".join(s for _, s in d.states) or "no harness state"
        lines.append(f"  {d.t:5.1f} s  {d.query!r} -> tool {d.tool or 'none'}: {states}")
        if d.reply:
            lines.append(f"{'':11}reply: {d.reply!r}")
    if not delegations:
        lines.append("  none")
    tools: dict[str, int] = {}
    for d in delegations:
        if d.tool:
            tools[d.tool] = tools.get(d.tool, 0) + 1
    lines.append("tool calls: " + (", ".join(f"{k} x{v}" for k, v in tools.items()) or "none"))
    if metrics:
        lines.extend(_latency_lines(metrics))
    done = [s_t - d.t for d in delegations for s_t, s in d.states if s == "COMPLETED"]
    if done:
        lines.append("delegation -> task completed: " + ", ".join(f"{x:.1f} s" for x in done))
    compute, missed = _compute(session)
    if compute:
        c = np.array(compute) * 1000.0
        lines.append(
            f"frontend compute per unit: p50 {np.percentile(c, 50):.0f} ms, p99 "
            f"{np.percentile(c, 99):.0f} ms, max {c.max():.0f} ms; missed deadlines {missed} of "
            f"{c.size} units"
        )
    out = options.out
    lines.append(
        f"wrote {out / 'conversation.wav'} (user left, assistant right), {out / 'session'} "
        f"(rosbag2, mcap), {out / 'timeline.png'}, {out / 'summary.txt'}, "
        f"{out / 'metrics.json'}"
    )
    return lines


def _s(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f} s"


def _reaction(event: dict[str, Any], row: dict[str, Any], turns: Sequence[Turn]) -> str:
    """What the assistant did about one scripted event, from its evaluation row."""
    text = event["text"]
    if row.get("overlap"):
        outcome = row.get("outcome")
        if outcome == "not_speaking":
            head = f"{text!r}: the assistant was not speaking at its onset"
        elif outcome == "resume":
            head = f"{text!r}: over the assistant; it kept speaking (resume)"
        else:
            head = (
                f"{text!r}: over the assistant; it stopped after "
                f"{_s(row.get('stop_latency_s'))} ({outcome}"
                + (
                    f", new speech {_s(row.get('response_latency_s'))} after the overlap's end)"
                    if row.get("response_latency_s") is not None
                    else ")"
                )
            )
        if row.get("label") and outcome == "not_speaking":
            head += f" [judge: {row['label']}; not scored, as in the evaluation]"
        elif row.get("label"):
            head += f" [judge: {row['label']}, expected {row.get('expected')}]"
        return head
    latency = row.get("turn_latency_s")
    if latency is None:
        return f"{text!r}: no answer within 5 s"
    end = float(event["end"])
    after = [turn for turn in turns if turn.start >= end - 0.1]
    said = f" ({after[0].kind}): {after[0].said[:50]!r}" if after else ""
    return f"{text!r}: answered after {latency:.2f} s{said}"


def _latency_lines(metrics: dict[str, Any]) -> list[str]:
    """Response and stop latencies as the evaluation reports them."""
    lines = []
    turn = metrics["turn_taking"]
    lat = turn["latency_s"]
    if lat["n"]:
        lines.append(
            f"response latency (user's end -> assistant's next voice segment, eval turn taking): "
            f"p50 {lat['p50']:.2f} s, max {max(lat['values']):.2f} s over {lat['n']} answered "
            f"of {turn['n']} requests"
        )
    block = metrics["overlap"]["by_expected"]["respond"]
    if block["n"]:
        stop, resp = block["stop_latency_s"], block["response_latency_s"]
        lines.append(
            f"interruptions ({block['n']}): stop latency (onset -> assistant silent) p50 "
            f"{_s(stop['p50'])}; response latency (its end -> new speech) p50 {_s(resp['p50'])}; "
            f"FDB double talk p50 {_s(block['fdb_stop_s']['p50'])}, FDB response gap p50 "
            f"{_s(block['fdb_resp_s']['p50'])}"
        )
    keep = metrics["overlap"]["by_expected"]["resume"]
    if keep["n"]:
        lines.append(
            f"overlaps to talk through ({keep['n']}): continued {keep['outcomes']['resume']} "
            f"of {keep['scored']} acoustically (not speaking at onset: {keep['not_speaking']})"
            + (f"; judge: {keep['labels']['resume']} resume" if keep["basis"] == "content" else "")
        )
    return lines


# ---------------------------------------------------------------------------------------------
# Plot
# ---------------------------------------------------------------------------------------------


def plot_timeline(
    session: Session,
    path: Path,
    events: Iterable[dict[str, Any]] = (),
    overlaps: Sequence[tuple[float, float]] | None = None,
) -> None:
    """The session's timeline as a PNG (matplotlib, Agg).

    Args:
        overlaps: the double-talk intervals to shade (:func:`venus_ros.eval.timing.double_talk`
            of the scored session); None: computed here from both channels the same way.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    duration = session.duration
    fig, ax = plt.subplots(figsize=(16.0, 5.5), dpi=110)
    rows = {"user": 3.0, "assistant": 2.0, "floor": 1.0, "tasks": 0.0}
    hop = 160
    for name, signal, color in (
        ("user", session.user, "tab:blue"),
        ("assistant", session.assistant, "tab:orange"),
    ):
        n = signal.size // hop
        env = np.sqrt(np.mean(np.square(signal[: n * hop].reshape(n, hop)), axis=1))
        env = env / max(float(env.max()), 1e-6) * 0.4
        t = np.arange(n) * hop / RATE
        ax.fill_between(t, rows[name] - env, rows[name] + env, color=color, lw=0)
    if overlaps is None:
        from venus_ros.eval.metrics import user_segments, voice_segments
        from venus_ros.eval.timing import double_talk

        overlaps = double_talk(
            user_segments(session.user, RATE), voice_segments(session.assistant, RATE)
        )
    for start, end in overlaps:
        ax.axvspan(start, end, color="red", alpha=0.15, lw=0)
    speak = [
        session.units[p["unit"]] for _, k, p in session.records
        if k == "decision" and p.get("decision") == "speak" and p.get("unit") in session.units
    ]  # fmt: skip
    for unit_start, unit_end in session.units.values():
        ax.broken_barh([(unit_end, unit_end - unit_start)], (0.7, 0.6), color="#dddddd", lw=0)
    for unit_start, unit_end in speak:
        ax.broken_barh([(unit_end, unit_end - unit_start)], (0.7, 0.6), color="tab:green", lw=0)
    label = 0
    for t, k, p in session.records:
        if k == "delegate_close":
            ax.axvline(t, color="purple", ls="--", lw=1)
            y = -0.3 - 0.2 * (label % 2)
            ax.text(t, y, p.get("query", "")[:40], fontsize=7, color="purple")
            label += 1
        elif k == "backend_insert" and p.get("inserted"):
            ax.plot([t], [0.0], marker="v", color="black", ms=9)
        elif k == "flush":
            ax.plot([t], [2.0], marker="x", color="red", ms=9, mew=2)
    for d in delegations_of(session):
        ends = [s_t for s_t, s in d.states if s in FINAL_STATES]
        if ends:
            ax.plot([d.t, ends[-1]], [0.0, 0.0], color="purple", lw=4, alpha=0.6)
    for event in events:
        ax.text(
            float(event["start"]), 3.5, event["kind"].replace("_", " "), fontsize=7, rotation=20
        )
    ax.set_yticks(list(rows.values()))
    ax.set_yticklabels(["user", "assistant", "listen / speak", "delegations"])
    ax.set_xlim(0, duration)
    ax.set_ylim(-0.6, 4.0)
    ax.set_xlabel("session time, s (microphone clock)")
    ax.set_title(
        "venus_ros demo: red = overlap, green = speak units, x = yield (flush), "
        "purple = delegation (task running), v = backend reply inserted",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(str(path))
    plt.close(fig)
