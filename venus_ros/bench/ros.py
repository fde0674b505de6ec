"""``venus-ros bench ros``: transport latency, boundary jitter and CPU of the real node set."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def bench_ros(seconds: float = 60.0) -> int:
    """Run the node set (file sources) for ``seconds`` and print transport and CPU figures.

    * mic -> frontend audio latency: arrival time of each AudioChunk minus the time its last
      sample existed (``header.stamp`` + chunk duration), seen by a subscriber in this process
      with the frontend's QoS;
    * unit-boundary jitter: deviation of the spacing of UnitDecision stamps from the unit
      length (1 s);
    * CPU per node process, from psutil, as % of one core.
    """
    import os
    import random
    import time
    import uuid

    import psutil
    import rclpy
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor

    from venus_interfaces.msg import AudioChunk, UnitDecision
    from venus_ros.launcher import RunOptions, Supervisor, plan
    from venus_ros.nodes.qos import SENSOR_AUDIO, TOPICS, reliable
    from venus_ros.paths import share_path

    # The probe in this process and the node processes share one domain, on loopback only.
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    os.environ.setdefault("ROS_DOMAIN_ID", str(random.randint(1, 101)))
    namespace = f"bench_{uuid.uuid4().hex[:8]}"
    supervisor = Supervisor(
        plan(RunOptions(demo=True, sink="file:/tmp/venus_bench_ros.wav")),
        share_path("config/venus.yaml"),
        namespace,
    )
    context = Context()
    rclpy.init(context=context)
    node = rclpy.create_node("bench_probe", namespace=namespace, context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    latencies: list[float] = []
    stamps: list[float] = []

    def on_audio(msg: AudioChunk) -> None:
        arrived = node.get_clock().now().nanoseconds / 1e9
        samples = len(msg.data) // 2
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec / 1e9
        latencies.append(arrived - (stamp + samples / msg.sample_rate))

    def on_decision(msg: UnitDecision) -> None:
        stamps.append(msg.header.stamp.sec + msg.header.stamp.nanosec / 1e9)

    node.create_subscription(AudioChunk, TOPICS["audio_in"], on_audio, SENSOR_AUDIO)
    node.create_subscription(UnitDecision, TOPICS["decision"], on_decision, reliable(50))
    Path("out/run").mkdir(parents=True, exist_ok=True)
    supervisor.start()
    try:
        # Wait for the first decision, then measure over the window.
        deadline = time.monotonic() + 30.0
        while not stamps and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
        processes = {name: psutil.Process(p.pid) for name, p in supervisor.procs.items()}
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
    finally:
        codes = supervisor.stop()
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
    if not latencies or len(stamps) - first_unit < 3:
        print(f"bench ros: too little traffic (chunks {len(latencies)}, units {len(stamps)})")
        return 1
    lat = np.array(latencies) * 1000
    spacing = np.diff(np.array(stamps[first_unit - 1 :]))
    jitter = np.abs(spacing - 1.0) * 1000
    print(f"bench ros: {elapsed:.0f} s, {len(lat)} audio chunks, {len(spacing)} unit boundaries")
    print(
        f"mic -> frontend audio latency: p50 {np.percentile(lat, 50):.2f} ms, "
        f"p99 {np.percentile(lat, 99):.2f} ms, max {lat.max():.2f} ms "
        f"(goal p99 <= 5 ms: {'met' if np.percentile(lat, 99) <= 5 else 'NOT met'})"
    )
    print(
        f"unit-boundary jitter: p50 {np.percentile(jitter, 50):.2f} ms, "
        f"p99 {np.percentile(jitter, 99):.2f} ms, max {jitter.max():.2f} ms "
        f"(goal p99 <= 10 ms: {'met' if np.percentile(jitter, 99) <= 10 else 'NOT met'})"
    )
    print("CPU per node (% of one core): " + ", ".join(f"{n} {c:.1f}" for n, c in cpu.items()))
    unclean = {name: code for name, code in codes.items() if code not in (0, None)}
    if unclean:
        print(f"unclean exits: {unclean}")
    return 0
