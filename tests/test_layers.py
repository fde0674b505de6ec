"""Layering rules: the ROS-free packages never pull in ROS or heavy inference libraries.

Every module under the layered packages is imported in a fresh interpreter, and afterwards none of
the forbidden top-level packages may be in ``sys.modules``, nor may the import have even tried to
find one (so a guarded ``try: import torch`` is caught on a machine without torch too). Separately,
the source of those packages must not mention ``import rclpy`` / ``from rclpy`` anywhere, not even
inside a function. Modules are discovered by walking the folders, so new ones are covered.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERED_PACKAGES = ("core", "harness", "audio", "memory", "eval", "text")
FORBIDDEN = (
    "rclpy",
    "torch",
    "onnxruntime",
    "transformers",
    "tensorrt",
    "cv2",
    "livekit",
    "faster_whisper",
    "ctranslate2",
    "piper",
)

#: Modules of the layered packages that may import rclpy: none. The ROS action and service tool
#: adapters live with the ROS glue (``venus_ros/ros/tools.py``), outside the layered packages.
ROS_ADAPTERS: tuple[str, ...] = ()


def layered_dirs() -> list[Path]:
    return [
        ROOT / "venus_ros" / name
        for name in LAYERED_PACKAGES
        if (ROOT / "venus_ros" / name).is_dir()
    ]


def python_files() -> list[Path]:
    files = []
    for folder in layered_dirs():
        files.extend(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)
    return sorted(p for p in files if p.relative_to(ROOT).as_posix() not in ROS_ADAPTERS)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = sorted({module_name(p) for p in python_files()})
FILES = [p.relative_to(ROOT).as_posix() for p in python_files()]

# Runs in the child interpreter: argv[1] is the module to import (or "" for a bare baseline).
_PROBE = """
import importlib, importlib.abc, json, sys
forbidden = set(sys.argv[2].split(","))
attempted = set()

class Spy(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in forbidden:
            attempted.add(name.partition(".")[0])
        return None

def forbidden_loaded():
    return {n.partition(".")[0] for n in sys.modules} & forbidden

before = forbidden_loaded()
sys.meta_path.insert(0, Spy())
origin = None
if sys.argv[1]:
    origin = getattr(importlib.import_module(sys.argv[1]), "__file__", None)
loaded = forbidden_loaded()
print(json.dumps({
    "before": sorted(before),
    "loaded": sorted(loaded - before),
    "attempted": sorted(attempted),
    "origin": origin,
}))
"""


def _probe(module: str) -> subprocess.CompletedProcess[str]:
    env = os.environ.copy()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return subprocess.run(
        [sys.executable, "-c", _PROBE, module, ",".join(FORBIDDEN)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture(scope="module")
def import_reports() -> dict[str, subprocess.CompletedProcess[str]]:
    """One fresh interpreter per module, run in parallel; keyed by module name ("" = baseline)."""
    names = ["", *MODULES]
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
        return dict(zip(names, pool.map(_probe, names), strict=True))


def _report(proc: subprocess.CompletedProcess[str], what: str) -> dict[str, object]:
    assert proc.returncode == 0, f"importing {what} failed:\n{proc.stderr}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_layered_packages_are_discovered() -> None:
    assert "venus_ros.core" in MODULES
    assert "venus_ros.core.timeline" in MODULES
    assert all(name.startswith("venus_ros.") for name in MODULES)


def test_ros_adapters_exist() -> None:
    # a stale entry would exempt whatever file later takes its name
    assert all((ROOT / path).is_file() for path in ROS_ADAPTERS)


def test_bare_interpreter_loads_no_forbidden_package(
    import_reports: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    report = _report(import_reports[""], "nothing")
    assert report["before"] == [] and report["loaded"] == [], (
        f"the interpreter itself preloads {report['before']}; the import checks would be blind"
    )


@pytest.mark.parametrize("module", MODULES)
def test_module_imports_without_ros_or_inference_libraries(
    module: str, import_reports: dict[str, subprocess.CompletedProcess[str]]
) -> None:
    report = _report(import_reports[module], module)
    origin = report["origin"]
    assert origin is not None and Path(str(origin)).resolve().is_relative_to(ROOT), (
        f"{module} was imported from {origin}, not from this checkout"
    )
    assert report["loaded"] == [], f"importing {module} loaded {report['loaded']}"
    assert report["attempted"] == [], f"importing {module} tried to import {report['attempted']}"


def rclpy_imports(source: str, filename: str = "<source>") -> list[int]:
    """Line numbers of every import of rclpy in ``source``, at any nesting depth."""

    def is_rclpy(name: str | None) -> bool:
        return name is not None and (name == "rclpy" or name.startswith("rclpy."))

    lines = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Import) and any(is_rclpy(a.name) for a in node.names):
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and is_rclpy(node.module):
            lines.append(node.lineno)
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            arg = node.args[0]
            if (
                name in ("import_module", "__import__")
                and isinstance(arg, ast.Constant)
                and isinstance(arg.value, str)
                and is_rclpy(arg.value)
            ):
                lines.append(node.lineno)
    return sorted(lines)


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("import rclpy\n", [1]),
        ("import os, rclpy.node as node\n", [1]),
        ("from rclpy.node import Node\n", [1]),
        ("def f():\n    if True:\n        import rclpy\n", [3]),
        ("class A:\n    def m(self):\n        from rclpy import qos\n", [3]),
        ("import importlib\nimportlib.import_module('rclpy.node')\n", [2]),
        ("__import__('rclpy')\n", [1]),
        ("import rclpyx\nfrom .rclpy import x\n# import rclpy\ns = 'import rclpy'\n", []),
    ],
)
def test_rclpy_scan_finds_imports_at_any_depth(source: str, found: list[int]) -> None:
    assert rclpy_imports(source) == found


@pytest.mark.parametrize("path", FILES)
def test_source_never_imports_rclpy(path: str) -> None:
    lines = rclpy_imports((ROOT / path).read_text(encoding="utf-8"), filename=path)
    assert lines == [], f"{path} imports rclpy at line(s) {lines}"


#: The evaluation never grades with the code it grades: its metrics, judges and synthesizer
#: import nothing from these packages (anywhere in the file). Only the runner drives them.
EVAL_UNTOUCHABLE = ("venus_ros.harness", "venus_ros.frontends", "venus_ros.training")
EVAL_DRIVERS = ("venus_ros/eval/runner.py",)
EVAL_FILES = sorted(
    p.relative_to(ROOT).as_posix()
    for p in (ROOT / "venus_ros" / "eval").rglob("*.py")
    if "__pycache__" not in p.parts and p.relative_to(ROOT).as_posix() not in EVAL_DRIVERS
)


def package_imports(source: str, packages: tuple[str, ...], filename: str = "<source>") -> list:
    """``(line, module)`` of every absolute or relative import of ``packages`` in ``source``."""

    def hit(name: str | None) -> bool:
        return name is not None and any(name == p or name.startswith(p + ".") for p in packages)

    found = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if hit(a.name)]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # relative to venus_ros/eval: one level is eval, two is venus_ros
                base = "venus_ros" if node.level == 2 else "venus_ros.eval"
                module = f"{base}.{module}" if module else base
            names = [module] + [f"{module}.{a.name}" for a in node.names]
            if any(hit(n) for n in names):
                found.append((node.lineno, module))
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            arg = node.args[0]
            if name in ("import_module", "__import__") and isinstance(arg, ast.Constant):
                if isinstance(arg.value, str) and hit(arg.value):
                    found.append((node.lineno, arg.value))
    return sorted(found)


def test_eval_scan_finds_imports_of_what_it_grades() -> None:
    source = (
        "from venus_ros.harness.tools import X\ndef f():\n    import venus_ros.frontends\n"
        "from .. import training\nimport venus_ros.harnessx\n"
    )
    assert [line for line, _ in package_imports(source, EVAL_UNTOUCHABLE)] == [1, 3, 4]


def test_eval_drivers_exist_and_the_rule_covers_the_rest() -> None:
    assert all((ROOT / p).is_file() for p in EVAL_DRIVERS)
    assert "venus_ros/eval/metrics.py" in EVAL_FILES and "venus_ros/eval/synth.py" in EVAL_FILES


@pytest.mark.parametrize("path", EVAL_FILES)
def test_eval_imports_nothing_it_grades(path: str) -> None:
    found = package_imports((ROOT / path).read_text(encoding="utf-8"), EVAL_UNTOUCHABLE, path)
    assert found == [], f"{path} imports {found}: only {EVAL_DRIVERS} may drive those packages"
