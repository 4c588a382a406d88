#!/usr/bin/env bash
# df11d's time from start to SERVING on the GPU machine: the Qwen3-8B-shaped random model (made by
# make-models.sh under WORK), DF11 and BF16 alternating, ROUNDS rounds, page cache warm. "SERVING after" is
# from launching df11d to the first grpc.health.v1 SERVING answer (`df11 health` polled every 50 ms); the
# model_ready log line's load_seconds is the load itself (the rest: CUDA context, KV cache, warm-up prompts).
# Usage (repository root on the GPU machine): scripts/gpu/run-startup-check.sh BUNDLE_DIR   (bundle: df11d, df11)
# Env: WORK (default /tmp/df11-ab), ROUNDS (2). Logs under $OUT (default ./out).
set -uo pipefail
a=${1:?bundle dir}
out=${OUT:-./out}
work=${WORK:-/tmp/df11-ab}
mkdir -p "$out" "$work"
scripts/gpu/make-models.sh "$a" "$work" "$out" > "$out/make_models.log" 2>&1 || { echo "make-models failed"; exit 1; }
cat "$work"/df11/*.safetensors "$work"/bf16/*.safetensors > /dev/null  # page cache warm for both
port=50151
for round in $(seq 1 "${ROUNDS:-2}"); do
  for fmt in df11 bf16; do
    r=${fmt}_r$round; port=$((port + 1))
    start=$(date +%s.%N)
    "$a/run" df11d --device cuda --model "m=$work/$fmt" --grpc-address "127.0.0.1:$port" --metrics-address "" \
      > "$out/df11d_$r.log" 2>&1 &
    pid=$!
    ok=0
    for _ in $(seq 1 1200); do
      if "$a/run" df11 health --addr "127.0.0.1:$port" > /dev/null 2>&1; then ok=1; break; fi
      kill -0 $pid 2>/dev/null || break
      sleep 0.05
    done
    t=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$start" "$(date +%s.%N)")
    echo "$r: SERVING=$ok after $t s"
    grep -E "model_ready|model_load_warning" "$out/df11d_$r.log" | head -3
    kill -TERM $pid; wait $pid; echo "$r: df11d exit $?"
  done
done
