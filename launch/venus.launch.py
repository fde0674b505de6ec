"""Live robot: microphone, camera, frontend, harness, speaker, monitor and the static TF frames,
each in its process.

ros2 launch venus_ros venus.launch.py [frontend:=SPEC] [audio_source:=device|file:PATH]
    [video_source:=device|file:PATH|''] [sink:=device|file:PATH] [namespace:=NS]
    [params_file:=PATH] [use_sim_time:=false] [log_level:=info] [autostart:=true]
    [rviz:=false] [audio_common:=false] [image_transport:=raw|compressed]
    [audio_in_topic:=audio/in] [image_topic:=camera/image_raw] [audio_out_topic:=audio/out]

The mic, camera, frontend and speaker are lifecycle nodes: with ``autostart:=false`` they wait
unconfigured for a lifecycle manager (``ros2 lifecycle set /mic_node configure`` ...);
``audio_common:=true`` adds audio_bridge_node (audio_common's ``audio`` in, ``assistant/audio``
out); ``rviz:=true`` opens RViz on config/venus.rviz in the same namespace. The topic arguments
remap the frontend's inputs and output (e.g. ``image_topic:=/camera/color/image_raw`` for a
RealSense driver).
"""

from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution, PythonExpression
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription

ARGUMENTS = {
    "frontend": (
        "cascade:aec",
        "frontend spec: the cascade with echo cancellation (the microphone hears the speaker); "
        "cascade for an input with no speaker in it; scripted:FILE",
    ),
    "audio_source": ("device", "microphone: device or file:PATH"),
    "video_source": ("device", "camera: device, file:PATH, or '' for no camera"),
    "sink": ("device", "speaker: device or file:PATH"),
    "namespace": ("", "namespace of every node"),
    "params_file": ("", "parameter YAML ('' = the package's config/venus.yaml)"),
    "use_sim_time": ("false", "every node uses /clock"),
    "log_level": ("info", "log level of every node"),
    "autostart": ("true", "lifecycle nodes configure and activate themselves"),
    "rviz": ("false", "open RViz with config/venus.rviz"),
    "audio_common": ("false", "bridge audio_common's AudioStamped in and out"),
    "image_transport": ("raw", "frontend frames: raw or compressed"),
    "audio_in_topic": ("audio/in", "the frontend's microphone topic"),
    "image_topic": ("camera/image_raw", "the frontend's camera topic (its /compressed too)"),
    "audio_out_topic": ("audio/out", "the assistant's speech topic"),
}


def generate_launch_description() -> LaunchDescription:
    """The live node set."""
    arg = LaunchConfiguration
    share = FindPackageShare("venus_ros")
    default_params = PathJoinSubstitution([share, "config", "venus.yaml"])
    params = PythonExpression(["'", arg("params_file"), "' or '", default_params, "'"])
    use_sim_time = PythonExpression(["'", arg("use_sim_time"), "'.lower() == 'true'"])
    autostart = PythonExpression(["'", arg("autostart"), "'.lower() == 'true'"])
    speech_remap = [("audio/out", arg("audio_out_topic"))]

    def node(executable: str, overrides: dict | None = None, **kwargs) -> Node:
        return Node(
            package="venus_ros",
            executable=executable,
            name=executable,
            namespace=arg("namespace"),
            parameters=[params, {"use_sim_time": use_sim_time}, overrides or {}],
            arguments=["--ros-args", "--log-level", arg("log_level")],
            output="screen",
            **kwargs,
        )

    frontend_overrides = {
        "frontend": arg("frontend"),
        "image_transport": arg("image_transport"),
        "autostart": autostart,
    }
    image_remaps = [
        ("camera/image_raw", arg("image_topic")),
        ("camera/image_raw/compressed", [arg("image_topic"), "/compressed"]),
    ]
    return LaunchDescription(
        [
            DeclareLaunchArgument(k, default_value=d, description=h)
            for k, (d, h) in ARGUMENTS.items()
        ]
        + [
            node(
                "mic_node",
                {"source": arg("audio_source"), "autostart": autostart},
                remappings=[("audio/in", arg("audio_in_topic"))],
            ),
            node(
                "camera_node",
                {"source": arg("video_source"), "autostart": autostart},
                condition=IfCondition(PythonExpression(["'", arg("video_source"), "' != ''"])),
            ),
            node(
                "frontend_node",
                frontend_overrides,
                remappings=[("audio/in", arg("audio_in_topic")), *image_remaps, *speech_remap],
            ),
            node("harness_node", respawn=True, respawn_delay=1.0),
            node(
                "speaker_node",
                {"sink": arg("sink"), "autostart": autostart},
                remappings=speech_remap,
            ),
            node("monitor_node"),
            node("frames_node"),
            node(
                "audio_bridge_node",
                {"autostart": autostart},
                remappings=[("audio/in", arg("audio_in_topic")), *speech_remap],
                condition=IfCondition(arg("audio_common")),
            ),
            Node(
                package="rviz2",
                executable="rviz2",
                name="rviz2",
                namespace=arg("namespace"),
                arguments=["-d", PathJoinSubstitution([share, "config", "venus.rviz"])],
                parameters=[{"use_sim_time": use_sim_time}],
                condition=IfCondition(arg("rviz")),
            ),
        ]
    )
