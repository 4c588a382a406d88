#!/usr/bin/env bash
# Engine serving benchmark on the GPU machine (issue 5): Qwen3-8B-shaped BF16 and DF11 models
# (made by run-gpu-checks.sh under $WORK), each alone, then two DF11 models served at once.
# Usage (repository root on the GPU machine): scripts/gpu/run-engine-bench.sh BUNDLE
# Env: WORK (default /tmp/df11-gpu), CONCURRENCY (default 1,8,32,64,128), PROMPT (512), OUTPUT (256),
# SAMPLING (extra engine_bench flags, e.g. "--temperature 0.8 --top-p 0.95": the GPU sampler's draw path).
set -uo pipefail
bundle=${1:?bundle dir}
out=${OUT:-./out}
work=${WORK:-/tmp/df11-gpu}
conc=${CONCURRENCY:-1,8,32,64,128}
args=(--device cuda --concurrency "$conc" --prompt "${PROMPT:-512}" --output "${OUTPUT:-256}")
read -r -a sampling <<<"${SAMPLING:-}"
args+=("${sampling[@]}")
mkdir -p "$out"
for m in bf16 df11; do
  echo "== engine_bench $m"
  start=$(date +%s)
  "$bundle/run" engine_bench --model "$m=$work/$m" "${args[@]}" --json > "$out/engine_$m.json" 2> "$out/engine_$m.log"
  echo "exit $? in $(( $(date +%s) - start )) s"; tail -12 "$out/engine_$m.log"
done
echo "== engine_bench two DF11 models at once"
start=$(date +%s)
"$bundle/run" engine_bench --model a="$work/df11" --model b="$work/df11" --max-model-bytes 30000000000 "${args[@]}" \
  --json > "$out/engine_two_df11.json" 2> "$out/engine_two_df11.log"
echo "exit $? in $(( $(date +%s) - start )) s"; tail -14 "$out/engine_two_df11.log"
