"""``venus-ros run``: the node set of ``launch/venus.launch.py`` for machines without ros2 launch.

Each node runs in its own process (``python -m venus_ros.nodes.<name>``) with the shared
parameter file, a namespace and per-run overrides, in the user's own ROS environment
(``ROS_DOMAIN_ID``, ``ROS_AUTOMATIC_DISCOVERY_RANGE``, ``ROS_STATIC_PEERS``,
``RMW_IMPLEMENTATION`` are passed through unchanged and printed), so RViz, ``ros2`` and other
machines see the graph. The harness is respawned if it dies (the frontend keeps deciding
meanwhile); the camera, monitor, static frames and recorder are optional: when one ends the run
goes on without it; the microphone, frontend or speaker ending stops the run. Ctrl-C or SIGTERM
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
    #: False: the run goes on without this node when it ends (camera, monitor, recorder).
    essential: bool = True

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
    #: Camera source; None = the default (a camera, none in demo mode), "" = no camera.
    video: str | None = None
    sink: str = ""
    record: str = ""
    duration_s: float = 0.0
    params_file: str = ""


def plan(options: RunOptions) -> list[NodeSpec]:
    """The nodes to start and their parameter overrides.

    In demo mode the microphone reads the bundled sample and the speaker writes
    ``out/run/assistant.wav``; otherwise devices are used unless files are given. A camera runs
    unless ``video`` is ``""`` (or, in demo mode, not given); it is optional either way.
    """
    audio = options.audio or (f"file:{sample_path('input.wav')}" if options.demo else "device")
    sink = options.sink or ("file:out/run/assistant.wav" if options.demo else "device")
    video = options.video
    if video is None:
        video = "" if options.demo else "device"
    # The demo's microphone plays a recorded session with no speaker in it: no echo to cancel
    # (elsewhere the parameter file's frontend, echo cancellation on).
    frontend = options.frontend or ("cascade" if options.demo else "")
    nodes = [
        NodeSpec("mic", {"source": audio}),
        NodeSpec("frontend", {"frontend": frontend} if frontend else {}),
        NodeSpec("harness", respawn=True),
        NodeSpec("speaker", {"sink": sink}),
        NodeSpec("monitor", essential=False),
        NodeSpec("frames", essential=False),  # the static TF frames of mic, camera, speaker
    ]
    if video:
        nodes.insert(1, NodeSpec("camera", {"source": video}, essential=False))
    if options.record:
        nodes.append(NodeSpec("recorder", {"path": options.record}, essential=False))
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
    """An isolated environment for self-contained runs (the demo, benchmarks): loopback-only
    discovery and a domain of the run's own unless ROS_DOMAIN_ID is set."""
    env = dict(os.environ)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env.setdefault("ROS_DOMAIN_ID", str(random.randint(1, 101)))
    env.setdefault("HF_HUB_OFFLINE", "1")
    return env


#: The ROS environment variables ``venus-ros run`` reports (and passes through unchanged).
ROS_VARIABLES = (
    "ROS_DOMAIN_ID",
    "ROS_AUTOMATIC_DISCOVERY_RANGE",
    "ROS_STATIC_PEERS",
    "RMW_IMPLEMENTATION",
)
#: What ROS uses when a variable is unset.
_ROS_DEFAULTS = {
    "ROS_DOMAIN_ID": "0",
    "ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET",
    "ROS_STATIC_PEERS": "none",
    "RMW_IMPLEMENTATION": "the default RMW",
}


def user_environment() -> dict[str, str]:
    """This process's environment as it is (the user's ROS settings), models offline."""
    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")
    return env


def describe_environment(env: dict[str, str]) -> str:
    """One line naming the ROS settings a run uses (and which are ROS's defaults)."""
    parts = []
    for name in ROS_VARIABLES:
        value = env.get(name, "")
        parts.append(f"{name}={value}" if value else f"{name} unset ({_ROS_DEFAULTS[name]})")
    return ", ".join(parts)


class Supervisor:
    """Starts, watches, respawns and stops the node processes."""

    def __init__(
        self,
        nodes: list[NodeSpec],
        params_file: Path,
        namespace: str = "",
        env: dict[str, str] | None = None,
    ) -> None:
        self.nodes = nodes
        self.params_file = params_file
        self.namespace = namespace
        self.env = env if env is not None else ros_environment()
        self.procs: dict[str, subprocess.Popen] = {}
        self.respawns = 0
        #: Optional nodes that ended, and their exit codes.
        self.ended: dict[str, int] = {}
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
                if spec.name in self.ended:
                    continue
                code = self.procs[spec.name].poll()
                if code is None:
                    continue
                if not spec.essential and not self._stopping:
                    self.ended[spec.name] = code
                    print(
                        f"venus-ros run: {spec.name} exited ({code}); going on without it",
                        flush=True,
                    )
                elif spec.respawn:
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
    env = user_environment()
    supervisor = Supervisor(plan(options), params_file, options.namespace, env)
    previous = {
        sig: signal.signal(sig, supervisor.request_stop) for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        print(f"venus-ros run: ROS environment: {describe_environment(env)}", flush=True)
        supervisor.start()
        print(
            f"venus-ros run: started {', '.join(supervisor.procs)} "
            f"(ROS_DOMAIN_ID={env.get('ROS_DOMAIN_ID') or 0}); Ctrl-C stops them",
            flush=True,
        )
        status = supervisor.watch(options.duration_s)
    finally:
        codes = supervisor.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    unclean = {
        name: code
        for name, code in codes.items()
        if code not in (0, None) and name not in supervisor.ended
    }
    if unclean and status == 0:
        print(f"venus-ros run: unclean exits: {unclean}", file=sys.stderr)
    print(f"venus-ros run: stopped ({supervisor.respawns} respawns)", flush=True)
    return status
