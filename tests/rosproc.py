"""Node processes and probe nodes for tests that run real ROS 2 graphs.

Processes inherit the private ROS_DOMAIN_ID and loopback-only discovery that conftest.py set,
write their output to files (a pipe could fill up), and are stopped with SIGINT, then killed
after a timeout. Every node runs in a namespace of its own (all venus topics are relative), so
runs that share a domain cannot cross-talk: a probe's (a test node with its own Context and
executor), or a fresh one. Waits are on conditions with bounded deadlines, never fixed sleeps.

Every process started here is remembered: a probe stops the processes it watched when it is
torn down, and :func:`stop_started` (called by conftest.py at the end of the session) stops any
that are left and names them, so that no test can leave a node running after the run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

ROOT = Path(__file__).resolve().parents[1]
#: How long a node gets to exit after SIGINT before it is killed.
STOP_TIMEOUT_S = 10.0
#: How much of a process's output a failure message quotes.
_TAIL_CHARS = 4000
#: Every process :func:`start_process` started in this session, in start order.
_STARTED: list[NodeProcess] = []


def unique_namespace() -> str:
    """A namespace no other run uses."""
    return f"/test_{uuid.uuid4().hex[:12]}"


def process_env() -> dict[str, str]:
    """This process's environment for a child: same domain, unbuffered output, venus_ros."""
    env = os.environ.copy()
    # conftest.py set these before anything imported rclpy; the child must share them.
    assert env.get("ROS_AUTOMATIC_DISCOVERY_RANGE") == "LOCALHOST" and env.get("ROS_DOMAIN_ID")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env["RCUTILS_LOGGING_BUFFERED_STREAM"] = "0"
    return env


@dataclass
class NodeProcess:
    """A process started by :func:`start_process`; its output goes to two files."""

    proc: subprocess.Popen[bytes]
    stdout: Path
    stderr: Path
    name: str = ""
    namespace: str = ""
    #: Set by :meth:`stop`: its exit is expected, :meth:`Probe.wait_for` no longer minds it.
    stopped: bool = False

    def out(self) -> str:
        return self.stdout.read_text(errors="replace")

    def err(self) -> str:
        return self.stderr.read_text(errors="replace")

    def log(self) -> str:
        """Everything it wrote: stdout, then stderr (where ROS logs go)."""
        return self.out() + self.err()

    def wait(self, timeout: float) -> int:
        """The exit code of a process that ends by itself; fail (killing it) after ``timeout``."""
        try:
            return int(self.proc.wait(timeout=timeout))
        except subprocess.TimeoutExpired:
            self.stop()
            pytest.fail(f"{self.name} still running after {timeout} s:\n{self.log()}")

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGINT, then SIGKILL after ``timeout``; the exit code."""
        self.stopped = True
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=timeout)
        return int(self.proc.returncode)


def start_process(
    command: Sequence[str], tmp_path: Path, name: str, *, cwd: Path = ROOT, namespace: str = ""
) -> NodeProcess:
    """Start ``command`` with :func:`process_env`; its output goes to ``tmp_path/name.out|err``."""
    out, err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.Popen(
            list(command),
            cwd=cwd,
            env=process_env(),
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
        )
    node = NodeProcess(proc, out, err, name, namespace)
    _STARTED.append(node)
    return node


def stop_started() -> list[str]:
    """Stop every process started here that still runs; the names of those that did."""
    left = [p for p in _STARTED if p.proc.poll() is None]
    for node in left:
        node.stop(timeout=5.0)
    _STARTED[:] = [p for p in _STARTED if p.proc.poll() is None]
    return [f"{p.name} (pid {p.proc.pid}, {p.namespace or 'no namespace'})" for p in left]


def start_node(
    module: str,
    tmp_path: Path,
    *params: str,
    namespace: str | None = None,
    params_file: Path | None = None,
    ros_args: Sequence[str] = (),
    tag: str = "",
) -> NodeProcess:
    """Start ``venus_ros.nodes.<module>`` with ``-p`` overrides (and a parameter file).

    ``namespace``: the probe's, typically; None gives the node a fresh one of its own.
    ``ros_args``: more ``--ros-args`` arguments (``--log-level ...``, remappings).
    ``tag`` keeps the output files of a restarted node apart from the first run's.
    """
    namespace = namespace if namespace is not None else unique_namespace()
    args = [arg for p in params for arg in ("-p", p)]
    if params_file is not None:
        args = ["--params-file", str(params_file), *args]
    command = [sys.executable, "-m", f"venus_ros.nodes.{module}", "--ros-args"]
    command += ["-r", f"__ns:={namespace}", *args, *ros_args]
    return start_process(command, tmp_path, f"{module}{tag}", namespace=namespace)


def _tails(processes: Iterable[NodeProcess]) -> str:
    return "".join(f"\n--- {p.name}:\n{p.log()[-_TAIL_CHARS:]}" for p in processes)


#: What a wait is for, or a function that says it when the wait fails (with the state then).
What = str | Callable[[], str]


def wait_until(
    condition: Callable[[], bool],
    timeout: float,
    what: What,
    watched: Sequence[NodeProcess] = (),
    step: Callable[[], object] = lambda: time.sleep(0.01),
) -> None:
    """Call ``step`` until ``condition()`` holds; fail after ``timeout`` seconds, or as soon as
    a ``watched`` process that was not stopped has exited (quoting the processes' output)."""
    deadline = time.monotonic() + timeout
    while not condition():
        for node in watched:
            if not node.stopped and node.proc.poll() is not None:
                pytest.fail(
                    f"{node.name} exited ({node.proc.returncode}) before {_say(what)}:\n"
                    f"{node.log()}"
                )
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {_say(what)}{_tails(watched)}")
        step()


def _say(what: What) -> str:
    return what if isinstance(what, str) else what()


@dataclass
class Probe:
    """A test node with its own context and executor."""

    node: Node
    executor: SingleThreadedExecutor
    namespace: str
    watched: list[NodeProcess] = field(default_factory=list)
    _spinner: threading.Thread | None = None

    def start(
        self,
        module: str,
        tmp_path: Path,
        *params: str,
        params_file: Path | None = None,
        ros_args: Sequence[str] = (),
        tag: str = "",
    ) -> NodeProcess:
        """:func:`start_node` in this probe's namespace, watched by :meth:`wait_for`."""
        node = start_node(
            module,
            tmp_path,
            *params,
            namespace=self.namespace,
            params_file=params_file,
            ros_args=ros_args,
            tag=tag,
        )
        self.watched.append(node)
        return node

    def node_names(self) -> set[str]:
        """The names of the nodes the probe sees in its namespace."""
        graph = self.node.get_node_names_and_namespaces()
        return {name for name, namespace in graph if namespace == self.namespace}

    def _step(self) -> None:
        if self._spinner is None:
            self.executor.spin_once(timeout_sec=0.01)
        else:
            time.sleep(0.01)

    def wait_for(self, condition: Callable[[], bool], timeout: float, what: What) -> None:
        """Spin until ``condition()`` holds; fail after ``timeout`` or if a node process died."""
        wait_until(condition, timeout, what, self.watched, self._step)

    def wait_for_log(self, node: NodeProcess, *texts: str, timeout: float, what: What) -> None:
        """Spin until every one of ``texts`` is in the output of ``node``."""

        def logged() -> bool:
            log = node.log()
            return all(text in log for text in texts)

        self.wait_for(logged, timeout, what)

    def spin_for(self, seconds: float) -> None:
        """Process callbacks for ``seconds`` (a measurement window, not a synchronisation)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self._step()

    @contextmanager
    def spinning(self) -> Iterator[Probe]:
        """Spin on a thread of its own meanwhile (for code that blocks this thread); the waits
        then only poll. Callbacks run on that thread."""
        assert self._spinner is None, "already spinning"
        done = threading.Event()

        def spin() -> None:
            while not done.is_set():
                self.executor.spin_once(timeout_sec=0.05)

        self._spinner = threading.Thread(target=spin, name="probe-spin", daemon=True)
        self._spinner.start()
        try:
            yield self
        finally:
            done.set()
            self._spinner.join(timeout=5.0)
            self._spinner = None


@contextmanager
def make_probe() -> Iterator[Probe]:
    """A probe node in a fresh namespace, torn down afterwards."""
    context = Context()
    rclpy.init(context=context)
    node = rclpy.create_node("probe", namespace=unique_namespace(), context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    probe = Probe(node, executor, node.get_namespace())
    try:
        yield probe
    finally:
        for watched in probe.watched:  # whatever the test left running ends with its probe
            watched.stop()
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
