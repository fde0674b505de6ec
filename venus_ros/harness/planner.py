"""The local tool planner: a spoken request -> tool calls, with no cloud LLM.

Used when no ``llm`` tool is configured. A request is planned in four steps:

1. **Split** into sub-requests at "and then", "then", "after that", "and also".
2. **Repair** each one (:mod:`venus_ros.text.repair`): fillers ("um", "uh", "you know") go,
   stuttered words and false starts
   ("could you, could you go", "the, the kitchen") collapse, and self-corrections are applied
   by slot: the request is cut at correction markers ("no", "no wait", "sorry", "I mean",
   "actually", "make it", "rather") and each slot keeps the value of the *last* segment that
   gives one, so "set a timer for five, no, ten minutes" is ten minutes and "five minutes, no,
   ten" is ten minutes too (a bare number inherits the unit it corrects).
3. **Choose the tool** by similarity between the request and each tool's name, description
   and argument descriptions: MiniLM sentence embeddings when an embedder is given (the
   cascade's :class:`~venus_ros.frontends.cascade.embed.Embedder`), else a lexical overlap of
   word stems. A tool whose required arguments cannot be filled from the request loses.
4. **Fill the arguments** from the JSON schema: ``enum`` values by mention; numbers and
   durations (:mod:`venus_ros.text.numbers`: "twenty five", "a minute and a half", "quarter of
   an hour") in seconds for a property whose name or description says seconds; booleans from
   on/off, yes/no, true/false; arithmetic expressions for a property called ``expression``;
   IANA time zones from place names (:mod:`venus_ros.text.places`); other strings as the noun
   phrase after the verb or preposition that introduces it.

:func:`make_planner_tool` wraps a planner as a tool (``local_planner``) that runs the planned
calls in order, so one delegated request may make several calls.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from venus_ros.core.timeline import TimelineView
from venus_ros.harness.tools import (
    ArgumentError,
    Tool,
    ToolError,
    ToolRegistry,
    ToolResult,
    _arithmetic,
)
from venus_ros.text.numbers import duration_s, quantities, seconds_to_time_said, to_digits
from venus_ros.text.places import zone_in
from venus_ros.text.repair import (
    ARITHMETIC_NOISE,
    REMINDER_WORDS,
    bare,
    segments,
    split_requests,
)

__all__ = [
    "PLANNER_TOOL",
    "LocalPlanner",
    "PlannedCall",
    "duration_s",
    "fill_arguments",
    "make_planner_tool",
    "planner_router",
    "segments",
    "split_requests",
    "with_planner_tool",
]

#: ``embed(texts) -> [n, d]`` L2-normalised sentence embeddings.
Embed = Callable[[Sequence[str]], np.ndarray]
#: ``router(query) -> (tool_name, args) | None``, as the runner takes it.
Router = Callable[[str], "tuple[str, dict[str, Any]] | None"]

#: The planner tool's name.
PLANNER_TOOL = "local_planner"

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")

_ON = re.compile(r"\b(?:on|true|yes|enable|start)\b", re.IGNORECASE)
_OFF = re.compile(r"\b(?:off|false|disable|stop|out)\b", re.IGNORECASE)
_INTRO_WORDS = frozenset(
    "to into in at toward towards from for the grab get fetch bring take find hand reach".split()
)
_INTRO_PAIRS = frozenset(
    {("pick", "up"), ("bring", "me"), ("get", "me"), ("hand", "me"), ("go", "to"), ("over", "to")}
)
_ARTICLE_WORDS = frozenset({"the", "a", "an", "my", "your", "our", "some", "this", "that"})
_STOP_WORDS = frozenset(
    "a an the please for me to in on at of and then now right away quickly thanks thank you "
    "could can would will you i it is be this that there here some my your our what what's "
    "how much tell say give show know want like need make do let us or well so".split()
)
#: Words that end a free-text value ("the kitchen lights" -> "kitchen").
_PHRASE_STOPS = _STOP_WORDS | {"lights", "light", "lamp", "lamps", "off", "over", "up"}
#: Lexical fallback only: words that mean the same to a tool description.
_SYNONYMS = {
    "go": "drive", "head": "drive", "move": "drive", "walk": "drive", "navigate": "drive",
    "come": "drive", "grab": "pick", "fetch": "pick", "bring": "pick", "get": "pick",
    "lift": "pick", "switch": "light", "lamp": "light", "alarm": "timer", "remind": "timer",
    "reminder": "timer", "countdown": "timer", "calculate": "arithmetic",
    "compute": "arithmetic", "plus": "arithmetic", "minus": "arithmetic",
    "times": "arithmetic", "divided": "arithmetic", "multiply": "arithmetic",
    "clock": "time", "date": "time",
}  # fmt: skip
_ARTICLES = re.compile(r"^(?:the|a|an|my|your|our|some)\s+", re.IGNORECASE)


@dataclass(frozen=True)
class PlannedCall:
    """One tool call the planner decided on."""

    tool: str
    args: dict[str, Any]


# --- values ---------------------------------------------------------------------------------------


def _words(text: str) -> list[str]:
    """Lower-case words without punctuation; "sixty-three" is two words."""
    text = re.sub(r"(?<=[a-z])-(?=[a-z])", " ", text.lower())
    return [w for w in (bare(w) for w in text.split()) if w]


def _is_number(word: str) -> bool:
    return bool(re.fullmatch(r"\d+(?:\.\d+)?", word)) or to_digits(word) != word


def _zone(segs: Sequence[str]) -> str | None:
    return _last(zone_in(seg) for seg in segs)


def _flag(segs: Sequence[str]) -> bool | None:
    result: bool | None = None
    for seg in segs:
        on = [m.start() for m in _ON.finditer(seg)]
        off = [m.start() for m in _OFF.finditer(seg)]
        if on or off:
            result = max(on, default=-1) > max(off, default=-1)
    return result


def _enum(segs: Sequence[str], values: Sequence[Any]) -> Any:
    found = None
    for seg in segs:
        lowered = seg.lower()
        hits = [
            (lowered.rfind(str(v).lower()), v)
            for v in values
            if re.search(rf"\b{re.escape(str(v).lower())}\b", lowered)
        ]
        if hits:
            found = max(hits, key=lambda h: h[0])[1]
    return found


def _phrase(segs: Sequence[str]) -> str | None:
    """A noun phrase for a free-text property: after its introducing word, or a bare repair."""
    found = None
    for index, seg in enumerate(segs):
        words = _words(seg)
        phrase = _after_intro(words)
        if phrase is None and index > 0 and len(words) <= 4:
            phrase = " ".join(words)  # "..., no, the living room"
        if phrase:
            phrase = _ARTICLES.sub("", phrase).strip()
            phrase = " ".join(w for w in phrase.split() if w not in ("please", "now"))
            if phrase and phrase not in _PHRASE_STOPS:
                found = phrase
    return found


def _named(seg: str) -> str | None:
    match = re.search(r"\b(?:called|named|labell?ed)\s+((?:[a-z]+\s*){1,4})", seg.lower())
    return match.group(1).strip() if match else None


def _after_intro(words: Sequence[str]) -> str | None:
    """The last noun phrase introduced by a verb, preposition or article ("to the living room",
    "pick up the red cup"): up to four words, ended by a stop word, a number or another
    introducing word."""
    best = None
    i = 0
    while i < len(words):
        width = 2 if tuple(words[i : i + 2]) in _INTRO_PAIRS else 1
        if width == 1 and words[i] not in _INTRO_WORDS:
            i += 1
            continue
        kept: list[str] = []
        for word in words[i + width : i + width + 6]:
            if word in _ARTICLE_WORDS and not kept:
                continue
            if word in _PHRASE_STOPS or word in _INTRO_WORDS or _is_number(word) or len(kept) == 4:
                break
            kept.append(word)
        if kept:
            best = " ".join(kept)
        i += width
    return best


# --- the planner ----------------------------------------------------------------------------------


class LocalPlanner:
    """Maps a spoken request to calls of the given tools (see the module docstring).

    Args:
        tools: the tools it may call.
        embed: sentence embeddings for tool choice (None: lexical overlap of word stems).
        min_score: a sub-request whose best tool scores below this gets no call.
    """

    def __init__(
        self, tools: Sequence[Tool], embed: Embed | None = None, min_score: float | None = None
    ) -> None:
        self.tools = [t for t in tools if t.name != PLANNER_TOOL]
        self._embed = embed
        self.min_score = (0.3 if embed else 0.2) if min_score is None else min_score
        self._profiles = [_profile(t) for t in self.tools]
        self._vectors = embed(self._profiles) if embed and self.tools else None

    def plan(self, request: str) -> list[PlannedCall]:
        """The calls for ``request``, in order (empty when no tool fits)."""
        calls = []
        for sub in split_requests(request):
            call = self._plan_one(sub)
            if call is not None:
                calls.append(call)
        return calls

    def _plan_one(self, request: str) -> PlannedCall | None:
        segs = segments(request)
        if not segs or not self.tools:
            return None
        text = " ".join(segs)
        scores = self._scores(text)
        best: tuple[float, PlannedCall] | None = None
        for tool, score in zip(self.tools, scores, strict=True):
            args, missing = fill_arguments(tool.schema, segs)
            evidence = _typed_evidence(tool.schema, args) + _destination_evidence(tool.schema, segs)
            score += 0.3 * evidence - 0.3 * len(missing)
            if best is None or score > best[0]:
                best = (score, PlannedCall(tool.name, args))
        if best is None or best[0] < self.min_score or not text:
            return None
        return best[1]

    def _scores(self, text: str) -> list[float]:
        if self._vectors is not None and self._embed is not None:
            query = self._embed([text])[0]
            return [float(v) for v in self._vectors @ query]
        words = _stems(text)
        return [_overlap(words, _stems(p)) for p in self._profiles]


def _typed_evidence(schema: Mapping[str, Any], args: Mapping[str, Any]) -> int:
    """How many required arguments were found by a typed extractor (numbers, durations,
    expressions, zones, enums, flags): strong evidence that the request is for this tool."""
    properties = schema.get("properties", {}) or {}
    count = 0
    for name in schema.get("required", []):
        spec = properties.get(name, {})
        if name in args and (
            spec.get("type") != "string" or "enum" in spec or name == "expression" or "zone" in name
        ):
            count += 1
    return count


#: Words that introduce where to go: the phrase after them is a destination.
_DESTINATION = re.compile(r"\b(?:to|into|towards?|onto)\s+(?:the\s+)?\w")
_PLACE_WORDS = re.compile(r"\b(?:place|location|room|destination|where)\b")
_NOT_DESTINATION = re.compile(r"^\s*(?:\d|[a-z]+\s+(?:seconds?|minutes?|hours?)\b)")


def _destination_evidence(schema: Mapping[str, Any], segs: Sequence[str]) -> int:
    """1 when the request names a destination ("to the porch", "into the hall") and the tool
    takes a required place ("location", "place", "room" in its name or description), else 0:
    a phrase after a motion preposition is where to go, whatever the verb before it."""
    properties = schema.get("properties", {}) or {}
    places = [
        name
        for name in schema.get("required", [])
        if isinstance(properties.get(name), Mapping)
        and properties[name].get("type") == "string"
        and _PLACE_WORDS.search(f"{name} {properties[name].get('description', '')}".lower())
    ]
    if not places:
        return 0
    for seg in segs:
        for match in _DESTINATION.finditer(seg.lower()):
            if not _NOT_DESTINATION.match(seg.lower()[match.end() - 1 :]):
                return 1
    return 0


def fill_arguments(
    schema: Mapping[str, Any], segs: Sequence[str]
) -> tuple[dict[str, Any], list[str]]:
    """Arguments for ``schema`` found in the segments, and the required ones not found."""
    properties: Mapping[str, Any] = schema.get("properties", {}) or {}
    args: dict[str, Any] = {}
    required = set(schema.get("required", []))
    for name, spec in properties.items():
        value = _value_for(name, spec if isinstance(spec, Mapping) else {}, segs, name in required)
        if value is not None:
            args[name] = value
    missing = [n for n in schema.get("required", []) if n not in args]
    return args, missing


def _value_for(name: str, spec: Mapping[str, Any], segs: Sequence[str], required: bool) -> Any:
    kind = spec.get("type")
    description = str(spec.get("description", ""))
    words = f"{name} {description}".lower()
    if "enum" in spec:
        return _enum(segs, spec["enum"])
    if kind == "boolean":
        return _flag(segs)
    if kind in ("number", "integer"):
        if re.search(r"second|duration|seconds", words):
            seconds = duration_s(segs)
            said = " ".join(segs)
            if seconds is None and REMINDER_WORDS.search(said):  # "remind me at 5 pm"
                seconds = seconds_to_time_said(said)
            if seconds is None:
                return None
            return int(seconds) if kind == "integer" or float(seconds).is_integer() else seconds
        numbers = [q.value for seg in segs for q in quantities(seg) if not q.ordinal]
        if not numbers:
            return None
        value = numbers[-1]
        return int(value) if kind == "integer" or float(value).is_integer() else value
    if kind == "string":
        if name == "expression" or "arithmetic" in words:
            found = _last(_arithmetic(_spoken_ops(seg)) for seg in segs)
            return _spaced(found) if found is not None else None
        if "zone" in words:
            return _zone(segs)
        if not required:  # an optional label only when it is named: "called pasta"
            return _last(_named(seg) for seg in segs)
        return _phrase(segs)
    return None


_EXPRESSION_TOKEN = re.compile(r"\d+(?:\.\d+)?|\*\*|//|[-+*/%()]")


def _spaced(expression: str) -> str:
    """One space between the tokens of an expression ("47-7" -> "47 - 7"), a sign kept on its
    number ("-3 * 2")."""
    tokens = _EXPRESSION_TOKEN.findall(expression)
    out: list[str] = []
    for token in tokens:
        sign = out and out[-1] in "+-" and (len(out) == 1 or out[-2] in "+-*/%(**//")
        if sign and token[0].isdigit():
            out[-1] += token
        else:
            out.append(token)
    return " ".join(out).replace("( ", "(").replace(" )", ")")


def _spoken_ops(text: str) -> str:
    """Number words as digits, so "twelve times seven" reads as arithmetic (fillers and
    commas inside it dropped: "50 minus, so, 12")."""
    return to_digits(" ".join(ARITHMETIC_NOISE.sub(" ", text).split()))


def _last(values: Any) -> Any:
    found = None
    for value in values:
        if value is not None:
            found = value
    return found


def _profile(tool: Tool) -> str:
    props = tool.schema.get("properties", {}) or {}
    parts = [tool.name.replace("_", " "), tool.description]
    for name, spec in props.items():
        description = spec.get("description", "") if isinstance(spec, Mapping) else ""
        parts.append(f"{name.replace('_', ' ')} {description}")
    return ". ".join(parts)


def _stems(text: str) -> set[str]:
    words = [w for w in _WORD.findall(text.lower()) if w not in _STOP_WORDS]
    return {_stem(w) for w in words} | {_SYNONYMS[w] for w in words if w in _SYNONYMS}


def _stem(word: str) -> str:
    for suffix in ("ing", "es", "ed", "s", "er"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _overlap(query: set[str], profile: set[str]) -> float:
    """The share of the request's content words the tool's profile explains."""
    if not query or not profile:
        return 0.0
    return len(query & profile) / len(query)


# --- as a router and a tool ----------------------------------------------------------------------


def planner_router(
    registry: ToolRegistry, embed: Embed | None = None, fallback: Router | None = None
) -> Router:
    """Route by planning over the registry's tools: one planned call goes straight to its
    tool, several to :data:`PLANNER_TOOL` (when the registry has it), none to ``fallback``."""
    planner = LocalPlanner([registry.get(n) for n in registry.names], embed)

    def route(query: str) -> tuple[str, dict[str, Any]] | None:
        calls = planner.plan(query)
        if len(calls) == 1:
            return calls[0].tool, dict(calls[0].args)
        if len(calls) > 1 and PLANNER_TOOL in registry:
            return PLANNER_TOOL, {"request": query}
        picked = fallback(query) if fallback is not None else None
        if picked is not None and picked[0] in registry:
            return picked
        return (calls[0].tool, dict(calls[0].args)) if calls else None

    return route


def with_planner_tool(tools: Sequence[Tool], embed: Embed | None = None) -> list[Tool]:
    """``tools`` plus a :data:`PLANNER_TOOL` over them (when there are two or more)."""
    if len(tools) < 2:
        return list(tools)
    return [*tools, make_planner_tool(ToolRegistry(tools), LocalPlanner(list(tools), embed))]


def make_planner_tool(registry: ToolRegistry, planner: LocalPlanner) -> Tool:
    """A tool that plans a request and runs the planned calls in order.

    Its result is the calls' spoken results joined; a call that fails stops the plan with a
    ToolError that says which call failed and what had already been done.
    """
    tools = [registry.get(n) for n in registry.names if n != PLANNER_TOOL]

    async def run(args: Mapping[str, Any], evidence: TimelineView) -> ToolResult:
        calls = planner.plan(str(args["request"]))
        if not calls:
            raise ToolError("no tool can answer this yet")
        texts: list[str] = []
        done: list[dict[str, Any]] = []
        for call in calls:
            tool = registry.get(call.tool)
            try:
                valid = tool.validate(call.args)
                result = await asyncio.wait_for(tool.run(valid, evidence), tool.timeout_s)
            except (ArgumentError, ToolError, TimeoutError) as exc:
                what = f" (already done: {', '.join(d['tool'] for d in done)})" if done else ""
                raise ToolError(f"{call.tool}: {exc or 'timed out'}{what}") from exc
            texts.append(result.text)
            done.append({"tool": call.tool, "args": valid, "result": result.payload})
        return ToolResult(" ".join(t.strip() for t in texts if t.strip()), {"calls": done})

    return Tool(
        name=PLANNER_TOOL,
        description="Plans a spoken request into calls of the other tools and runs them.",
        schema={
            "type": "object",
            "properties": {"request": {"type": "string", "minLength": 1, "maxLength": 4000}},
            "required": ["request"],
            "additionalProperties": False,
        },
        run=run,
        timeout_s=min(600.0, sum(t.timeout_s for t in tools) or 5.0),
        side_effects=any(t.side_effects for t in tools),
        cancellable=True,
    )
