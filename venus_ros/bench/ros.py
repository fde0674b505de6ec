"""``venus-ros bench ros``: transport latency, boundary jitter and CPU of the real node set."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from venus_ros.bench import figures, goal

LATENCY_GOAL_MS = 5.0
JITTER_GOAL_MS = 10.0


def bench_ros(seconds: float = 60.0) -> int:
    """Run the node set (file sources) for ``seconds`` and print transport and CPU figures.

    * mic -> frontend audio latency: arrival time of each AudioChunk minus the time its last
      sample existed (``header.stamp`` + chunk duration), seen by a subscriber in this process
      with the frontend's QoS;
    * unit-boundary jitter: deviation of the spacing of UnitDecision stamps from the unit
      length (1 s);
    * CPU per node process, from psutil, as % of one core.
    """
    import time

    import psutil

    from venus_interfaces.msg import AudioChunk, UnitDecision
    from venus_ros.bench import probed_graph
    from venus_ros.launcher import RunOptions, plan
    from venus_ros.nodes.qos import SENSOR_AUDIO, TOPICS, reliable

    latencies: list[float] = []
    stamps: list[float] = []
    Path("out/run").mkdir(parents=True, exist_ok=True)
    nodes = plan(RunOptions(demo=True, sink="file:/tmp/venus_bench_ros.wav"))
    with probed_graph(nodes, "bench_probe") as graph:
        node, executor = graph.node, graph.executor

        def on_audio(msg: AudioChunk) -> None:
            arrived = node.get_clock().now().nanoseconds / 1e9
            samples = len(msg.data) // 2
            stamp = msg.header.stamp.sec + msg.header.stamp.nanosec / 1e9
            latencies.append(arrived - (stamp + samples / msg.sample_rate))

        def on_decision(msg: UnitDecision) -> None:
            stamps.append(msg.header.stamp.sec + msg.header.stamp.nanosec / 1e9)

        node.create_subscription(AudioChunk, TOPICS["audio_in"], on_audio, SENSOR_AUDIO)
        node.create_subscription(UnitDecision, TOPICS["decision"], on_decision, reliable(50))
        graph.supervisor.start()
        # Wait for the first decision, then measure over the window.
        deadline = time.monotonic() + 30.0
        while not stamps and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
        procs = graph.supervisor.procs
        processes = {name: psutil.Process(p.pid) for name, p in procs.items()}
        before = {name: sum(p.cpu_times()[:2]) for name, p in processes.items()}
        latencies.clear()
        start = time.monotonic()
        first_unit = len(stamps)
        while time.monotonic() - start < seconds:
            executor.spin_once(timeout_sec=0.05)
        elapsed = time.monotonic() - start
        cpu = {
            name: (sum(p.cpu_times()[:2]) - before[name]) / elapsed * 100
            for name, p in processes.items()
        }
    if not latencies or len(stamps) - first_unit < 3:
        print(f"bench ros: too little traffic (chunks {len(latencies)}, units {len(stamps)})")
        return 1
    lat = list(np.array(latencies) * 1000)
    spacing = np.diff(np.array(stamps[first_unit - 1 :]))
    jitter = list(np.abs(spacing - 1.0) * 1000)
    print(f"bench ros: {elapsed:.0f} s, {len(lat)} audio chunks, {len(spacing)} unit boundaries")
    print(f"mic -> frontend audio latency: {figures(lat)} ({goal(lat, LATENCY_GOAL_MS)})")
    print(f"unit-boundary jitter: {figures(jitter)} ({goal(jitter, JITTER_GOAL_MS)})")
    print("CPU per node (% of one core): " + ", ".join(f"{n} {c:.1f}" for n, c in cpu.items()))
    if graph.unclean:
        print(f"unclean exits: {graph.unclean}")
    return 0
