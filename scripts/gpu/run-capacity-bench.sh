#!/usr/bin/env bash
# Capacity benchmark (model tiers issue, item b) on one GPU: a Qwen3-32B-shaped random model is
# written as DF11 directly (`df11 random-model qwen3-32b DIR --df11`: the 65.5 GB BF16 original
# never exists on disk, it would not fit beside the DF11 copy), then served by engine_bench once as
# DF11 and once as BF16 (the same files decoded at load: --resident-bf16, bit-identical weights).
# Usage, on the GPU machine from the repository root with the bundle unpacked in $B:
#   scripts/gpu/run-capacity-bench.sh generate DIR OUT   # DIR (~44 GB); OUT/capacity_generate.log
#   scripts/gpu/run-capacity-bench.sh df11 DIR OUT       # OUT/capacity_df11.json and .log
#   scripts/gpu/run-capacity-bench.sh bf16 DIR OUT       # OUT/capacity_bf16.json and .log
# Env: B (default /tmp/gb), LEVELS (8,16,32,64,128), PROMPT (4096), OUTPUT (256), LIMIT_S (570:
# engine_bench is stopped after this many seconds; the levels it finished are in the .log).
set -uo pipefail
phase=$1 dir=$2 out=$3
B=${B:-/tmp/gb}
mkdir -p "$out"
case "$phase" in
  generate)
    {
      nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
      echo "cores $(nproc)"; free -g | head -2; df -h "$(dirname "$dir")"
      start=$(date +%s)
      "$B/run" df11 random-model qwen3-32b "$dir" --df11
      echo "rc $? generate_seconds $(($(date +%s) - start))"
      du -sb "$dir"
    } >"$out/capacity_generate.log" 2>&1
    tail -5 "$out/capacity_generate.log"
    ;;
  df11|bf16)
    extra=()
    [[ $phase == bf16 ]] && extra=(--resident-bf16)
    timeout "${LIMIT_S:-570}" "$B/run" engine_bench --model "qwen3-32b=$dir" --device cuda \
      --concurrency "${LEVELS:-8,16,32,64,128}" --prompt "${PROMPT:-4096}" --output "${OUTPUT:-256}" \
      "${extra[@]}" --json >"$out/capacity_$phase.json" 2>"$out/capacity_$phase.log"
    echo "rc $?" >>"$out/capacity_$phase.log"
    cat "$out/capacity_$phase.log"
    ;;
  *) echo "usage: $0 generate|df11|bf16 DIR OUT" >&2; exit 2 ;;
esac
