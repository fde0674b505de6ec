#!/usr/bin/env bash
# Build and install the venus_interfaces ROS 2 interface package into the
# active virtual environment (ROS 2 from pip wheels, no system ROS needed).
#
# Usage: source <venv>/bin/activate && scripts/build_interfaces.sh
#
# Build dir: <repo>/build/venus_interfaces. Skips everything when nothing
# changed: the stamp file there holds a sha256 over all files under
# venus_interfaces/, this script and the venv's python path, and the generated
# python package must still be importable.
set -euo pipefail

if [[ -z "${VIRTUAL_ENV:-}" ]]; then
  echo "build_interfaces.sh: error: VIRTUAL_ENV is not set; activate the venv with the ROS 2 wheels first (source <venv>/bin/activate)" >&2
  exit 1
fi

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCRIPT="$ROOT/scripts/$(basename "${BASH_SOURCE[0]}")"
SRC="$ROOT/venus_interfaces"
BUILD="$ROOT/build/venus_interfaces"
STAMP="$BUILD/.venus_stamp"
PYTHON="$VIRTUAL_ENV/bin/python"
JOBS="${VENUS_BUILD_JOBS:-2}"

if [[ ! -x "$PYTHON" ]]; then
  echo "build_interfaces.sh: error: $PYTHON not found or not executable (VIRTUAL_ENV=$VIRTUAL_ENV)" >&2
  exit 1
fi

export AMENT_PREFIX_PATH="$VIRTUAL_ENV"

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
T0="$(now)"

# True if the generated package imports from this venv. Run from / so that the
# source dir <repo>/venus_interfaces cannot pass as a namespace package, and
# import a message class, which a namespace package would not have.
importable() {
  (cd / && "$PYTHON" -c 'from venus_interfaces.msg import AudioChunk; from venus_interfaces.action import Delegate')
}

# Hash of the inputs: every file under venus_interfaces/ (path + content),
# this script, and the python path.
compute_hash() {
  {
    (cd "$ROOT" && find venus_interfaces -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
    sha256sum "$SCRIPT"
    echo "python=$PYTHON"
  } | sha256sum | cut -d' ' -f1
}
HASH="$(compute_hash)"

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$HASH" ]] \
   && importable >/dev/null 2>&1; then
  echo "venus_interfaces: up to date, skipping build ($(elapsed "$T0") s)"
  exit 0
fi

# A build dir configured for another venv or source location holds stale
# cached paths (CMake refuses a moved source dir): start clean.
if [[ -f "$BUILD/CMakeCache.txt" ]] \
   && ! { grep -qxF "CMAKE_INSTALL_PREFIX:PATH=$VIRTUAL_ENV" "$BUILD/CMakeCache.txt" \
          && grep -qxF "CMAKE_HOME_DIRECTORY:INTERNAL=$SRC" "$BUILD/CMakeCache.txt"; }; then
  echo "venus_interfaces: build dir was configured for another venv or source dir, removing it"
  rm -rf "$BUILD"
fi
rm -f "$STAMP"
mkdir -p "$BUILD"
LOG="$BUILD/build.log"
: >"$LOG"
# Quiet on success; on failure show the end of the log.
quiet() {
  if ! "$@" >>"$LOG" 2>&1; then
    tail -n 40 "$LOG" >&2
    echo "build_interfaces.sh: error: '$*' failed; full log: $LOG" >&2
    exit 1
  fi
}

T="$(now)"
quiet cmake -S "$SRC" -B "$BUILD" \
  -DCMAKE_INSTALL_PREFIX="$VIRTUAL_ENV" \
  -DCMAKE_PREFIX_PATH="$VIRTUAL_ENV" \
  -DPython3_EXECUTABLE="$PYTHON" \
  -DBUILD_TESTING=OFF
echo "venus_interfaces: configure $(elapsed "$T") s"

T="$(now)"
quiet cmake --build "$BUILD" -j"$JOBS"
echo "venus_interfaces: build $(elapsed "$T") s"

T="$(now)"
quiet cmake --install "$BUILD"
echo "venus_interfaces: install $(elapsed "$T") s"

if ! importable; then
  echo "build_interfaces.sh: error: installed, but 'import venus_interfaces' fails with $PYTHON" >&2
  exit 1
fi

echo "$HASH" > "$STAMP"
echo "venus_interfaces: built and installed into $VIRTUAL_ENV in $(elapsed "$T0") s"
