#!/usr/bin/env bash
# On the GPU machine: the Hugging Face reference fixtures of the runtime tests, the tokenizer
# goldens from Python tokenizers/transformers, and both sides of the tokenizer throughput
# comparison (HF tokenizers in the golden script, ours from the bundle). Writes under $OUT.
# Usage: scripts/gpu/make-fixtures-and-goldens.sh BUNDLE TOKENIZER_DIR
set -uo pipefail
bundle=$1; toks=$2; out=${OUT:-./out}
mkdir -p "$out"
PYTHONUNBUFFERED=1 python3 scripts/gpu/make_hf_fixtures.py --out /tmp/hf_fixtures 2>&1 | tail -30
(cd /tmp/hf_fixtures && tar czf "$out/hf_fixtures.tgz" .)
PYTHONUNBUFFERED=1 python3 scripts/gpu/make_tokenizer_goldens.py --tokenizers "$toks" \
  --corpus tests/fixtures/tokenizer/corpus.jsonl --out "$out/tokenizer_goldens.json" 2>&1 | tail -15
"$bundle/run" tokenizer_bench --tokenizers "$toks" --corpus tests/fixtures/tokenizer/corpus.jsonl \
  > "$out/tokenizer_bench_ours.json" 2> "$out/tokenizer_bench_ours.log"
cat "$out/tokenizer_bench_ours.json"
lscpu | grep -E "Model name|MHz" | head -3 > "$out/cpu.txt"; cat "$out/cpu.txt"
