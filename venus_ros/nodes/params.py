"""Typed, declared, validated parameters: a frozen dataclass in, the same dataclass out.

Each field of a node's config dataclass becomes one read-only ROS parameter with the field's
default, type and help text (``field(metadata={"help": ...})``). Overrides that name no declared
parameter are an error, so a misspelled key in a YAML file stops the node with a clear message
instead of being ignored.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from rcl_interfaces.msg import ParameterDescriptor
from rclpy.exceptions import InvalidParameterTypeException, ParameterException
from rclpy.node import Node
from rclpy.parameter import Parameter

T = TypeVar("T")

#: Parameters every rclpy node has, which configs never declare.
_BUILTIN = {"use_sim_time", "start_type_description_service"}


class ConfigError(ValueError):
    """A parameter is unknown, of the wrong type, or fails validation."""


def declare_config(node: Node, cls: type[T], prefix: str = "") -> T:
    """Declare every field of dataclass ``cls`` on ``node`` and build the config from them.

    Args:
        node: the node.
        cls: a dataclass whose fields have defaults (nested dataclass fields get a
            ``name.`` prefix).
        prefix: prefix for the parameter names.

    Raises:
        ConfigError: naming the parameter that is wrong and why.
    """
    values: dict[str, Any] = {}
    for spec in dataclasses.fields(cls):  # type: ignore[arg-type]
        name = f"{prefix}{spec.name}"
        default = _default(spec)
        if dataclasses.is_dataclass(default):
            values[spec.name] = declare_config(node, type(default), prefix=f"{name}.")
            continue
        descriptor = ParameterDescriptor(description=spec.metadata.get("help", ""), read_only=True)
        declared = _declared_value(spec, default)
        try:
            value = node.declare_parameter(name, declared, descriptor).value
        except (InvalidParameterTypeException, ParameterException, TypeError) as exc:
            raise ConfigError(f"parameter {name!r}: {exc}") from exc
        if isinstance(default, tuple):
            value = default if value is None else tuple(value)
        values[spec.name] = value
    try:
        config = cls(**values)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{node.get_name()}: {prefix}{exc}") from exc
    return config


def reject_unknown_overrides(node: Node) -> None:
    """Raise :class:`ConfigError` if a parameter file or ``-p`` names an undeclared parameter."""
    overrides = getattr(node, "_parameter_overrides", {})
    unknown = sorted(n for n in overrides if n not in _BUILTIN and not node.has_parameter(n))
    if unknown:
        raise ConfigError(
            f"{node.get_name()}: unknown parameter(s) {', '.join(unknown)} "
            f"(check the spelling in the parameter file)"
        )


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
