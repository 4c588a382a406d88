#!/usr/bin/env bash
# Where a forward step's time goes, kernel by kernel, on the GPU machine (issue 13): a
# Qwen3-8B-shaped BF16 random model, then
#   - nsys (when installed): the kernel summary of a 2,048-token prefill (+ batch-1 decode) run and
#     of a batch-64 decode run (512 cached positions), op by op (--eager);
#   - ncu: the decode attention kernel at batch 64 and one layer's small-batch linears at batch 1
#     (speed of light, occupancy, warp stalls, memory); every kernel's summed time over a run of
#     2,048-token prefill steps.
# Usage (repository root on the GPU machine): scripts/gpu/profile-step.sh BUNDLE   (bundle as for
# run-gpu-checks.sh, with df11 and model_step_bench). Output: $OUT/profile.tgz (default OUT ./out).
set -uo pipefail
bundle=${1:?bundle dir}
out=${OUT:-./out}
work=${WORK:-/tmp/df11-profile}
mkdir -p "$out/p" "$work"
p="$out/p"
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
bench="$bundle/bin/model_step_bench"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$p/gpu.txt"
[ -d "$work/bf16" ] || "$bundle/run" df11 random-model qwen3-8b "$work/bf16" --shards 4 > "$p/random_model.log" 2>&1
m="$work/bf16"
nsys=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
echo "nsys: ${nsys:-none}" | tee "$p/tools.txt"
if [ -n "$nsys" ]; then
  for run in "prefill --context 16 --batches 1 --prefill 2048" "decode64 --context 512 --batches 64 --prefill 16"; do
    read -r name args <<<"$run"
    # shellcheck disable=SC2086
    "$nsys" profile -t cuda -o "/tmp/$name" --force-overwrite true "$bench" "$m" "$m" --eager --reps 10 $args \
      > "$p/nsys_$name.run.log" 2>&1
    "$nsys" stats --report cuda_gpu_kern_sum --format csv "/tmp/$name.nsys-rep" > "$p/nsys_$name.csv" 2>/dev/null
    head -25 "$p/nsys_$name.csv"
  done
fi
sections=(--section SpeedOfLight --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis
  --section LaunchStats)
# Decode attention at batch 64: skip the fill's 16 prefill steps x 36 layers (prefill-mode blocks).
ncu "${sections[@]}" --kernel-name-base function --kernel-name AttentionKernel --launch-skip 600 --launch-count 2 \
  "$bench" "$m" "$m" --eager --reps 10 --context 512 --batches 64 --prefill 16 > "$p/ncu_attention_decode64.txt" 2>&1
grep -E "Duration|Memory Throughput|DRAM Throughput|Achieved Occupancy|Theoretical Occupancy|Registers|Block Limit" \
  "$p/ncu_attention_decode64.txt" | head -20
[ -n "${SKIP_GEMV:-}" ] || ncu "${sections[@]}" --kernel-name-base function --kernel-name GemvKernel --launch-skip 40 --launch-count 8 \
  "$bench" "$m" "$m" --eager --reps 10 --context 16 --batches 1 --prefill 16 > "$p/ncu_gemv_b1.txt" 2>&1
grep -E "GemvKernel|Duration|DRAM Throughput" "$p/ncu_gemv_b1.txt" | head -30
# Every kernel's time over ~2 prefill steps of 2,048 tokens: past the fill (~370 launches) and 13
# batch-1 decode steps (~370 each).
ncu --metrics gpu__time_duration.sum --print-summary per-kernel --launch-skip 5300 --launch-count 1000 \
  "$bench" "$m" "$m" --eager --reps 10 --context 16 \
  --batches 1 --prefill 2048 > "$p/ncu_prefill_summary.txt" 2>&1
grep -E "^ +[A-Za-z_].*\(|gpu__time_duration" "$p/ncu_prefill_summary.txt" | paste - - | awk '{print}' | head -40
tar czf "$out/profile.tgz" -C "$p" . && rm -rf "$p"
