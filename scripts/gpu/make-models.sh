#!/usr/bin/env bash
# A Qwen3-8B-shaped random BF16 model and its DF11 twin in WORK/bf16 and WORK/df11, made once:
# WORK/df11/.done marks a finished pair, which later calls (a second visit to a warm machine) keep.
# Logs go to LOGDIR/random_model.log and LOGDIR/compress.log. Exit status: 0 when the pair is there.
# Usage (GPU machine): scripts/gpu/make-models.sh BUNDLE_DIR WORK LOGDIR
set -uo pipefail
bundle=${1:?bundle dir}
work=${2:?work dir}
logs=${3:?log dir}
[ -f "$work/df11/.done" ] && exit 0
rm -rf "$work/bf16" "$work/df11"
mkdir -p "$work" "$logs"
"$bundle/run" df11 random-model qwen3-8b "$work/bf16" --shards 4 > "$logs/random_model.log" 2>&1 || exit 1
"$bundle/run" df11 compress "$work/bf16" "$work/df11" --threads 16 > "$logs/compress.log" 2>&1 || exit 1
touch "$work/df11/.done"
