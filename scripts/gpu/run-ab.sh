#!/usr/bin/env bash
# A/B runs on the GPU machine in one visit: GPU tests of the new build, then benchmarks of several
# builds or options, alternating, from one carried archive (nothing is built there).
#
# ARCHIVE: a .tar.xz (or directory) of a bundle made here by /work/shared/tools/bundle-libs, whose
# bin/ holds the new build's binaries under their own names and other builds' as NAME.LABEL
# (e.g. model_step_bench.base); the run script runs either.
#
# Usage (repository root, on the GPU machine): scripts/gpu/run-ab.sh ARCHIVE
# Environment (each step runs only when set):
#   TESTS=1           test_kernels and test_runtime's CUDA tests, then compute-sanitizer memcheck
#                     of MEMCHECK_KERNELS / MEMCHECK_RUNTIME (gtest filters; default: none)
#   ATTENTION="A B"   attention_bench binaries (names in bin/), alternating, ROUNDS rounds, with
#                     ATTENTION_ARGS (e.g. "--prefill 512,2048,4096")
#   STEPS="A|B|..."   model_step_bench runs, each "NAME ARGS..." (NAME in bin/), alternating,
#                     ROUNDS rounds, on a Qwen3-8B-shaped random model made once in WORK
#   GEMV="A B"        df11_gemv_bench binaries, alternating, ROUNDS rounds
#   ENGINE=NAME       after STEPS: engine_bench NAME on the BF16 and the DF11 model, CONCURRENCY
#                     (1,8,32,64,128) streams, prompt 512, output 256
#   CLOCKS=1          nvidia-smi samples the SM clock, power, temperature and throttle reasons
#                     every 100 ms into clocks.csv, and each run's start and end times go to ab.log
#   ROUNDS (2), WORK (/tmp/df11-ab: kept, so a second visit to the same warm machine reuses the
#   models), BATCHES (1,8,64,128,256), REPS (10)
# Everything lands in $OUT (./out): ab.log (the summary) and one log per run, packed into
# ab-results.tgz.
set -uo pipefail
archive=${1:?archive or bundle dir}
out=${OUT:-./out}
work=${WORK:-/tmp/df11-ab}
rounds=${ROUNDS:-2}
mkdir -p "$out" "$work"
export DF11_TEST_FIXTURES_DIR="$PWD/tests/fixtures"
log="$out/ab.log"
say() { echo "$*" | tee -a "$log"; }
start=$(date +%s)
stamp() { say "-- $1: $(( $(date +%s) - start )) s"; }
# Wall-clock marks (seconds, to match clocks.csv) around a run when CLOCKS is set.
mark() { [ -z "${CLOCKS:-}" ] || say "-- $1 at $(date +%s.%N)"; }

bundle=$(scripts/gpu/bundle-dir.sh "$archive" /tmp/ab-bundle)
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv | tee -a "$log"
status=0
if [ -n "${CLOCKS:-}" ]; then
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv,noheader -lms 100 > "$out/clocks.csv" 2>&1 &
  clocks_pid=$!
  say "-- clocks sampled from $(date +%s.%N) (nvidia-smi timestamps are local time)"
fi

if [ -n "${TESTS:-}" ]; then
  "$bundle/run" test_kernels --gtest_brief=1 > "$out/test_kernels.log" 2>&1
  rc=$?; [ "$rc" = 0 ] || status=1
  say "test_kernels rc $rc"; tail -3 "$out/test_kernels.log" | tee -a "$log"
  "$bundle/run" test_runtime --gtest_brief=1 --gtest_filter='*Cuda*' > "$out/test_runtime_cuda.log" 2>&1
  rc=$?; [ "$rc" = 0 ] || status=1
  say "test_runtime rc $rc"; grep -v '^\[parity\]' "$out/test_runtime_cuda.log" | tail -3 | tee -a "$log"
  for which in kernels runtime; do
    filter_var=MEMCHECK_${which^^}
    filter=${!filter_var:-}
    [ -n "$filter" ] || continue
    LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64" compute-sanitizer --tool memcheck --error-exitcode 9 \
      "$bundle/bin/test_$which" --gtest_brief=1 --gtest_filter="$filter" > "$out/memcheck_$which.log" 2>&1
    rc=$?; [ "$rc" = 0 ] || status=1
    say "memcheck $which rc $rc"; tail -2 "$out/memcheck_$which.log" | tee -a "$log"
  done
  stamp tests
fi

if [ -n "${ATTENTION:-}" ]; then
  for r in $(seq 1 "$rounds"); do
    for b in $ATTENTION; do
      say "===== attention_bench $b round $r"
      # shellcheck disable=SC2086
      "$bundle/run" "$b" ${ATTENTION_ARGS:-} --json "$out/attention_${b}_r$r.json" 2>&1 | tee -a "$log"
    done
  done
  stamp attention
fi

if [ -n "${GEMV:-}" ]; then
  for r in $(seq 1 "$rounds"); do
    for b in $GEMV; do
      say "===== $b round $r"
      "$bundle/run" "$b" > "$out/gemv_${b}_r$r.log" 2>&1
      grep -A12 '^linears of one decode step' "$out/gemv_${b}_r$r.log" | tee -a "$log"
    done
  done
  stamp gemv
fi

if [ -n "${STEPS:-}" ]; then
  if [ ! -f "$work/df11/.done" ]; then
    scripts/gpu/make-models.sh "$bundle" "$work" "$out" || status=1
    stamp models
  fi
  IFS='|' read -r -a runs <<< "$STEPS"
  for r in $(seq 1 "$rounds"); do
    for i in "${!runs[@]}"; do
      read -r -a argv <<< "${runs[$i]}"
      say "===== ${runs[$i]} round $r"
      mark start
      "$bundle/run" "${argv[0]}" "$work/bf16" "$work/df11" --reps "${REPS:-10}" --batches "${BATCHES:-1,8,64,128,256}" \
        "${argv[@]:1}" --json "$out/step_${i}_r$r.json" > "$out/step_${i}_r$r.log" 2>&1 || status=1
      mark end
      grep -E 'decode batch|prefill|^[0-9]|^batch' "$out/step_${i}_r$r.log" | tee -a "$log"
    done
    stamp "steps round $r"
  done
fi

if [ -n "${ENGINE:-}" ] && [ -f "$work/df11/.done" ]; then
  for m in bf16 df11; do
    say "===== $ENGINE $m"
    "$bundle/run" "$ENGINE" --model "$m=$work/$m" --device cuda --concurrency "${CONCURRENCY:-1,8,32,64,128}" \
      --prompt 512 --output 256 --json > "$out/engine_$m.json" 2> "$out/engine_$m.log" || status=1
    tail -8 "$out/engine_$m.log" | tee -a "$log"
  done
  stamp engine
fi

[ -z "${clocks_pid:-}" ] || kill "$clocks_pid"
(cd "$out" && find . -maxdepth 1 -type f \( -name '*.log' -o -name '*.json' -o -name '*.csv' \) ! -name ab.log -printf '%f\n' > .packed &&
  tar -czf ab-results.tgz -T .packed && xargs -r rm -f < .packed; rm -f .packed)
say "== done in $(( $(date +%s) - start )) s, status $status"
exit $status
