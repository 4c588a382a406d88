#!/usr/bin/env bash
# Lint: fails (exit 1) on drift. Three checks:
#  0. layering: a folder includes only from itself and the folders below it (the table below), so
#     dependencies point one way: server -> scheduler -> runtime rooms -> kernels -> kernels/base.
#  1. clang-format over every C++ file (about 5 s). Files that drifted before the check was
#     enforced are listed in scripts/format-baseline.txt and skipped; the list only shrinks: a
#     listed file that is clean again must leave the list (the check says so).
#  2. clang-tidy (.clang-tidy) over the .cc files changed since a base commit, two at a time,
#     using build/compile_commands.json (scripts/build.sh first). Base: $DF11_LINT_BASE, else the
#     merge-base with main, else HEAD~1 (on main itself: the last commit). To stay within about
#     2 minutes on 2 cores it runs only when at most $DF11_LINT_TIDY_MAX (12) files changed, and
#     says so otherwise; --all checks every .cc file (about 20 min on 2 cores); --no-tidy skips it.
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
# folder: the include prefixes it may use (besides its own); the longest matching folder wins.
layers="kernels/base:kernels/base/
kernels:kernels/
runtime/format:kernels/ runtime/format/
runtime/model:kernels/ runtime/format/ runtime/model/
runtime/tokenizer:kernels/base/ runtime/format/ runtime/tokenizer/
runtime/template:kernels/base/ runtime/format/ runtime/template/
scheduler:kernels/ runtime/ scheduler/
server:kernels/ runtime/ scheduler/ server/ proto/"
for f in "${all[@]}"; do
  dir=; allowed=
  while IFS=: read -r d a; do
    case "$f" in "$d"/*) [ "${#d}" -gt "${#dir}" ] && { dir=$d; allowed=$a; } ;; esac
  done <<<"$layers"
  [ -n "$dir" ] || continue
  while read -r inc; do
    ok=0
    for p in $allowed; do case "$inc" in "$p"*) ok=1 ;; esac; done
    [ "$ok" = 1 ] || { echo "layering: $f includes $inc ($dir/ may include ${allowed// /, })"; status=1; }
  done < <(grep -o '^#include "[^"]*/[^"]*"' "$f" | sed 's/#include "//; s/"$//')
done
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
  if [ "${1:-}" != --all ] && [ "${#cc[@]}" -gt "${DF11_LINT_TIDY_MAX:-12}" ]; then
    echo "clang-tidy: skipped, ${#cc[@]} .cc files changed since $base (more than ${DF11_LINT_TIDY_MAX:-12}); run scripts/lint.sh --all"
  elif [ "${#cc[@]}" -gt 0 ]; then
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
