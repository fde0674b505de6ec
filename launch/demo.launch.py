"""Demo with file sources: the bundled sample session in, the assistant's speech to a WAV file.

ros2 launch venus_ros demo.launch.py [frontend:=SPEC] [video_source:=file:PATH]
    [sink:=file:PATH] [namespace:=NS]
"""

from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription

SHARE = FindPackageShare("venus_ros")
ARGUMENTS = {
    "frontend": ("", "frontend spec ('' = the configured default)"),
    "video_source": ("", "camera: file:PATH, or '' for no camera"),
    "sink": ("file:/tmp/venus_demo_assistant.wav", "speaker: file:PATH or device"),
    "namespace": ("", "namespace of every node"),
}


def generate_launch_description() -> LaunchDescription:
    """venus.launch.py with file sources."""
    sample = PathJoinSubstitution([SHARE, "samples", "hello", "input.wav"])
    live = PythonLaunchDescriptionSource(PathJoinSubstitution([SHARE, "launch", "venus.launch.py"]))
    forwarded = {name: LaunchConfiguration(name) for name in ARGUMENTS}
    return LaunchDescription(
        [
            DeclareLaunchArgument(k, default_value=d, description=h)
            for k, (d, h) in ARGUMENTS.items()
        ]
        + [
            IncludeLaunchDescription(
                live, launch_arguments={**forwarded, "audio_source": ["file:", sample]}.items()
            )
        ]
    )
