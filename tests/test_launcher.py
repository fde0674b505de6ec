"""``venus-ros run`` (venus_ros/launcher.py): the node plan and command lines, then real runs of
the node set, stopped by ``--duration`` and by Ctrl-C, in a probe's namespace."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import psutil
import pytest
import yaml
from rosproc import NodeProcess, Probe, start_process

from venus_ros.frontends.cascade.config import parse_spec
from venus_ros.launcher import (
    NodeSpec,
    RunOptions,
    describe_environment,
    node_command,
    plan,
    user_environment,
)
from venus_ros.paths import sample_path, share_path

DEMO_NODES = [
    "mic_node",
    "frontend_node",
    "harness_node",
    "speaker_node",
    "monitor_node",
    "frames_node",
]
#: Bound on a run's start-up and shut-down (a node gets 5 s after SIGINT, then is killed).
RUN_SLACK_S = 30.0


# ---------------------------------------------------------------------------- plan


def by_module(nodes: list[NodeSpec]) -> dict[str, NodeSpec]:
    return {spec.module: spec for spec in nodes}


def test_demo_plan_uses_the_bundled_sample_and_a_file_sink() -> None:
    nodes = plan(RunOptions(demo=True))
    assert [spec.name for spec in nodes] == DEMO_NODES
    specs = by_module(nodes)
    assert specs["mic"].overrides == {"source": f"file:{sample_path('input.wav')}"}
    assert sample_path("input.wav").is_file()
    # a recorded session through a file microphone: no speaker in it, no echo to cancel
    assert specs["frontend"].overrides == {"frontend": "cascade"}
    assert specs["speaker"].overrides == {"sink": "file:out/run/assistant.wav"}
    assert [spec.module for spec in nodes if spec.respawn] == ["harness"]
    assert "camera" not in specs and "recorder" not in specs


def test_plan_adds_a_camera_for_video_and_a_recorder_for_record() -> None:
    nodes = plan(RunOptions(demo=True, video="file:/tmp/v.avi", record="/tmp/bag"))
    assert [spec.module for spec in nodes] == [
        "mic",
        "camera",
        "frontend",
        "harness",
        "speaker",
        "monitor",
        "frames",
        "recorder",
    ]
    specs = by_module(nodes)
    assert specs["camera"].overrides == {"source": "file:/tmp/v.avi"}
    assert specs["recorder"].overrides == {"path": "/tmp/bag"}
    assert not specs["camera"].respawn and not specs["recorder"].respawn
    # The camera, monitor and recorder are optional; mic, frontend, harness, speaker are not.
    assert {spec.module for spec in nodes if not spec.essential} == {
        "camera",
        "monitor",
        "frames",
        "recorder",
    }


def test_an_empty_video_means_no_camera() -> None:
    assert "camera" not in by_module(plan(RunOptions(video="")))
    assert "camera" in by_module(plan(RunOptions()))
    assert "camera" not in by_module(plan(RunOptions(demo=True)))


def test_run_uses_the_users_ros_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROS_DOMAIN_ID", "17")
    monkeypatch.delenv("ROS_AUTOMATIC_DISCOVERY_RANGE")
    monkeypatch.delenv("ROS_STATIC_PEERS", raising=False)
    env = user_environment()
    assert env["ROS_DOMAIN_ID"] == "17" and "ROS_AUTOMATIC_DISCOVERY_RANGE" not in env
    line = describe_environment(env)
    assert "ROS_DOMAIN_ID=17" in line
    assert "ROS_AUTOMATIC_DISCOVERY_RANGE unset (SUBNET)" in line


def test_plan_without_demo_uses_the_devices_and_given_overrides() -> None:
    specs = by_module(plan(RunOptions()))
    assert specs["mic"].overrides == {"source": "device"}
    assert specs["frontend"].overrides == {}  # the parameter file's: echo cancellation on
    params = yaml.safe_load(share_path("config/venus.yaml").read_text())
    name, _, options = params["/**/frontend_node"]["ros__parameters"]["frontend"].partition(":")
    assert name == "cascade" and parse_spec(options).aec
    assert specs["camera"].overrides == {"source": "device"}
    assert specs["speaker"].overrides == {"sink": "device"}
    given = by_module(plan(RunOptions(frontend="scripted:s.yaml", audio="file:a.wav")))
    assert given["frontend"].overrides == {"frontend": "scripted:s.yaml"}
    assert given["mic"].overrides == {"source": "file:a.wav"}


def test_node_command_has_params_file_namespace_and_overrides(tmp_path: Path) -> None:
    params = tmp_path / "venus.yaml"
    spec = NodeSpec("mic", {"source": "file:a.wav", "chunk_ms": "20"})
    command = node_command(spec, params, "/robot1/")
    assert command[:4] == [sys.executable, "-m", "venus_ros.nodes.mic", "--ros-args"]
    rest = command[4:]
    assert rest == [
        "--params-file",
        str(params),
        "-r",
        "__ns:=/robot1",
        "-p",
        "source:=file:a.wav",
        "-p",
        "chunk_ms:=20",
    ]
    assert node_command(NodeSpec("monitor"), params, "robot1")[-2:] == ["-r", "__ns:=/robot1"]
    assert "-r" not in node_command(NodeSpec("monitor"), params, "")


# ---------------------------------------------------------------------------- real runs


def start_run(probe: Probe, cwd: Path, *args: str) -> NodeProcess:
    """``venus-ros run --demo`` in the probe's namespace, in ``cwd`` (it writes out/run there),
    with this process's environment (conftest's domain and loopback-only discovery)."""
    command = [sys.executable, "-m", "venus_ros.cli", "run", "--demo"]
    command += ["--namespace", probe.namespace, *args]
    run = start_process(command, cwd, "run", cwd=cwd)
    probe.watched.append(run)
    return run


def started_line() -> str:
    return f"venus-ros run: started {', '.join(DEMO_NODES)} (ROS_DOMAIN_ID={domain()});"


def domain() -> str:
    return os.environ["ROS_DOMAIN_ID"]


def test_demo_run_for_a_duration_stops_every_node_and_writes_the_sink(
    probe: Probe, tmp_path: Path
) -> None:
    run = start_run(probe, tmp_path, "--duration", "6")
    try:
        code = run.wait(6 + RUN_SLACK_S)
    finally:
        run.stop()
    out = run.out()
    assert code == 0, run.log()
    assert started_line() in out, run.log()
    assert "venus-ros run: stopped (0 respawns)" in out, run.log()
    assert "unclean exits" not in run.err(), run.log()
    assert (tmp_path / "out" / "run" / "assistant.wav").is_file()
    assert f"ROS_DOMAIN_ID={domain()}, ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST" in out


def test_a_failed_camera_does_not_stop_the_run(probe: Probe, tmp_path: Path) -> None:
    run = start_run(probe, tmp_path, "--video", "file:/nonexistent/video.avi")
    try:
        probe.wait_for(
            lambda: "camera_node exited (1); going on without it" in run.out(),
            RUN_SLACK_S,
            "the camera to fail",
        )
        assert run.proc.poll() is None, run.log()  # the rest of the graph runs on
        code = run.stop(RUN_SLACK_S)
    finally:
        run.stop()
    assert code == 0, run.log()
    assert "device error: camera: no video file '/nonexistent/video.avi'" in run.err()
    assert "venus-ros run: stopped (0 respawns)" in run.out(), run.log()


def test_ctrl_c_stops_the_run_and_every_node(probe: Probe, tmp_path: Path) -> None:
    run = start_run(probe, tmp_path)
    children: list[psutil.Process] = []
    try:
        probe.wait_for(lambda: started_line() in run.out(), RUN_SLACK_S, "the started line")
        # Every node is up, in the probe's namespace (the namespace remap reached them).
        probe.wait_for(
            lambda: set(DEMO_NODES) <= probe.node_names(),
            RUN_SLACK_S,
            lambda: f"the demo nodes in the probe's namespace, seen {probe.node_names()}",
        )
        children = psutil.Process(run.proc.pid).children(recursive=True)
        modules = {arg for child in children for arg in child.cmdline() if "venus_ros.nodes" in arg}
        assert modules == {f"venus_ros.nodes.{name.removesuffix('_node')}" for name in DEMO_NODES}
        code = run.stop(RUN_SLACK_S)  # SIGINT, as Ctrl-C sends it
        assert code == 0, run.log()
        assert "venus-ros run: stopped (0 respawns)" in run.out(), run.log()
        assert "unclean exits" not in run.err(), run.log()
        _, alive = psutil.wait_procs(children, timeout=5.0)
        assert alive == [], f"node processes left running: {alive}"
    finally:
        run.stop()
        for child in children:  # after a failure: no node outlives the test
            if child.is_running():
                child.kill()
