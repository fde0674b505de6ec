"""Taking work back: "stop" / "never mind" requests and superseding requests, in the runner.

Real HarnessRunner, real asyncio tools held open by gates; the test is the user.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest
from test_harness_core import (
    WAIT_S,
    Gate,
    Recorder,
    clock,
    make_runner,
    recorder,
    settle,
    submit,
    tool,
)

from venus_ros.core.timeline import TimelineView
from venus_ros.harness.polish import reply_text
from venus_ros.harness.runner import CANCEL_TOOL, HarnessRunner, is_cancel_request
from venus_ros.harness.tasks import TaskState
from venus_ros.harness.tools import ToolResult

__all__ = ["clock", "make_runner", "recorder"]  # fixtures, re-exported for pytest

S = TaskState


def gated(gate: Gate, text: str = "done") -> Callable[..., Any]:
    async def run(args: Mapping[str, Any], evidence: TimelineView) -> ToolResult:
        await gate.wait()
        return ToolResult(text, {})

    return run


@pytest.mark.parametrize(
    "query",
    [
        "stop",
        "Stop!",
        "never mind",
        "Nevermind.",
        "um, never mind, forget it",
        "cancel that",
        "oh wait, stop what you're doing",
        "forget about it",
        "scratch that",
        "no, don't bother",
        "actually, cancel the navigation please",
    ],
)
def test_cancel_requests_are_recognised(query: str) -> None:
    assert is_cancel_request(query)


@pytest.mark.parametrize(
    "query",
    [
        "stop at the kitchen door and wait for me",
        "cancel my three pm meeting with Anna",
        "what is twelve times seven",
        "set a timer for ten minutes",
        "don't stop the music",
        "",
    ],
)
def test_requests_with_other_content_are_not_cancel_requests(query: str) -> None:
    assert not is_cancel_request(query)


def test_never_mind_cancels_the_running_work_and_says_so(
    make_runner: Callable[..., HarnessRunner], recorder: Recorder
) -> None:
    gate = Gate()
    runner = make_runner(tool("fetch", gated(gate)))
    work = submit(runner, "look it up", tool="fetch", args={})
    recorder.wait_for(work.id, S.RUNNING)
    cancel = settle(runner, submit(runner, "never mind"))
    assert cancel.tool == CANCEL_TOOL and cancel.state is S.COMPLETED
    assert settle(runner, work).state is S.CANCELLED
    assert reply_text(cancel) == "Okay, I stopped that."
    assert cancel.payload == {"targets": {work.id: "CANCELLED"}}


def test_a_side_effecting_tool_that_already_acted_is_reported_done_not_cancelled(
    make_runner: Callable[..., HarnessRunner], recorder: Recorder
) -> None:
    gate = Gate()
    send = tool("send", gated(gate, "Sent."), side_effects=True, cancellable=False)
    runner = make_runner(send)
    work = submit(runner, "send the message to Anna", tool="send", args={})
    recorder.wait_for(work.id, S.RUNNING)
    cancel_task = submit(runner, "stop")
    recorder.wait_for(work.id, S.CANCELLING)
    gate.open()  # the message goes out anyway: it cannot be interrupted
    cancel = settle(runner, cancel_task)
    assert settle(runner, work).state is S.COMPLETED
    assert reply_text(cancel) == "That had already been done: send the message to Anna."


def test_a_finished_reply_nobody_heard_is_withdrawn_by_a_cancel(
    make_runner: Callable[..., HarnessRunner],
) -> None:
    runner = make_runner()
    answered = settle(runner, submit(runner, "what is 2 plus 2"))
    assert answered.state is S.COMPLETED
    runner.advance(answered.id, S.DELIVERING, "sent to the frontend").result(WAIT_S)
    cancel = settle(runner, submit(runner, "forget it"))
    assert runner.get(answered.id).state is S.CANCELLED
    assert runner.get(answered.id).reason == "reply withdrawn: the user asked to stop"
    assert reply_text(cancel) == "Okay, I stopped that."


def test_a_cancel_with_nothing_running_says_so(make_runner: Callable[..., HarnessRunner]) -> None:
    runner = make_runner()
    delivered = settle(runner, submit(runner, "what is 1 plus 1"))
    runner.advance(delivered.id, S.DELIVERING).result(WAIT_S)
    runner.advance(delivered.id, S.DELIVERED).result(WAIT_S)
    cancel = settle(runner, submit(runner, "cancel"))
    assert reply_text(cancel) == "There was nothing running to stop."
    assert runner.get(delivered.id).state is S.DELIVERED


def test_a_cancel_only_touches_its_own_session(
    make_runner: Callable[..., HarnessRunner], recorder: Recorder
) -> None:
    gate = Gate()
    runner = make_runner(tool("fetch", gated(gate)))
    other = runner.submit(
        "look it up", "other-session", 1, 0, TimelineView((), 0), tool="fetch", args={}
    )
    recorder.wait_for(other.id, S.RUNNING)
    settle(runner, submit(runner, "stop"))
    assert runner.get(other.id).state is S.RUNNING
    gate.open()
    assert settle(runner, other).state is S.COMPLETED


def test_a_newer_request_to_a_superseding_tool_replaces_the_older_one(
    make_runner: Callable[..., HarnessRunner], recorder: Recorder
) -> None:
    gates = {"kitchen": Gate(), "door": Gate()}  # by destination: a cancel may land before
    # the superseded call's body has even started (each tool runs on its own thread)

    async def go(args: Mapping[str, Any], evidence: TimelineView) -> ToolResult:
        await gates[args["to"]].wait()
        return ToolResult(f"arrived at {args['to']}", {})

    runner = make_runner(tool("navigate", go), superseding=["navigate"])
    first = submit(runner, "go to the kitchen", tool="navigate", args={"to": "kitchen"})
    recorder.wait_for(first.id, S.RUNNING)
    second = submit(runner, "no, go to the door", tool="navigate", args={"to": "door"})
    assert settle(runner, first).state is S.CANCELLED
    assert "superseded by a newer request" in runner.get(first.id).history[-2].reason
    gates["door"].open()
    assert settle(runner, second).result_text == "arrived at door"


def test_tools_that_do_not_supersede_keep_every_request(
    make_runner: Callable[..., HarnessRunner],
) -> None:
    runner = make_runner()
    first = settle(runner, submit(runner, "what is 2 plus 2"))
    second = settle(runner, submit(runner, "what is 3 plus 3"))
    assert (first.state, second.state) == (S.COMPLETED, S.COMPLETED)
