"""``venus-ros run``: the node set of ``launch/venus.launch.py`` for machines without ros2 launch.

Each node runs in its own process (``python -m venus_ros.nodes.<name>``) with the shared
parameter file, a namespace and per-run overrides. The harness is respawned if it dies (the
frontend keeps deciding meanwhile); any other node ending stops the run. Ctrl-C or SIGTERM
stops every node with SIGINT, then kills what is left after a grace period.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from venus_ros.paths import sample_path, share_path

GRACE_S = 5.0
RESPAWN_DELAY_S = 1.0


@dataclass(frozen=True)
class NodeSpec:
    """One node process to run."""

    module: str
    overrides: dict[str, str] = field(default_factory=dict)
    respawn: bool = False

    @property
    def name(self) -> str:
        """The node's name (and console script)."""
        return f"{self.module}_node"


@dataclass(frozen=True)
class RunOptions:
    """What ``venus-ros run`` was asked for."""

    demo: bool = False
    namespace: str = ""
    frontend: str = ""
    audio: str = ""
    video: str = ""
    sink: str = ""
    record: str = ""
    duration_s: float = 0.0
    params_file: str = ""


def plan(options: RunOptions) -> list[NodeSpec]:
    """The nodes to start and their parameter overrides.

    In demo mode the microphone reads the bundled sample and the speaker writes
    ``out/run/assistant.wav``; otherwise devices are used unless files are given.
    """
    audio = options.audio or (f"file:{sample_path('input.wav')}" if options.demo else "device")
    sink = options.sink or ("file:out/run/assistant.wav" if options.demo else "device")
    video = options.video or ("" if options.demo else "device")
    nodes = [
        NodeSpec("mic", {"source": audio}),
        NodeSpec("frontend", {"frontend": options.frontend} if options.frontend else {}),
        NodeSpec("harness", respawn=True),
        NodeSpec("speaker", {"sink": sink}),
        NodeSpec("monitor"),
    ]
    if video:
        nodes.insert(1, NodeSpec("camera", {"source": video}))
    if options.record:
        nodes.append(NodeSpec("recorder", {"path": options.record}))
    return nodes


def node_command(spec: NodeSpec, params_file: Path, namespace: str) -> list[str]:
    """The command line of one node process."""
    command = [sys.executable, "-m", f"venus_ros.nodes.{spec.module}", "--ros-args"]
    command += ["--params-file", str(params_file)]
    if namespace:
        command += ["-r", f"__ns:=/{namespace.strip('/')}"]
    for key, value in spec.overrides.items():
        command += ["-p", f"{key}:={value}"]
    return command


def ros_environment() -> dict[str, str]:
    """This process's environment with loopback-only discovery and a domain for the run."""
    env = dict(os.environ)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env.setdefault("ROS_DOMAIN_ID", str(random.randint(1, 101)))
    env.setdefault("HF_HUB_OFFLINE", "1")
    return env


class Supervisor:
    """Starts, watches, respawns and stops the node processes."""

    def __init__(self, nodes: list[NodeSpec], params_file: Path, namespace: str = "") -> None:
        self.nodes = nodes
        self.params_file = params_file
        self.namespace = namespace
        self.env = ros_environment()
        self.procs: dict[str, subprocess.Popen] = {}
        self.respawns = 0
        self._stopping = False

    def start(self) -> None:
        """Start every node."""
        for spec in self.nodes:
            self._spawn(spec)

    def _spawn(self, spec: NodeSpec) -> None:
        command = node_command(spec, self.params_file, self.namespace)
        self.procs[spec.name] = subprocess.Popen(command, env=self.env)

    def watch(self, duration_s: float = 0.0) -> int:
        """Run until a non-respawning node ends, the duration passes, or a stop; exit status."""
        deadline = time.monotonic() + duration_s if duration_s > 0 else None
        while not self._stopping:
            if deadline is not None and time.monotonic() >= deadline:
                return 0
            for spec in self.nodes:
                code = self.procs[spec.name].poll()
                if code is None:
                    continue
                if spec.respawn:
                    print(f"venus-ros run: {spec.name} exited ({code}); restarting", flush=True)
                    time.sleep(RESPAWN_DELAY_S)
                    self.respawns += 1
                    self._spawn(spec)
                else:
                    print(f"venus-ros run: {spec.name} exited ({code}); stopping", flush=True)
                    return code or 1
            time.sleep(0.1)
        return 0

    def request_stop(self, *_: object) -> None:
        """Signal handler: leave :meth:`watch` at its next poll."""
        self._stopping = True

    def stop(self) -> dict[str, int | None]:
        """SIGINT every node, wait up to the grace period, kill the rest; their exit codes."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        deadline = time.monotonic() + GRACE_S
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return {name: proc.returncode for name, proc in self.procs.items()}


def run(options: RunOptions) -> int:
    """Run the node set until Ctrl-C (or ``duration_s``); returns the exit status."""
    params_file = (
        Path(options.params_file) if options.params_file else share_path("config/venus.yaml")
    )
    if options.demo:
        Path("out/run").mkdir(parents=True, exist_ok=True)
    supervisor = Supervisor(plan(options), params_file, options.namespace)
    previous = {
        sig: signal.signal(sig, supervisor.request_stop) for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        supervisor.start()
        print(
            f"venus-ros run: started {', '.join(supervisor.procs)} "
            f"(ROS_DOMAIN_ID={supervisor.env['ROS_DOMAIN_ID']}); Ctrl-C stops them",
            flush=True,
        )
        status = supervisor.watch(options.duration_s)
    finally:
        codes = supervisor.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    unclean = {name: code for name, code in codes.items() if code not in (0, None)}
    if unclean and status == 0:
        print(f"venus-ros run: unclean exits: {unclean}", file=sys.stderr)
    print(f"venus-ros run: stopped ({supervisor.respawns} respawns)", flush=True)
    return status
