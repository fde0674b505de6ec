"""Typed, declared, validated parameters: a frozen dataclass in, the same dataclass out.

Each field of a node's config dataclass becomes one ROS parameter with the field's default, type
and help text (``field(metadata={"help": ...})``). Structural parameters (what is opened, loaded
or wired) are read-only: ``ros2 param set`` refuses them with rclpy's "read-only" reason. A field
marked ``metadata={"tunable": True, "range": (lo, hi)}`` (what :func:`tunable` writes; or named
in ``declare_config``'s ``tunable`` argument, for configs defined outside the nodes) can be set
at run time: its descriptor carries the range, a set is refused when it is out of range or when
the config's own validation (``__post_init__``) rejects the new value, and an accepted set
replaces ``node.config`` with a new frozen config and calls the node's ``on_change``.

Overrides that name no declared parameter are an error, so a misspelled key in a node's own
section of a YAML file (``/**/mic_node:``) stops the node with a clear message instead of being
ignored. Keys in a shared section (``/**:``, ``/**/*:``) are meant for several nodes, so a node
ignores the ones it does not declare; ``qos_overrides.*`` keys are checked by rclpy itself. The
overrides are read from the node's own command line arguments (``--params-file``, ``-p``) and its
``parameter_overrides``, never from rclpy's private attributes.
"""

from __future__ import annotations

import dataclasses
import math
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import yaml
from rcl_interfaces.msg import (
    FloatingPointRange,
    IntegerRange,
    ParameterDescriptor,
    SetParametersResult,
)
from rclpy.exceptions import (
    InvalidParameterTypeException,
    InvalidParameterValueException,
    ParameterException,
)
from rclpy.node import Node
from rclpy.parameter import Parameter

T = TypeVar("T")

#: Parameters every rclpy node has, which configs never declare.
_BUILTIN = {"use_sim_time", "start_type_description_service", "start_parameter_event_publisher"}
#: Prefix of the QoS override parameters rclpy declares for entities that allow them.
QOS_OVERRIDES = "qos_overrides."

#: Command line arguments of this process, as ``rclpy.init`` saw them (set by ``run_node``).
_process_args: list[str] = list(sys.argv)

#: A tunable field's range: (low, high), both inclusive.
Range = tuple[float, float]


def tunable(default: Any, text: str, low: float, high: float) -> Any:
    """A config field with help ``text`` that can be set at run time within ``[low, high]``."""
    return dataclasses.field(
        default=default, metadata={"help": text, "tunable": True, "range": (low, high)}
    )


class ConfigError(ValueError):
    """A parameter is unknown, of the wrong type, or fails validation."""


def set_process_arguments(args: Sequence[str]) -> None:
    """Record the arguments ``rclpy.init`` was given, for the unknown-key check."""
    _process_args[:] = list(args)


def declare_config(
    node: Node,
    cls: type[T],
    prefix: str = "",
    *,
    tunable: Mapping[str, Range | None] | None = None,
    on_change: Callable[[T], None] | None = None,
) -> T:
    """Declare every field of dataclass ``cls`` on ``node`` and build the config from them.

    Args:
        node: the node.
        cls: a dataclass whose fields have defaults (nested dataclass fields get a
            ``name.`` prefix).
        prefix: prefix for the parameter names.
        tunable: extra run-time tunable parameters (dotted names) and their ranges (None = no
            range), for config classes that do not mark them in their field metadata.
        on_change: called with the new config after an accepted run-time set (on the executor
            thread); ``node.config`` is already the new config then.

    Raises:
        ConfigError: naming the parameter that is wrong and why.
    """
    extra = dict(tunable or {})
    names: dict[str, tuple[Any, bool]] = {}
    config = _declare(node, cls, prefix, extra, names)
    tunables = {name for name, (_, is_tunable) in names.items() if is_tunable}
    if prefix == "" and tunables:
        _bind(node, cls, tunables, on_change)
    return config


def _declare(
    node: Node,
    cls: type[T],
    prefix: str,
    extra: Mapping[str, Range | None],
    names: dict[str, tuple[Any, bool]],
) -> T:
    values: dict[str, Any] = {}
    for spec in dataclasses.fields(cls):  # type: ignore[arg-type]
        name = f"{prefix}{spec.name}"
        default = _default(spec)
        if dataclasses.is_dataclass(default):
            values[spec.name] = _declare(node, type(default), f"{name}.", extra, names)
            continue
        is_tunable = bool(spec.metadata.get("tunable")) or name in extra
        span = extra.get(name) or spec.metadata.get("range")
        descriptor = _descriptor(spec, default, is_tunable, span)
        declared = _declared_value(spec, default)
        try:
            value = node.declare_parameter(name, declared, descriptor).value
        except (
            InvalidParameterTypeException,
            InvalidParameterValueException,
            ParameterException,
            TypeError,
        ) as exc:
            raise ConfigError(f"parameter {name!r}: {exc}") from exc
        if isinstance(default, tuple):
            value = default if value is None else tuple(value)
        values[spec.name] = value
        names[name] = (value, is_tunable)
    try:
        config = cls(**values)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{node.get_name()}: {prefix}{exc}") from exc
    return config


def _descriptor(
    spec: dataclasses.Field, default: Any, is_tunable: bool, span: Range | None
) -> ParameterDescriptor:
    help_text = spec.metadata.get("help", "")
    if not is_tunable:
        return ParameterDescriptor(
            description=f"{help_text} (read-only: set it in the parameter file and restart)",
            read_only=True,
        )
    descriptor = ParameterDescriptor(description=f"{help_text} (tunable at run time)")
    if span is not None:
        low, high = span
        if isinstance(default, bool):
            pass
        elif isinstance(default, int):
            descriptor.integer_range = [
                IntegerRange(from_value=int(low), to_value=int(high), step=1)
            ]
        elif isinstance(default, float):
            descriptor.floating_point_range = [
                FloatingPointRange(from_value=float(low), to_value=float(high), step=0.0)
            ]
    return descriptor


def _bind(
    node: Node, cls: type[T], tunables: set[str], on_change: Callable[[T], None] | None
) -> None:
    """Validate run-time sets of ``tunables`` against the config and apply accepted ones."""

    def candidate(params: Iterable[Parameter]) -> T | None:
        changes = {p.name: p.value for p in params if p.name in tunables}
        if not changes:
            return None
        current = node.config  # type: ignore[attr-defined]
        return _replace(current, changes)

    def check(params: list[Parameter]) -> SetParametersResult:
        try:
            candidate(params)
        except (TypeError, ValueError) as exc:
            return SetParametersResult(successful=False, reason=f"rejected: {exc}")
        return SetParametersResult(successful=True)

    def apply(params: list[Parameter]) -> None:
        new = candidate(params)
        if new is None:
            return
        node.config = new  # type: ignore[attr-defined]
        node.get_logger().info(
            "parameters set: " + ", ".join(f"{p.name}={p.value!r}" for p in params)
        )
        if on_change is not None:
            on_change(new)

    node.add_on_set_parameters_callback(check)
    node.add_post_set_parameters_callback(apply)


def _replace(config: Any, changes: Mapping[str, Any]) -> Any:
    """A copy of nested frozen dataclass ``config`` with dotted ``changes`` (validated)."""
    direct: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for name, value in changes.items():
        head, _, rest = name.partition(".")
        if rest:
            nested.setdefault(head, {})[rest] = value
        else:
            current = getattr(config, head)
            if isinstance(current, float) and isinstance(value, int):
                value = float(value)
            if isinstance(current, float) and not math.isfinite(value):
                raise ValueError(f"{name} must be finite, got {value}")
            direct[head] = value
    for head, sub in nested.items():
        direct[head] = _replace(getattr(config, head), sub)
    return dataclasses.replace(config, **direct)


def reject_unknown_overrides(
    node: Node, parameter_overrides: Iterable[Parameter] | None = None
) -> None:
    """Raise :class:`ConfigError` if an override meant for this node names no declared parameter.

    Args:
        node: the node, after it declared its parameters.
        parameter_overrides: the overrides the node was constructed with, if any.
    """
    specific = override_names(node.get_fully_qualified_name(), _process_args)
    specific |= {p.name for p in parameter_overrides or ()}
    unknown = sorted(
        name
        for name in specific
        if name not in _BUILTIN
        and not name.startswith(QOS_OVERRIDES)
        and not node.has_parameter(name)
    )
    if unknown:
        raise ConfigError(
            f"{node.get_name()}: unknown parameter(s) {', '.join(unknown)} "
            f"(check the spelling in the parameter file)"
        )


#: ROS arguments that take a value (``--ros-args`` section of a command line).
_WITH_VALUE = {
    "-p",
    "--param",
    "--params-file",
    "-r",
    "--remap",
    "--log-level",
    "--log-config-file",
    "--log-file-name",
    "-e",
    "--enclave",
}


def override_names(fully_qualified_name: str, args: Sequence[str]) -> set[str]:
    """Parameter names that ``args`` set for this node specifically (not via a wildcard block).

    Reads ``-p name:=value`` and ``-p node:name:=value`` (for this node's name) and every
    ``--params-file`` block whose node pattern ends in this node's name.
    """
    node_name = fully_qualified_name.rsplit("/", 1)[-1]
    names: set[str] = set()
    for option, value in _ros_arguments(args):
        if option in ("-p", "--param"):
            target, sep, _ = value.partition(":=")
            if not sep:
                continue
            owner, colon, name = target.rpartition(":")
            if not colon:
                names.add(target)
            elif owner.rsplit("/", 1)[-1] == node_name:
                names.add(name)
        elif option == "--params-file":
            names |= _file_names(value, fully_qualified_name)
    return names


def _ros_arguments(args: Sequence[str]) -> list[tuple[str, str]]:
    """(option, value) pairs inside the ``--ros-args`` sections of ``args``."""
    pairs: list[tuple[str, str]] = []
    inside = False
    items = list(args)
    i = 0
    while i < len(items):
        arg = items[i]
        if arg == "--ros-args":
            inside = True
        elif arg == "--":
            inside = False
        elif inside and arg in _WITH_VALUE and i + 1 < len(items):
            pairs.append((arg, items[i + 1]))
            i += 1
        i += 1
    return pairs


def _file_names(path: str, fully_qualified_name: str) -> set[str]:
    """Names set in ``path``'s blocks that target this node by name."""
    try:
        with open(path, encoding="utf-8") as handle:
            document = yaml.safe_load(handle) or {}
    except (OSError, yaml.YAMLError):
        return set()  # rclpy itself reports an unreadable parameter file
    names: set[str] = set()
    if not isinstance(document, dict):
        return names
    for pattern, block in document.items():
        if not isinstance(block, dict) or not isinstance(block.get("ros__parameters"), dict):
            continue
        last = str(pattern).rstrip("/").rsplit("/", 1)[-1]
        if "*" in last or not _matches(str(pattern), fully_qualified_name):
            continue
        names |= set(flatten_parameters(block["ros__parameters"]))
    return names


def _matches(pattern: str, fully_qualified_name: str) -> bool:
    """ROS 2 node pattern matching: ``*`` is one name token, ``**`` any number of them."""
    if not pattern.startswith("/"):
        pattern = "/" + pattern
    regex = ""
    for token in pattern.strip("/").split("/"):
        if token == "**":
            regex += r"(/[^/]+)*"
        else:
            regex += "/" + re.escape(token).replace(r"\*", "[^/]*")
    return re.fullmatch(regex or "/", fully_qualified_name) is not None


def flatten_parameters(params: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested ``ros__parameters`` as dotted parameter names, the way ROS declares them."""
    flat: dict[str, Any] = {}
    for key, value in params.items():
        if isinstance(value, dict):
            flat.update(flatten_parameters(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


_ARRAY_TYPES = {
    "str": Parameter.Type.STRING_ARRAY,
    "int": Parameter.Type.INTEGER_ARRAY,
    "float": Parameter.Type.DOUBLE_ARRAY,
    "bool": Parameter.Type.BOOL_ARRAY,
}


def _declared_value(spec: dataclasses.Field, default: Any) -> Any:
    """What to pass to declare_parameter: lists for tuples, a typed array for an empty one."""
    if not isinstance(default, tuple):
        return default
    if default:
        return list(default)
    # An empty list would be declared as a byte array; take the type from the annotation.
    annotation = str(spec.type)
    element = annotation.removeprefix("tuple[").split(",")[0].strip()
    if element not in _ARRAY_TYPES:
        raise ConfigError(f"config field {spec.name!r}: cannot declare {annotation} parameters")
    return _ARRAY_TYPES[element]


def _default(spec: dataclasses.Field) -> Any:
    if spec.default is not dataclasses.MISSING:
        return spec.default
    if spec.default_factory is not dataclasses.MISSING:
        return spec.default_factory()
    raise ConfigError(f"config field {spec.name!r} has no default")
