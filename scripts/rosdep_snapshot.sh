#!/usr/bin/env bash
# Resolve every rosdep key of package.xml and venus_interfaces/package.xml against a rosdistro
# checkout, offline, and write what each resolves to into tests/data/rosdep_kilted_noble.txt
# (tests/test_package_xml.py checks package.xml against that snapshot).
#   scripts/rosdep_snapshot.sh ROSDISTRO_CHECKOUT [DISTRO] [OS]
# Needs the `rosdep` tool (pip install rosdep, in any venv). Nothing is installed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SRC="$(cd "${1:?usage: $0 ROSDISTRO_CHECKOUT [DISTRO] [OS]}" && pwd)"
DISTRO="${2:-kilted}"
OS="${3:-ubuntu:noble}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/sources.list.d"
for f in base python ruby; do echo "yaml file://$SRC/rosdep/$f.yaml"; done \
  >"$WORK/sources.list.d/20-default.list"
cp "$SRC/index-v4.yaml" "$WORK/index-v4.yaml"
ln -s "$SRC/$DISTRO" "$WORK/$DISTRO"   # the index names it relative to itself
export ROSDEP_SOURCE_PATH="$WORK/sources.list.d" ROSDISTRO_INDEX_URL="file://$WORK/index-v4.yaml"
export ROS_HOME="$WORK/home"
rosdep update --rosdistro "$DISTRO" >/dev/null 2>&1 || rosdep update --rosdistro "$DISTRO"
keys=$(python3 - "$ROOT" <<'PY'
import sys
from pathlib import Path
from xml.etree import ElementTree
root = Path(sys.argv[1])
keys = set()
for path in (root / "package.xml", root / "venus_interfaces" / "package.xml"):
    tree = ElementTree.parse(path)
    for tag in ("depend", "build_depend", "buildtool_depend", "exec_depend", "test_depend"):
        keys |= {e.text.strip() for e in tree.iter(tag)}
print("\n".join(sorted(keys - {"venus_interfaces"})))
PY
)
out="$ROOT/tests/data/rosdep_${DISTRO}_${OS%%:*}_${OS##*:}.txt"
commit="${ROSDISTRO_COMMIT:-$(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo unknown)}"
{
  echo "# rosdep keys of package.xml resolved for $DISTRO on $OS (rosdistro $commit),"
  echo "# by scripts/rosdep_snapshot.sh: key<TAB>installer<TAB>packages"
  for key in $keys; do
    resolved=$(rosdep resolve "$key" --rosdistro "$DISTRO" --os "$OS" 2>&1) \
      || { echo "cannot resolve $key: $resolved" >&2; exit 1; }
    installer=$(echo "$resolved" | sed -n 's/^#\(.*\)/\1/p' | head -1)
    packages=$(echo "$resolved" | grep -v '^#' | tr '\n' ' ' | sed 's/ *$//')
    printf '%s\t%s\t%s\n' "$key" "$installer" "$packages"
  done
} >"$out"
echo "wrote $out ($(grep -vc '^#' "$out") keys)"
