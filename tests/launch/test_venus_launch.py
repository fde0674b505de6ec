"""launch_testing check of launch/venus.launch.py, for machines with ROS 2 from the distro.

    launch_test tests/launch/test_venus_launch.py    # (after colcon build; source install/)

launch and launch_testing are not on pip, so under plain pytest here this module is skipped.
The live launch starts with file sources (the bundled sample, no camera, a WAV sink) and the
test waits until every node of the graph is up in the launch's namespace.
"""

from __future__ import annotations

import os
import tempfile
import time
import unittest

import pytest

pytest.importorskip("launch_testing")

import launch_testing.actions
import rclpy
from launch.actions import IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import PathJoinSubstitution
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription

NAMESPACE = "launch_test"
NODES = {"mic_node", "frontend_node", "harness_node", "speaker_node", "monitor_node", "frames_node"}


@pytest.mark.launch_test
def generate_test_description() -> LaunchDescription:
    """venus.launch.py on the bundled sample, without a camera or a sound card."""
    share = FindPackageShare("venus_ros")
    sink = os.path.join(tempfile.mkdtemp(prefix="venus_launch_"), "assistant.wav")
    live = PythonLaunchDescriptionSource(PathJoinSubstitution([share, "launch", "venus.launch.py"]))
    sample = PathJoinSubstitution([share, "samples", "hello", "input.wav"])
    return LaunchDescription(
        [
            IncludeLaunchDescription(
                live,
                launch_arguments={
                    "namespace": NAMESPACE,
                    "audio_source": ["file:", sample],
                    "video_source": "",
                    "sink": f"file:{sink}",
                }.items(),
            ),
            launch_testing.actions.ReadyToTest(),
        ]
    )


class TestGraphComesUp(unittest.TestCase):
    """Every node of the live launch appears in its namespace."""

    def test_every_node_is_up(self) -> None:
        rclpy.init()
        node = rclpy.create_node("launch_probe")
        try:
            deadline = time.monotonic() + 60.0
            seen: set[str] = set()
            while time.monotonic() < deadline and not NODES <= seen:
                rclpy.spin_once(node, timeout_sec=0.5)
                seen = {
                    n for n, ns in node.get_node_names_and_namespaces() if ns == f"/{NAMESPACE}"
                }
            self.assertLessEqual(NODES, seen)
        finally:
            node.destroy_node()
            rclpy.shutdown()
