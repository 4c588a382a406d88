#!/usr/bin/env bash
# Formatting and lint: clang-format (check, or fix with --fix) and clang-tidy over the project's
# C++ sources, using build/compile_commands.json (run scripts/build.sh first).
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cc' '*.h' '*.cu' '*.cuh' | grep -v '^tests/fixtures/')
if [ "${1:-}" = --fix ]; then
  clang-format -i "${files[@]}"
else
  clang-format --dry-run "${files[@]}" 2>&1 | grep -c "warning:" | xargs -I{} echo "clang-format: {} lines would change (scripts/lint.sh --fix)"
fi
mapfile -t cc < <(printf '%s\n' "${files[@]}" | grep '\.cc$')
clang-tidy -p build --quiet "${cc[@]}" 2>/dev/null | grep -E "warning:|error:" || echo "clang-tidy: clean"
