"""The local tool planner: disfluent spoken requests to tool calls, without a cloud LLM.

The tools here are declared in the test (a small home robot); the phrasings are written for the
test, independent of the evaluation suite's synthesizer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from venus_ros.core.timeline import TimelineView
from venus_ros.harness.planner import (
    PLANNER_TOOL,
    LocalPlanner,
    PlannedCall,
    _destination_evidence,
    duration_s,
    make_planner_tool,
    segments,
    split_requests,
)
from venus_ros.harness.tools import (
    CALCULATOR_SCHEMA,
    CLOCK_SCHEMA,
    TIMER_SCHEMA,
    Tool,
    ToolError,
    ToolRegistry,
    ToolResult,
)
from venus_ros.text.numbers import numbers

EMPTY = TimelineView((), 0)
CALLS: list[tuple[str, dict[str, Any]]] = []


def recording(name: str, description: str, schema: Mapping[str, Any]) -> Tool:
    async def run(args: Mapping[str, Any], evidence: TimelineView) -> ToolResult:
        CALLS.append((name, dict(args)))
        return ToolResult(f"{name} done.", {})

    return Tool(name=name, description=description, schema=schema, run=run)


def strings(*names: str, **extra: Any) -> dict[str, Any]:
    props = {n: {"type": "string", "description": f"{n} name"} for n in names}
    props.update(extra)
    return {
        "type": "object",
        "properties": props,
        "required": [*names, *extra],
        "additionalProperties": False,
    }


TOOLS = [
    recording("timer", "Sets a timer or reminder that speaks when it is due.", TIMER_SCHEMA),
    recording("calculator", "Evaluates an arithmetic expression exactly.", CALCULATOR_SCHEMA),
    recording("clock", "Tells the current time and date in a time zone.", CLOCK_SCHEMA),
    recording("go_to", "Drives the robot to a place in the house.", strings("place")),
    recording("fetch", "Picks up an object and brings it to the user.", strings("item")),
    recording(
        "lights",
        "Switches the lamps of a room on or off.",
        strings("room", on={"type": "boolean", "description": "on or off"}),
    ),
    recording(
        "volume",
        "Sets the speaker volume level in percent.",
        {
            "type": "object",
            "properties": {"level": {"type": "integer", "minimum": 0, "maximum": 100}},
            "required": ["level"],
        },
    ),
]


@pytest.fixture(scope="module")
def planner() -> LocalPlanner:
    return LocalPlanner(TOOLS)


def test_requests_are_split_at_chaining_words() -> None:
    assert split_requests("turn on the lamp and then start a timer, then go home") == [
        "turn on the lamp",
        "start a timer",
        "go home",
    ]


def test_self_corrections_cut_the_request_into_segments() -> None:
    assert segments("um, go to the, the hall, no wait, the study") == [
        "go to the hall",
        "the study",
    ]


@pytest.mark.parametrize(
    ("words", "value"),
    [
        ("twenty five", 25.0),
        ("a half", 0.5),
        ("one and a half", 1.5),
        ("three hundred and twelve", 312.0),
        ("45", 45.0),
        ("2.5", 2.5),
    ],
)
def test_spoken_numbers(words: str, value: float) -> None:
    assert numbers(words) == [value]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("a timer for ninety seconds", 90),
        ("remind me in an hour and a half", 5400),
        ("one hour and 15 minutes", 4500),
        ("for four minutes, no, six", 360),
        ("for four, sorry, six minutes", 360),
        ("three minutes, actually make it ten minutes", 600),
    ],
)
def test_durations_keep_the_corrected_value(text: str, seconds: int) -> None:
    assert duration_s(segments(text)) == seconds


@pytest.mark.parametrize(
    ("request_text", "call"),
    [
        ("uh, could you start a timer for twelve minutes", ("timer", {"seconds": 720})),
        ("set an alarm for eight, no wait, nine minutes", ("timer", {"seconds": 540})),
        ("what's seventeen plus twenty six", ("calculator", {"expression": "17 + 26"})),
        ("um how much is 81 divided by 9", ("calculator", {"expression": "81 / 9"})),
        ("what time is it in Berlin", ("clock", {"timezone": "Europe/Berlin"})),
        ("please head to the laundry room", ("go_to", {"place": "laundry room"})),
        ("go to the porch, sorry, the attic", ("go_to", {"place": "attic"})),
        ("could you, could you fetch my glasses", ("fetch", {"item": "glasses"})),
        ("bring me the, uh, the green bottle", ("fetch", {"item": "green bottle"})),
        ("switch off the lamps in the study", ("lights", {"room": "study", "on": False})),
        ("turn the hall lights off, no, on", ("lights", {"room": "hall", "on": True})),
        ("set the volume to forty percent", ("volume", {"level": 40})),
        # operator words said between two numbers
        ("what's 64 over eight", ("calculator", {"expression": "64 / 8"})),
        ("nineteen take away four", ("calculator", {"expression": "19 - 4"})),
        ("quickly, 5 add 9 please", ("calculator", {"expression": "5 + 9"})),
        ("six multiply by seven", ("calculator", {"expression": "6 * 7"})),
        ("what's the sum of 12 and thirty", ("calculator", {"expression": "12 + 30"})),
        ("add, um, 8 and 9", ("calculator", {"expression": "8 + 9"})),
        # a destination after a motion preposition, whatever the verb
        ("wander over to the garage", ("go_to", {"place": "garage"})),
        ("scoot into the cellar, sorry, the loft", ("go_to", {"place": "loft"})),
        # "scratch that" corrects, and "let me think" is a hesitation
        ("a timer for two hours, scratch that, three hours", ("timer", {"seconds": 10800})),
        ("let me think, what's 3 plus 4", ("calculator", {"expression": "3 + 4"})),
    ],
)
def test_disfluent_requests_become_the_right_call(
    planner: LocalPlanner, request_text: str, call: tuple[str, dict[str, Any]]
) -> None:
    assert planner.plan(request_text) == [PlannedCall(*call)]


@pytest.mark.parametrize("chat", ["hello there", "thanks a lot", "how are you", "tell me a joke"])
def test_chit_chat_calls_nothing(planner: LocalPlanner, chat: str) -> None:
    assert planner.plan(chat) == []


def test_the_planner_tool_runs_every_call_in_order() -> None:
    registry = ToolRegistry(TOOLS)
    tool = make_planner_tool(registry, LocalPlanner(TOOLS))
    assert tool.name == PLANNER_TOOL
    CALLS.clear()
    request = "turn on the garage lights and then set a timer for 2 minutes"
    result = asyncio.run(tool.run({"request": request}, EMPTY))
    assert CALLS == [("lights", {"room": "garage", "on": True}), ("timer", {"seconds": 120})]
    assert result.text == "lights done. timer done."
    assert [c["tool"] for c in result.payload["calls"]] == ["lights", "timer"]


def test_the_planner_tool_fails_honestly_when_nothing_fits() -> None:
    tool = make_planner_tool(ToolRegistry(TOOLS), LocalPlanner(TOOLS))
    with pytest.raises(ToolError, match="no tool can answer this yet"):
        asyncio.run(tool.run({"request": "sing me a song"}, EMPTY))


@pytest.mark.parametrize(
    ("request_text", "expression"),
    [
        ("what's 47-7", "47 - 7"),
        ("calculate 50 minus, so, 12 for me", "50 - 12"),
        ("compute (3+4)*2", "(3 + 4) * 2"),
        ("what is minus three times two", "-3 * 2"),
    ],
)
def test_expressions_come_out_in_one_spelling(
    planner: LocalPlanner, request_text: str, expression: str
) -> None:
    assert planner.plan(request_text) == [PlannedCall("calculator", {"expression": expression})]


def test_a_chain_of_a_sum_and_a_destination(planner: LocalPlanner) -> None:
    assert planner.plan("eleven add 2, and then make your way down to the shed") == [
        PlannedCall("calculator", {"expression": "11 + 2"}),
        PlannedCall("go_to", {"place": "shed"}),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "what is 3 over the weekend",
        "I'll add 2 things",
        "I have 2 cats and 3 dogs",
        "read the news",
    ],
)
def test_operator_words_away_from_numbers_are_no_arithmetic(
    planner: LocalPlanner, text: str
) -> None:
    assert all(call.tool != "calculator" for call in planner.plan(text))


def test_a_number_after_to_is_no_destination() -> None:
    schema = TOOLS[3].schema
    assert _destination_evidence(schema, ["set it to 40 percent"]) == 0
    assert _destination_evidence(schema, ["count to ten minutes"]) == 0
    assert _destination_evidence(schema, ["roll towards the den"]) == 1
    assert _destination_evidence(TOOLS[4].schema, ["roll towards the den"]) == 0  # no place
