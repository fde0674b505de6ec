#!/usr/bin/env bash
# Build the interface packages of other ROS stacks that venus_ros speaks (compat_interfaces/:
# audio_common_msgs, tf2_msgs) into the active virtual environment, each only where the
# environment does not provide it already (distro ROS 2 has the real ones: then nothing is built).
#
# Usage: source <venv>/bin/activate && scripts/build_compat_interfaces.sh [PREFIX]
#   PREFIX: install prefix (default: $VIRTUAL_ENV).
#
# Build dirs: <repo>/build/compat/<package>. A package is rebuilt when its files, this script or
# the python path changed (stamp), and skipped when it imports and was not built here.
set -euo pipefail

if [[ -z "${VIRTUAL_ENV:-}" ]]; then
  echo "build_compat_interfaces.sh: error: VIRTUAL_ENV is not set; activate the venv with the ROS 2 wheels first" >&2
  exit 1
fi
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCRIPT="$ROOT/scripts/$(basename "${BASH_SOURCE[0]}")"
PREFIX="${1:-$VIRTUAL_ENV}"
PYTHON="$VIRTUAL_ENV/bin/python"
JOBS="${VENUS_BUILD_JOBS:-2}"
export AMENT_PREFIX_PATH="$PREFIX${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}:$VIRTUAL_ENV"

declare -A PROBE=(
  [audio_common_msgs]="from audio_common_msgs.msg import AudioData"
  [tf2_msgs]="from tf2_msgs.msg import TFMessage"
)

for pkg in audio_common_msgs tf2_msgs; do
  SRC="$ROOT/compat_interfaces/$pkg"
  BUILD="$ROOT/build/compat/$pkg"
  STAMP="$BUILD/.venus_stamp"
  HASH=$({
    (cd "$ROOT" && find "compat_interfaces/$pkg" venus_interfaces/cmake/pip_wheel_fix.cmake \
      -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
    sha256sum "$SCRIPT"
    echo "python=$PYTHON prefix=$PREFIX"
  } | sha256sum | cut -d' ' -f1)
  if (cd / && "$PYTHON" -c "${PROBE[$pkg]}") >/dev/null 2>&1; then
    if [[ ! -f "$STAMP" ]]; then
      echo "$pkg: provided by the environment, not built"
      continue
    fi
    if [[ "$(cat "$STAMP")" == "$HASH" ]]; then
      echo "$pkg: up to date"
      continue
    fi
  fi
  if [[ -f "$BUILD/CMakeCache.txt" ]] \
     && ! grep -qxF "CMAKE_INSTALL_PREFIX:PATH=$PREFIX" "$BUILD/CMakeCache.txt"; then
    rm -rf "$BUILD"
  fi
  rm -f "$STAMP"
  mkdir -p "$BUILD"
  LOG="$BUILD/build.log"
  : >"$LOG"
  T0=$SECONDS
  for step in configure build install; do
    case $step in
      configure) cmd=(cmake -S "$SRC" -B "$BUILD" -DCMAKE_INSTALL_PREFIX="$PREFIX"
                      -DCMAKE_PREFIX_PATH="$PREFIX;$VIRTUAL_ENV" -DPython3_EXECUTABLE="$PYTHON"
                      -DBUILD_TESTING=OFF) ;;
      build) cmd=(cmake --build "$BUILD" -j"$JOBS") ;;
      install) cmd=(cmake --install "$BUILD") ;;
    esac
    if ! "${cmd[@]}" >>"$LOG" 2>&1; then
      tail -n 40 "$LOG" >&2
      echo "build_compat_interfaces.sh: error: $pkg: $step failed; full log: $LOG" >&2
      exit 1
    fi
  done
  echo "$HASH" >"$STAMP"
  echo "$pkg: built and installed into $PREFIX in $((SECONDS - T0)) s"
done
