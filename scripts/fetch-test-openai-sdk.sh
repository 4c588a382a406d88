#!/usr/bin/env bash
# Installs the official OpenAI Node SDK (npm package `openai`, pinned version) for the HTTP API's
# end-to-end test into a cache outside git:
# ${DF11_OPENAI_SDK_CACHE:-$HOME/.cache/df11-serve/openai-node}/<version>/node_modules/openai.
# Prints the directory holding node_modules. The test (tests/server/openai_sdk_test.sh) reads it
# from DF11_OPENAI_SDK_DIR and fails when it is missing.
set -euo pipefail
version=4.104.0
dir=${DF11_OPENAI_SDK_CACHE:-$HOME/.cache/df11-serve/openai-node}/$version
if [ ! -s "$dir/node_modules/openai/package.json" ]; then
  mkdir -p "$dir"
  (cd "$dir" && echo '{"name": "df11-openai-sdk-fixture", "private": true}' >package.json \
    && npm install --silent --no-audit --no-fund --save-exact "openai@$version" >/dev/null 2>&1)
fi
echo "$dir"
