#!/usr/bin/env bash
# Every test, from a fresh Debian bookworm machine: install, fetch test fixtures (tokenizers, the
# OpenAI Node SDK), then
#  1. the Release build (CUDA kernels compiled when nvcc is present), all CTest tests (GPU tests
#     skip without a GPU and say so), then scripts/lint.sh (layering, clang-format drift, and
#     clang-tidy on the .cc files of the change when there are at most 12);
#  2. one clang ASan+UBSan build with libFuzzer instrumentation: the codec and parser unit tests
#     (safetensors, checkpoint, config, tokenizer, Jinja, sampler), then every fuzz target briefly;
#  3. the container image: the Dockerfile's CPU variant built with podman on a debootstrapped
#     bookworm, df11d run from it and queried over gRPC and /metrics (scripts/container-test.sh).
# Env: FUZZ_SECONDS (default 30) per fuzz target; SKIP_SANITIZE=1 /
# DF11_SKIP_CONTAINER=1 to leave a stage out.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export DF11_TOKENIZER_DIR
DF11_TOKENIZER_DIR=$(scripts/fetch-test-tokenizers.sh)
export DF11_OPENAI_SDK_DIR
DF11_OPENAI_SDK_DIR=$(scripts/fetch-test-openai-sdk.sh)
jobs=$(nproc)

echo "== 1/3 Release build and tests"
scripts/build.sh build
(cd build && ctest --output-on-failure -j "$jobs")
scripts/lint.sh

if [ "${SKIP_SANITIZE:-0}" != 1 ]; then
  # One clang build serves both: ASan+UBSan with libFuzzer coverage instrumentation. The unit
  # tests of every parser run in it first, then each fuzz target for FUZZ_SECONDS.
  echo "== 2/3 ASan+UBSan (clang): parser and codec tests, then fuzz targets ${FUZZ_SECONDS:-30} s each"
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDF11_FUZZ=ON \
    -DDF11_SANITIZE=ON -DDF11_CUDA=OFF >build-fuzz.cmake.log 2>&1 || { cat build-fuzz.cmake.log; exit 1; }
  mapfile -t fuzz_targets < <(ninja -C build-fuzz -t targets all | grep -o '^fuzz_[a-z0-9_]*' | sort -u)
  cmake --build build-fuzz -j "$jobs" --target test_kernels test_runtime "${fuzz_targets[@]}"
  export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1
  build-fuzz/tests/test_kernels --gtest_brief=1
  build-fuzz/tests/test_runtime --gtest_brief=1 \
    --gtest_filter='Safetensors*:TensorStore*:Checkpoint*:ModelConfig*:Tokenizer*:Jinja*:ChatTemplate*:Sampler*'
  for f in build-fuzz/tests/fuzz_*; do
    [ -x "$f" ] || continue
    name=$(basename "$f")
    corpus=$(mktemp -d)
    # Real inputs as seeds where the format is structured (JSON configs).
    [ "$name" = fuzz_model_config ] && cp tests/fixtures/configs/*.json "$corpus"/
    echo "-- $name"
    "$f" "$corpus" -max_total_time="${FUZZ_SECONDS:-30}" -rss_limit_mb=2048 -max_len=65536 -print_final_stats=0 \
      >"build-fuzz/$name.log" 2>&1 || { tail -40 "build-fuzz/$name.log"; exit 1; }
    grep -E "^Done" "build-fuzz/$name.log" || true
    rm -rf "$corpus"
  done
fi
if [ "${DF11_SKIP_CONTAINER:-0}" != 1 ]; then
  echo "== 3/3 container image (CPU variant): build, run, gRPC + /metrics"
  DF11_CLI=build/cli/df11 scripts/container-test.sh
fi
echo "all test stages passed"
