"""Launch files and the parameter file, checked without launch_ros (not installable from pip).

Every executable a launch file starts must be a console script of the package, every parameter
it or config/venus.yaml sets must be declared by that node, with a value of the declared type.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest
import yaml

from venus_ros.nodes.params import flatten_parameters

ROOT = Path(__file__).resolve().parent.parent
LAUNCH_FILES = sorted((ROOT / "launch").glob("*.launch.py"))
PARAMS = yaml.safe_load((ROOT / "config" / "venus.yaml").read_text())


def _console_scripts() -> set[str]:
    return {ep.name for ep in entry_points(group="console_scripts") if ep.value.startswith("venus")}


def _launched_nodes(path: Path) -> dict[str, set[str]]:
    """executable -> parameter names overridden in the launch file."""
    nodes: dict[str, set[str]] = {}
    for call in ast.walk(ast.parse(path.read_text())):
        if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
            continue
        if call.func.id == "node" and call.args and isinstance(call.args[0], ast.Constant):
            overrides = call.args[1] if len(call.args) > 1 else None
            keys = (
                {k.value for k in overrides.keys if isinstance(k, ast.Constant)}
                if isinstance(overrides, ast.Dict)
                else set()
            )
            nodes[call.args[0].value] = keys
    return nodes


def _config_class(node_name: str) -> type:
    module = importlib.import_module(f"venus_ros.nodes.{node_name.removesuffix('_node')}")
    classes = [
        obj
        for obj in vars(module).values()
        if isinstance(obj, type)
        and dataclasses.is_dataclass(obj)
        and obj.__module__ == module.__name__
        and obj.__name__.endswith("Config")
    ]
    assert len(classes) == 1, f"{module.__name__} must define exactly one *Config dataclass"
    return classes[0]


def _declared(cls: type, prefix: str = "") -> dict[str, Any]:
    """Parameter name -> default, flattened like nodes/params.py declares them."""
    names: dict[str, Any] = {}
    for spec in dataclasses.fields(cls):
        if spec.default is not dataclasses.MISSING:
            default = spec.default
        else:
            default = spec.default_factory()  # type: ignore[misc]
        if dataclasses.is_dataclass(default):
            names.update(_declared(type(default), f"{prefix}{spec.name}."))
        else:
            names[f"{prefix}{spec.name}"] = default
    return names


def _same_type(value: Any, default: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(default, bool)
    if isinstance(default, (tuple, list)):
        return isinstance(value, list)
    return type(value) is type(default)


def test_there_is_a_live_and_a_demo_launch_file() -> None:
    assert {p.name for p in LAUNCH_FILES} == {"venus.launch.py", "demo.launch.py"}


def test_the_demo_launch_reuses_the_live_launch_file() -> None:
    assert "venus.launch.py" in (ROOT / "launch" / "demo.launch.py").read_text()


def test_every_launched_executable_is_a_console_script() -> None:
    scripts = _console_scripts()
    for executable in _launched_nodes(ROOT / "launch" / "venus.launch.py"):
        assert executable in scripts, f"venus.launch.py starts {executable}, not a console script"


def test_the_live_launch_starts_the_whole_node_set() -> None:
    launched = set(_launched_nodes(ROOT / "launch" / "venus.launch.py"))
    assert launched == {
        "mic_node",
        "camera_node",
        "frontend_node",
        "harness_node",
        "speaker_node",
        "monitor_node",
        "frames_node",
        "audio_bridge_node",
    }


def _node_declared(executable: str) -> dict[str, Any]:
    """Everything the node declares: its config, plus the lifecycle and diagnostics ones."""
    declared = _declared(_config_class(executable))
    module = importlib.import_module(f"venus_ros.nodes.{executable.removesuffix('_node')}")
    source = Path(module.__file__ or "").read_text()
    if "(ManagedNode)" in source:
        declared["autostart"] = True
    if "NodeDiagnostics(" in source:
        declared["hardware_id"] = ""
    return declared


def _shared(section: str) -> bool:
    return "*" in section.rsplit("/", 1)[-1]


def test_every_launch_override_is_a_declared_parameter() -> None:
    for executable, keys in _launched_nodes(ROOT / "launch" / "venus.launch.py").items():
        declared = _node_declared(executable)
        assert keys <= set(declared), f"{executable}: undeclared {keys - set(declared)}"


@pytest.mark.parametrize("section", sorted(PARAMS), ids=str)
def test_every_parameter_file_key_is_declared_with_its_type(section: str) -> None:
    if _shared(section):  # a /** block: each key for at least one node of the launch
        declared = {}
        for executable in _launched_nodes(ROOT / "launch" / "venus.launch.py"):
            declared |= _node_declared(executable)
    else:
        declared = _node_declared(section.rsplit("/", 1)[-1])
    given = flatten_parameters(PARAMS[section]["ros__parameters"])
    unknown = set(given) - set(declared)
    assert not unknown, f"{section}: keys no node declares: {sorted(unknown)}"
    for key, value in given.items():
        assert _same_type(value, declared[key]), f"{section}.{key}: {value!r} vs default type"


def test_the_parameter_file_configures_every_launched_node() -> None:
    sections = {s.rsplit("/", 1)[-1] for s in PARAMS if not _shared(s)}
    assert set(_launched_nodes(ROOT / "launch" / "venus.launch.py")) <= sections
