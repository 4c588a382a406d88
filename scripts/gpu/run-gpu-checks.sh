#!/usr/bin/env bash
# Runs every GPU test and benchmark on the GPU machine from a prebuilt bundle (nothing is built
# there except, optionally, the reference DF11 kernel's PTX from a carried, never-committed copy).
#
# BUNDLE: built here with
#   /work/shared/tools/bundle-libs BUNDLE build/tests/test_kernels build/tests/test_runtime \
#       build/cli/df11 build/bench/df11_decode_bench build/bench/model_step_bench [build/bench/engine_bench] [build/bench/gemv_bench]
#       [build/bench/df11_gemv_bench]
#   strip --strip-debug BUNDLE/bin/*      # 226 MB -> 32 MB
# (binaries: test_kernels test_runtime df11 df11_decode_bench model_step_bench)
#
# Usage (on the GPU machine, repository root): scripts/gpu/run-gpu-checks.sh BUNDLE_DIR [REF_DIR]
# Steps (each prints its wall time): GPU tests (test_kernels, test_runtime's CUDA tests),
# compute-sanitizer on the decoder tests, decode benchmark, a Qwen3-8B-shaped random model
# (BF16 + DF11, 16 cores), model_step_bench. Logs and JSON end up in $OUT/gpu-results.tgz
# (default OUT ./out), model_step_bench.json also loose beside it.
# Environment: RECORD_FIXTURES=1 first records the HF fixtures again (hf_fixtures.tgz beside the
# archive) and tests against them; SKIP_BENCH=1 stops after the tests and memcheck (no 8B models, no benchmarks: for
# changes that touch loading or validation, not the step); RUN_DECODE_BENCH=1 adds the DF11 decoder benchmark and memcheck of the decoder
# tests (unchanged code, ~2 min); WORK (default /tmp/df11-gpu) holds the 8B models (~28 GB),
# deleted at the end unless KEEP_MODELS=1.
set -uo pipefail
bundle=${1:?bundle dir}
ref=${2:-}
out=${OUT:-./out}
work=${WORK:-/tmp/df11-gpu}
mkdir -p "$out"
export DF11_TEST_FIXTURES_DIR="$PWD/tests/fixtures"  # the bundle was built in another checkout
status=0
start_all=$(date +%s)
step_start=0
begin() { step_start=$(date +%s); echo "== $1"; }
done_step() { echo "-- $1: $(( $(date +%s) - step_start )) s (total $(( $(date +%s) - start_all )) s)"; }

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"

if [ "${RECORD_FIXTURES:-}" = 1 ]; then
  # The Hugging Face fixtures recorded again with transformers here (sdpa attention), as
  # $OUT/hf_fixtures.tgz, and the tests below run on them.
  begin "record the HF fixtures"
  PYTHONUNBUFFERED=1 python3 scripts/gpu/make_hf_fixtures.py --out /tmp/hf_fixtures > "$out/make_hf_fixtures.log" 2>&1 || status=1
  tail -20 "$out/make_hf_fixtures.log"
  (cd /tmp/hf_fixtures && tar czf "$out/hf_fixtures.tgz" .) && cp -r /tmp/hf_fixtures/. tests/fixtures/models/
  done_step record_fixtures
fi

begin "test_kernels"
"$bundle/run" test_kernels --gtest_brief=1 2>&1 | head -c 200000 > "$out/test_kernels.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
tail -15 "$out/test_kernels.log"
done_step test_kernels

begin "test_runtime (CUDA tests)"
# Failures only (--gtest_brief), capped at 200 KB so the log always comes back; [parity] lines
# say how many greedy steps match transformers per fixture.
"$bundle/run" test_runtime --gtest_brief=1 --gtest_filter='*Cuda*' 2>&1 | head -c 200000 > "$out/test_runtime_cuda.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
grep '^\[parity\]' "$out/test_runtime_cuda.log"
grep -v '^\[parity\]' "$out/test_runtime_cuda.log" | tail -60
done_step test_runtime

if command -v compute-sanitizer >/dev/null; then
  begin "compute-sanitizer memcheck (CUDA ops, two CUDA model tests)"
  kernel_filter='CudaOps*:CudaSampling*:Df11LanesCuda*'
  [ -n "${RUN_DECODE_BENCH:-}" ] && kernel_filter="$kernel_filter:Df11Cuda.CorruptStreamsStayInBounds:Df11Cuda.RangesMatchCpu:Df11Cuda.SizesAroundBoundaries"
  LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64" compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$bundle/bin/test_kernels" --gtest_filter="$kernel_filter" \
    > "$out/memcheck.log" 2>&1
  echo "memcheck kernels exit $?"; tail -3 "$out/memcheck.log"
  LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64" compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$bundle/bin/test_runtime" --gtest_filter='Devices/ModelTest.RaggedBatchMatchesSequencesAlone/Cuda:Devices/ModelTest.RejectsBadInputs/Cuda:Devices/ModelTest.SamplingInTheStepMatchesSamplingTheLogits/Cuda:Devices/ModelTest.OffloadAndRestoreKeepEveryBit/Cuda:ModelCudaTest.GraphsMatchEagerBitForBit' \
    > "$out/memcheck_model.log" 2>&1
  echo "memcheck model exit $?"; tail -3 "$out/memcheck_model.log"
  done_step memcheck
fi

pack_and_exit() {
  # The device tool returns only a few files: every log and JSON goes into one archive; only
  # model_step_bench.json stays loose.
  (cd "$out" && find . -maxdepth 1 -type f \( -name '*.log' -o -name '*.json' -o -name '*.txt' \) -printf '%f\n' \
    | sort > .packed && tar -czf gpu-results.tgz -T .packed &&
    grep -vx 'model_step_bench.json' .packed | xargs -r rm -f; rm -f .packed)
  echo "== all done in $(( $(date +%s) - start_all )) s, status $status"
  exit $status
}
if [ -x "$bundle/bin/df11d" ]; then
  # The daemon on the GPU: the demo model loaded twice (no memory flags), a greedy generate from
  # each, SIGTERM; then a model whose config.json is out of bounds (refused at start).
  begin "df11d on CUDA"
  port=50561
  bad=$(mktemp -d); cp -r deploy/demo-model/. "$bad"
  sed -i 's/"num_hidden_layers": *[0-9]*/"num_hidden_layers": 1000000000/' "$bad/config.json"
  "$bundle/run" df11d --device cuda --grpc-address 127.0.0.1:$port --metrics-address "" \
    --model a=deploy/demo-model --model b=deploy/demo-model > "$out/df11d_cuda.log" 2>&1 &
  daemon=$!
  for _ in $(seq 1 300); do
    "$bundle/run" df11 health --addr 127.0.0.1:$port >/dev/null 2>&1 && break
    sleep 0.2
  done
  for m in a b; do
    "$bundle/run" df11 generate --addr 127.0.0.1:$port -m $m -n 24 -t 0 "def fib(n):" >> "$out/df11d_cuda.log" 2>&1 || status=1
  done
  "$bundle/run" df11 models --addr 127.0.0.1:$port >> "$out/df11d_cuda.log" 2>&1 || status=1
  kill -TERM $daemon; wait $daemon; echo "df11d exit $?" | tee -a "$out/df11d_cuda.log"
  tail -8 "$out/df11d_cuda.log"
  # A configured model whose config.json is out of bounds: exit 1 at once, naming the key.
  timeout 60 "$bundle/run" df11d --device cuda --grpc-address 127.0.0.1:$((port + 1)) --metrics-address "" \
    --model bad="$bad" >> "$out/df11d_cuda.log" 2>&1
  echo "df11d with an out-of-bounds config exit $? (expected 1)" | tee -a "$out/df11d_cuda.log"
  grep -q "num_hidden_layers: 1000000000 is above the supported maximum" "$out/df11d_cuda.log" || status=1
  rm -rf "$bad"
  done_step df11d_cuda
fi

[ "${SKIP_BENCH:-}" = 1 ] && pack_and_exit

if [ -x "$bundle/bin/gemv_bench" ]; then
  begin "gemv_bench (small-batch linear vs cuBLAS)"
  "$bundle/run" gemv_bench --json "$out/gemv_bench.json" > "$out/gemv_bench.log" 2>&1
  tail -4 "$out/gemv_bench.log"
  done_step gemv_bench
fi

if [ -x "$bundle/bin/df11_gemv_bench" ]; then
  begin "df11_gemv_bench (fused DF11 GEMV vs BF16 Gemv vs decode-then-Gemv)"
  "$bundle/run" df11_gemv_bench --json "$out/df11_gemv_bench.json" > "$out/df11_gemv_bench.log" 2>&1 || status=1
  tail -6 "$out/df11_gemv_bench.log"
  done_step df11_gemv_bench
fi

if [ -n "${RUN_DECODE_BENCH:-}" ]; then
  ptx_arg=()
  if [ -n "$ref" ] && [ -f "$ref/decode.cu" ]; then
    nvcc -O3 -ptx -arch=sm_90 "$ref/decode.cu" -o /tmp/ref_decode.ptx && ptx_arg=(--reference-ptx /tmp/ref_decode.ptx)
  fi
  begin "decode benchmark"
  "$bundle/run" df11_decode_bench "${ptx_arg[@]}" --json "$out/decode_bench.json" > "$out/decode_bench.log" 2>&1
  tail -5 "$out/decode_bench.log"
  done_step decode_bench
fi

begin "Qwen3-8B-shaped random model: BF16 + DF11"
rm -rf "$work"; mkdir -p "$work"
"$bundle/run" df11 random-model qwen3-8b "$work/bf16" --shards 4 > "$out/random_model.log" 2>&1 || status=1
"$bundle/run" df11 compress "$work/bf16" "$work/df11" --threads 16 > "$out/compress.log" 2>&1 || status=1
tail -3 "$out/compress.log"
done_step model_creation

begin "model_step_bench"
"$bundle/run" model_step_bench "$work/bf16" "$work/df11" --profile --reps 10 --json "$out/model_step_bench.json" \
  2>&1 | tee "$out/model_step_bench.log" | tail -40
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
done_step model_step_bench

begin "model_step_bench at 4096 cached positions"
"$bundle/run" model_step_bench "$work/bf16" "$work/df11" --profile --reps 10 --context 4096 --batches 1,64 \
  --prefill 512 --json "$out/model_step_bench_4096.json" 2>&1 | tee "$out/model_step_bench_4096.log" | tail -12
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
done_step model_step_bench_4096

# KEEP_MODELS=1 keeps $work (the engine benchmark runs next on the same models).
[ "${KEEP_MODELS:-}" = 1 ] || rm -rf "$work"
pack_and_exit
