"""The tool declarations (``config/tools.yaml``): loading, validation, and building the registry.

The file::

    version: 1
    enabled: [clock, calculator]      # only these run, in this order
    polish_llm: null                  # an llm entry that polishes every result, or null
    tools:
      clock:                          # the tool's name: [a-z][a-z0-9_]*
        kind: builtin                 # builtin | llm | ros_action | ros_service
        description: ...
        schema: {type: object, ...}   # JSON schema (draft 2020-12) of the arguments
        timeout_s: 2.0
        side_effects: false
        cancellable: true
        idempotent: false             # optional: a crash-interrupted task may run again
        supersedes: false             # optional: a newer request to this tool replaces the
                                      # session's older ones (navigation, not timers)
        # kind-specific keys (see the entry classes below)

Every key is checked: an unknown or misspelt key, a wrong type, an invalid schema or an
``enabled`` name without an entry is a :class:`ToolConfigError` that names the file and the
key path (``tools.clock.timeout``). ``ros_action`` and ``ros_service`` entries have their common
keys checked here; their other keys are passed through as :attr:`RosToolEntry.settings` to the
ROS adapter, which checks them (a key that looks like a misspelt common key is still an error).
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import logging
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import jsonschema
import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from venus_ros.harness.llm import (
    LLM_TOOL_SCHEMA,
    LlmClient,
    LlmSettings,
    LlmToolSettings,
    make_llm_tool,
    with_llm_polish,
)
from venus_ros.harness.planner import Embed, planner_router, with_planner_tool
from venus_ros.harness.schedule import Schedule
from venus_ros.harness.tools import Tool, ToolRegistry, builtin_tools, route

log = logging.getLogger("venus_ros.harness.toolconfig")

KINDS = ("builtin", "llm", "ros_action", "ros_service")
#: Keys every entry has (a pass-through key of a ROS entry too close to one is refused).
COMMON_KEYS = (
    "kind",
    "description",
    "schema",
    "timeout_s",
    "side_effects",
    "cancellable",
    "idempotent",
    "supersedes",
)
_NAME = re.compile(r"[a-z][a-z0-9_]*")


class ToolConfigError(ValueError):
    """The tool configuration is invalid; the message names the file and each key path."""


def _check_schema(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    if schema is None:
        return None
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(f"not a valid JSON schema: {exc.message}") from None
    if schema.get("type") != "object":
        raise ValueError("the argument schema must have type 'object'")
    return schema


class _Entry(BaseModel):
    """Keys common to every kind of tool."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str = Field(min_length=1, max_length=1000)
    arg_schema: dict[str, Any] | None = Field(default=None, alias="schema")
    timeout_s: float = Field(gt=0)
    side_effects: bool
    cancellable: bool
    idempotent: bool = False
    supersedes: bool = False

    @field_validator("timeout_s")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("must be a finite number of seconds")
        return value

    @field_validator("arg_schema")
    @classmethod
    def _schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        return _check_schema(value)

    @model_validator(mode="after")
    def _idempotent_without_side_effects(self) -> _Entry:
        if self.idempotent and self.side_effects:
            raise ValueError(
                "idempotent: true needs side_effects: false (a tool with side effects is never "
                "run again after a crash)"
            )
        return self


class BuiltinEntry(_Entry):
    """A built-in tool (:func:`~venus_ros.harness.tools.builtin_tools`).

    ``builtin`` names the implementation (default: the entry's name). ``schema`` may be left
    out; when given it must equal the built-in's, so the file shows what the model sees.
    """

    kind: Literal["builtin"]
    builtin: str | None = None


class LlmEntry(_Entry):
    """A cloud (or local) LLM planner: an OpenAI-compatible ``/v1/chat/completions`` endpoint.

    The API key is read from the environment variable ``api_key_env``, never from this file.
    ``tools`` limits what the model may call (default: every other enabled, non-llm tool).
    """

    kind: Literal["llm"]
    base_url: str
    model: str = Field(min_length=1)
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    max_steps: int = Field(default=4, ge=1, le=32)
    temperature: float = Field(default=0.2, ge=0.0, le=2.0)
    max_tokens: int | None = Field(default=None, ge=1)
    request_timeout_s: float = Field(default=30.0, gt=0)
    connect_timeout_s: float = Field(default=5.0, gt=0)
    max_retries: int = Field(default=3, ge=0, le=10)
    tools: list[str] | None = None

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        LlmSettings(base_url=value, model="x")  # raises ValueError with the reason
        return value

    def llm_settings(self) -> LlmSettings:
        """The client settings of this entry."""
        return LlmSettings(
            base_url=self.base_url,
            model=self.model,
            api_key_env=self.api_key_env,
            max_steps=self.max_steps,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            request_timeout_s=self.request_timeout_s,
            connect_timeout_s=self.connect_timeout_s,
            max_retries=self.max_retries,
        )

    def tool_settings(self, name: str) -> LlmToolSettings:
        """The settings of the ``llm`` tool called ``name``."""
        return LlmToolSettings(
            llm=self.llm_settings(),
            name=name,
            description=self.description,
            timeout_s=self.timeout_s,
            side_effects=self.side_effects,
            cancellable=self.cancellable,
            idempotent=self.idempotent,
            tools=None if self.tools is None else tuple(self.tools),
        )


class RosToolEntry(_Entry):
    """A ROS 2 action or service called as a tool; built by the ROS adapter.

    ``schema`` is required. Keys other than the common ones (action or service type and name,
    the mapping of arguments to goal or request fields, ...) are kept in :attr:`settings`.
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    kind: Literal["ros_action", "ros_service"]
    arg_schema: dict[str, Any] = Field(alias="schema")

    @model_validator(mode="after")
    def _no_misspelt_common_keys(self) -> RosToolEntry:
        for key in self.model_extra or {}:
            close = difflib.get_close_matches(key, COMMON_KEYS, n=1, cutoff=0.8)
            if close:
                raise ValueError(f"unknown key {key!r} (did you mean {close[0]!r}?)")
        return self

    @property
    def settings(self) -> dict[str, Any]:
        """The kind-specific keys, for the ROS adapter."""
        return dict(self.model_extra or {})


ToolEntry = Annotated[BuiltinEntry | LlmEntry | RosToolEntry, Field(discriminator="kind")]


class ToolConfig(BaseModel):
    """The whole tool configuration (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: Literal[1] = 1
    enabled: list[str]
    polish_llm: str | None = None
    tools: dict[str, ToolEntry]

    _source: str = PrivateAttr(default="<tool config>")

    @property
    def source(self) -> str:
        """The file it was loaded from (for messages)."""
        return self._source

    def entry(self, name: str) -> BuiltinEntry | LlmEntry | RosToolEntry:
        """The entry called ``name``.

        Raises:
            KeyError: when there is none.
        """
        return self.tools[name]

    def enabled_entries(self) -> dict[str, BuiltinEntry | LlmEntry | RosToolEntry]:
        """The entries named in ``enabled``, in that order."""
        return {name: self.tools[name] for name in self.enabled}

    def with_enabled(self, names: Iterable[str]) -> ToolConfig:
        """The same configuration with another ``enabled`` list (e.g. a node parameter's).

        Raises:
            ToolConfigError: as :func:`parse_tool_config` (``enabled[i]`` names no entry ...).
        """
        data = self.model_dump(by_alias=True)
        data["enabled"] = list(names)
        return parse_tool_config(data, self.source)

    def superseding_names(self) -> list[str]:
        """The enabled tools declared ``supersedes: true``."""
        return [n for n, e in self.enabled_entries().items() if e.supersedes]

    def llm_names(self) -> list[str]:
        """The enabled ``llm`` tools, in ``enabled`` order."""
        return [n for n, e in self.enabled_entries().items() if isinstance(e, LlmEntry)]

    def vocabulary(self) -> list[str]:
        """The words a user is likely to say to the enabled tools, most telling first: each
        non-``llm`` tool's name ("set light"), then every ``enum`` value of their arguments,
        then argument names and the first sentence of each tool's description.

        For a speech recogniser's vocabulary prompt
        (:func:`venus_ros.audio.asr.vocabulary_prompt`); repeats are kept (the prompt drops
        them).
        """
        entries = [e for e in self.enabled_entries().items() if not isinstance(e[1], LlmEntry)]
        names = [name.replace("_", " ") for name, _ in entries]
        values: list[str] = []
        words: list[str] = []
        for _, entry in entries:
            properties = (entry.arg_schema or {}).get("properties", {}) or {}
            for prop, spec in properties.items():
                if not isinstance(spec, Mapping):
                    continue
                values.extend(str(v) for v in spec.get("enum", []) if isinstance(v, (str, int)))
                words.append(prop.replace("_", " "))
            sentence = re.split(r"(?<=[.!?])\s", entry.description.strip(), maxsplit=1)[0]
            words.append(sentence.rstrip("."))
        return [*names, *values, *words]


# --- loading ------------------------------------------------------------------------------------


class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe YAML loader that refuses a mapping key given twice."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode):  # a list or mapping as a key
            raise yaml.constructor.ConstructorError(
                None,
                None,
                "a mapping key must be a plain value, not a list or mapping",
                key_node.start_mark,
            )
        key = loader.construct_object(key_node)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} appears twice", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node)


_UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_mapping,  # type: ignore[arg-type]
)


def load_tool_config(path: str | os.PathLike[str]) -> ToolConfig:
    """Read and validate a tool configuration file.

    Raises:
        ToolConfigError: naming the file and, for each problem, the key path.
    """
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolConfigError(f"{source}: cannot read the tool configuration ({exc})") from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ToolConfigError(f"{source}: not valid YAML: {exc}") from None
    except RecursionError:
        raise ToolConfigError(f"{source}: nested too deeply to be a tool configuration") from None
    return parse_tool_config(data, source)


#: Deepest nesting a tool configuration may have (schemas included); deeper is an error.
MAX_DEPTH = 64


def _depth(data: Any) -> int:
    """How deeply ``data`` nests mappings and lists (iteratively: no recursion limit)."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children = list(value.values())
        elif isinstance(value, list):
            children = value
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > MAX_DEPTH:
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest


def parse_tool_config(data: Any, source: str = "<tool config>") -> ToolConfig:
    """Validate already-parsed configuration data (see :func:`load_tool_config`).

    Raises:
        ToolConfigError: naming ``source`` and, for each problem, the key path.
    """
    if not isinstance(data, dict):
        raise ToolConfigError(
            f"{source}: the tool configuration must be a mapping, got {type(data).__name__}"
        )
    if _depth(data) > MAX_DEPTH:
        raise ToolConfigError(f"{source}: nested more than {MAX_DEPTH} levels deep")
    try:
        config = ToolConfig.model_validate(data)
    except ValidationError as exc:
        raise ToolConfigError(_describe(source, exc)) from None
    except RecursionError:
        raise ToolConfigError(f"{source}: nested too deeply to be a tool configuration") from None
    problems = _cross_check(config)
    if problems:
        raise ToolConfigError(_listing(source, problems))
    config._source = source
    return config


def _describe(source: str, exc: ValidationError) -> str:
    problems = []
    for error in exc.errors(include_url=False):
        loc = list(error["loc"])
        # a discriminated union puts the kind in the path: tools.<name>.<kind>.<key>
        if len(loc) >= 3 and loc[0] == "tools" and loc[2] in KINDS:
            del loc[2]
        kind = error["type"]
        if kind == "extra_forbidden":
            message = "unknown key"
            close = difflib.get_close_matches(str(loc[-1]), _known_keys(loc), n=1, cutoff=0.7)
            if close:
                message += f" (did you mean {close[0]!r}?)"
        elif kind == "missing":
            message = "required key is missing"
        elif kind == "union_tag_invalid":
            message = f"kind must be one of {', '.join(KINDS)}"
        elif kind == "union_tag_not_found":
            message = f"'kind' is missing (one of {', '.join(KINDS)})"
        else:
            message = error["msg"].removeprefix("Value error, ")
        problems.append((_path(loc), message))
    return _listing(source, problems)


def _known_keys(loc: list[Any]) -> list[str]:
    if len(loc) == 1:
        return list(ToolConfig.model_fields)
    keys = set(COMMON_KEYS)
    for model in (BuiltinEntry, LlmEntry):
        keys.update(f.alias or n for n, f in model.model_fields.items())
    return sorted(keys)


def _path(loc: list[Any]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text or "(top level)"


def _listing(source: str, problems: list[tuple[str, str]]) -> str:
    if len(problems) == 1:
        where, message = problems[0]
        return f"{source}: {where}: {message}"
    lines = [f"{source}: {len(problems)} problems:"]
    lines.extend(f"  {where}: {message}" for where, message in problems)
    return "\n".join(lines)


def _cross_check(config: ToolConfig) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    builtins = {tool.name: tool for tool in builtin_tools()}
    for name, entry in config.tools.items():
        if not _NAME.fullmatch(name):
            problems.append((f"tools.{name}", "a tool name must match [a-z][a-z0-9_]*"))
        if isinstance(entry, BuiltinEntry):
            base = builtins.get(entry.builtin or name)
            if base is None:
                key = "builtin" if entry.builtin else "kind"
                problems.append(
                    (
                        f"tools.{name}.{key}",
                        f"there is no built-in tool {entry.builtin or name!r} "
                        f"(built-ins: {', '.join(sorted(builtins))})",
                    )
                )
            elif entry.arg_schema is not None and not _same(entry.arg_schema, base.schema):
                problems.append(
                    (
                        f"tools.{name}.schema",
                        f"differs from the built-in {base.name} tool's schema (leave it out, "
                        f"or copy the built-in one): {_canonical(base.schema)}",
                    )
                )
        if (
            isinstance(entry, LlmEntry)
            and entry.arg_schema is not None
            and not _same(entry.arg_schema, LLM_TOOL_SCHEMA)
        ):
            problems.append(
                (
                    f"tools.{name}.schema",
                    f"an llm tool's schema is fixed (leave it out, or use "
                    f"{_canonical(LLM_TOOL_SCHEMA)})",
                )
            )
        if isinstance(entry, LlmEntry):
            for index, other in enumerate(entry.tools or []):
                where = f"tools.{name}.tools[{index}]"
                if other not in config.tools:
                    problems.append((where, f"no tool is called {other!r}"))
                elif other == name or isinstance(config.tools[other], LlmEntry):
                    problems.append((where, f"{other!r} is an llm tool: it cannot be called"))
    seen: set[str] = set()
    for index, name in enumerate(config.enabled):
        if name in seen:
            problems.append((f"enabled[{index}]", f"{name!r} is listed twice"))
        elif name not in config.tools:
            problems.append((f"enabled[{index}]", f"no entry under tools is called {name!r}"))
        seen.add(name)
    if config.polish_llm is not None:
        entry = config.tools.get(config.polish_llm)
        if not isinstance(entry, LlmEntry):
            problems.append(("polish_llm", f"{config.polish_llm!r} is not an llm entry"))
    return problems


# --- building -----------------------------------------------------------------------------------

#: ``factory(name, entry) -> Tool`` for ``ros_action`` / ``ros_service`` entries.
RosToolFactory = Callable[[str, RosToolEntry], Tool]
#: ``factory(settings) -> LlmClient`` (tests inject a client with a recording sleep).
LlmClientFactory = Callable[[LlmSettings], LlmClient]


def _canonical(schema: Mapping[str, Any]) -> str:
    try:
        return json.dumps(dict(schema), sort_keys=True)
    except (TypeError, ValueError, RecursionError):  # keys that are not text, NaN, depth
        return f"(not a JSON schema) {schema!r}"


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return _canonical(a) == _canonical(b)


def build_builtin(
    name: str,
    entry: BuiltinEntry,
    source: str = "<tool config>",
    schedule: Schedule | None = None,
) -> Tool:
    """The built-in tool ``entry`` declares, with the entry's description, timeout and flags.

    ``schedule`` is where the timer tools keep their jobs (None: a fresh one in memory).

    Raises:
        ToolConfigError: when there is no such built-in, or the entry's schema differs from it.
    """
    available = {tool.name: tool for tool in builtin_tools(schedule)}
    base = available.get(entry.builtin or name)
    if base is None:
        raise ToolConfigError(f"{source}: tools.{name}: no built-in tool {entry.builtin or name!r}")
    if entry.arg_schema is not None and not _same(entry.arg_schema, base.schema):
        raise ToolConfigError(
            f"{source}: tools.{name}.schema: differs from the built-in {base.name} tool's "
            f"schema (leave it out, or copy the built-in one): {_canonical(base.schema)}"
        )
    return dataclasses.replace(
        base,
        name=name,
        description=entry.description,
        timeout_s=entry.timeout_s,
        side_effects=entry.side_effects,
        cancellable=entry.cancellable,
        idempotent=entry.idempotent,
    )


def build_registry(
    config: ToolConfig,
    *,
    ros_factory: RosToolFactory | None = None,
    env: Mapping[str, str] | None = None,
    llm_client: LlmClientFactory | None = None,
    embed: Embed | None = None,
    schedule: Schedule | None = None,
) -> ToolRegistry:
    """The registry of the enabled tools (only those are built).

    Built-ins and ROS tools are built first; each ``llm`` tool then gets the enabled non-llm
    tools (or those its ``tools`` key names and that are enabled) to call. When ``polish_llm``
    is set, every non-llm tool's result is polished by that LLM inside its task.

    Args:
        config: the validated configuration.
        ros_factory: builds ``ros_action`` / ``ros_service`` tools (the ROS adapter); needed
            only when one is enabled.
        env: where API keys are read (default ``os.environ``).
        llm_client: makes the client of an llm entry (default :class:`LlmClient` over ``env``).
        embed: sentence embeddings for the local planner's tool choice (None: lexical).
        schedule: where the timer tools keep their jobs (the harness passes the journal's;
            None: one schedule in memory, shared by this registry's timer tools).

    Without an enabled ``llm`` tool, the registry also holds ``local_planner``
    (:mod:`venus_ros.harness.planner`), which runs requests that need several calls.

    Raises:
        ToolConfigError: when an enabled tool cannot be built (no ROS adapter, a schema that
            differs from its built-in, an adapter that fails).
    """
    source = config.source

    def client_for(settings: LlmSettings) -> LlmClient:
        return llm_client(settings) if llm_client else LlmClient(settings, env=env)

    entries = config.enabled_entries()
    built: dict[str, Tool] = {}
    schedule = schedule if schedule is not None else Schedule()
    for name, entry in entries.items():
        if isinstance(entry, BuiltinEntry):
            built[name] = build_builtin(name, entry, source, schedule)
        elif isinstance(entry, RosToolEntry):
            if ros_factory is None:
                raise ToolConfigError(
                    f"{source}: tools.{name}: a {entry.kind} tool is enabled but no ROS "
                    "adapter was given to build it"
                )
            try:
                tool = ros_factory(name, entry)
            except ToolConfigError:
                raise
            except (ValueError, TypeError, KeyError) as exc:
                raise ToolConfigError(f"{source}: tools.{name}: {exc}") from exc
            if tool.name != name or tool.idempotent != entry.idempotent:
                tool = dataclasses.replace(tool, name=name, idempotent=entry.idempotent)
            built[name] = tool
    plain = dict(built)
    if config.polish_llm is not None:
        polisher = client_for(config.entry(config.polish_llm).llm_settings())  # type: ignore[union-attr]
        built = {name: with_llm_polish(tool, polisher) for name, tool in built.items()}
    for name, entry in entries.items():
        if not isinstance(entry, LlmEntry):
            continue
        wanted = list(plain) if entry.tools is None else entry.tools
        callable_names = [n for n in wanted if n in plain]
        skipped = [n for n in wanted if n not in plain]
        if skipped:
            log.info("%s: %s may not call %s: not enabled", source, name, ", ".join(skipped))
        settings = dataclasses.replace(entry.tool_settings(name), tools=tuple(callable_names))
        # make_llm_tool runs the keyword router's pick only among the tools it offers
        built[name] = make_llm_tool(
            settings, list(plain.values()), client=client_for(settings.llm), fallback=route
        )
    tools = [built[name] for name in config.enabled]
    if not config.llm_names():  # the local planner runs requests that need several calls
        tools = with_planner_tool(tools, embed)
    return ToolRegistry(tools)


def load_registry(
    path: str | os.PathLike[str],
    *,
    ros_factory: RosToolFactory | None = None,
    env: Mapping[str, str] | None = None,
) -> ToolRegistry:
    """:func:`load_tool_config` then :func:`build_registry`."""
    return build_registry(load_tool_config(path), ros_factory=ros_factory, env=env)


#: ``router(query) -> (tool_name, args) | None``, as the runner takes it.
Router = Callable[[str], "tuple[str, dict[str, Any]] | None"]


def make_router(
    config: ToolConfig, registry: ToolRegistry, base: Router = route, embed: Embed | None = None
) -> Router:
    """A router over the enabled tools.

    With an enabled ``llm`` tool (the cloud planner): every request goes to the first ``llm``
    tool with ``{"request": query}``; the keyword router is its last resort inside the tool,
    when the planner fails (:func:`~venus_ros.harness.llm.make_llm_tool`). Without one: the
    local planner (:class:`~venus_ros.harness.planner.LocalPlanner`) — one planned call
    goes straight to its tool, several go to ``local_planner`` — and ``base`` when it plans
    nothing. None when nothing fits (the task then fails with "no tool can answer this yet").
    """
    llm = next((n for n in config.llm_names() if n in registry), None)

    def keyword(query: str) -> tuple[str, dict[str, Any]] | None:
        picked = base(query)
        return picked if picked is not None and picked[0] in registry else None

    if llm is not None:

        def cloud(query: str) -> tuple[str, dict[str, Any]] | None:
            return llm, {"request": query}

        return cloud

    return planner_router(registry, embed, fallback=keyword)
