"""Tests for venus_ros.harness.toolconfig: the shipped config/tools.yaml, validation, building."""

from __future__ import annotations

import asyncio
import copy
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fake_openai import FakeOpenAI, error, text, tool_calls

from venus_ros.core.timeline import TimelineView
from venus_ros.harness.llm import LLM_TOOL_SCHEMA, LlmClient, LlmSettings
from venus_ros.harness.toolconfig import (
    BuiltinEntry,
    LlmEntry,
    RosToolEntry,
    ToolConfig,
    ToolConfigError,
    build_registry,
    load_registry,
    load_tool_config,
    make_router,
    parse_tool_config,
)
from venus_ros.harness.tools import Tool, ToolError, ToolResult, UnknownToolError, builtin_tools
from venus_ros.paths import share_path

SHIPPED = Path(__file__).resolve().parents[1] / "config" / "tools.yaml"
EMPTY = TimelineView((), 0)
KEY_ENV = "VENUS_TEST_LLM_KEY"
ENV = {KEY_ENV: "sk-test-toolconfig-123456"}


@pytest.fixture
def shipped() -> dict[str, Any]:
    """The shipped file's data (a fresh copy to alter)."""
    return yaml.safe_load(SHIPPED.read_text())


def write(tmp_path: Path, data: Any, name: str = "tools.yaml") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return path


def problem(tmp_path: Path, data: Any) -> str:
    path = write(tmp_path, data)
    with pytest.raises(ToolConfigError) as caught:
        load_tool_config(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: "), message
    return message


# --- the shipped file -----------------------------------------------------------------------------

#: The tools config/tools.yaml enables.
SHIPPED_ENABLED = ("clock", "calculator", "echo_evidence", "timer", "list_timers", "cancel_timer")


def test_the_shipped_config_loads() -> None:
    config = load_tool_config(SHIPPED)
    assert config.source == str(SHIPPED)
    assert config.enabled == list(SHIPPED_ENABLED)
    assert config.polish_llm is None
    assert isinstance(config.entry("cloud_llm"), LlmEntry)
    assert isinstance(config.entry("navigate_to"), RosToolEntry)
    assert set(config.enabled_entries()) == set(config.enabled)
    assert share_path("config/tools.yaml").resolve() == SHIPPED


def test_the_examples_are_shipped_disabled() -> None:
    config = load_tool_config(SHIPPED)
    assert "cloud_llm" not in config.enabled and "navigate_to" not in config.enabled
    llm = config.entry("cloud_llm")
    assert isinstance(llm, LlmEntry)
    assert llm.base_url == "https://api.openai.com/v1"
    assert llm.api_key_env == "OPENAI_API_KEY"
    assert llm.llm_settings().url == "https://api.openai.com/v1/chat/completions"
    nav = config.entry("navigate_to")
    assert isinstance(nav, RosToolEntry) and nav.kind == "ros_action"
    assert nav.side_effects and nav.cancellable
    assert nav.settings["action_type"] == "nav2_msgs/action/NavigateToPose"
    assert nav.settings["goal_map"]["pose.pose.position.x"] == "x"
    assert set(nav.settings) == {
        "action_type",
        "action_name",
        "goal_map",
        "feedback_text",
        "result_text",
    }


def test_the_builtin_entries_match_the_builtin_tools() -> None:
    config = load_tool_config(SHIPPED)
    code = {tool.name: tool for tool in builtin_tools()}
    entries = {n: e for n, e in config.tools.items() if isinstance(e, BuiltinEntry)}
    assert set(entries) == set(code)
    for name, entry in entries.items():
        tool = code[entry.builtin or name]
        assert entry.arg_schema == json.loads(json.dumps(dict(tool.schema))), name
        assert entry.description == tool.description, name
        assert entry.timeout_s == tool.timeout_s, name
        declared = (entry.side_effects, entry.cancellable, entry.idempotent)
        assert declared == (tool.side_effects, tool.cancellable, tool.idempotent), name


def test_the_shipped_registry_has_the_enabled_builtins() -> None:
    registry = load_registry(SHIPPED)
    # No llm tool is enabled: the local planner runs requests that need several calls.
    assert registry.names == (*SHIPPED_ENABLED, "local_planner")
    calculator = registry.get("calculator")
    assert calculator.idempotent and not registry.get("timer").idempotent
    result = asyncio.run(calculator.run({"expression": "6*7"}, EMPTY))
    assert result.text == "6 times 7 is 42."
    with pytest.raises(UnknownToolError, match="no tool called"):
        registry.get("cloud_llm")


# --- validation ----------------------------------------------------------------------------------


def test_an_unknown_key_names_the_file_and_the_key_path(
    tmp_path: Path, shipped: dict[str, Any]
) -> None:
    shipped["tools"]["clock"]["timeout"] = 3
    message = problem(tmp_path, shipped)
    assert "tools.clock.timeout: unknown key (did you mean 'timeout_s'?)" in message


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda d: d.update(colour="red"), "colour: unknown key"),
        (lambda d: d.update(enabled="clock"), "enabled: Input should be a valid list"),
        (lambda d: d.pop("tools"), "tools: required key is missing"),
        (lambda d: d.update(version=2), "version: Input should be 1"),
        (lambda d: d["tools"]["timer"].pop("cancellable"), "tools.timer.cancellable: required"),
        (lambda d: d["tools"]["timer"].update(timeout_s=-1), "tools.timer.timeout_s: Input"),
        (lambda d: d["tools"]["timer"].update(timeout_s=".inf"), "tools.timer.timeout_s"),
        (lambda d: d["tools"]["clock"].update(kind="magic"), "tools.clock: kind must be one of"),
        (lambda d: d["tools"]["clock"].pop("kind"), "tools.clock: 'kind' is missing"),
        (lambda d: d["tools"]["clock"].update(side_effects="maybe"), "tools.clock.side_effects"),
        (
            lambda d: d["tools"]["clock"].update(schema={"type": "array"}),
            "tools.clock.schema: the argument schema must have type 'object'",
        ),
        (
            lambda d: d["tools"]["clock"].update(schema={"type": "object", "properties": 3}),
            "tools.clock.schema: not a valid JSON schema",
        ),
        (lambda d: d["tools"]["cloud_llm"].update(api_key=""), "tools.cloud_llm.api_key: unknown"),
        (
            lambda d: d["tools"]["cloud_llm"].update(base_url="ftp://x/v1"),
            "tools.cloud_llm.base_url: base_url must be an http(s) URL",
        ),
        (
            lambda d: d["tools"]["cloud_llm"].update(base_url="https://u:secret@x/v1"),
            "must not carry credentials",
        ),
        (lambda d: d["tools"]["cloud_llm"].update(max_steps=0), "tools.cloud_llm.max_steps"),
        (
            lambda d: d["tools"]["cloud_llm"].update(api_key_env="sk-abc def"),
            "tools.cloud_llm.api_key_env",
        ),
        (
            lambda d: d["tools"]["cloud_llm"].update(tools=["clock", "nowhere"]),
            "tools.cloud_llm.tools[1]: no tool is called 'nowhere'",
        ),
        (
            lambda d: d["tools"]["cloud_llm"].update(tools=["cloud_llm"]),
            "tools.cloud_llm.tools[0]: 'cloud_llm' is an llm tool",
        ),
        (
            lambda d: d["tools"]["cloud_llm"].update(schema={"type": "object"}),
            "tools.cloud_llm.schema: an llm tool's schema is fixed",
        ),
        (lambda d: d["tools"]["navigate_to"].pop("schema"), "tools.navigate_to.schema: required"),
        (
            lambda d: d["tools"]["navigate_to"].update(cancelable=True),
            "tools.navigate_to: unknown key 'cancelable' (did you mean 'cancellable'?)",
        ),
        (
            lambda d: d.update(enabled=["clock", "nope", "clock"]),
            "enabled[1]: no entry under tools is called 'nope'",
        ),
        (lambda d: d.update(enabled=["clock", "clock"]), "enabled[1]: 'clock' is listed twice"),
        (lambda d: d.update(polish_llm="clock"), "polish_llm: 'clock' is not an llm entry"),
        (
            lambda d: d["tools"]["navigate_to"].update(idempotent=True),
            "tools.navigate_to: idempotent: true needs side_effects: false",
        ),
        (
            lambda d: d["tools"].update(Bad_Name=copy.deepcopy(d["tools"]["clock"])),
            "tools.Bad_Name: a tool name must match",
        ),
        (
            lambda d: d["tools"].update(clock2=copy.deepcopy(d["tools"]["clock"])),
            "tools.clock2.kind: there is no built-in tool 'clock2'",
        ),
        (
            lambda d: d["tools"]["calculator"]["schema"]["properties"]["expression"].update(
                maxLength=10_000
            ),
            "tools.calculator.schema: differs from the built-in calculator tool's schema",
        ),
    ],
)
def test_invalid_configs_are_clear_errors(
    tmp_path: Path, shipped: dict[str, Any], change: Any, expected: str
) -> None:
    change(shipped)
    assert expected in problem(tmp_path, shipped)


def test_several_problems_are_listed_together(tmp_path: Path, shipped: dict[str, Any]) -> None:
    shipped["tools"]["clock"]["timeout"] = 1
    shipped["tools"]["timer"]["side_effects"] = "often"
    message = problem(tmp_path, shipped)
    assert "2 problems:" in message
    assert "tools.clock.timeout" in message and "tools.timer.side_effects" in message


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("enabled: [clock\n", "not valid YAML"),
        ("- a list\n", "must be a mapping, got list"),
        ("", "must be a mapping, got NoneType"),
        ("enabled: []\ntools: {}\ntools: {}\n", "key 'tools' appears twice"),
        ("!!python/object:os.system {}\n", "not valid YAML"),
    ],
)
def test_unreadable_files_are_clear_errors(tmp_path: Path, content: str, expected: str) -> None:
    assert expected in problem(tmp_path, content)


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ToolConfigError, match="cannot read the tool configuration"):
        load_tool_config(tmp_path / "absent.yaml")


def test_a_duplicate_tool_entry_is_refused(tmp_path: Path) -> None:
    lines = SHIPPED.read_text().replace("  calculator:\n", "  clock:\n", 1)
    assert "key 'clock' appears twice" in problem(tmp_path, lines)


# --- building -----------------------------------------------------------------------------------


def config_with(shipped: dict[str, Any], enabled: list[str], **top: Any) -> ToolConfig:
    return parse_tool_config({**shipped, "enabled": enabled, **top}, "test.yaml")


def test_only_enabled_tools_are_built(shipped: dict[str, Any]) -> None:
    built: list[str] = []

    def ros_factory(name: str, entry: RosToolEntry) -> Tool:
        built.append(name)
        raise AssertionError("a disabled ROS tool must not be built")

    registry = build_registry(config_with(shipped, ["calculator"]), ros_factory=ros_factory)
    assert registry.names == ("calculator",) and built == []
    with pytest.raises(UnknownToolError, match="no tool called"):
        registry.get("clock")


def test_config_overrides_a_builtins_description_timeout_and_flags(
    shipped: dict[str, Any],
) -> None:
    shipped["tools"]["slow_sum"] = {
        **copy.deepcopy(shipped["tools"]["calculator"]),
        "builtin": "calculator",
        "description": "Adds things up.",
        "timeout_s": 9.0,
        "side_effects": False,
        "cancellable": False,
    }
    del shipped["tools"]["slow_sum"]["schema"]  # optional for a built-in
    tool = build_registry(config_with(shipped, ["slow_sum"])).get("slow_sum")
    assert (tool.name, tool.description, tool.timeout_s) == ("slow_sum", "Adds things up.", 9.0)
    assert not tool.side_effects and not tool.cancellable and tool.idempotent
    assert asyncio.run(tool.run({"expression": "1+2"}, EMPTY)).text == "1 plus 2 is 3."


def test_an_enabled_ros_tool_needs_the_ros_adapter(shipped: dict[str, Any]) -> None:
    config = config_with(shipped, ["clock", "navigate_to"])
    with pytest.raises(ToolConfigError, match=r"test\.yaml: tools\.navigate_to: a ros_action tool"):
        build_registry(config)


def test_the_ros_adapter_gets_the_entry_and_its_errors_name_the_tool(
    shipped: dict[str, Any],
) -> None:
    seen: dict[str, Any] = {}

    async def run(args: Any, evidence: TimelineView) -> ToolResult:
        return ToolResult("moved")

    def ros_factory(name: str, entry: RosToolEntry) -> Tool:
        seen.update(name=name, kind=entry.kind, settings=entry.settings)
        return Tool(
            "whatever",
            entry.description,
            entry.arg_schema,
            run,
            timeout_s=entry.timeout_s,
            side_effects=entry.side_effects,
        )

    registry = build_registry(config_with(shipped, ["navigate_to"]), ros_factory=ros_factory)
    tool = registry.get("navigate_to")
    assert tool.name == "navigate_to" and tool.timeout_s == 300.0 and not tool.idempotent
    assert seen["kind"] == "ros_action" and seen["settings"]["action_name"] == "navigate_to_pose"

    def broken(name: str, entry: RosToolEntry) -> Tool:
        raise ValueError("tool navigate_to: goal_map: no field 'pose.nope'")

    with pytest.raises(ToolConfigError, match=r"tools\.navigate_to: tool navigate_to: goal_map"):
        build_registry(config_with(shipped, ["navigate_to"]), ros_factory=broken)


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def llm_config(shipped: dict[str, Any], url: str, enabled: list[str], **top: Any) -> ToolConfig:
    shipped["tools"]["cloud_llm"].update(base_url=url, api_key_env=KEY_ENV, max_retries=0)
    return config_with(shipped, enabled, **top)


def fast_client(settings: LlmSettings) -> LlmClient:
    async def no_sleep(seconds: float) -> None:
        pass

    return LlmClient(settings, env=ENV, sleep=no_sleep, rng=random.Random(0))


def test_an_enabled_llm_tool_plans_with_the_tools_it_may_call(
    shipped: dict[str, Any], server: FakeOpenAI
) -> None:
    config = llm_config(shipped, server.url, ["clock", "calculator", "timer", "cloud_llm"])
    registry = build_registry(config, llm_client=fast_client)
    llm = registry.get("cloud_llm")
    assert dict(llm.schema) == dict(LLM_TOOL_SCHEMA) and llm.timeout_s == 60.0
    server.add(tool_calls(("calculator", {"expression": "2**10"})), text("It is 1024."))
    result = asyncio.run(llm.run({"request": "two to the tenth?"}, EMPTY))
    assert result.text == "It is 1024."
    offered = [t["function"]["name"] for t in server.requests[0].json()["tools"]]
    assert offered == ["clock", "calculator"]  # its `tools` key; timer is enabled but not listed
    assert server.requests[0].headers["authorization"] == f"Bearer {ENV[KEY_ENV]}"


def test_an_llm_tool_without_a_tools_key_may_call_every_enabled_non_llm_tool(
    shipped: dict[str, Any], server: FakeOpenAI
) -> None:
    del shipped["tools"]["cloud_llm"]["tools"]
    config = llm_config(shipped, server.url, ["cloud_llm", "timer", "echo_evidence"])
    registry = build_registry(config, llm_client=fast_client)
    assert registry.names == ("cloud_llm", "timer", "echo_evidence")
    server.add(text("Nothing to do."))
    asyncio.run(registry.get("cloud_llm").run({"request": "hi"}, EMPTY))
    offered = [t["function"]["name"] for t in server.requests[0].json()["tools"]]
    assert offered == ["timer", "echo_evidence"]


def test_an_llm_tool_reads_its_key_from_the_environment(
    shipped: dict[str, Any], server: FakeOpenAI
) -> None:
    config = llm_config(shipped, server.url, ["cloud_llm"])
    registry = build_registry(config, env={})
    with pytest.raises(Exception, match=f"\\${KEY_ENV} is not set"):
        asyncio.run(registry.get("cloud_llm").run({"request": "hi"}, EMPTY))
    assert server.requests == []


def test_polish_llm_rewrites_every_non_llm_result(
    shipped: dict[str, Any], server: FakeOpenAI
) -> None:
    config = llm_config(shipped, server.url, ["calculator"], polish_llm="cloud_llm")
    registry = build_registry(config, llm_client=fast_client)
    calculator = registry.get("calculator")
    assert calculator.timeout_s > 2.0  # the polishing time is added
    server.add(text("That makes forty-two."), error(500, "down"))
    first = asyncio.run(calculator.run({"expression": "6*7"}, EMPTY))
    assert first.text == "That makes forty-two." and first.payload["value"] == 42
    second = asyncio.run(calculator.run({"expression": "6*7"}, EMPTY))
    assert second.text == "6 times 7 is 42."  # the template when the LLM fails
    assert json.loads(server.requests[0].body)["messages"][1]["content"] == "6 times 7 is 42."


def test_with_enabled_revalidates(shipped: dict[str, Any]) -> None:
    config = load_tool_config(SHIPPED)
    other = config.with_enabled(["timer", "cloud_llm"])
    assert other.enabled == ["timer", "cloud_llm"] and other.source == config.source
    assert other.tools == config.tools and other.llm_names() == ["cloud_llm"]
    with pytest.raises(ToolConfigError, match="enabled\\[0\\]: no entry under tools"):
        config.with_enabled(["nothing"])


def test_superseding_tools_are_the_enabled_ones_declared_so() -> None:
    config = load_tool_config(SHIPPED)
    assert config.entry("navigate_to").supersedes is True
    assert config.entry("timer").supersedes is False
    assert config.superseding_names() == []  # navigate_to ships disabled
    assert config.with_enabled(["timer", "navigate_to"]).superseding_names() == ["navigate_to"]


def test_the_router_plans_with_the_cloud_llm_when_one_is_enabled(shipped: dict[str, Any]) -> None:
    plain = config_with(shipped, ["calculator"])
    router = make_router(plain, build_registry(plain))
    assert router("what is 6 times 7") == ("calculator", {"expression": "6 * 7"})
    assert router("what time is it") is None  # clock is not enabled
    assert router("tell me a joke") is None
    with_llm = config_with(shipped, ["calculator", "timer", "cloud_llm"])
    router = make_router(with_llm, build_registry(with_llm, env=ENV))
    for query in ("what is 6 times 7", "set a timer for twenty five minutes", "tell me a joke"):
        assert router(query) == ("cloud_llm", {"request": query})  # the planner plans


def test_the_keyword_router_answers_only_when_the_cloud_planner_fails(
    shipped: dict[str, Any], server: FakeOpenAI
) -> None:
    config = llm_config(shipped, server.url, ["clock", "calculator", "timer", "cloud_llm"])
    llm = build_registry(config, llm_client=fast_client).get("cloud_llm")
    server.add(error(503, "down"))
    result = asyncio.run(llm.run({"request": "what time is it in Tokyo"}, EMPTY))
    assert result.payload["fallback"] == "keyword router"
    assert "HTTP 503" in result.payload["planner_error"]
    expected = {"tool": "clock", "ok": True, "args": {"timezone": "Asia/Tokyo"}}
    assert result.payload["calls"] == [expected]
    # The fallback only picks tools the planner may call (cloud_llm's `tools`: no timer).
    server.add(error(503, "down"))
    with pytest.raises(ToolError, match="HTTP 503"):
        asyncio.run(llm.run({"request": "set a timer for twenty five minutes"}, EMPTY))
    # A request the keyword router cannot place fails with the planner's error.
    server.add(error(503, "down"))
    with pytest.raises(ToolError, match="HTTP 503"):
        asyncio.run(llm.run({"request": "tell me a joke"}, EMPTY))
    # After the planner called a tool, a later failure is not retried by the keyword router.
    server.add(tool_calls(("calculator", {"expression": "6*7"})), error(400, "bad"))
    with pytest.raises(ToolError, match="HTTP 400"):
        asyncio.run(llm.run({"request": "what is 6 times 7"}, EMPTY))


def test_vocabulary_names_the_enabled_tools_first(shipped: dict[str, Any]) -> None:
    shipped["tools"]["fan"] = {
        "kind": "ros_service",
        "description": "Sets the fan speed. Needs the fan node.",
        "schema": {
            "type": "object",
            "properties": {"fan_speed": {"type": "string", "enum": ["low", "high"]}},
            "required": ["fan_speed"],
            "additionalProperties": False,
        },
        "timeout_s": 2.0,
        "side_effects": True,
        "cancellable": False,
        "service_type": "std_srvs/srv/Trigger",
        "service_name": "fan",
    }
    shipped["enabled"] = ["fan", "clock"]
    words = parse_tool_config(shipped).vocabulary()
    assert words[:4] == ["fan", "clock", "low", "high"]
    assert "fan speed" in words and "Sets the fan speed" in words
    assert "Needs the fan node" not in " ".join(words)  # the first sentence only
    assert "timer" not in words  # not enabled
