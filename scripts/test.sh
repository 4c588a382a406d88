#!/usr/bin/env bash
# Every test, from a fresh Debian bookworm machine: install, fetch test fixtures, then
#  1. the Release build (CUDA kernels compiled when nvcc is present) and all CTest tests
#     (GPU tests skip without a GPU and say so);
#  2. an ASan+UBSan build of the codec, safetensors and checkpoint tests;
#  3. the libFuzzer targets (clang), each run briefly;
#  4. the container image: the Dockerfile's CPU variant built with podman on a debootstrapped
#     bookworm, df11d run from it and queried over gRPC and /metrics (scripts/container-test.sh).
# Env: FUZZ_SECONDS (default 30) per fuzz target; SKIP_SANITIZE=1 / SKIP_FUZZ=1 /
# DF11_SKIP_CONTAINER=1 to leave a stage out.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export DF11_TOKENIZER_DIR
DF11_TOKENIZER_DIR=$(scripts/fetch-test-tokenizers.sh)
jobs=$(nproc)

echo "== 1/4 Release build and tests"
scripts/build.sh build
(cd build && ctest --output-on-failure -j "$jobs")

if [ "${SKIP_SANITIZE:-0}" != 1 ]; then
  echo "== 2/4 ASan+UBSan build: codec, safetensors and checkpoint tests"
  TARGETS="test_kernels test_runtime df11" scripts/build.sh build-asan -DDF11_SANITIZE=ON -DDF11_CUDA=OFF
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 build-asan/tests/test_kernels --gtest_brief=1
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    build-asan/tests/test_runtime --gtest_brief=1 --gtest_filter='Safetensors*:TensorStore*:Checkpoint*:ModelConfig*'
fi

if [ "${SKIP_FUZZ:-0}" != 1 ]; then
  echo "== 3/4 fuzz targets (clang libFuzzer + ASan/UBSan), ${FUZZ_SECONDS:-30} s each"
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDF11_FUZZ=ON \
    -DDF11_SANITIZE=ON -DDF11_CUDA=OFF >build-fuzz.cmake.log 2>&1 || { cat build-fuzz.cmake.log; exit 1; }
  mapfile -t fuzz_targets < <(ninja -C build-fuzz -t targets all | grep -o '^fuzz_[a-z0-9_]*' | sort -u)
  cmake --build build-fuzz -j "$jobs" --target "${fuzz_targets[@]}"
  for f in build-fuzz/tests/fuzz_*; do
    [ -x "$f" ] || continue
    name=$(basename "$f")
    corpus=$(mktemp -d)
    echo "-- $name"
    "$f" "$corpus" -max_total_time="${FUZZ_SECONDS:-30}" -rss_limit_mb=2048 -max_len=65536 -print_final_stats=0 \
      >"build-fuzz/$name.log" 2>&1 || { tail -40 "build-fuzz/$name.log"; exit 1; }
    grep -E "^Done" "build-fuzz/$name.log" || true
    rm -rf "$corpus"
  done
fi
if [ "${DF11_SKIP_CONTAINER:-0}" != 1 ]; then
  echo "== 4/4 container image (CPU variant): build, run, gRPC + /metrics"
  DF11_CLI=build/cli/df11 scripts/container-test.sh
fi
echo "all test stages passed"
