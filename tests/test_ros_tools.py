"""ROS action and service tools, run by the Harness runner against a real server process.

The servers (``tests/ros_servers.py``) run as a process of their own in the probe's namespace;
the tools live on the probe node, whose executor spins on a background thread (as the harness
node's does), and the runner runs them on its own loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import re
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from types import SimpleNamespace
from typing import Any

import pytest
from geometry_msgs.msg import PoseWithCovarianceStamped
from rclpy.action import ActionClient
from rosproc import ROOT, NodeProcess, Probe, start_process, wait_until
from sensor_msgs.msg import JointState
from std_srvs.srv import SetBool

from venus_interfaces.action import Delegate
from venus_ros.core.clock import MonotonicClock
from venus_ros.core.timeline import TimelineView
from venus_ros.harness.progress import progress_to, report_progress
from venus_ros.harness.runner import ALREADY_DONE_NOTE, HarnessRunner
from venus_ros.harness.tasks import Task, TaskState
from venus_ros.harness.tools import Tool, ToolError, ToolRegistry
from venus_ros.ros.tools import (
    CANCEL_WAIT_S,
    FieldMap,
    convert,
    import_interface,
    make_ros_action_tool,
    make_ros_service_tool,
    message_to_dict,
    render,
    ros_tool_factory,
)

S = TaskState
WAIT_S = 10.0
EMPTY = TimelineView((), 0)
SERVERS = ROOT / "tests" / "ros_servers.py"

GOAL_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"query": {"type": "string"}, "turn": {"type": "number"}},
    "required": ["query"],
    "additionalProperties": False,
}
SWITCH_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"on": {"type": "boolean"}},
    "required": ["on"],
    "additionalProperties": False,
}
GOAL_MAP = {
    "query": "query",
    "turn_id": "turn",
    "session_id": {"const": "s1"},
    "evidence_cutoff_seq": 42,
}


# --- fixtures -----------------------------------------------------------------------------------


class Progress:
    """Progress reports per task id (from the runner thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reports: dict[str, list[tuple[float, str]]] = {}

    def sink(self, key: str) -> Any:
        def report(fraction: float, message: str) -> None:
            with self._lock:
                self.reports.setdefault(key, []).append((fraction, message))

        return report

    def of(self, key: str) -> list[tuple[float, str]]:
        with self._lock:
            return list(self.reports.get(key, ()))


def reporting(tool: Tool, progress: Progress) -> Tool:
    """``tool`` with its progress going to ``progress`` under the task's query argument.

    Per tool (the runner's ``progress_listeners`` see every tool; the plain tool here must
    report to nobody): like the runner, it sets the callback with :func:`progress_to` around the
    creation of the tool's task.
    """

    async def run(args: Mapping[str, Any], evidence: TimelineView) -> Any:
        with progress_to(progress.sink(str(args.get("query", "")))):
            job = asyncio.ensure_future(tool.run(args, evidence))
        return await job  # a cancel reaches the tool's task; its outcome is this one's

    return dataclasses.replace(tool, run=run)


@dataclasses.dataclass
class Ros:
    probe: Probe
    servers: NodeProcess
    progress: Progress
    registry: ToolRegistry

    @property
    def ns(self) -> str:
        return self.probe.namespace

    def wait_for_log(self, *texts: str) -> None:
        self.probe.wait_for_log(self.servers, *texts, timeout=WAIT_S, what=f"{texts} logged")


def make_tools(probe: Probe, progress: Progress) -> list[Tool]:
    node = probe.node
    go = make_ros_action_tool(
        node,
        "go",
        "Runs the test action.",
        GOAL_SCHEMA,
        "venus_interfaces/action/Delegate",
        "act",
        GOAL_MAP,
        timeout_s=10.0,
        result_text="The server {reply_text}.",
        feedback_text="{message}",
        progress_field="progress",
        abort_text="{reply_text}",
    )
    quick = make_ros_action_tool(
        node,
        "quick",
        "Runs the test action with a short timeout.",
        GOAL_SCHEMA,
        "venus_interfaces/action/Delegate",
        "act",
        {"query": "query"},
        timeout_s=0.3,
    )
    absent = make_ros_action_tool(
        node,
        "absent",
        "An action nobody serves.",
        GOAL_SCHEMA,
        "venus_interfaces/action/Delegate",
        "nobody_home",
        {"query": "query"},
        timeout_s=5.0,
        server_wait_s=0.5,
    )
    switch = make_ros_service_tool(
        node,
        "switch",
        "Switches the test switch.",
        SWITCH_SCHEMA,
        "std_srvs/srv/SetBool",
        "switch",
        {"data": "on"},
        timeout_s=5.0,
        response_text="It is {message}.",
        success_field="success",
    )
    no_service = make_ros_service_tool(
        node,
        "no_service",
        "A service nobody serves.",
        SWITCH_SCHEMA,
        "std_srvs/srv/SetBool",
        "nobody_home",
        {"data": "on"},
        timeout_s=5.0,
        side_effects=False,
        server_wait_s=0.5,
    )
    plain = make_ros_action_tool(
        node,
        "plain",
        "Runs the test action; nobody listens to its progress.",
        GOAL_SCHEMA,
        "venus_interfaces/action/Delegate",
        "act",
        {"query": "query"},
        timeout_s=5.0,
    )
    return [plain, *(reporting(t, progress) for t in (go, quick, absent, switch, no_service))]


WARM_UP_ARGS: Mapping[str, Mapping[str, Any]] = {
    "plain": {"query": "ok 1"},
    "go": {"query": "ok 1"},
    "quick": {"query": "ok 1"},
    "switch": {"on": False},
}


def warm_up(registry: ToolRegistry, attempts: int = 3, attempt_s: float = 3.0) -> None:
    """One call through each reachable tool's own client before the tests measure anything.

    Fast DDS discovers each direction of a client/server pair on its own: a client may see its
    server ready while the server has not yet matched the client's response reader, and then
    the first answer is lost. Tests check behaviour, not discovery latency, so every client
    first completes one call (a lost one is retried).
    """
    for name, args in WARM_UP_ARGS.items():
        tool = registry.get(name)
        for attempt in range(1, attempts + 1):
            try:
                asyncio.run(asyncio.wait_for(tool.run(args, EMPTY), attempt_s))
                break
            except ToolError:
                break  # an answer (the switch reports "off" as a failure): the path works
            except TimeoutError:
                if attempt == attempts:
                    raise


@pytest.fixture(scope="module")
def ros(module_probe: Probe, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ros]:
    servers = start_process(
        [sys.executable, str(SERVERS), "--ros-args", "-r", f"__ns:={module_probe.namespace}"],
        tmp_path_factory.mktemp("ros_servers"),
        "ros_servers",
        namespace=module_probe.namespace,
    )
    module_probe.watched.append(servers)
    try:
        progress = Progress()
        registry = ToolRegistry(make_tools(module_probe, progress))
        ros = Ros(module_probe, servers, progress, registry)
        ros.wait_for_log("ros_servers ready")
        # Discovery may take longer than a tool's server wait on a loaded machine. (These
        # clients are destroyed before the executor spins on a thread: rclpy's destroy()
        # races a spinning executor.)
        action = ActionClient(module_probe.node, Delegate, "act")
        switch = module_probe.node.create_client(SetBool, "switch")
        module_probe.wait_for(
            lambda: action.server_is_ready() and switch.service_is_ready(),
            WAIT_S,
            "the test servers discovered",
        )
        action.destroy()
        module_probe.node.destroy_client(switch)
        with module_probe.spinning():
            warm_up(registry)
            yield ros
    finally:
        servers.stop()


@pytest.fixture
def runner(ros: Ros) -> Iterator[HarnessRunner]:
    with HarnessRunner(ros.registry, MonotonicClock(), max_concurrent=8) as runner:
        yield runner


def submit(runner: HarnessRunner, tool: str, **args: Any) -> str:
    return runner.submit(str(args.get("query", "")), "s1", 1, 0, EMPTY, tool=tool, args=args).id


def settle(runner: HarnessRunner, task_id: str) -> Task:
    return runner.future(task_id).result(timeout=WAIT_S)


def unique(query: str) -> str:
    return f"{query} {uuid.uuid4().hex[:8]}"


# --- the action tool ----------------------------------------------------------------------------


def test_success_forwards_feedback_as_progress(ros: Ros, runner: HarnessRunner) -> None:
    task = settle(runner, submit(runner, "go", query="ok 5"))
    assert task.state is S.COMPLETED, task.error
    assert task.states == [S.QUEUED, S.RUNNING, S.COMPLETED]
    assert task.result_text == "The server did 5 steps."
    assert task.payload == {
        "final_state": "succeed",
        "reply_text": "did 5 steps",
        "payload_json": "{}",
    }
    reports = ros.progress.of("ok 5")
    expected = [(pytest.approx(i / 5), f"step {i} of 5") for i in range(1, 6)]
    # Feedback and result travel on different channels: the last report may lose the race.
    assert len(reports) >= 4 and reports == expected[: len(reports)], reports


def test_success_without_formats_or_a_progress_listener(ros: Ros, runner: HarnessRunner) -> None:
    task = settle(runner, submit(runner, "plain", query="ok 3"))
    assert task.state is S.COMPLETED, task.error
    assert task.result_text == "Done."
    assert task.payload["reply_text"] == "did 3 steps"
    assert ros.progress.of("ok 3") == []


def test_arguments_and_constants_fill_the_goal(ros: Ros, runner: HarnessRunner) -> None:
    task = settle(runner, submit(runner, "go", query="echo", turn=7.0))
    assert task.state is S.COMPLETED, task.error
    assert json.loads(task.payload["reply_text"]) == {
        "query": "echo",
        "session_id": "s1",
        "turn_id": 7,
        "evidence_cutoff_seq": 42,
    }


def test_abort_fails_with_the_reason(ros: Ros, runner: HarnessRunner) -> None:
    task = settle(runner, submit(runner, "go", query="abort"))
    assert task.state is S.FAILED
    assert task.error == f"the {ros.ns}/act action was aborted: blocked by an obstacle"


def test_cancel_is_forwarded_and_the_task_ends_cancelled(ros: Ros, runner: HarnessRunner) -> None:
    query = unique("slow")
    task_id = submit(runner, "go", query=query)
    wait_until(lambda: bool(ros.progress.of(query)), WAIT_S, "feedback from the slow goal")
    started = time.monotonic()
    assert runner.cancel(task_id, "the user said stop")
    task = settle(runner, task_id)
    assert task.state is S.CANCELLED, task.error
    assert task.states[-3:] == [S.RUNNING, S.CANCELLING, S.CANCELLED]
    assert time.monotonic() - started < CANCEL_WAIT_S + 1.0
    ros.wait_for_log(f"cancel requested: {query}", f"outcome: {query}: cancel")


def test_cancel_after_the_server_committed_reports_it_done(ros: Ros, runner: HarnessRunner) -> None:
    query = unique("late")
    task_id = submit(runner, "go", query=query)
    wait_until(lambda: bool(ros.progress.of(query)), WAIT_S, "feedback from the late goal")
    assert runner.cancel(task_id)
    task = settle(runner, task_id)
    assert task.state is S.COMPLETED, task.error
    assert task.note == ALREADY_DONE_NOTE
    assert task.result_text == "The server already delivered."
    ros.wait_for_log(f"cancel requested: {query}", f"outcome: {query}: succeed")


def test_refused_cancel_waits_briefly_for_the_result(ros: Ros, runner: HarnessRunner) -> None:
    task_id = submit(runner, "go", query="stubborn 10")  # done ~0.2 s after the cancel
    wait_until(lambda: bool(ros.progress.of("stubborn 10")), WAIT_S, "feedback")
    assert runner.cancel(task_id)
    task = settle(runner, task_id)
    assert task.state is S.COMPLETED, task.error
    assert task.note == ALREADY_DONE_NOTE
    assert task.result_text == "The server did 10 steps."


def test_refused_cancel_without_a_result_fails_honestly(ros: Ros, runner: HarnessRunner) -> None:
    task_id = submit(runner, "go", query="stubborn 150")  # runs ~3 s
    wait_until(lambda: bool(ros.progress.of("stubborn 150")), WAIT_S, "feedback")
    assert runner.cancel(task_id)
    task = settle(runner, task_id)
    assert task.state is S.FAILED
    assert task.error == (
        f"the {ros.ns}/act action server refused to cancel the goal; it may still be running"
    )
    ros.wait_for_log("cancel refused: stubborn 150")


def test_timeout_cancels_the_goal(ros: Ros, runner: HarnessRunner) -> None:
    query = unique("slow")
    task = settle(runner, submit(runner, "quick", query=query))
    assert task.state is S.FAILED
    assert task.error.startswith("timeout: quick took longer than 0.3 s")
    ros.wait_for_log(f"cancel requested: {query}", f"outcome: {query}: cancel")


def test_missing_server_fails_within_the_bound(ros: Ros, runner: HarnessRunner) -> None:
    started = time.monotonic()
    task = settle(runner, submit(runner, "absent", query="ok 1"))
    assert task.state is S.FAILED
    assert task.error == f"action server {ros.ns}/nobody_home not available"
    assert 0.5 <= time.monotonic() - started < 2.0


@pytest.mark.parametrize(
    ("turn", "error"),
    [
        (-1, "-1 is out of range for uint32 (0 to 4294967295)"),
        (2.5, "expected an integer for uint32, got the number 2.5"),
    ],
)
def test_an_argument_that_does_not_fit_its_field_fails_clearly(
    ros: Ros, runner: HarnessRunner, turn: float, error: str
) -> None:
    task = settle(runner, submit(runner, "go", query="echo", turn=turn))
    assert task.state is S.FAILED
    assert task.error == f"the argument 'turn' does not fit goal field turn_id (uint32): {error}"


# --- the service tool ---------------------------------------------------------------------------


def test_service_call_succeeds(ros: Ros, runner: HarnessRunner) -> None:
    task = settle(runner, submit(runner, "switch", on=True))
    assert task.state is S.COMPLETED, task.error
    assert task.result_text == "It is switched on."
    assert task.payload == {"success": True, "message": "switched on"}
    ros.wait_for_log("service: switched on")


def test_service_reporting_failure_fails_the_task(ros: Ros, runner: HarnessRunner) -> None:
    task = settle(runner, submit(runner, "switch", on=False))
    assert task.state is S.FAILED
    assert task.error == f"the {ros.ns}/switch service reported a failure: switched off"


def test_missing_service_fails_within_the_bound(ros: Ros, runner: HarnessRunner) -> None:
    started = time.monotonic()
    task = settle(runner, submit(runner, "no_service", on=True))
    assert task.state is S.FAILED
    assert task.error == f"service {ros.ns}/nobody_home not available"
    assert time.monotonic() - started < 2.0


def test_a_side_effecting_service_is_not_cancellable_by_default(ros: Ros) -> None:
    assert ros.registry.get("switch").cancellable is False
    assert ros.registry.get("no_service").cancellable is True


# --- making tools: configuration errors ---------------------------------------------------------


def _make(ros: Ros, **changes: Any) -> Tool:
    options: dict[str, Any] = {
        "node": ros.probe.node,
        "name": "bad",
        "description": "A misconfigured tool.",
        "schema": GOAL_SCHEMA,
        "action_type": "venus_interfaces/action/Delegate",
        "action_name": "act",
        "goal_map": {"query": "query"},
        "timeout_s": 1.0,
    }
    options.update(changes)
    return make_ros_action_tool(**options)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"action_type": "nav9_msgs/action/Go"},
            "the ROS interface package 'nav9_msgs' (for nav9_msgs/action/Go) is not installed",
        ),
        (
            {"action_type": "venus_interfaces/action/Nope"},
            "the ROS package 'venus_interfaces' has no action called 'Nope'",
        ),
        (
            {"action_type": "Delegate"},
            "'Delegate' is not a ROS action type such as 'pkg/action/Name'",
        ),
        (
            {"action_type": "std_srvs/srv/SetBool"},
            "'std_srvs/srv/SetBool' is not a ROS action type",
        ),
        (
            {"goal_map": {"quary": "query"}},
            "tool bad: goal_map: there is no field 'quary': it has only query, session_id, "
            "turn_id, evidence_cutoff_seq",
        ),
        (
            {"goal_map": {"query.text": "query"}},
            "field 'query' is a string, so 'query.text' cannot go inside it",
        ),
        (
            {"goal_map": {"query": "question"}},
            "field 'query' takes the argument 'question', which the schema does not declare "
            "(it has query, turn)",
        ),
        (
            {"goal_map": {"turn_id": {"const": "seven"}}},
            "the constant for field 'turn_id': expected an integer for uint32, got text",
        ),
        ({"goal_map": {"turn_id": {"value": 7}}}, "expected an argument name or {'const'"),
        ({"result_text": "Got {reply}"}, "result_text: {reply}: there is no field 'reply'"),
        ({"progress_field": "message"}, "progress_field 'message' is a string"),
        ({"name": "Bad Name"}, "tool name 'Bad Name' must match"),
    ],
)
def test_configuration_errors_are_clear(ros: Ros, changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        _make(ros, **changes)
    assert message in str(caught.value)


def test_service_configuration_errors_are_clear(ros: Ros) -> None:
    with pytest.raises(ValueError, match="has no srv called 'Toggle'"):
        make_ros_service_tool(
            ros.probe.node, "t", "d", SWITCH_SCHEMA, "std_srvs/srv/Toggle", "s", {}, 1.0
        )
    with pytest.raises(ValueError, match="success_field 'message' is a string"):
        make_ros_service_tool(
            ros.probe.node,
            "t",
            "d",
            SWITCH_SCHEMA,
            "std_srvs/srv/SetBool",
            "s",
            {"data": "on"},
            1.0,
            success_field="message",
        )


def _entry(kind: str, **settings: Any) -> SimpleNamespace:
    """Stands in for a ``RosToolEntry`` of the tool config."""
    return SimpleNamespace(
        kind=kind,
        description="From config.",
        arg_schema=GOAL_SCHEMA if kind == "ros_action" else SWITCH_SCHEMA,
        timeout_s=5.0,
        side_effects=True,
        cancellable=True,
        idempotent=False,
        settings=settings,
    )


def test_tools_from_config_entries(ros: Ros) -> None:
    factory = ros_tool_factory(ros.probe.node)
    go = factory(
        "from_config",
        _entry(
            "ros_action",
            action_type="venus_interfaces/action/Delegate",
            action_name="act",
            goal_map={"query": "query"},
            result_text="{reply_text}",
        ),
    )
    switch = factory(
        "switch_from_config",
        _entry(
            "ros_service",
            service_type="std_srvs/srv/SetBool",
            service_name="switch",
            request_map={"data": "on"},
        ),
    )
    assert (go.side_effects, go.cancellable, switch.cancellable) == (True, True, True)
    with HarnessRunner(ToolRegistry([go, switch]), MonotonicClock()) as runner:
        task = settle(runner, submit(runner, "from_config", query="ok 2"))
        assert (task.state, task.result_text) == (S.COMPLETED, "did 2 steps")
        task = settle(runner, submit(runner, "switch_from_config", on=True))
        assert (task.state, task.payload["message"]) == (S.COMPLETED, "switched on")
    with pytest.raises(
        ValueError, match=re.escape("unknown key(s) goal_mapp for a ros_action tool")
    ):
        factory("bad", _entry("ros_action", action_type="x/action/Y", goal_mapp={}))
    with pytest.raises(ValueError, match="a ros_service tool needs service_name, request_map"):
        factory("bad", _entry("ros_service", service_type="std_srvs/srv/SetBool"))


# --- field mapping and conversion (no ROS graph) ------------------------------------------------


def test_nested_fields_are_filled_and_converted() -> None:
    schema = {"type": "object", "properties": {"x": {}, "y": {}, "cov": {}, "frame": {}}}
    mapping = {
        "header.frame_id": "frame",
        "pose.pose.position.x": "x",
        "pose.pose.position.y": "y",
        "pose.pose.orientation.w": 1,
        "pose.covariance": "cov",
    }
    fields = FieldMap(PoseWithCovarianceStamped, mapping, schema)
    msg = fields.build({"x": 1, "y": -2.5, "cov": [0.0] * 35 + [9], "frame": "map"})
    assert msg.header.frame_id == "map"
    assert (msg.pose.pose.position.x, msg.pose.pose.position.y) == (1.0, -2.5)
    assert msg.pose.pose.orientation.w == 1.0
    assert msg.pose.covariance[35] == 9.0
    partial = fields.build({"x": 3})  # absent optional arguments keep the defaults
    assert partial.header.frame_id == "" and partial.pose.pose.position.x == 3.0
    with pytest.raises(ToolError, match=r"field pose.covariance \(double\[36\]\): expected exac"):
        fields.build({"cov": [1.0, 2.0]})
    with pytest.raises(ToolError, match=r"'frame' does not fit .* expected text for string"):
        fields.build({"frame": 5})


@pytest.mark.parametrize(
    ("value", "ros_type", "expected"),
    [
        (3, "double", 3.0),
        (3.0, "int64", 3),
        (255, "uint8", 255),
        (7, "octet", b"\x07"),
        ("ab", "string<=2", "ab"),
        ([1, 2], "sequence<int32, 3>", [1, 2]),
        ({"x": 1, "y": 2}, "geometry_msgs/Point", None),
    ],
)
def test_convert_accepts(value: Any, ros_type: str, expected: Any) -> None:
    result = convert(value, ros_type)
    if expected is None:
        assert (result.x, result.y, result.z) == (1.0, 2.0, 0.0)
    else:
        assert result == expected and type(result) is type(expected)


@pytest.mark.parametrize(
    ("value", "ros_type", "error"),
    [
        (True, "int32", "expected an integer for int32, got a boolean"),
        (256, "uint8", "256 is out of range for uint8 (0 to 255)"),
        (1e39, "float", "out of range for float"),
        ("abc", "string<=2", "text longer than 2 characters"),
        ([1, 2, 3, 4], "sequence<int32, 3>", "expected at most 3 items"),
        ([1, "x"], "sequence<int32>", "item 1: expected an integer for int32, got text"),
        ({"w": 1}, "geometry_msgs/Point", "geometry_msgs/Point has no field 'w'"),
        (1, "boolean", "expected true or false, got the number 1"),
    ],
)
def test_convert_refuses(value: Any, ros_type: str, error: str) -> None:
    with pytest.raises(ValueError, match=re.escape(error)):
        convert(value, ros_type)


def test_message_to_dict_gives_plain_json_values() -> None:
    msg = JointState(name=["a"], position=[1.0, math.nan])
    msg.header.stamp.sec = 3
    assert message_to_dict(msg) == {
        "header": {"stamp": {"sec": 3, "nanosec": 0}, "frame_id": ""},
        "name": ["a"],
        "position": [1.0, None],
        "velocity": [],
        "effort": [],
    }


def test_render_fills_placeholders_with_format_specs() -> None:
    fields = {"distance": 2.345, "goal": {"name": "door"}}
    assert render("{goal.name} is {distance:.1f} m away", fields) == "door is 2.3 m away"
    assert render("{distance:bad spec} {missing}", fields) == "2.345 "


def test_import_interface_accepts_the_short_form() -> None:
    assert import_interface("venus_interfaces/Delegate", "action") is Delegate


def test_report_progress_is_a_no_op_without_a_listener() -> None:
    report_progress(0.5, "nobody listens")
    seen: list[tuple[float, str]] = []
    with progress_to(lambda fraction, message: seen.append((fraction, message))):
        report_progress(1.7, "clamped")
    report_progress(0.1, "after")
    assert seen == [(1.0, "clamped")]


def test_a_newly_seen_server_is_given_time_to_settle_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from venus_ros.ros import tools as ros_tools

    slept: list[float] = []
    here = threading.get_ident()
    real_sleep = asyncio.sleep

    async def no_sleep(seconds: float) -> None:
        # (the patch is process-wide: a loop an earlier test left on another thread, such as
        # a harness's tool loop draining its last tasks, sleeps for real and is not counted)
        if threading.get_ident() != here:
            await real_sleep(seconds)
            return
        slept.append(seconds)

    monkeypatch.setattr(ros_tools.asyncio, "sleep", no_sleep)
    seen = iter([False, True, True, True])
    readiness = ros_tools._Readiness(lambda: next(seen))
    asyncio.run(readiness.wait(5.0, "gone"))
    assert slept[0] == ros_tools._POLL_S  # polled while the server was not there
    assert slept[1] == pytest.approx(ros_tools.SETTLE_S, abs=0.05)  # then let the match settle
    slept.clear()
    readiness._since -= ros_tools.SETTLE_S  # the settle time has passed (sleep is a no-op here)
    asyncio.run(readiness.wait(5.0, "gone"))
    assert slept == []  # settled: later calls go straight out
    with pytest.raises(ToolError, match="gone"):
        asyncio.run(ros_tools._Readiness(lambda: False).wait(0.0, "gone"))
