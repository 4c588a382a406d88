#!/usr/bin/env bash
# The main job on the default model, from a fresh Debian bookworm machine: install, build, then
# a DF11 round trip with the df11 CLI: make a small Qwen3-architecture BF16 checkpoint, compress
# it to DF11 (published layout), inspect it, and verify every weight decodes bit for bit.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
TARGETS=df11 scripts/build.sh build
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
df11=build/cli/df11
$df11 random-model qwen3-tiny "$work/qwen3-bf16"
$df11 compress "$work/qwen3-bf16" "$work/qwen3-df11"
$df11 inspect "$work/qwen3-df11"
$df11 verify "$work/qwen3-df11" "$work/qwen3-bf16"
