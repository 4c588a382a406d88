#!/usr/bin/env bash
# Configures and builds df11-serve into build/ (Release; CUDA kernels when nvcc is found).
# Usage: scripts/build.sh [BUILD_DIR] [extra cmake args...] ; env TARGETS limits what is built.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true
jobs=$(nproc)
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >"$dir.cmake.log" 2>&1 || { cat "$dir.cmake.log"; exit 1; }
grep "df11:" "$dir.cmake.log" || true
# shellcheck disable=SC2086
cmake --build "$dir" -j "$jobs" ${TARGETS:+--target $TARGETS}
