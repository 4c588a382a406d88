#!/usr/bin/env bash
# Kernel by kernel, where a decode step's time goes in each format, on the GPU machine: a
# Qwen3-8B-shaped random BF16 model and its DF11 twin (made once in WORK: make-models.sh), then
#   - ncu, gpu__time_duration of every kernel of a model_step_bench run of one format (the
#     same directory given twice), op by op (--eager), clocks and caches left alone, from the
#     first launch on (--launch-count COUNT covers the fill and the first decode steps);
#     bench/step_kernels.py splits the CSV into steps and sums each step's kernels by name;
#   - model_step_bench --profile (CUDA events around the GEMMs and the attention).
# Usage (repository root on the GPU machine): scripts/gpu/step-kernels.sh ARCHIVE (a bundle as for
# run-ab.sh, with df11 and model_step_bench in bin/).
# Environment: BATCHES ("1 8"), FORMATS ("bf16 df11"), SKIP (0: launches not profiled first, e.g. a large
# batch's fill), COUNT (2500), CONTEXT (512), WORK (/tmp/df11-ab), PREFILL (set: the bench's
# 2,048-token prefill steps are summed instead of its decode steps; SKIP past the decode steps),
# NO_PROFILE (set: no --profile run), BENCH (model_step_bench: the binary's name in bin/).
# Output in $OUT (./out): step-kernels.log and step-kernels.tgz (ncu_<format>_b<batch>.csv.xz, ncu's
# errors, profile.json, the models' logs).
set -uo pipefail
archive=${1:?archive or bundle dir}
out=${OUT:-./out}
work=${WORK:-/tmp/df11-ab}
mkdir -p "$out" "$work"
log="$out/step-kernels.log"
bundle=$(scripts/gpu/bundle-dir.sh "$archive" /tmp/sk-bundle)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee -a "$log"
scripts/gpu/make-models.sh "$bundle" "$work" "$out"
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
prefill_tokens=16
[ -z "${PREFILL:-}" ] || prefill_tokens=2048
for fmt in ${FORMATS:-bf16 df11}; do
  for b in ${BATCHES:-1 8}; do
    csv="$out/ncu_${fmt}_b$b.csv"
    ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --print-units base \
      --launch-skip "${SKIP:-0}" --launch-count "${COUNT:-2500}" "$bundle/bin/${BENCH:-model_step_bench}" "$work/$fmt" "$work/$fmt" --eager --reps 10 \
      --context "${CONTEXT:-512}" --batches "$b" --prefill "$prefill_tokens" > "$csv" 2> "$out/ncu_${fmt}_b$b.err"
    echo "ncu $fmt batch $b rc $?, $(grep -c gpu__time_duration "$csv") kernels" | tee -a "$log"
    python3 bench/step_kernels.py "$csv" --label "$fmt batch $b" ${PREFILL:+--prefill} 2>&1 | tee -a "$log"
    xz -f "$csv"
  done
done
[ -n "${NO_PROFILE:-}" ] || "$bundle/bin/model_step_bench" "$work/bf16" "$work/df11" --profile --reps 10 --context "${CONTEXT:-512}" \
  --batches "$(echo "${BATCHES:-1 8}" | tr ' ' ',')" --prefill 2048 --json "$out/profile.json" 2>&1 |
  grep -E 'profile|decode batch|prefill|^[0-9]|^batch' | tee -a "$log"
(cd "$out" && find . -maxdepth 1 -type f ! -name step-kernels.log ! -name '*.tgz' -printf '%f\n' > .packed &&
  tar -czf step-kernels.tgz -T .packed && xargs -r rm -f < .packed; rm -f .packed)
