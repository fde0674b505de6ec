"""Tools the Harness may run, the built-in ones, the registry of enabled tools, and a router.

Every tool declares a JSON schema for its arguments, a timeout, whether it has side effects and
whether it may be cancelled (DESIGN.md §5). Arguments are validated against the schema before
the tool is called; a tool sees the evidence snapshot only through a read-only
:class:`~venus_ros.core.timeline.TimelineView`.

A tool raises :class:`ToolError` for an expected failure whose message may be spoken to the user
("unknown time zone 'Mars/Base'"); any other exception is a bug in the tool and is reported
generically.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone, tzinfo
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import jsonschema
from jsonschema.exceptions import best_match

from venus_ros.core.timeline import Kind, TimelineView
from venus_ros.text.numbers import (
    duration_s,
    seconds_to_time_said,
    spoken_duration as spoken_duration,  # re-exported
    to_digits,
)
from venus_ros.text.places import zone_in
from venus_ros.text.repair import REMINDER_WORDS

if TYPE_CHECKING:
    from venus_ros.harness.schedule import Schedule


class ToolError(Exception):
    """An expected tool failure; the message is fit to be told to the user."""


class ArgumentError(ValueError):
    """Arguments that do not match a tool's schema. Raised before the tool is called."""

    def __init__(self, tool: str, message: str) -> None:
        super().__init__(f"invalid arguments for {tool}: {message}")
        self.tool = tool
        self.detail = message


class UnknownToolError(ValueError):
    """A tool name that no registered tool has, or one that is not enabled."""


@dataclass(frozen=True)
class ToolResult:
    """What a tool returns: text to be polished into speech, and structured data."""

    text: str
    payload: Mapping[str, Any] = field(default_factory=dict)


#: ``run(args, evidence)``: the tool's body, awaited on the Harness loop.
RunFn = Callable[[Mapping[str, Any], TimelineView], Awaitable[ToolResult]]


@dataclass(frozen=True)
class Tool:
    """A capability the Harness can run.

    Attributes:
        name: unique name, as used in config (``[a-z][a-z0-9_]*``).
        description: one sentence saying what it does (for a planner or an LLM).
        schema: JSON schema (draft 2020-12) of the arguments; must describe an object.
        run: the async body, ``run(args, evidence) -> ToolResult``.
        timeout_s: the runner gives up after this many seconds.
        side_effects: True when running it changes the world (a message sent, an arm moved).
        cancellable: True when it may be interrupted; False means it runs to the end once
            started.
        idempotent: True when running it twice has the same effect as running it once (a task
            interrupted by a crash may then be run again).
    """

    name: str
    description: str
    schema: Mapping[str, Any]
    run: RunFn = field(repr=False, compare=False)
    timeout_s: float = 5.0
    side_effects: bool = False
    cancellable: bool = True
    idempotent: bool = False
    _validator: Any = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z][a-z0-9_]*", self.name):
            raise ValueError(f"tool name {self.name!r} must match [a-z][a-z0-9_]*")
        if not (math.isfinite(self.timeout_s) and self.timeout_s > 0):
            raise ValueError(f"tool {self.name}: timeout_s must be > 0, got {self.timeout_s}")
        try:
            jsonschema.Draft202012Validator.check_schema(dict(self.schema))
        except jsonschema.SchemaError as exc:
            raise ValueError(f"tool {self.name}: invalid argument schema: {exc.message}") from exc
        if self.schema.get("type") != "object":
            raise ValueError(f"tool {self.name}: the argument schema must have type 'object'")
        if self.idempotent and self.side_effects:
            raise ValueError(f"tool {self.name}: a tool with side effects cannot be idempotent")
        object.__setattr__(self, "_validator", jsonschema.Draft202012Validator(dict(self.schema)))

    def validate(self, args: Any) -> dict[str, Any]:
        """Check ``args`` against the schema and return them as a plain dict.

        Raises:
            ArgumentError: naming the offending argument and what is wrong with it.
        """
        if not isinstance(args, Mapping):
            raise ArgumentError(self.name, f"expected a JSON object, got {type(args).__name__}")
        args = dict(args)
        error = best_match(self._validator.iter_errors(args))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "arguments"
            raise ArgumentError(self.name, f"{where}: {error.message}")
        return args


class ToolRegistry:
    """The tools that may run: those available, restricted to the names enabled in config.

    Args:
        available: every tool known to this process.
        enabled: names allowed to run; None enables all of ``available``.

    Raises:
        UnknownToolError: if ``enabled`` names a tool that is not available.
        ValueError: if two available tools share a name.
    """

    def __init__(self, available: Iterable[Tool], enabled: Iterable[str] | None = None) -> None:
        tools: dict[str, Tool] = {}
        for tool in available:
            if tool.name in tools:
                raise ValueError(f"two tools are named {tool.name!r}")
            tools[tool.name] = tool
        names = list(tools) if enabled is None else list(dict.fromkeys(enabled))
        unknown = [n for n in names if n not in tools]
        if unknown:
            raise UnknownToolError(
                f"unknown tool(s) {', '.join(map(repr, unknown))} in config; "
                f"available: {', '.join(sorted(tools)) or 'none'}"
            )
        self._tools = {n: tools[n] for n in names}
        self._available = frozenset(tools)

    @classmethod
    def builtins(cls, enabled: Iterable[str] | None = None) -> ToolRegistry:
        """A registry over the built-in tools (:func:`builtin_tools`)."""
        return cls(builtin_tools(), enabled)

    @property
    def names(self) -> tuple[str, ...]:
        """The enabled tool names, in config order."""
        return tuple(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def get(self, name: str) -> Tool:
        """The enabled tool called ``name``.

        Raises:
            UnknownToolError: if no such tool exists or it is not enabled.
        """
        tool = self._tools.get(name)
        if tool is None:
            if name in self._available:
                raise UnknownToolError(f"the {name} tool is not enabled")
            raise UnknownToolError(f"there is no tool called {name!r}")
        return tool


# --- clock ------------------------------------------------------------------------------------

CLOCK_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "timezone": {
            "type": "string",
            "minLength": 1,
            "maxLength": 64,
            "description": "IANA time zone, e.g. 'Europe/Paris' or 'UTC'; default: local time",
        }
    },
    "additionalProperties": False,
}


def make_clock_tool(now: Callable[[tzinfo | None], datetime] | None = None) -> Tool:
    """The ``clock`` tool: the current time and date, optionally in a given time zone.

    Args:
        now: the wall clock, ``now(tz) -> aware datetime`` (tests inject a fixed one).
    """
    read = now or _wall_clock

    async def run(args: Mapping[str, Any], evidence: TimelineView) -> ToolResult:
        name = args.get("timezone")
        zone: tzinfo | None = None
        if name is not None:
            try:
                zone = timezone.utc if name.upper() == "UTC" else ZoneInfo(name)
            except (ZoneInfoNotFoundError, ValueError) as exc:
                raise ToolError(f"unknown time zone {name!r}") from exc
        moment = read(zone)
        label = name or moment.tzname() or "local time"
        hour = moment.hour % 12 or 12
        text = (
            f"It is {hour}:{moment.minute:02d} {'AM' if moment.hour < 12 else 'PM'} "
            f"on {moment:%A}, {moment.day} {moment:%B %Y} ({label})."
        )
        payload = {"iso": moment.isoformat(timespec="seconds"), "timezone": label}
        return ToolResult(text, payload)

    return Tool(
        name="clock",
        description="Tells the current time and date, optionally in a given time zone.",
        schema=CLOCK_SCHEMA,
        run=run,
        timeout_s=2.0,
        idempotent=True,
    )


def _wall_clock(zone: tzinfo | None) -> datetime:
    return datetime.now(zone).astimezone(zone)


# --- calculator -------------------------------------------------------------------------------

CALCULATOR_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "expression": {
            "type": "string",
            "minLength": 1,
            "maxLength": 200,
            "description": "arithmetic: numbers, + - * / // % **, unary minus, parentheses",
        }
    },
    "required": ["expression"],
    "additionalProperties": False,
}

#: The largest exponent ``**`` accepts.
MAX_EXPONENT = 1000
#: Integer results (and operands) above this many bits are refused.
MAX_INT_BITS = 4096
_MAX_NODES = 100

_BINARY: Mapping[type[ast.operator], tuple[Callable[[Any, Any], Any], str]] = {
    ast.Add: (operator.add, "plus"),
    ast.Sub: (operator.sub, "minus"),
    ast.Mult: (operator.mul, "times"),
    ast.Div: (operator.truediv, "divided by"),
    ast.FloorDiv: (operator.floordiv, "integer-divided by"),
    ast.Mod: (operator.mod, "modulo"),
    ast.Pow: (operator.pow, "to the power of"),
}


def evaluate(expression: str) -> int | float:
    """Evaluate arithmetic safely: numbers, + - * / // % **, unary +/-, parentheses.

    No names, calls, attributes or other Python syntax; exponents are capped at
    :data:`MAX_EXPONENT` and integers at :data:`MAX_INT_BITS` bits.

    Raises:
        ToolError: with a message fit to be spoken ("division by zero", "only numbers ...").
    """
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ToolError(f"{expression!r} is not an arithmetic expression") from exc
    if sum(1 for _ in ast.walk(tree)) > _MAX_NODES:
        raise ToolError("the expression is too long")
    try:
        value = _eval(tree.body)
    except ZeroDivisionError as exc:
        raise ToolError("division by zero") from exc
    except OverflowError as exc:
        raise ToolError("the result is too large") from exc
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolError("the result is too large")
    return value


def _eval(node: ast.AST) -> int | float:
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ToolError(f"only numbers are allowed, not {value!r}")
        return _checked(value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = _eval(node.operand)
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow):
            _check_power(left, right)
        elif isinstance(node.op, ast.Mult) and isinstance(left, int) and isinstance(right, int):
            if left.bit_length() + right.bit_length() > MAX_INT_BITS + 1:
                raise ToolError("the result is too large")
        return _checked(_BINARY[type(node.op)][0](left, right))
    if isinstance(node, ast.Name):
        raise ToolError(f"names such as {node.id!r} are not allowed, only numbers")
    if isinstance(node, ast.Call):
        raise ToolError("function calls are not allowed, only arithmetic")
    raise ToolError(f"{type(node).__name__} is not allowed, only arithmetic")


def _check_power(base: int | float, exponent: int | float) -> None:
    if abs(exponent) > MAX_EXPONENT:
        raise ToolError(f"exponents above {MAX_EXPONENT} are not allowed")
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0:
        if (abs(base).bit_length() - 1) * exponent > MAX_INT_BITS:
            raise ToolError("the result is too large")
    if base == 0 and exponent < 0:
        raise ZeroDivisionError


def _checked(value: Any) -> int | float:
    if isinstance(value, complex):
        raise ToolError("the result is not a real number")
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise ToolError("the result is too large")
    return value


def format_number(value: int | float) -> str:
    """A number as it should be spoken.

    Integers below 10**15 plainly, other floats to 10 significant digits, and very large or
    very small numbers as "about 1.2345 times 10 to the power of 20".
    """
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, int) and abs(value) < 10**15:
        return str(value)
    if isinstance(value, float) and (value == 0 or 1e-6 <= abs(value) < 1e15):
        return f"{value:.10g}"
    if isinstance(value, int):
        digits = str(abs(value))
        mantissa, exponent = f"{digits[0]}.{digits[1:6]}", len(digits) - 1
    else:
        text, power = f"{abs(value):.5e}".split("e")
        mantissa, exponent = text, int(power)
    mantissa = mantissa.rstrip("0").rstrip(".")
    sign = "minus " if value < 0 else ""
    power_text = f"minus {-exponent}" if exponent < 0 else str(exponent)
    return f"about {sign}{mantissa} times 10 to the power of {power_text}"


def spoken_expression(expression: str) -> str:
    """The expression in words: ``(3+4)*2`` -> ``(3 plus 4) times 2``.

    Raises:
        ToolError: if it is not a valid expression.
    """
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ToolError(f"{expression!r} is not an arithmetic expression") from exc
    return _words(tree.body, top=True)


def _words(node: ast.AST, top: bool = False) -> str:
    if isinstance(node, ast.Constant):
        return format_number(node.value)
    if isinstance(node, ast.UnaryOp):
        sign = "minus " if isinstance(node.op, ast.USub) else ""
        return sign + _words(node.operand)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        text = f"{_words(node.left)} {_BINARY[type(node.op)][1]} {_words(node.right)}"
        return text if top else f"({text})"
    raise ToolError(f"{type(node).__name__} is not allowed, only arithmetic")


def make_calculator_tool() -> Tool:
    """The ``calculator`` tool: safe arithmetic (see :func:`evaluate`), no ``eval``."""

    async def run(args: Mapping[str, Any], evidence: TimelineView) -> ToolResult:
        expression = args["expression"]
        value = evaluate(expression)
        answer = format_number(value)
        text = f"{spoken_expression(expression)} is {answer}."
        return ToolResult(text[0].upper() + text[1:], {"expression": expression, "value": value})

    return Tool(
        name="calculator",
        description="Evaluates an arithmetic expression exactly.",
        schema=CALCULATOR_SCHEMA,
        run=run,
        timeout_s=2.0,
        idempotent=True,
    )


# --- echo_evidence ----------------------------------------------------------------------------

ECHO_SCHEMA: Mapping[str, Any] = {"type": "object", "additionalProperties": False}


def make_echo_evidence_tool() -> Tool:
    """The ``echo_evidence`` tool: what the evidence snapshot holds (proves the snapshot path).

    Not idempotent: the evidence mirror does not survive a harness restart, so a re-run would
    count what the new process happens to have, not what the user had said at the cutoff.
    """

    async def run(args: Mapping[str, Any], evidence: TimelineView) -> ToolResult:
        user_units = len(evidence.of_kind(Kind.USER_AUDIO))
        user_texts = len(evidence.of_kind(Kind.USER_TEXT))
        texts = [str(r.payload.get("text", "")) for r in evidence.of_kind(Kind.ASSISTANT_TEXT)]
        words = sum(len(text.split()) for text in texts)
        newest = evidence[len(evidence) - 1].seq if len(evidence) else 0
        text = (
            f"Up to record {evidence.cutoff_seq} I have {user_units} user units, "
            f"{user_texts} user texts and {words} assistant words."
        )
        payload = {
            "cutoff_seq": evidence.cutoff_seq,
            "records": len(evidence),
            "newest_seq": newest,
            "user_units": user_units,
            "user_texts": user_texts,
            "assistant_words": words,
        }
        return ToolResult(text, payload)

    return Tool(
        name="echo_evidence",
        description="Reports how much evidence (user units, assistant words) the task can see.",
        schema=ECHO_SCHEMA,
        run=run,
        timeout_s=2.0,
    )


# --- timers (scheduled jobs: venus_ros.harness.schedule) ------------------------------------

#: The longest timer, seconds.
MAX_TIMER_S = 24 * 3600

TIMER_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_TIMER_S},
        "label": {"type": "string", "maxLength": 80},
    },
    "required": ["seconds"],
    "additionalProperties": False,
}


def builtin_tools(schedule: Schedule | None = None) -> tuple[Tool, ...]:
    """Fresh instances of every built-in tool.

    Args:
        schedule: where the timer tools (``timer``, ``list_timers``, ``cancel_timer``) keep
            their jobs; None: a fresh schedule in memory (nothing rings it unless its owner
            polls it).
    """
    from venus_ros.harness.schedule import Schedule, timer_tools

    return (
        make_clock_tool(),
        make_calculator_tool(),
        make_echo_evidence_tool(),
        *timer_tools(schedule if schedule is not None else Schedule()),
    )


# --- router -----------------------------------------------------------------------------------

_BETWEEN = r"(?<=\d)\s+{}\s+(?=\(?\s*\d)"  # an operator word only between two numbers
_WORD_OPERATORS = (
    (r"\b(?:multiplied|multiply|times)\s+by\b", "*"),
    (r"\b(?:divided|divide)\s+by\b", "/"),
    (r"\bto\s+the\s+power\s+of\b", "**"),
    (r"\btimes\b", "*"),
    (r"\bplus\b", "+"),
    (r"\bminus\b", "-"),
    (_BETWEEN.format(r"(?:add|added\s+to|and\s+add)"), " + "),
    (_BETWEEN.format(r"(?:less|take\s+away|subtract)"), " - "),
    (_BETWEEN.format(r"over"), " / "),
    # "add 3 and 4", "the sum of 3 and 4": "and" is "+" after a word that asks for a sum
    (r"\b(?:add|sum|total)(?:\s+(?:of|up))?\s+(\d+(?:\.\d+)?)\s+and\s+(?=\d)", r" \1 + "),
    (r"\bmod(?:ulo)?\b", "%"),
    (r"(?<=\d)\s*[x×]\s*(?=[\d(])", " * "),
    (r"÷", "/"),
)
_ARITHMETIC_RUN = re.compile(r"[\d.()+\-*/%\s]+")
_OPERATOR = re.compile(r"\d\s*\)*\s*(?:\*\*|//|[+\-*/%])\s*\(*\s*-?\s*[\d.]")
_TIME_WORDS = re.compile(r"\b(?:time|date|clock)\b")
_EVIDENCE_WORDS = re.compile(r"\bevidence\b")


def route(query: str) -> tuple[str, dict[str, Any]] | None:
    """Pick a built-in tool and its arguments for ``query`` by keywords, or None.

    The last resort when no planner can plan (the local planner plans when no cloud planner is
    configured; the cloud planner when one is): "cancel the (pasta | 5 minute) timer" goes to
    ``cancel_timer``, "what timers are set" to ``list_timers``, "set a timer for twenty five
    minutes" or "remind me at 5 pm" to ``timer`` (durations and clock times read by
    :mod:`venus_ros.text.numbers`; a clock time becomes the seconds until it); an arithmetic
    expression ("what is 12 times 7", "compute (3+4)*2") goes to ``calculator`` with the
    expression normalised ("times" -> ``*``, "plus" -> ``+``, "minus" -> ``-``, "divided by"
    -> ``/``); the words time/date/clock go to ``clock`` (with the zone of a place named:
    "in Tokyo" -> ``Asia/Tokyo``, :mod:`venus_ros.text.places`); the word "evidence" goes to
    ``echo_evidence``. Anything else returns None and the task fails honestly.
    """
    lowered = query.lower()
    if REMINDER_WORDS.search(lowered):
        seconds = duration_s(query)
        if _CANCEL_WORDS.search(lowered):
            label = _LABEL.search(lowered)
            args: dict[str, Any] = {"seconds": seconds} if seconds else {}
            if label and label.group(1) not in _NOT_LABELS:
                args["label"] = label.group(1)
            return "cancel_timer", args
        if seconds is None and _LIST_WORDS.search(lowered):
            return "list_timers", {}
        if seconds is None:  # "remind me at 5 pm"
            seconds = seconds_to_time_said(query)
        if seconds is not None:
            return "timer", {"seconds": seconds}
    expression = _arithmetic(to_digits(query))
    if expression is not None:
        return "calculator", {"expression": expression}
    if _TIME_WORDS.search(lowered):
        zone = zone_in(query)
        return "clock", ({"timezone": zone} if zone else {})
    if _EVIDENCE_WORDS.search(lowered):
        return "echo_evidence", {}
    return None


_CANCEL_WORDS = re.compile(r"\b(?:cancel|stop|delete|remove|clear|turn off|switch off)\b")
_LIST_WORDS = re.compile(r"\b(?:what|which|list|any|how (?:long|much time)|left|running)\b")
_LABEL = re.compile(r"\bthe ([a-z]+) (?:timer|reminder|alarm)\b")
_NOT_LABELS = frozenset({"minute", "second", "hour", "last", "first", "other", "current"})


def _arithmetic(query: str) -> str | None:
    text = query.lower()
    for pattern, replacement in _WORD_OPERATORS:
        text = re.sub(pattern, f" {replacement} ", text)
    best: str | None = None
    for match in _ARITHMETIC_RUN.finditer(text):
        candidate = " ".join(match.group(0).split()).strip(" .")
        if not _OPERATOR.search(candidate):
            continue
        candidate = _balance(candidate)
        try:
            spoken_expression(candidate)
        except ToolError:
            continue
        if best is None or len(candidate) > len(best):
            best = candidate
    return best


def _balance(candidate: str) -> str:
    """Drop unmatched parentheses at the edges ("(what is 2+2)" leaves "2+2)")."""
    while candidate.endswith(")") and candidate.count(")") > candidate.count("("):
        candidate = candidate[:-1].rstrip()
    while candidate.startswith("(") and candidate.count("(") > candidate.count(")"):
        candidate = candidate[1:].lstrip()
    return candidate
