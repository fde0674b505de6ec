"""The demo graph with file sources: venus.launch.py on the bundled multi-turn session, plus the
simulated robot and the session recorder (what ``venus-ros demo`` runs).

ros2 launch venus_ros demo.launch.py [frontend:=SPEC] [video_source:=file:PATH]
    [sink:=file:PATH] [namespace:=NS] [bag:=FOLDER]

The harness runs the demo's tools (config/demo_tools.yaml: the built-ins and ``go_to``, served
by sim_robot_node): the launch writes a copy of config/venus.yaml with that ``tools_file`` into a
temporary folder and passes it as venus.launch.py's ``params_file``.
"""

import tempfile
from pathlib import Path

from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription, OpaqueFunction
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription

SHARE = FindPackageShare("venus_ros")
ARGUMENTS = {
    "frontend": ("cascade", "frontend spec (default: the cascade)"),
    "video_source": ("", "camera: file:PATH, or '' for no camera"),
    "sink": ("file:/tmp/venus_demo_assistant.wav", "speaker: file:PATH or device"),
    "namespace": ("", "namespace of every node"),
    "bag": ("", "recorder bag folder ('' = venus_session_<time> in the working directory)"),
}
FORWARDED = ("frontend", "video_source", "sink", "namespace")


def _graph(context, *args, **kwargs):
    """venus.launch.py with the demo's parameter file, the recorder and the simulated robot."""
    from venus_ros.demo import write_demo_params

    params = write_demo_params(Path(tempfile.mkdtemp(prefix="venus_demo_")) / "venus_demo.yaml")
    session = PathJoinSubstitution([SHARE, "samples", "demo", "input.wav"])
    live = PythonLaunchDescriptionSource(PathJoinSubstitution([SHARE, "launch", "venus.launch.py"]))
    forwarded = {name: LaunchConfiguration(name) for name in FORWARDED}
    namespace = LaunchConfiguration("namespace")
    return [
        IncludeLaunchDescription(
            live,
            launch_arguments={
                **forwarded,
                "audio_source": ["file:", session],
                "params_file": str(params),
            }.items(),
        ),
        Node(
            package="venus_ros",
            executable="recorder_node",
            name="recorder_node",
            namespace=namespace,
            parameters=[str(params), {"path": LaunchConfiguration("bag")}],
            output="screen",
        ),
        Node(
            package="venus_ros",
            executable="sim_robot_node",
            name="sim_robot_node",
            namespace=namespace,
            output="screen",
        ),
    ]


def generate_launch_description() -> LaunchDescription:
    """The demo graph."""
    return LaunchDescription(
        [
            DeclareLaunchArgument(k, default_value=d, description=h)
            for k, (d, h) in ARGUMENTS.items()
        ]
        + [OpaqueFunction(function=_graph)]
    )
