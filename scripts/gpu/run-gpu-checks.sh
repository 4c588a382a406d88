#!/usr/bin/env bash
# Runs every GPU test and benchmark on the GPU machine from a prebuilt bundle (nothing is built
# there except, optionally, the reference DF11 kernel's PTX from a carried, never-committed copy).
# Usage (on the GPU machine, repository root): scripts/gpu/run-gpu-checks.sh BUNDLE_DIR [REF_DIR]
# Writes logs and JSON under $OUT (default ./out).
set -uo pipefail
bundle=${1:?bundle dir}
ref=${2:-}
out=${OUT:-./out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
status=0
echo "== GPU tests"
"$bundle/run" test_kernels --gtest_brief=1 2>&1 | tee "$out/test_kernels.log" | tail -15 || status=1
if command -v compute-sanitizer >/dev/null; then
  echo "== compute-sanitizer memcheck on the CUDA decoder tests"
  LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64" compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$bundle/bin/test_kernels" --gtest_filter='Df11Cuda.CorruptStreamsStayInBounds:Df11Cuda.RangesMatchCpu:Df11Cuda.SizesAroundBoundaries' \
    > "$out/memcheck.log" 2>&1
  echo "memcheck exit $?"; tail -4 "$out/memcheck.log"
fi
ptx_arg=()
if [ -n "$ref" ] && [ -f "$ref/decode.cu" ]; then
  nvcc -O3 -ptx -arch=sm_90 "$ref/decode.cu" -o /tmp/ref_decode.ptx && ptx_arg=(--reference-ptx /tmp/ref_decode.ptx)
fi
echo "== decode benchmark"
"$bundle/run" df11_decode_bench "${ptx_arg[@]}" --json "$out/decode_bench.json" 2>&1 | tee "$out/decode_bench.log"
echo "== decode benchmark, 2 blocks/SM register variant"
DF11_DECODE_MIN_BLOCKS=2 "$bundle/run" df11_decode_bench --json "$out/decode_bench_2blocks.json" 2>&1 | tee "$out/decode_bench_2blocks.log"
exit $status
