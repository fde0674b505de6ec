"""Live robot: microphone, camera, frontend, harness, speaker and monitor, each in its process.

ros2 launch venus_ros venus.launch.py [frontend:=SPEC] [audio_source:=device|file:PATH]
    [video_source:=device|file:PATH|''] [sink:=device|file:PATH] [namespace:=NS]
    [params_file:=PATH]
"""

from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution, PythonExpression
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription

ARGUMENTS = {
    "frontend": ("", "frontend spec, e.g. scripted:FILE ('' = the configured default)"),
    "audio_source": ("device", "microphone: device or file:PATH"),
    "video_source": ("device", "camera: device, file:PATH, or '' for no camera"),
    "sink": ("device", "speaker: device or file:PATH"),
    "namespace": ("", "namespace of every node"),
    "params_file": ("", "parameter YAML ('' = the package's config/venus.yaml)"),
}


def generate_launch_description() -> LaunchDescription:
    """The live node set."""
    arg = LaunchConfiguration
    default_params = PathJoinSubstitution([FindPackageShare("venus_ros"), "config", "venus.yaml"])
    params = PythonExpression(["'", arg("params_file"), "' or '", default_params, "'"])

    def node(executable: str, overrides: dict | None = None, **kwargs) -> Node:
        return Node(
            package="venus_ros",
            executable=executable,
            name=executable,
            namespace=arg("namespace"),
            parameters=[params, overrides or {}],
            output="screen",
            **kwargs,
        )

    frontend_overrides = {"frontend": arg("frontend")}
    return LaunchDescription(
        [
            DeclareLaunchArgument(k, default_value=d, description=h)
            for k, (d, h) in ARGUMENTS.items()
        ]
        + [
            node("mic_node", {"source": arg("audio_source")}),
            node(
                "camera_node",
                {"source": arg("video_source")},
                condition=IfCondition(PythonExpression(["'", arg("video_source"), "' != ''"])),
            ),
            node("frontend_node", frontend_overrides),
            node("harness_node", respawn=True, respawn_delay=1.0),
            node("speaker_node", {"sink": arg("sink")}),
            node("monitor_node"),
        ]
    )
