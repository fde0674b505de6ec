"""Session recordings as rosbag2 bags (mcap storage), written and read with pure-Python ``rosbags``.

A bag is a folder (``metadata.yaml`` plus ``<name>.mcap``), exactly what ``ros2 bag record -s mcap``
writes, so ``ros2 bag play``, Foxglove and rosbags-based tools read it. Messages go in and come out
as raw CDR bytes: an rclpy raw subscription delivers them, ``Publisher.publish(bytes)`` sends them
back, and nothing here deserializes them.

Our own message types (``venus_interfaces/msg/*``) are registered in the typestore from their
``.msg`` text, so the bag carries their full definitions and type hashes (RIHS01, equal to the ones
rosidl generates) and any reader can decode them without our package.

This module does not import rclpy; :func:`message_class` imports message packages only when it is
called.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import sys
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from rosbags.interfaces import Connection, Qos
from rosbags.rosbag2 import Reader, StoragePlugin, Writer
from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

#: Package whose message definitions are added to the typestore.
INTERFACE_PACKAGE = "venus_interfaces"

#: Every topic of the graph (docs/ros.md) except the ``delegate`` action, with its ROS type name.
#: Names are as the nodes use them (relative, so a namespace moves them; ``/diagnostics`` absolute).
RECORDED_TOPICS: Mapping[str, str] = {
    "audio/in": "venus_interfaces/msg/AudioChunk",
    "camera/image_raw": "sensor_msgs/msg/Image",
    "camera/image_raw/compressed": "sensor_msgs/msg/CompressedImage",
    "camera/camera_info": "sensor_msgs/msg/CameraInfo",
    "audio/out": "venus_interfaces/msg/AudioChunk",
    "decision": "venus_interfaces/msg/UnitDecision",
    "audio/played": "venus_interfaces/msg/PlaybackAck",
    "transcript": "std_msgs/msg/String",
    "timeline": "venus_interfaces/msg/TimelineEvent",
    "backend_reply": "venus_interfaces/msg/BackendReply",
    "task_status": "venus_interfaces/msg/TaskStatus",
    "delivery": "venus_interfaces/msg/TaskStatus",
    "harness/heartbeat": "std_msgs/msg/Header",
    "markers": "visualization_msgs/msg/MarkerArray",
    "/diagnostics": "diagnostic_msgs/msg/DiagnosticArray",
}


class BagError(RuntimeError):
    """A bag cannot be created, written or read (the message names the path and why)."""


# --------------------------------------------------------------------------------------------
# Type store
# --------------------------------------------------------------------------------------------


def _store() -> Stores:
    """The closest built-in rosbags store to ROS 2 kilted (older rosbags: jazzy)."""
    return getattr(Stores, "ROS2_KILTED", None) or Stores.ROS2_JAZZY


def interface_share_dir() -> Path:
    """The folder holding ``msg/*.msg`` of :data:`INTERFACE_PACKAGE`.

    Looked for, in order: every prefix of ``AMENT_PREFIX_PATH`` (a sourced workspace), this
    interpreter's prefix (a venv install), the prefixes above the installed Python package, and
    finally the package source next to this project.

    Raises:
        BagError: no candidate has ``.msg`` files.
    """
    tried: list[Path] = []
    prefixes = [Path(p) for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    prefixes.append(Path(sys.prefix))
    spec = importlib.util.find_spec(INTERFACE_PACKAGE)
    if spec is not None and spec.origin:
        prefixes.extend(Path(spec.origin).resolve().parents)
    candidates = [prefix / "share" / INTERFACE_PACKAGE for prefix in prefixes]
    candidates.append(Path(__file__).resolve().parents[1] / INTERFACE_PACKAGE)
    for folder in candidates:
        if folder in tried:
            continue
        tried.append(folder)
        if any((folder / "msg").glob("*.msg")):
            return folder
    raise BagError(
        f"cannot find the {INTERFACE_PACKAGE} message definitions (msg/*.msg); looked in "
        + ", ".join(str(p) for p in tried)
    )


@functools.lru_cache(maxsize=1)
def typestore() -> Typestore:
    """The ROS 2 kilted typestore with every ``venus_interfaces/msg`` type registered (cached)."""
    store = get_typestore(_store())
    types: dict[str, Any] = {}
    for path in sorted((interface_share_dir() / "msg").glob("*.msg")):
        name = f"{INTERFACE_PACKAGE}/msg/{path.stem}"
        types.update(get_types_from_msg(path.read_text(encoding="utf-8"), name))
    store.register(types)
    return store


def message_class(type_name: str) -> type:
    """The generated Python class of a ROS type name such as ``venus_interfaces/msg/AudioChunk``.

    Imports the message package on first use (that pulls in the rosidl runtime, not rclpy).

    Raises:
        BagError: the name is malformed or its package is not installed.
    """
    parts = type_name.split("/")
    if len(parts) == 2:
        parts = [parts[0], "msg", parts[1]]
    if len(parts) != 3 or not all(parts):
        raise BagError(f"malformed message type name {type_name!r} (expected pkg/msg/Name)")
    package, kind, name = parts
    try:
        module = importlib.import_module(f"{package}.{kind}")
        return getattr(module, name)
    except (ImportError, AttributeError) as exc:
        raise BagError(f"message type {type_name!r} is not installed: {exc}") from exc


def full_type_name(type_name: str) -> str:
    """``pkg/Name`` → ``pkg/msg/Name``; full names unchanged."""
    parts = type_name.split("/")
    return f"{parts[0]}/msg/{parts[1]}" if len(parts) == 2 else type_name


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------


class BagWriter:
    """Writes raw CDR messages into a new rosbag2 bag with mcap storage.

    ``path`` is the bag folder to create (it must not exist); the data lands in
    ``path/<name>.mcap``. Connections are added on a topic's first message. The bag is only
    complete (indexed, with ``metadata.yaml``) after :meth:`close` — use it as a context manager.
    :meth:`add` and :meth:`close` may be called from different threads.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._store = typestore()
        self._connections: dict[tuple[str, str], Connection] = {}
        self.counts: Counter[str] = Counter()
        try:
            self._writer = Writer(
                self.path, version=Writer.VERSION_LATEST, storage_plugin=StoragePlugin.MCAP
            )
            self._writer.open()
        except Exception as exc:  # WriterError (path exists), OSError
            raise BagError(f"cannot create bag {self.path}: {exc}") from exc
        self._open = True

    @property
    def closed(self) -> bool:
        return not self._open

    @property
    def mcap_path(self) -> Path:
        """The mcap file inside the bag folder."""
        return self.path / f"{self.path.name}.mcap"

    def add(
        self,
        topic: str,
        msgtype: str,
        raw_cdr: bytes | bytearray | memoryview,
        t_ns: int,
        *,
        qos: Sequence[Qos] = (),
    ) -> None:
        """Write one serialized message.

        Args:
            topic: topic name as it should appear in the bag.
            msgtype: ROS type name (``pkg/msg/Name``; ``pkg/Name`` is accepted).
            raw_cdr: the CDR bytes exactly as received.
            t_ns: the message time (receive time, ns since the epoch).
            qos: the publishers' offered QoS profiles, stored with the topic on its first message
                (``ros2 bag play`` republishes with them).

        Raises:
            BagError: the bag is closed, or ``msgtype`` is unknown to the typestore.
        """
        msgtype = full_type_name(msgtype)
        with self._lock:
            if not self._open:
                raise BagError(f"bag {self.path} is closed")
            conn = self._connections.get((topic, msgtype))
            if conn is None:
                if msgtype not in self._store.fielddefs:
                    raise BagError(f"unknown message type {msgtype!r} for topic {topic!r}")
                conn = self._writer.add_connection(
                    topic, msgtype, typestore=self._store, offered_qos_profiles=list(qos)
                )
                self._connections[(topic, msgtype)] = conn
            self._writer.write(conn, int(t_ns), bytes(raw_cdr))
            self.counts[topic] += 1

    def close(self) -> None:
        """Finish the bag (chunk index, summary, ``metadata.yaml``); a second call does nothing."""
        with self._lock:
            if not self._open:
                return
            self._open = False
            self._writer.close()

    def __enter__(self) -> BagWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # Close even after an error: what was recorded so far stays readable.
        self.close()


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


def _reader(path: str | os.PathLike[str]) -> Reader:
    path = Path(path)
    if not path.exists():
        raise BagError(f"no bag at {path}")
    try:
        return Reader(path)
    except Exception as exc:
        raise BagError(f"cannot read bag {path}: {exc}") from exc


def topic_matches(topic: str, wanted: Iterable[str] | None) -> bool:
    """Whether bag topic ``topic`` is one of ``wanted`` (None: all). An absolute wanted name
    must be equal; a relative one (``timeline``) matches it in any namespace
    (``/timeline``, ``/robot1/timeline``)."""
    if wanted is None:
        return True
    for w in wanted:
        if topic == w or (not w.startswith("/") and ("/" + topic.lstrip("/")).endswith("/" + w)):
            return True
    return False


def read_bag(
    path: str | os.PathLike[str], topics: Iterable[str] | None = None
) -> Iterator[tuple[str, str, bytes, int]]:
    """Yield ``(topic, type, raw_cdr, t_ns)`` for every message, in time order.

    ``path`` is a bag folder or its ``.mcap`` file. ``topics`` keeps only those topics (see
    :func:`topic_matches`: ``timeline`` selects ``/timeline`` and ``/robot1/timeline``).

    Raises:
        BagError: no readable bag at ``path``.
    """
    wanted = None if topics is None else list(topics)
    reader = _reader(path)
    try:
        reader.open()
    except Exception as exc:
        raise BagError(f"cannot read bag {path}: {exc}") from exc
    try:
        conns = [c for c in reader.connections if topic_matches(c.topic, wanted)]
        if not conns:
            return
        for conn, t_ns, raw in reader.messages(connections=conns):
            yield conn.topic, conn.msgtype, bytes(raw), int(t_ns)
    finally:
        reader.close()


def bag_topics(path: str | os.PathLike[str]) -> dict[str, str]:
    """Topic name → type name of every topic in the bag."""
    reader = _reader(path)
    reader.open()
    try:
        return {c.topic: c.msgtype for c in reader.connections}
    finally:
        reader.close()


def offered_qos(path: str | os.PathLike[str]) -> dict[str, list[Qos]]:
    """Topic name → the QoS profiles its publishers offered while recording (may be empty)."""
    reader = _reader(path)
    reader.open()
    try:
        out: dict[str, list[Qos]] = {}
        for conn in reader.connections:
            out.setdefault(conn.topic, []).extend(getattr(conn.ext, "offered_qos_profiles", []))
        return out
    finally:
        reader.close()


def summary(path: str | os.PathLike[str]) -> dict[str, int]:
    """Message count per topic (from the bag's index; topics without messages count 0)."""
    reader = _reader(path)
    try:
        reader.open()
    except Exception as exc:
        raise BagError(f"cannot read bag {path}: {exc}") from exc
    try:
        counts: dict[str, int] = {}
        for conn in reader.connections:
            counts[conn.topic] = counts.get(conn.topic, 0) + conn.msgcount
        return counts
    finally:
        reader.close()


def format_summary(path: str | os.PathLike[str], counts: Mapping[str, int]) -> str:
    """One line: ``PATH: N messages (topic=n, ...)``."""
    total = sum(counts.values())
    detail = ", ".join(f"{t}={n}" for t, n in sorted(counts.items()))
    noun = "message" if total == 1 else "messages"
    return f"{path}: {total} {noun}" + (f" ({detail})" if detail else "")
