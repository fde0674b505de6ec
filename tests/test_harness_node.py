"""harness_node as a real process, driven by a Delegate action client on a probe node here."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import rclpy
from action_msgs.msg import GoalStatus
from rclpy.action import ActionClient
from rclpy.action.client import ClientGoalHandle
from rclpy.context import Context
from rclpy.parameter import Parameter
from rclpy.task import Future
from rosproc import Probe, start_node

from venus_interfaces.action import Delegate
from venus_interfaces.msg import TaskStatus, TimelineEvent
from venus_ros.harness.tasks import Task, TaskState
from venus_ros.nodes.harness import HarnessNode
from venus_ros.nodes.qos import TOPICS, reliable

WAIT_S = 10.0


@dataclass
class Run:
    """One goal as the client saw it."""

    handle: ClientGoalHandle
    result: Delegate.Result | None = None
    status: int = GoalStatus.STATUS_UNKNOWN
    seconds: float = 0.0

    @property
    def task_id(self) -> str:
        return bytes(self.handle.goal_id.uuid).hex()

    @property
    def payload(self) -> dict[str, Any]:
        assert self.result is not None
        return json.loads(self.result.payload_json)


class Client:
    """A Delegate action client and the harness's topics, on a probe node (spun while waiting)."""

    def __init__(self, probe: Probe) -> None:
        self.probe = probe
        node = probe.node
        self.action = ActionClient(node, Delegate, TOPICS["delegate"])
        self.statuses: list[TaskStatus] = []
        self.events: list[TimelineEvent] = []
        self.status_sub = node.create_subscription(
            TaskStatus, TOPICS["task_status"], self.statuses.append, reliable(100)
        )
        self.timeline_sub = node.create_subscription(
            TimelineEvent, TOPICS["timeline"], self.events.append, reliable(1000)
        )
        self.timeline_pub = node.create_publisher(TimelineEvent, TOPICS["timeline"], reliable(1000))
        # The action's feedback topic itself: the client drops a goal's feedback callback once
        # its result is in, and feedback and result travel on different channels, so feedback
        # read through the callback may lose the race with the result.
        self.feedback: dict[bytes, list[Delegate.Feedback]] = defaultdict(list)
        self.feedback_sub = node.create_subscription(
            Delegate.Impl.FeedbackMessage,
            f"{TOPICS['delegate']}/_action/feedback",
            lambda msg: self.feedback[bytes(msg.goal_id.uuid)].append(msg.feedback),
            reliable(100),
        )

    def wait_until(self, condition: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
        self.probe.wait_for(condition, timeout, what)

    def wait(self, future: Future[Any], what: str, timeout: float = WAIT_S) -> Any:
        self.probe.wait_for(future.done, timeout, what)
        return future.result()

    def send(
        self, query: str, cutoff: int = 0, session_id: str = "", turn_id: int = 1
    ) -> Run | None:
        """Send a goal; None if it was rejected, else the run (without waiting for its result)."""
        goal = Delegate.Goal(
            query=query, session_id=session_id, turn_id=turn_id, evidence_cutoff_seq=cutoff
        )
        started = time.perf_counter()
        handle = self.wait(self.action.send_goal_async(goal), f"goal {query!r}")
        if not handle.accepted:
            return None
        run = Run(handle)
        run.seconds = -started
        return run

    def finish(self, run: Run) -> Run:
        response = self.wait(run.handle.get_result_async(), "a result")
        run.result, run.status = response.result, response.status
        run.seconds += time.perf_counter()
        return run

    def ask(self, query: str, **options: Any) -> Run:
        run = self.send(query, **options)
        assert run is not None, f"goal {query!r} was rejected"
        return self.finish(run)

    def task_states(self, task_id: str) -> list[str]:
        payloads = [json.loads(e.payload_json) for e in self.events if e.kind == "task_state"]
        return [p["state"] for p in payloads if p.get("task_id") == task_id]

    def close(self) -> None:
        self.action.destroy()


@pytest.fixture(scope="module")
def harness(module_probe: Probe, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    process = module_probe.start("harness", tmp_path_factory.mktemp("harness"))
    client = Client(module_probe)
    try:
        client.wait_until(client.action.server_is_ready, "a Delegate server")
        client.wait_until(
            lambda: (
                client.status_sub.get_publisher_count() >= 1
                and client.timeline_sub.get_publisher_count() >= 2
                and client.timeline_pub.get_subscription_count() >= 2
                and client.feedback_sub.get_publisher_count() >= 1
            ),
            "the harness's topics to match",
        )
        warm = client.ask("what is 1 plus 1")  # discovery of the feedback topic, too
        assert warm.result is not None and warm.result.final_state == "COMPLETED"
        yield client
    finally:
        client.close()
        code = process.stop(WAIT_S)
        output = process.log()
        assert code == 0, f"harness_node exited {code} on SIGINT:\n{output}"
        assert "Traceback" not in output, output


def test_arithmetic_goal_completes_with_feedback_status_and_timeline(harness: Client) -> None:
    run = harness.ask("what is 12 times 7", turn_id=3)
    assert run.result is not None
    assert run.result.final_state == "COMPLETED" and run.status == GoalStatus.STATUS_SUCCEEDED
    assert "84" in run.result.reply_text
    assert run.payload["tool"] == "calculator" and run.payload["result"]["value"] == 84
    feedback = harness.feedback[bytes(run.handle.goal_id.uuid)]
    harness.wait_until(lambda: len(feedback) >= 2, "feedback")
    lived = ["QUEUED", "RUNNING", "COMPLETED"]
    assert [f.state for f in feedback] == lived[: len(feedback)]
    # The reply went out in the result: DELIVERING until the frontend reports its playback.
    lifecycle = [*lived, "DELIVERING"]
    harness.wait_until(
        lambda: harness.task_states(run.task_id) == lifecycle, "task_state timeline events"
    )
    harness.wait_until(
        lambda: any(s.task_id == run.task_id and s.state == "DELIVERING" for s in harness.statuses),
        "a DELIVERING TaskStatus",
    )
    mine = [s for s in harness.statuses if s.task_id == run.task_id]
    assert [s.state for s in mine] == lifecycle
    assert {s.tool for s in mine} == {"calculator"}
    events = [e for e in harness.events if e.kind == "task_state"]
    assert [e.seq for e in events] == sorted(e.seq for e in events)
    payload = json.loads(events[-1].payload_json)
    assert payload["source"] == "harness" and payload["turn"] == 3


def test_time_question_completes_with_text(harness: Client) -> None:
    run = harness.ask("what time is it?")
    assert run.result is not None and run.result.final_state == "COMPLETED"
    assert run.result.reply_text.startswith("It is ")
    assert run.payload["tool"] == "clock"


def test_unanswerable_query_fails_with_a_clear_reply(harness: Client) -> None:
    run = harness.ask("book me a table for two tonight")
    assert run.result is not None
    assert (run.result.final_state, run.status) == ("FAILED", GoalStatus.STATUS_ABORTED)
    assert run.result.reply_text == "Sorry, I could not do that: no tool can answer this yet."
    assert run.payload["error"] == "no tool can answer this yet"


@pytest.mark.parametrize(
    "query,session",
    [("", ""), ("   ", ""), ("x" * 4001, ""), ("what time is it", "another-session")],
)
def test_bad_goals_are_rejected_at_goal_time(harness: Client, query: str, session: str) -> None:
    assert harness.send(query, session_id=session) is None


def test_cancel_of_a_finished_goal_is_answered_and_harmless(harness: Client) -> None:
    run = harness.ask("compute (3+4)*2")
    assert run.result is not None and run.result.final_state == "COMPLETED"
    response = harness.wait(run.handle.cancel_goal_async(), "a cancel response")
    assert response.return_code == response.ERROR_GOAL_TERMINATED
    assert list(response.goals_canceling) == []
    again = harness.ask("what is 2 plus 2")
    assert again.result is not None and "4" in again.result.reply_text


def test_cancel_of_an_in_flight_goal_ends_it_cancelled(harness: Client) -> None:
    # A cutoff that has not arrived keeps the goal waiting for its evidence: in flight.
    run = harness.send("what evidence do you have", cutoff=10**9)
    assert run is not None
    response = harness.wait(run.handle.cancel_goal_async(), "a cancel response")
    assert response.return_code == response.ERROR_NONE and len(response.goals_canceling) == 1
    harness.finish(run)
    assert run.result is not None
    assert (run.result.final_state, run.status) == ("CANCELLED", GoalStatus.STATUS_CANCELED)
    assert run.result.reply_text == ""
    harness.wait_until(
        lambda: harness.task_states(run.task_id) == ["QUEUED", "CANCELLING", "CANCELLED"],
        "the cancelled task's timeline events",
    )


def test_a_delivery_report_moves_the_sent_reply_to_delivered(harness: Client) -> None:
    run = harness.ask("what is 6 times 7")
    assert run.result is not None and run.result.final_state == "COMPLETED"
    harness.wait_until(
        lambda: harness.task_states(run.task_id)[-1:] == ["DELIVERING"],
        "the reply to be sent (DELIVERING)",
    )
    delivery = harness.probe.node.create_publisher(TaskStatus, TOPICS["delivery"], reliable(100))
    harness.wait_until(lambda: delivery.get_subscription_count() >= 1, "the delivery topic")
    delivery.publish(
        TaskStatus(task_id=run.task_id, state="DELIVERED", message="delivered: played in full")
    )
    harness.wait_until(
        lambda: harness.task_states(run.task_id)[-1:] == ["DELIVERED"],
        "the harness to record DELIVERED",
    )
    harness.probe.node.destroy_publisher(delivery)


def test_never_mind_takes_back_a_timer_whose_reply_was_not_heard(harness: Client) -> None:
    # Setting a timer is a short task (its ring is a scheduled job): the goal completes at once.
    timer = harness.ask("set a timer for 30 seconds")
    assert timer.result is not None and timer.result.final_state == "COMPLETED"
    assert timer.result.reply_text == "Okay, a 30 second timer. It rings in 30 seconds."
    listed = harness.ask("which timers are running")
    assert listed.result is not None and "the 30 second timer with" in listed.result.reply_text
    # No frontend reported the reply played: "never mind" withdraws it and cancels the job.
    cancel = harness.ask("um, never mind")
    assert cancel.result is not None and cancel.result.final_state == "COMPLETED"
    assert cancel.result.reply_text.startswith("Okay, I stopped")
    assert cancel.payload["tool"] == "cancel"
    assert cancel.payload["result"]["targets"][timer.task_id] == "CANCELLED"
    after = harness.ask("what timers do I have")
    assert after.result is not None and after.result.reply_text == "You have no timers set."


def test_tools_see_the_timeline_up_to_the_cutoff(harness: Client) -> None:
    records = [("user_audio", {"unit": u}) for u in range(3)]
    records += [
        ("assistant_text", {"unit": 2, "text": "let me check"}),
        ("user_audio", {"unit": 3}),
    ]
    for seq, (kind, payload) in enumerate(records, start=1):
        harness.timeline_pub.publish(
            TimelineEvent(seq=seq, t=seq * 1.0, kind=kind, payload_json=json.dumps(payload))
        )
    # The goal may overtake the records on the other channel: the harness waits for its cutoff.
    run = harness.ask("what evidence do you have", cutoff=4)
    assert run.result is not None and run.result.final_state == "COMPLETED"
    assert run.payload["result"] == {
        "cutoff_seq": 4,
        "records": 4,
        "newest_seq": 4,
        "user_units": 3,
        "user_texts": 0,
        "assistant_words": 3,
    }
    # A cutoff that never arrives costs evidence_wait_s (0.5 s), then the task goes ahead.
    late = harness.ask("what evidence do you have", cutoff=1000)
    assert late.result is not None and late.result.final_state == "COMPLETED"
    assert late.payload["result"]["records"] == 5 and 0.4 < late.seconds < WAIT_S


def test_many_goals_run_at_once_and_all_round_trip(harness: Client) -> None:
    runs = [harness.send(f"what is {i} plus 1") for i in range(20)]
    finished = [harness.finish(run) for run in runs if run is not None]
    assert len(finished) == 20
    for i, run in enumerate(finished):
        assert run.result is not None and run.result.final_state == "COMPLETED"
        assert run.result.reply_text == f"{i} plus 1 is {i + 1}."


def test_an_unknown_tool_in_config_stops_the_node_with_exit_2(tmp_path: Path) -> None:
    process = start_node("harness", tmp_path, "tools:=[calculator, shell]")
    code = process.wait(WAIT_S * 2)
    output = process.log()
    assert code == 2, output
    assert "configuration error" in output and "no entry under tools is called 'shell'" in output
    assert "Traceback" not in output


def test_a_transition_as_the_signal_shuts_rclpy_down_is_no_error(tmp_path: Path) -> None:
    """Ctrl-C shuts the context down on rclpy's signal thread while the runner's threads still
    report transitions (running tasks end as the harness closes): a status publish that meets
    the invalid context ends that report quietly, with nothing raised (the runner would log it
    as a failed listener, with a traceback)."""
    context = Context()
    rclpy.init(context=context)
    node = HarnessNode(
        context=context,
        parameter_overrides=[Parameter("journal_path", value=str(tmp_path / "tasks.db"))],
    )
    publish = node._status_pub.publish
    timeline: list[Any] = []
    node._timeline_pub.publish = timeline.append  # type: ignore[method-assign]

    def signal_lands_first(msg: Any) -> None:
        rclpy.try_shutdown(context=context)
        publish(msg)

    try:
        node.start_up()
        node._status_pub.publish = signal_lands_first  # type: ignore[method-assign]
        task = Task(id="t1", query="what is 1 plus 1", session_id="s", turn_id=0, cutoff_seq=0)
        node._on_transition(task, None, TaskState.QUEUED)  # no RCLError
        assert timeline == [] and not context.ok()
        node._on_progress(task, 0.5, "half")  # the context is down: nothing is sent
    finally:
        node.close()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
