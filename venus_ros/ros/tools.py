"""ROS 2 actions and services as Harness tools: the ROS glue the harness node gives its runner.

:func:`make_ros_action_tool` and :func:`make_ros_service_tool` turn any action or service named
in config into a :class:`~venus_ros.harness.tools.Tool`. The interface type is imported by name
(``"nav2_msgs/action/NavigateToPose"``); the goal or request is built from the tool's
(validated) arguments through a mapping of field paths, checked against the interface when the
tool is made::

    goal_map = {
        "pose.header.frame_id": {"const": "map"},   # a constant (any JSON value)
        "pose.pose.position.x": "x",                # the tool argument "x"
        "pose.pose.position.y": "y",
        "behavior_tree": {"const": ""},
    }

A string value names a tool argument (an absent optional argument leaves the field at its
default); ``{"const": value}`` or a bare number, boolean or list is a constant. Values are
converted to the field's type (integers range-checked, strings length-checked, a JSON object
for a nested message, a list for a sequence or array).

Threading: the clients belong to the given node, whose executor spins elsewhere (the harness
node's). A tool never spins: rclpy futures complete on the executor thread and are handed to
the tool's asyncio loop with ``loop.call_soon_threadsafe``.

Action tools: action feedback becomes task progress through the progress callback of the tool
task (:mod:`venus_ros.harness.progress`; nothing is relayed when nobody listens). Cancelling
the tool's asyncio task sends a cancel request to the action server, waits (at most
``cancel_wait_s``) for the answer and the final status, and then:

- CANCELED (or no result in time after an accepted cancel): the cancellation goes on
  (the task ends CANCELLED);
- SUCCEEDED: the goal had already been achieved, so the result is returned (a side-effecting
  tool's task then ends COMPLETED with the runner's "already done" note);
- ABORTED, or the server refused the cancel and did not finish in time: a
  :class:`~venus_ros.harness.tools.ToolError` that says so (the task ends FAILED, never
  CANCELLED while the robot may still be moving).

Service tools: a service call cannot be taken back, so a side-effecting service tool is not
cancellable by default (the runner then waits for the response and reports honestly).
Cancelling a read-only one stops waiting for the response.

Text formats (``result_text``, ``feedback_text``, ``abort_text``, ``response_text``,
``error_text``) use ``{field.path}`` placeholders, with an optional format spec
(``{distance:.1f}``), over the fields of the result, feedback or response; every placeholder
is checked against the interface when the tool is made.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from action_msgs.msg import GoalStatus
from action_msgs.srv import CancelGoal
from rclpy.action import ActionClient
from rclpy.action.client import ClientGoalHandle
from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node
from rclpy.task import Future

from venus_ros.core.timeline import TimelineView
from venus_ros.harness.progress import ProgressFn, clamp_fraction, current_progress
from venus_ros.harness.tools import Tool, ToolError, ToolResult

log = logging.getLogger("venus_ros.harness")

#: How long a tool waits for its action or service server to appear before failing.
SERVER_WAIT_S = 2.0
#: How long a cancelled action tool waits for the cancel answer and the final status. Below
#: the runner's grace for a cancelled tool (1 s), so a timeout or shutdown forwards it too.
CANCEL_WAIT_S = 0.8
#: The text of a successful call without a ``result_text`` / ``response_text`` format.
DONE_TEXT = "Done."
#: Feedback rendered without a ``feedback_text`` format is cut to this many characters.
MAX_FEEDBACK_TEXT = 200
_POLL_S = 0.02
#: How long a newly discovered server is left to match the client's response reader.
SETTLE_S = 0.3

T = TypeVar("T")

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_PATH = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
_PLACEHOLDER = re.compile(r"\{(" + _PATH + r")(?::([^{}]*))?\}")
_SEQUENCE = re.compile(r"sequence<(.+?)(?:, ?(\d+))?>")
_ARRAY = re.compile(r"(.+)\[(\d+)\]")
_STRING = re.compile(r"w?string(?:<=(\d+))?")
_INT_RANGES = {
    f"{sign}int{bits}": ((0, 2**bits - 1) if sign else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1))
    for sign in ("", "u")
    for bits in (8, 16, 32, 64)
}
_FLOAT32_MAX = 3.4028234663852886e38


# --- interfaces and messages --------------------------------------------------------------------


def import_interface(type_name: str, kind: str) -> Any:
    """The class of a ROS interface named ``"pkg/<kind>/Name"`` (``kind``: msg, srv or action).

    ``"pkg/Name"`` is accepted too.

    Raises:
        ValueError: naming the package when it is not installed, or the type when the package
            has no such interface.
    """
    parts = type_name.strip().split("/")
    if len(parts) == 2:
        parts.insert(1, kind)
    if len(parts) != 3 or parts[1] != kind or not all(_NAME.fullmatch(p) for p in parts):
        raise ValueError(f"{type_name!r} is not a ROS {kind} type such as 'pkg/{kind}/Name'")
    package, _, name = parts
    try:
        module = importlib.import_module(f"{package}.{kind}")
    except ModuleNotFoundError as exc:
        if exc.name not in (package, f"{package}.{kind}"):
            raise
        raise ValueError(
            f"the ROS interface package {package!r} (for {type_name}) is not installed; "
            "install it or source the workspace that provides it"
        ) from exc
    cls = getattr(module, name, None)
    marker = {"msg": "get_fields_and_field_types", "srv": "Request", "action": "Goal"}[kind]
    if not isinstance(cls, type) or not hasattr(cls, marker):
        raise ValueError(f"the ROS package {package!r} has no {kind} called {name!r}")
    return cls


def field_type(message: type, path: str) -> str:
    """The ROS type (``"double"``, ``"geometry_msgs/Pose"`` ...) of a field path in a message.

    Raises:
        ValueError: if the path names no field (saying which fields there are instead).
    """
    if not re.fullmatch(_PATH, path):
        raise ValueError(f"{path!r} is not a field path such as 'pose.position.x'")
    cls, parts = message, path.split(".")
    ros_type = ""
    for i, part in enumerate(parts):
        if cls is None:
            raise ValueError(
                f"field {'.'.join(parts[:i])!r} is a {ros_type}, so {path!r} cannot go inside it"
            )
        fields = cls.get_fields_and_field_types()
        if part not in fields:
            where = f"field {'.'.join(parts[:i])!r}" if i else "it"
            raise ValueError(
                f"there is no field {path!r}: {where} has only {', '.join(fields) or 'no fields'}"
            )
        ros_type = fields[part]
        cls = _message_class(ros_type)
    return ros_type


def _message_class(ros_type: str) -> type | None:
    """The class of a nested message type (``"pkg/Name"``), None for anything else."""
    if "/" not in ros_type or "<" in ros_type or "[" in ros_type:
        return None
    return import_interface(ros_type, "msg")


def message_to_dict(message: Any) -> dict[str, Any]:
    """A message's fields as plain JSON-able values (non-finite floats become None)."""
    return {name: _plain(getattr(message, name)) for name in message.get_fields_and_field_types()}


def _plain(value: Any) -> Any:
    if hasattr(value, "get_fields_and_field_types"):
        return message_to_dict(value)
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (bytes, bytearray)):
        return list(value)
    if hasattr(value, "tolist"):  # array.array, numpy arrays
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)


def convert(value: Any, ros_type: str) -> Any:
    """``value`` (a JSON value) as a value for a field of ``ros_type``.

    Raises:
        ValueError: saying what was expected.
    """
    if match := _SEQUENCE.fullmatch(ros_type) or _ARRAY.fullmatch(ros_type):
        element, size = match.group(1), match.group(2)
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"expected a list for {ros_type}, got {_kind(value)}")
        if size is not None:
            limit = int(size)
            fixed = ros_type.endswith("]")
            if (fixed and len(value) != limit) or len(value) > limit:
                wanted = f"exactly {limit}" if fixed else f"at most {limit}"
                raise ValueError(f"expected {wanted} items for {ros_type}, got {len(value)}")
        items = []
        for i, item in enumerate(value):
            try:
                items.append(convert(item, element))
            except ValueError as exc:
                raise ValueError(f"item {i}: {exc}") from None
        return items
    if ros_type == "boolean":
        if not isinstance(value, bool):
            raise ValueError(f"expected true or false, got {_kind(value)}")
        return value
    if ros_type in ("float", "double"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"expected a number for {ros_type}, got {_kind(value)}")
        number = float(value)
        if ros_type == "float" and math.isfinite(number) and abs(number) > _FLOAT32_MAX:
            raise ValueError(f"{value} is out of range for float")
        return number
    if ros_type in _INT_RANGES or ros_type in ("octet", "byte"):
        return _integer(value, ros_type)
    if ros_type == "char":
        if not (isinstance(value, str) and len(value) == 1):
            raise ValueError(f"expected a single character, got {_kind(value)}")
        return value
    if match := _STRING.fullmatch(ros_type):
        if not isinstance(value, str):
            raise ValueError(f"expected text for {ros_type}, got {_kind(value)}")
        if match.group(1) is not None and len(value) > int(match.group(1)):
            raise ValueError(f"text longer than {match.group(1)} characters for {ros_type}")
        return value
    cls = _message_class(ros_type)
    if cls is None:
        raise ValueError(f"fields of type {ros_type} are not supported")
    if not isinstance(value, Mapping):
        raise ValueError(f"expected an object for {ros_type}, got {_kind(value)}")
    message = cls()
    fields = cls.get_fields_and_field_types()
    for key, item in value.items():
        if key not in fields:
            raise ValueError(f"{ros_type} has no field {key!r} (it has {', '.join(fields)})")
        try:
            _assign(message, key, convert(item, fields[key]))
        except ValueError as exc:
            raise ValueError(f"{key}: {exc}") from None
    return message


def _integer(value: Any, ros_type: str) -> Any:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected an integer for {ros_type}, got {_kind(value)}")
    low, high = _INT_RANGES.get(ros_type, (0, 255))
    if not low <= value <= high:
        raise ValueError(f"{value} is out of range for {ros_type} ({low} to {high})")
    return bytes([value]) if ros_type in ("octet", "byte") else value


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, str):
        return "text"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def _assign(target: Any, name: str, value: Any) -> None:
    try:
        setattr(target, name, value)
    except (AssertionError, TypeError, ValueError) as exc:  # rclpy's own setter checks
        raise ValueError(str(exc) or f"{type(exc).__name__} setting {name}") from None


# --- field mappings and text formats ------------------------------------------------------------


@dataclass(frozen=True)
class _Slot:
    """One mapped field: where it goes, its ROS type, and an argument name or a constant."""

    path: str
    ros_type: str
    argument: str | None
    constant: Any = None


class FieldMap:
    """A mapping from tool arguments (and constants) to the fields of a message type.

    Args:
        message: the message class (an action's ``Goal``, a service's ``Request`` ...).
        mapping: field path -> argument name, ``{"const": value}``, or a bare non-text constant.
        schema: the tool's argument schema; an argument it does not declare is refused.
        what: names the mapping in error messages ("tool go: goal_map").

    Raises:
        ValueError: for a path that names no field, an undeclared argument, or a constant that
            does not fit its field.
    """

    def __init__(
        self,
        message: type,
        mapping: Mapping[str, Any],
        schema: Mapping[str, Any] | None = None,
        what: str = "mapping",
    ) -> None:
        self.message = message
        declared = (schema or {}).get("properties")
        slots = []
        for path, source in mapping.items():
            try:
                ros_type = field_type(message, str(path))
            except ValueError as exc:
                raise ValueError(f"{what}: {exc}") from None
            if isinstance(source, str):
                if isinstance(declared, Mapping) and source not in declared:
                    raise ValueError(
                        f"{what}: field {path!r} takes the argument {source!r}, which the "
                        f"schema does not declare (it has {', '.join(declared) or 'none'})"
                    )
                slots.append(_Slot(path, ros_type, source))
                continue
            if isinstance(source, Mapping):
                if set(source) != {"const"}:
                    raise ValueError(
                        f"{what}: field {path!r}: expected an argument name or "
                        f"{{'const': value}}, got {dict(source)!r}"
                    )
                source = source["const"]
            try:
                constant = convert(source, ros_type)
            except ValueError as exc:
                raise ValueError(f"{what}: the constant for field {path!r}: {exc}") from None
            slots.append(_Slot(path, ros_type, None, constant))
        self._slots = tuple(slots)

    def build(self, args: Mapping[str, Any], what: str = "goal") -> Any:
        """A message with every mapped field set (absent arguments leave their defaults).

        Raises:
            ToolError: for an argument that does not fit its field, naming both.
        """
        result = self.message()
        for slot in self._slots:
            if slot.argument is None:
                value = slot.constant
            elif slot.argument not in args:
                continue
            else:
                try:
                    value = convert(args[slot.argument], slot.ros_type)
                except ValueError as exc:
                    raise ToolError(
                        f"the argument {slot.argument!r} does not fit {what} field "
                        f"{slot.path} ({slot.ros_type}): {exc}"
                    ) from None
            *parents, leaf = slot.path.split(".")
            target = result
            for part in parents:
                target = getattr(target, part)
            try:
                _assign(target, leaf, value)
            except ValueError as exc:
                raise ToolError(f"{what} field {slot.path} ({slot.ros_type}): {exc}") from None
        return result


def _check_format(text: str | None, message: type, what: str) -> None:
    if text is None:
        return
    for match in _PLACEHOLDER.finditer(text):
        try:
            field_type(message, match.group(1))
        except ValueError as exc:
            raise ValueError(f"{what}: {{{match.group(1)}}}: {exc}") from None


def render(text: str, fields: Mapping[str, Any]) -> str:
    """``text`` with every ``{field.path}`` / ``{field.path:spec}`` filled from ``fields``."""

    def fill(match: re.Match[str]) -> str:
        value = _lookup(fields, match.group(1))
        if value is None:
            value = ""
        try:
            return format(value, match.group(2) or "")
        except (TypeError, ValueError):
            return str(value)

    return _PLACEHOLDER.sub(fill, text)


def _lookup(fields: Mapping[str, Any], path: str) -> Any:
    value: Any = fields
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def _resolved(resolve: Callable[[str], str], name: str) -> str:
    try:
        return resolve(name)
    except Exception:  # an invalid name fails later, when the client is made
        return name


# --- rclpy futures on asyncio -------------------------------------------------------------------


def _bridge(future: Future[T], loop: asyncio.AbstractEventLoop) -> asyncio.Future[T]:
    """An asyncio future on ``loop`` that completes like the rclpy ``future``.

    Call on ``loop``'s thread; the rclpy future may complete on any thread (the executor's).
    """
    bridged: asyncio.Future[T] = loop.create_future()

    def copy() -> None:
        if bridged.done():
            return
        if future.cancelled():
            bridged.cancel()
        elif (exc := future.exception()) is not None:
            bridged.set_exception(exc)
        else:
            bridged.set_result(future.result())  # type: ignore[arg-type]

    def done(_: Future[T]) -> None:
        try:
            loop.call_soon_threadsafe(copy)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    if future.done():  # rclpy would hand the callback to an executor that may be gone
        copy()
    else:
        future.add_done_callback(done)
    return bridged


async def _within(future: Future[T], deadline: float) -> T | None:
    """The rclpy future's result if it completes before ``deadline`` (loop time), else None."""
    loop = asyncio.get_running_loop()
    bridged = _bridge(future, loop)
    try:
        done, _ = await asyncio.wait({bridged}, timeout=max(0.0, deadline - loop.time()))
        return bridged.result() if done else None
    finally:
        bridged.cancel()


class _Readiness:
    """When a client first saw its server ready, so a fresh match can settle before a call.

    Fast DDS matches each direction of a client/server pair on its own: a client may see its
    server ready before the server has matched the client's response reader, and the server
    then drops the first response ("client will not receive response"). The first call after
    discovery therefore waits until the server has been visible for :data:`SETTLE_S`.
    """

    def __init__(self, ready: Callable[[], bool]) -> None:
        self._ready = ready
        self._since: float | None = None

    async def wait(self, wait_s: float, reason: str) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        while not self._ready():
            self._since = None
            if loop.time() >= deadline:
                raise ToolError(reason)
            await asyncio.sleep(_POLL_S)
        if self._since is None:
            self._since = loop.time()
        settle = self._since + SETTLE_S - loop.time()
        if settle > 0:
            await asyncio.sleep(settle)


class _FeedbackRelay:
    """Action feedback (executor thread) -> the tool's progress callback (its loop)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        progress: ProgressFn,
        text: str | None,
        progress_field: str | None,
    ) -> None:
        self.loop = loop
        self.progress = progress
        self.text = text
        self.progress_field = progress_field
        self.fraction = 0.0
        self.closed = False

    def __call__(self, message: Any) -> None:
        if self.closed:
            return
        fields = message_to_dict(message.feedback)
        if self.progress_field is not None:
            value = _lookup(fields, self.progress_field)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self.fraction = clamp_fraction(value)
        if self.text is not None:
            text = render(self.text, fields)
        else:
            text = json.dumps(fields, separators=(",", ":"))[:MAX_FEEDBACK_TEXT]
        try:
            self.loop.call_soon_threadsafe(self._deliver, self.fraction, text)
        except RuntimeError:  # the loop is closed
            pass

    def _deliver(self, fraction: float, text: str) -> None:
        if self.closed:
            return
        try:
            self.progress(fraction, text)
        except Exception:
            log.exception("harness: a progress callback failed")


def _refused(answer: Any, handle: ClientGoalHandle) -> bool:
    """Whether a cancel answer refuses to cancel the goal (rclpy answers ERROR_NONE without
    the goal when the server's cancel callback rejects it)."""
    if answer.return_code == CancelGoal.Response.ERROR_REJECTED:
        return True
    if answer.return_code != CancelGoal.Response.ERROR_NONE:
        return False  # unknown goal or already terminated: its result tells the outcome
    goal_id = bytes(handle.goal_id.uuid)
    return all(bytes(info.goal_id.uuid) != goal_id for info in answer.goals_canceling)


# --- action tool --------------------------------------------------------------------------------


def make_ros_action_tool(
    node: Node,
    name: str,
    description: str,
    schema: Mapping[str, Any],
    action_type: str,
    action_name: str,
    goal_map: Mapping[str, Any],
    timeout_s: float,
    side_effects: bool = True,
    cancellable: bool = True,
    *,
    result_text: str | None = None,
    feedback_text: str | None = None,
    progress_field: str | None = None,
    abort_text: str | None = None,
    idempotent: bool = False,
    server_wait_s: float = SERVER_WAIT_S,
    cancel_wait_s: float = CANCEL_WAIT_S,
    callback_group: CallbackGroup | None = None,
) -> Tool:
    """A tool that sends one goal to a ROS 2 action server and returns its result.

    Args:
        node: owns the action client; its executor must be spinning (on another thread).
        name, description, schema, timeout_s, side_effects, cancellable, idempotent: as for
            :class:`~venus_ros.harness.tools.Tool`.
        action_type: ``"pkg/action/Name"``, imported now.
        action_name: the action, resolved against ``node``'s namespace.
        goal_map: goal field path -> argument name or constant (see the module docstring).
        result_text: the spoken text of a success, over the result's fields (default "Done.").
        feedback_text: the progress message, over the feedback's fields (default: the
            feedback as compact JSON).
        progress_field: the feedback field holding the fraction done (0.0 to 1.0); without
            one, progress messages carry the last known fraction (0.0).
        abort_text: detail added to the reason of an aborted goal, over the result's fields.
        server_wait_s: how long a run waits for the server to appear before failing with
            "action server <name> not available".
        cancel_wait_s: how long a cancelled run waits for the cancel answer and final status.
        callback_group: for the action client (default: the node's).

    Returns:
        The tool; its payload on success is the result's fields as JSON-able values.

    Raises:
        ValueError: for a type that cannot be imported, a mapping to a field that does not
            exist, a constant that does not fit its field, an argument the schema does not
            declare, or a format placeholder naming no field.
    """
    action = import_interface(action_type, "action")
    what = f"tool {name}"
    goals = FieldMap(action.Goal, goal_map, schema, f"{what}: goal_map")
    _check_format(result_text, action.Result, f"{what}: result_text")
    _check_format(abort_text, action.Result, f"{what}: abort_text")
    _check_format(feedback_text, action.Feedback, f"{what}: feedback_text")
    if progress_field is not None:
        ros_type = field_type(action.Feedback, progress_field)
        if ros_type not in ("float", "double"):
            raise ValueError(f"{what}: progress_field {progress_field!r} is a {ros_type}")
    label = _resolved(node.resolve_topic_name, action_name)

    async def run(args: Mapping[str, Any], evidence: TimelineView) -> ToolResult:
        goal = goals.build(args, "goal")
        await readiness.wait(server_wait_s, f"action server {label} not available")
        loop = asyncio.get_running_loop()
        progress = current_progress()
        relay = None
        if progress is not None:
            relay = _FeedbackRelay(loop, progress, feedback_text, progress_field)
        try:
            return await _send_goal(goal, relay, loop)
        finally:
            if relay is not None:
                relay.closed = True

    async def _send_goal(
        goal: Any, relay: _FeedbackRelay | None, loop: asyncio.AbstractEventLoop
    ) -> ToolResult:
        sent = client.send_goal_async(goal, feedback_callback=relay)
        try:
            handle: ClientGoalHandle = await _bridge(sent, loop)
        except asyncio.CancelledError:
            # The goal is on its way: if the server takes it, cancel it there too.
            deadline = loop.time() + cancel_wait_s
            handle = await _within(sent, deadline)
            if handle is not None and handle.accepted:
                response = await _cancel(handle, handle.get_result_async(), deadline)
                if response is not None and response.status != GoalStatus.STATUS_CANCELED:
                    return _outcome(response)
            raise
        if not handle.accepted:
            raise ToolError(f"the {label} action server rejected the goal")
        result = handle.get_result_async()
        try:
            response = await _bridge(result, loop)
        except asyncio.CancelledError:
            response = await _cancel(handle, result, loop.time() + cancel_wait_s)
            if response is None or response.status == GoalStatus.STATUS_CANCELED:
                raise
        return _outcome(response)

    async def _cancel(handle: ClientGoalHandle, result: Future[Any], deadline: float) -> Any:
        """Ask the server to cancel; the final result if it comes in time, else None."""
        answer = await _within(handle.cancel_goal_async(), deadline)
        refused = answer is not None and _refused(answer, handle)
        response = await _within(result, deadline)
        if response is None:
            if refused:
                raise ToolError(
                    f"the {label} action server refused to cancel the goal; it may still be running"
                )
            if answer is None:
                log.warning("harness: %s did not answer a cancel request", label)
        return response

    def _outcome(response: Any) -> ToolResult:
        fields = message_to_dict(response.result)
        status = response.status
        if status == GoalStatus.STATUS_SUCCEEDED:
            return ToolResult(render(result_text, fields) if result_text else DONE_TEXT, fields)
        if status == GoalStatus.STATUS_ABORTED:
            detail = f": {render(abort_text, fields)}" if abort_text else ""
            raise ToolError(f"the {label} action was aborted{detail}")
        if status == GoalStatus.STATUS_CANCELED:
            raise ToolError(f"the {label} action was cancelled by its server")
        raise ToolError(f"the {label} action ended with status {status}")

    tool = Tool(
        name=name,
        description=description,
        schema=schema,
        run=run,
        timeout_s=timeout_s,
        side_effects=side_effects,
        cancellable=cancellable,
        idempotent=idempotent,
    )
    client = ActionClient(node, action, action_name, callback_group=callback_group)
    readiness = _Readiness(client.server_is_ready)
    return tool


# --- service tool -------------------------------------------------------------------------------


def make_ros_service_tool(
    node: Node,
    name: str,
    description: str,
    schema: Mapping[str, Any],
    service_type: str,
    service_name: str,
    request_map: Mapping[str, Any],
    timeout_s: float,
    side_effects: bool = True,
    cancellable: bool | None = None,
    *,
    response_text: str | None = None,
    success_field: str | None = None,
    error_text: str | None = None,
    idempotent: bool = False,
    server_wait_s: float = SERVER_WAIT_S,
    callback_group: CallbackGroup | None = None,
) -> Tool:
    """A tool that calls a ROS 2 service once and returns its response.

    Args:
        node, name, description, schema, timeout_s, side_effects, idempotent: as for
            :func:`make_ros_action_tool`.
        service_type: ``"pkg/srv/Name"``, imported now.
        service_name: the service, resolved against ``node``'s namespace.
        request_map: request field path -> argument name or constant.
        cancellable: default ``not side_effects``: a request that was sent cannot be taken
            back, so a side-effecting call runs to its response.
        response_text: the spoken text, over the response's fields (default "Done.").
        success_field: a boolean response field (e.g. ``"success"``); false fails the task.
        error_text: the reason of such a failure, over the response's fields (default: the
            service and, when the response has one, its ``message``).
        server_wait_s: how long a run waits for the service before failing with
            "service <name> not available".
        callback_group: for the client (default: the node's).

    Raises:
        ValueError: as for :func:`make_ros_action_tool`.
    """
    service = import_interface(service_type, "srv")
    what = f"tool {name}"
    requests = FieldMap(service.Request, request_map, schema, f"{what}: request_map")
    _check_format(response_text, service.Response, f"{what}: response_text")
    _check_format(error_text, service.Response, f"{what}: error_text")
    if success_field is not None:
        ros_type = field_type(service.Response, success_field)
        if ros_type != "boolean":
            raise ValueError(f"{what}: success_field {success_field!r} is a {ros_type}")
    label = _resolved(node.resolve_service_name, service_name)

    async def run(args: Mapping[str, Any], evidence: TimelineView) -> ToolResult:
        request = requests.build(args, "request")
        await readiness.wait(server_wait_s, f"service {label} not available")
        future = client.call_async(request)
        try:
            response = await _bridge(future, asyncio.get_running_loop())
        except asyncio.CancelledError:
            client.remove_pending_request(future)
            raise
        fields = message_to_dict(response)
        if success_field is not None and not _lookup(fields, success_field):
            if error_text is not None:
                raise ToolError(render(error_text, fields))
            message = fields.get("message")
            detail = f": {message}" if isinstance(message, str) and message else ""
            raise ToolError(f"the {label} service reported a failure{detail}")
        return ToolResult(render(response_text, fields) if response_text else DONE_TEXT, fields)

    tool = Tool(
        name=name,
        description=description,
        schema=schema,
        run=run,
        timeout_s=timeout_s,
        side_effects=side_effects,
        cancellable=(not side_effects) if cancellable is None else cancellable,
        idempotent=idempotent,
    )
    client = node.create_client(service, service_name, callback_group=callback_group)
    readiness = _Readiness(client.service_is_ready)
    return tool


# --- from tool config ---------------------------------------------------------------------------

#: The keys a ``ros_action`` / ``ros_service`` config entry may have besides the common ones.
ACTION_KEYS = (
    "action_type",
    "action_name",
    "goal_map",
    "result_text",
    "feedback_text",
    "progress_field",
    "abort_text",
    "server_wait_s",
    "cancel_wait_s",
)
SERVICE_KEYS = (
    "service_type",
    "service_name",
    "request_map",
    "response_text",
    "success_field",
    "error_text",
    "server_wait_s",
)


def ros_tool_factory(
    node: Node, callback_group: CallbackGroup | None = None
) -> Callable[[str, Any], Tool]:
    """``factory(name, entry) -> Tool`` for the ``ros_action`` / ``ros_service`` entries of the
    tool config (:class:`venus_ros.harness.toolconfig.RosToolEntry`), with clients on ``node``.

    The entry's common keys (description, schema, timeout_s, side_effects, cancellable,
    idempotent) and its other keys (:data:`ACTION_KEYS` / :data:`SERVICE_KEYS`) become the
    arguments of :func:`make_ros_action_tool` / :func:`make_ros_service_tool`.

    Raises (from the factory):
        ValueError: for an unknown or missing key, and whatever the maker raises.
    """

    def build(name: str, entry: Any) -> Tool:
        action = entry.kind == "ros_action"
        allowed = ACTION_KEYS if action else SERVICE_KEYS
        settings = dict(entry.settings)
        unknown = sorted(set(settings) - set(allowed))
        if unknown:
            raise ValueError(
                f"unknown key(s) {', '.join(unknown)} for a {entry.kind} tool "
                f"(allowed: {', '.join(allowed)})"
            )
        missing = [key for key in allowed[:3] if key not in settings]
        if missing:
            raise ValueError(f"a {entry.kind} tool needs {', '.join(missing)}")
        make: Callable[..., Tool] = make_ros_action_tool if action else make_ros_service_tool
        return make(
            node,
            name,
            entry.description,
            entry.arg_schema,
            timeout_s=entry.timeout_s,
            side_effects=entry.side_effects,
            cancellable=entry.cancellable,
            idempotent=entry.idempotent,
            callback_group=callback_group,
            **settings,
        )

    return build
