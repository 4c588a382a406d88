#!/usr/bin/env bash
# Prints the directory of a bundle made by /work/shared/tools/bundle-libs (the one holding `run`),
# given the bundle's directory or a .tar.xz of it, which it unpacks into SCRATCH (emptied first).
# Usage (GPU machine): bundle=$(scripts/gpu/bundle-dir.sh ARCHIVE_OR_DIR SCRATCH)
set -euo pipefail
archive=${1:?archive or bundle dir}
scratch=${2:?scratch dir}
bundle=$archive
if [ ! -d "$archive" ]; then
  bundle=$scratch
  rm -rf "$bundle" && mkdir -p "$bundle"
  python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" "$archive" "$bundle"
fi
[ -x "$bundle/run" ] || bundle=$(dirname "$(find "$bundle" -name run -type f | head -1)")
echo "$bundle"
