"""``venus-ros bench harness``: delegation latency, task throughput, and the foreground under load.

1. ``</delegate>`` -> RUNNING, two ways:

   * over ROS: the real node set (``venus-ros run --demo`` with a scripted frontend that
     delegates at every unit), in a namespace and domain of its own. A probe node subscribes to
     ``timeline`` and pairs each frontend ``delegate_close`` record with the harness's
     ``task_state`` RUNNING record of the same delegation (same ``cutoff_seq``); the latency is
     the difference of their arrival times at the probe, so the probe's own receive path is in
     both ends of it;
   * in process: :meth:`HarnessRunner.submit` to the RUNNING transition listener, journal on
     (SQLite, default ``synchronous=NORMAL``), one task at a time.

2. Throughput: 64 tasks submitted at once to a runner allowing 64 at a time, each awaiting
   ``asyncio.sleep(0.2)`` (I/O-bound, like a cloud call), journal on; several rounds.

3. Foreground unit-boundary jitter while 16 CPU-heavy tool tasks run: the duplex loop
   (scripted frontend) paced in real time, as in frontend_node: a feeder thread pushes each
   unit's audio at its boundary, the foreground thread wakes, pops the unit and steps. Jitter
   is ``|step start - scheduled boundary|``. The heavy tasks are pure-Python busy loops of
   ~2 s, kept 16 in flight by a harness runner:

   (a) in this process, the tool running the loop on a thread pool: it shares the GIL with the
       foreground (what a CPU-heavy tool inside the frontend's process would cost);
   (b) as deployed, the harness in a process of its own (frontend_node and harness_node are
       separate processes): a child process runs the runner, its tool running the loop in a
       pool of 16 processes, so every core is busy while the foreground runs here.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from venus_ros.audio.meter import usable_cores
from venus_ros.bench import figures, goal, probed_graph
from venus_ros.core.clock import MonotonicClock
from venus_ros.core.duplex import DuplexLoop
from venus_ros.core.timeline import Timeline, TimelineView
from venus_ros.core.units import UnitAssembler, UnitConfig
from venus_ros.frontends.scripted import Reply, Script, ScriptedFrontend
from venus_ros.harness.journal import Journal
from venus_ros.harness.runner import HarnessRunner
from venus_ros.harness.tasks import Task, TaskState
from venus_ros.harness.tools import Tool, ToolRegistry, ToolResult

LATENCY_P99_GOAL_MS = 20.0
JITTER_P99_GOAL_MS = 10.0
#: Submissions timed on the in-process path.
IN_PROCESS_SUBMISSIONS = 1000
#: What the throughput tool awaits (a cloud call), and how many rounds are timed.
IO_WAIT_S = 0.2
THROUGHPUT_ROUNDS = 5
#: How long one CPU-heavy task busy-loops.
BURN_S = 2.0
#: How long the node set gets to start and run its first delegation.
STARTUP_TIMEOUT_S = 60.0

_NO_ARGS: Mapping[str, Any] = {"type": "object", "additionalProperties": False}
_NO_EVIDENCE = TimelineView((), 0)


def bench_harness(tasks: int = 64, heavy: int = 16, seconds: float = 20.0) -> int:
    """Measure and print the figures; returns a process exit code.

    Args:
        tasks: concurrent tasks in the throughput test (and the runner's limit there).
        heavy: CPU-heavy tool tasks kept running during the jitter tests.
        seconds: the measuring window of the ROS test and of each jitter test.
    """
    if tasks < 1 or heavy < 1 or seconds <= 0:
        raise ValueError("tasks and heavy must be >= 1 and seconds > 0")
    tmp = Path(tempfile.mkdtemp(prefix="venus_bench_harness_"))
    try:
        ros = _ros_latency(seconds, tmp)
        if ros is None:
            return 1
        local = _in_process_latency(tmp / "latency.sqlite3")
        print(
            f"bench harness: ROS {ros.elapsed:.0f} s window, {len(ros.latencies_ms)} delegations "
            f"paired ({ros.unpaired} without RUNNING, {ros.failed} failed at the frontend); "
            f"in process {len(local)} submissions"
        )
        print(
            f"</delegate> -> RUNNING latency over ROS (probe receive times, included at both "
            f"ends): {figures(ros.latencies_ms)} "
            f"({goal(ros.latencies_ms, LATENCY_P99_GOAL_MS)})"
        )
        print(
            f"  of which delegate_close -> harness QUEUED (probe receive times): "
            f"{figures(ros.to_queued_ms)}; QUEUED -> RUNNING (harness clock): "
            f"{figures(ros.queued_to_running_ms)}"
        )
        print(
            f"submit -> RUNNING in process (journal on): {figures(local)} "
            f"({goal(local, LATENCY_P99_GOAL_MS)})"
        )
        if ros.unclean:
            print(f"unclean exits: {ros.unclean}")

        rounds = _throughput(tasks, tmp / "throughput.sqlite3")
        total = tasks * len(rounds)
        ideal = 2 * IO_WAIT_S
        print(
            f"throughput with {tasks} concurrent tasks (each awaits {IO_WAIT_S:g} s, journal on): "
            f"{total / sum(rounds):.0f} tasks/s over {len(rounds)} rounds; wall per round "
            f"p50 {np.median(rounds):.3f} s, max {max(rounds):.3f} s (ideal {IO_WAIT_S:.3f} s; "
            f"all concurrent, round <= {ideal:g} s: {'met' if max(rounds) <= ideal else 'NOT met'})"
        )

        same = _jitter_same_process(heavy, seconds, tmp / "burn.sqlite3")
        if same is None:
            return 1
        print(
            f"foreground unit-boundary jitter, {heavy} CPU-heavy tool tasks in the same process "
            f"(threads, shared GIL), {len(same.jitter_ms)} units, {same.completed} heavy tasks "
            f"done: {figures(same.jitter_ms)} ({goal(same.jitter_ms, JITTER_P99_GOAL_MS)})"
        )
        apart = _jitter_other_process(heavy, seconds, tmp / "burn_child.sqlite3")
        if apart is None:
            return 1
        print(
            f"foreground unit-boundary jitter, {heavy} CPU-heavy tool tasks in a harness process "
            f"of their own ({heavy} worker processes, {usable_cores()} cores), "
            f"{len(apart.jitter_ms)} units: {figures(apart.jitter_ms)} "
            f"({goal(apart.jitter_ms, JITTER_P99_GOAL_MS)})"
        )
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# --- 1. </delegate> -> RUNNING ----------------------------------------------------------------


@dataclasses.dataclass
class _RosResult:
    latencies_ms: list[float]
    #: delegate_close -> the harness's QUEUED record, arrival times at the probe
    to_queued_ms: list[float]
    #: QUEUED -> RUNNING on the harness's own clock (record stamps: no transport in it)
    queued_to_running_ms: list[float]
    unpaired: int
    failed: int
    elapsed: float
    unclean: dict[str, int | None]


def _delegating_script(units: int) -> dict[str, Any]:
    """A script that speaks one word and delegates a sum at every unit from the second on."""
    replies = [
        {"at_unit": k, "text": f"Okay. <delegate>what is {k} plus 1</delegate>"}
        for k in range(1, units)
    ]
    return {"words_per_unit": 8, "word_ms": 120, "replies": replies}


def _ros_latency(seconds: float, tmp: Path) -> _RosResult | None:
    """The node set with a delegating script; a probe pairs delegate_close with RUNNING."""
    from venus_interfaces.msg import TimelineEvent
    from venus_ros.launcher import RunOptions, plan
    from venus_ros.nodes.qos import TOPICS, reliable

    script = tmp / "delegating.yaml"
    units = int(STARTUP_TIMEOUT_S + seconds + 30)
    script.write_text(yaml.safe_dump(_delegating_script(units)), encoding="utf-8")
    options = RunOptions(
        demo=True, frontend=f"scripted:{script}", sink=f"file:{tmp / 'assistant.wav'}"
    )
    nodes = [
        dataclasses.replace(
            spec, overrides={**spec.overrides, "journal_path": str(tmp / "harness.sqlite3")}
        )
        if spec.module == "harness"
        else spec
        for spec in plan(options)
    ]
    closes: dict[int, float] = {}  # cutoff_seq -> arrival of the frontend's delegate_close
    running: dict[int, float] = {}  # cutoff_seq -> arrival of the harness's RUNNING
    queued: dict[int, float] = {}  # cutoff_seq -> arrival of the harness's QUEUED
    stamps: dict[tuple[int, str], float] = {}  # (cutoff_seq, state) -> harness record t
    failed_at: list[float] = []  # arrivals of delegations the frontend reported FAILED

    def on_timeline(msg: TimelineEvent) -> None:
        arrived = time.perf_counter()
        if msg.kind not in ("delegate_close", "task_state"):
            return
        payload = json.loads(msg.payload_json)
        if msg.kind == "delegate_close":
            closes.setdefault(int(payload["cutoff_seq"]), arrived)
        elif payload.get("source") == "harness" and payload.get("state") in ("QUEUED", "RUNNING"):
            cutoff, state = int(payload["cutoff_seq"]), payload["state"]
            (running if state == "RUNNING" else queued).setdefault(cutoff, arrived)
            stamps.setdefault((cutoff, state), msg.t)
        elif payload.get("source") == "frontend" and payload.get("state") == "FAILED":
            failed_at.append(arrived)

    with probed_graph(nodes, "bench_harness_probe") as graph:
        executor, supervisor = graph.executor, graph.supervisor
        graph.node.create_subscription(
            TimelineEvent, TOPICS["timeline"], on_timeline, reliable(1000)
        )
        supervisor.start()
        # The window opens at the first delegation that reached RUNNING (the harness is up).
        deadline = time.perf_counter() + STARTUP_TIMEOUT_S
        while not running and time.perf_counter() < deadline:
            executor.spin_once(timeout_sec=0.05)
            dead = {n: p.returncode for n, p in supervisor.procs.items() if p.poll() is not None}
            if dead:
                print(f"bench harness: node(s) exited during start-up: {dead}")
                return None
        if not running:
            print(f"bench harness: no delegation reached RUNNING within {STARTUP_TIMEOUT_S:g} s")
            return None
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            executor.spin_once(timeout_sec=0.05)
        end = time.perf_counter()
        window = [c for c, t in closes.items() if start <= t <= end]
        drain = time.perf_counter() + 2.0  # the last delegations' RUNNING
        while any(c not in running for c in window) and time.perf_counter() < drain:
            executor.spin_once(timeout_sec=0.05)
    paired = [c for c in window if c in running]
    return _RosResult(
        latencies_ms=[(running[c] - closes[c]) * 1000 for c in paired],
        to_queued_ms=[(queued[c] - closes[c]) * 1000 for c in paired if c in queued],
        queued_to_running_ms=[
            (stamps[c, "RUNNING"] - stamps[c, "QUEUED"]) * 1000
            for c in paired
            if (c, "QUEUED") in stamps
        ],
        unpaired=len(window) - len(paired),
        failed=sum(start <= t <= end for t in failed_at),
        elapsed=end - start,
        unclean=graph.unclean,
    )


def _in_process_latency(journal_path: Path) -> list[float]:
    """submit -> RUNNING listener, one task at a time, routed to the calculator as in the node."""
    running: dict[str, float] = {}

    def on_transition(task: Task, old: TaskState | None, new: TaskState) -> None:
        if new is TaskState.RUNNING:
            running[task.id] = time.perf_counter()

    latencies: list[float] = []
    with (
        Journal(journal_path) as journal,
        HarnessRunner(
            ToolRegistry.builtins(), MonotonicClock(), listeners=[on_transition], journal=journal
        ) as runner,
    ):
        for i in range(IN_PROCESS_SUBMISSIONS):
            t0 = time.perf_counter()
            task = runner.submit(f"what is {i} plus 1", "bench", i, 0, _NO_EVIDENCE)
            settled = runner.future(task.id).result(timeout=10.0)
            if task.id in running:
                latencies.append((running[task.id] - t0) * 1000)
            elif settled.state is not TaskState.COMPLETED:
                raise RuntimeError(f"bench task {task.id} ended {settled.state.value}")
    return latencies


# --- 2. throughput ----------------------------------------------------------------------------


def _io_tool() -> Tool:
    async def run(args: Mapping[str, Any], evidence: TimelineView) -> ToolResult:
        await asyncio.sleep(IO_WAIT_S)
        return ToolResult("done")

    return Tool("cloud_wait", "Waits like a cloud call.", _NO_ARGS, run, timeout_s=10.0)


def _throughput(tasks: int, journal_path: Path) -> list[float]:
    """Wall time of each round of ``tasks`` tasks submitted at once."""
    rounds: list[float] = []
    with (
        Journal(journal_path) as journal,
        HarnessRunner(
            ToolRegistry([_io_tool()]),
            MonotonicClock(),
            max_concurrent=tasks,
            max_retained=tasks * (THROUGHPUT_ROUNDS + 1),
            journal=journal,
        ) as runner,
    ):
        for r in range(THROUGHPUT_ROUNDS):
            t0 = time.perf_counter()
            futures = []
            for i in range(tasks):
                query = f"wait {r}.{i}"
                task = runner.submit(query, "bench", i, 0, _NO_EVIDENCE, tool="cloud_wait")
                futures.append(runner.future(task.id))
            settled = [f.result(timeout=30.0) for f in futures]
            rounds.append(time.perf_counter() - t0)
            bad = [t.state.value for t in settled if t.state is not TaskState.COMPLETED]
            if bad:
                raise RuntimeError(f"bench throughput: {len(bad)} tasks ended {bad[0]}")
    return rounds


# --- 3. foreground jitter under load ----------------------------------------------------------


@dataclasses.dataclass
class _JitterResult:
    jitter_ms: list[float]
    completed: int = 0


def _burn(seconds: float) -> int:
    """A pure-Python busy loop for ``seconds`` of wall time (holds the GIL while it runs)."""
    end = time.perf_counter() + seconds
    count = 0
    while time.perf_counter() < end:
        for _ in range(1000):
            count += 1
    return count


def _burn_tool(pool: concurrent.futures.Executor) -> Tool:
    async def run(args: Mapping[str, Any], evidence: TimelineView) -> ToolResult:
        count = await asyncio.get_running_loop().run_in_executor(pool, _burn, BURN_S)
        return ToolResult(f"counted to {count}")

    return Tool("burn", "Busy-loops the CPU.", _NO_ARGS, run, timeout_s=60.0, cancellable=False)


class _HeavyLoad:
    """Keeps ``heavy`` burn tasks in flight on ``runner``: each one settled is replaced."""

    def __init__(self, runner: HarnessRunner, heavy: int) -> None:
        self.runner = runner
        self.heavy = heavy
        self.completed = 0
        self.running = 0
        self._stopped = False
        self._lock = threading.Lock()
        runner.add_listener(self._on_transition)

    def start(self, timeout: float = 30.0) -> bool:
        """Submit the tasks; True once all of them are RUNNING."""
        for _ in range(self.heavy):
            self._submit()
        deadline = time.perf_counter() + timeout
        while self.running < self.heavy and time.perf_counter() < deadline:
            time.sleep(0.02)
        return self.running >= self.heavy

    def stop(self) -> None:
        with self._lock:
            self._stopped = True

    def _submit(self) -> None:
        with self._lock:
            if self._stopped:
                return
        try:
            self.runner.submit("burn the CPU", "bench", 0, 0, _NO_EVIDENCE, tool="burn")
        except RuntimeError:  # the runner closed meanwhile
            pass

    def _on_transition(self, task: Task, old: TaskState | None, new: TaskState) -> None:
        if new is TaskState.RUNNING:
            self.running += 1
        elif old is TaskState.RUNNING and new.settled:
            self.running -= 1
            self.completed += new is TaskState.COMPLETED
            self._submit()


def _speaking_script(units: int) -> Script:
    return Script(
        replies=[
            Reply(at_unit=k, text="Okay, let me think about that for a second.")
            for k in range(1, units, 3)
        ]
    )


def _boundary_jitter(seconds: float) -> list[float]:
    """Run the duplex loop in real time for ``seconds``; |step start - boundary| per unit, ms."""
    config = UnitConfig()
    rate = config.sample_rate
    count = max(2, int(seconds * 1000 / config.unit_ms))
    clock = MonotonicClock()
    frontend = ScriptedFrontend(_speaking_script(count), clock=clock)
    loop = DuplexLoop(frontend, Timeline(clock), clock)
    loop.prepare()
    assembler = UnitAssembler(config)
    wake = threading.Condition()
    t0 = time.perf_counter() + 0.1
    boundaries = [t0 + (config.unit_start(k) + config.unit_length(k)) / rate for k in range(count)]
    jitter: list[float] = []
    done = threading.Event()

    def feed() -> None:  # the microphone: each unit's audio arrives at its boundary
        for k in range(count):
            delay = boundaries[k] - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            assembler.push_audio(np.zeros(config.unit_length(k), np.float32), rate)
            with wake:
                wake.notify()

    def foreground() -> None:  # as frontend_node's loop thread
        while not done.is_set():
            with wake:
                unit = assembler.pop_unit()
                while unit is None and not done.is_set():
                    wake.wait(timeout=0.1)
                    unit = assembler.pop_unit()
            if unit is None:
                return
            jitter.append(abs(time.perf_counter() - boundaries[unit.index]) * 1000)
            loop.step(unit)
            if unit.index == count - 1:
                done.set()

    threads = [
        threading.Thread(target=feed, name="bench-feeder", daemon=True),
        threading.Thread(target=foreground, name="bench-foreground", daemon=True),
    ]
    for thread in threads:
        thread.start()
    threads[0].join(timeout=seconds + 30)
    threads[1].join(timeout=5.0)
    done.set()
    return jitter


def _jitter_same_process(heavy: int, seconds: float, journal_path: Path) -> _JitterResult | None:
    """(a) the burn tool on a thread pool of this process."""
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=heavy, thread_name_prefix="burn")
    journal = Journal(journal_path)
    runner = HarnessRunner(
        ToolRegistry([_burn_tool(pool)]), MonotonicClock(), max_concurrent=heavy, journal=journal
    )
    load = _HeavyLoad(runner, heavy)
    try:
        if not load.start():
            print(f"bench harness: the {heavy} burn tasks did not all start")
            return None
        jitter = _boundary_jitter(seconds)
        return _JitterResult(jitter, load.completed)
    finally:
        load.stop()
        runner.close()
        pool.shutdown(wait=True, cancel_futures=True)
        journal.close()


def _jitter_other_process(heavy: int, seconds: float, journal_path: Path) -> _JitterResult | None:
    """(b) the load in a harness process of its own; the foreground runs here."""
    command = [
        sys.executable,
        "-c",
        "import sys; from venus_ros.bench.harness import _burner; "
        "sys.exit(_burner(int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]))",
        str(heavy),
        str(seconds + 30.0),  # it stops by itself if this process dies
        str(journal_path),
    ]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert child.stdout is not None
        ready, _, _ = select.select([child.stdout], [], [], 60.0)
        line = child.stdout.readline().strip() if ready else ""
        if line != "ready":
            print(f"bench harness: the load process did not start ({line or 'timeout'})")
            return None
        return _JitterResult(_boundary_jitter(seconds))
    finally:
        _stop_group(child)


def _stop_group(child: subprocess.Popen[str]) -> None:
    """End the child and its workers (its own process group), then reap it."""
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            break
        try:
            child.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        try:  # workers left behind by the child
            os.killpg(child.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        break
    if child.poll() is None:
        child.kill()
        child.wait()
    if child.stdout is not None:
        child.stdout.close()


def _burner(heavy: int, duration: float, journal_path: str) -> int:
    """The load process of (b): a runner keeping ``heavy`` burn tasks in a process pool busy.

    Prints ``ready`` once they all run; stops after ``duration`` seconds (or when killed).
    """
    pool = concurrent.futures.ProcessPoolExecutor(max_workers=heavy)
    # Start the workers now, before the runner's thread exists (they are forked).
    list(pool.map(_burn, [0.0] * heavy))
    journal = Journal(journal_path)
    runner = HarnessRunner(
        ToolRegistry([_burn_tool(pool)]), MonotonicClock(), max_concurrent=heavy, journal=journal
    )
    load = _HeavyLoad(runner, heavy)
    try:
        if not load.start():
            print("not all burn tasks started", flush=True)
            return 1
        print("ready", flush=True)
        time.sleep(duration)
        return 0
    finally:
        load.stop()
        runner.close()
        pool.shutdown(wait=False, cancel_futures=True)
        journal.close()
