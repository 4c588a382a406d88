#!/usr/bin/env bash
# Lint: fails (exit 1) on drift. Two checks:
#  1. clang-format over every C++ file (about 5 s). Files that drifted before the check was
#     enforced are listed in scripts/format-baseline.txt and skipped; the list only shrinks: a
#     listed file that is clean again must leave the list (the check says so).
#  2. clang-tidy (.clang-tidy) over the .cc files changed since a base commit, two at a time,
#     using build/compile_commands.json (scripts/build.sh first). Base: $DF11_LINT_BASE, else the
#     merge-base with main, else HEAD~1 (on main itself: the last commit). --all checks every .cc
#     file (about 15 min on 2 cores); --no-tidy skips it.
# --fix: clang-format -i every file not in the baseline (and the baseline files given as arguments).
set -euo pipefail
cd "$(dirname "$0")/.."
baseline=scripts/format-baseline.txt
mapfile -t all < <(git ls-files '*.cc' '*.h' '*.cu' '*.cuh' | grep -v '^tests/fixtures/')
mapfile -t checked < <(printf '%s\n' "${all[@]}" | grep -vxF -f "$baseline")
if [ "${1:-}" = --fix ]; then
  shift
  clang-format -i "${checked[@]}" "$@"
  exit 0
fi
status=0
if ! clang-format --dry-run --Werror "${checked[@]}" 2>/tmp/df11-lint-format.$$; then
  grep -E "error:" /tmp/df11-lint-format.$$ | cut -d: -f1 | sort | uniq -c | sed 's/^/clang-format drift: /'
  echo "clang-format: fix with scripts/lint.sh --fix"
  status=1
fi
rm -f /tmp/df11-lint-format.$$
while read -r f; do
  [ -f "$f" ] || { echo "format baseline: $f no longer exists; remove it from $baseline"; status=1; continue; }
  clang-format --dry-run --Werror "$f" 2>/dev/null && { echo "format baseline: $f is clean now; remove it from $baseline"; status=1; }
done <"$baseline"
[ "$status" = 0 ] && echo "clang-format: clean (${#checked[@]} files; $(wc -l <"$baseline") in the baseline)"

if [ "${1:-}" != --no-tidy ]; then
  if [ "${1:-}" = --all ]; then
    mapfile -t cc < <(printf '%s\n' "${all[@]}" | grep '\.cc$')
  else
    base=${DF11_LINT_BASE:-$(git merge-base HEAD main 2>/dev/null || true)}
    [ -z "$base" ] || [ "$(git rev-parse "$base")" = "$(git rev-parse HEAD)" ] && base=HEAD~1
    mapfile -t cc < <(git diff --name-only --diff-filter=d "$base" HEAD -- '*.cc' | grep -v '^tests/fixtures/' || true)
  fi
  if [ "${#cc[@]}" -gt 0 ]; then
    [ -f build/compile_commands.json ] || { echo "clang-tidy: build/compile_commands.json missing (scripts/build.sh)"; exit 1; }
    # Only files the build compiles (fuzz targets are not in a default build).
    mapfile -t cc < <(printf '%s\n' "${cc[@]}" | grep -F -f <(grep -o '"file": "[^"]*"' build/compile_commands.json |
                                                       sed "s|\"file\": \"$PWD/||; s|\"\$||") || true)
    out=$(printf '%s\n' "${cc[@]}" | xargs -r -P 2 -n 4 clang-tidy -p build --quiet 2>/dev/null || true)
    if grep -E "(warning|error):" <<<"$out"; then
      status=1
    else
      echo "clang-tidy: clean (${#cc[@]} files)"
    fi
  fi
fi
exit "$status"
