#!/usr/bin/env bash
# Times `df11 compress` (and verify) on a Qwen3-8B-shaped random BF16 checkpoint (8.19 G weights,
# 4 shards). Usage: bench/compress_bench.sh DF11_RUN WORK_DIR OUT_JSON, where DF11_RUN runs the
# CLI (e.g. "gpu-bundle/run df11"). Needs ~30 GB of disk and ~20 GB of memory.
set -euo pipefail
run=$1; work=$2; out=$3
rm -rf "$work"; mkdir -p "$work"
t0=$(date +%s.%N)
$run random-model qwen3-8b "$work/bf16" --shards 4
t1=$(date +%s.%N)
$run compress "$work/bf16" "$work/df11" 2>"$work/progress.log" | tee "$work/compress.txt"
t2=$(date +%s.%N)
$run verify "$work/df11" "$work/bf16" | tee "$work/verify.txt"
t3=$(date +%s.%N)
cores=$(nproc)
python3 - "$out" "$t0" "$t1" "$t2" "$t3" "$cores" "$work/compress.txt" <<'PY'
import json, sys
out, t0, t1, t2, t3, cores, summary = sys.argv[1:]
t0, t1, t2, t3 = map(float, (t0, t1, t2, t3))
json.dump({"model": "Qwen3-8B shape, random Gaussian std 0.02 (8.19 G weights)", "cores": int(cores),
           "generate_s": t1 - t0, "compress_s": t2 - t1, "verify_s": t3 - t2,
           "compress_summary": open(summary).read().strip()}, open(out, "w"), indent=2)
print(open(out).read())
PY
rm -rf "$work"
