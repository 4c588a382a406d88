#!/usr/bin/env bash
# Several models on one GPU with no memory flags (issue 15, "found while measuring"): df11d
# started with two Qwen3-8B-shaped DF11 models and neither --kv-memory-bytes nor
# --max-model-bytes must load both (all weights first, then the KV pool from what is left), serve
# both, report the shared decode scratch once, and refuse a third model at run time up front with
# the bytes it needs and the bytes free (the KV pool holds the rest), leaving the others serving.
# Then model tiers: three models with --max-model-bytes for two and a host tier: all SERVING,
# a request to the one off the device brings it in (greedy ids equal to the resident run's),
# the tier and promotion metrics say so.
# Usage (GPU machine, repository root): scripts/gpu/run-multi-model-check.sh BUNDLE_DIR
#   BUNDLE: bundle-libs of build/cli/df11 and build/server/df11d (see run-gpu-checks.sh).
# Output under $OUT (default ./out): multi_model.log (everything), gpu.txt.
set -uo pipefail
bundle=${1:?bundle dir}
out=${OUT:-./out}
work=${WORK:-/tmp/df11-multi}
mkdir -p "$out"
log="$out/multi_model.log"
status=0
t0=$(date +%s)
say() { echo "== [$(( $(date +%s) - t0 )) s] $*" | tee -a "$log"; }
# Waits (up to 300 s) for df11d ($daemon) to answer health on $port; a failure sets status=1.
wait_serving() {
  local up=0
  for _ in $(seq 1 600); do
    if "$bundle/run" df11 health --addr 127.0.0.1:$port >/dev/null 2>&1; then up=1; break; fi
    kill -0 $daemon 2>/dev/null || break
    sleep 0.5
  done
  say "serving: $up"
  [ $up = 1 ] || status=1
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/gpu.txt" >> "$log"

say "Qwen3-8B-shaped random model, DF11"
rm -rf "$work"; mkdir -p "$work"
"$bundle/run" df11 random-model qwen3-8b "$work/bf16" --shards 4 >> "$log" 2>&1 || status=1
"$bundle/run" df11 compress "$work/bf16" "$work/df11" --threads 16 >> "$log" 2>&1 || status=1
rm -rf "$work/bf16"

port=50571 mport=9571
say "df11d --device cuda --model a=DF11 --model b=DF11 (no memory flags)"
"$bundle/run" df11d --device cuda --grpc-address 127.0.0.1:$port --metrics-address 127.0.0.1:$mport \
  --model a="$work/df11" --model b="$work/df11" > "$out/df11d.log" 2>&1 &
daemon=$!
wait_serving
for m in a b; do
  "$bundle/run" df11 generate --addr 127.0.0.1:$port -m $m --tokens 1,2,3,4 -n 16 -t 0 >> "$log" 2>&1 || status=1
done
"$bundle/run" df11 models --addr 127.0.0.1:$port >> "$log" 2>&1 || status=1
python3 - $port $mport "$work/df11" >> "$log" 2>&1 <<'PY' || status=1
import sys, urllib.request, grpc
port, mport, path = sys.argv[1], sys.argv[2], sys.argv[3]
metrics = urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=10).read().decode()
for line in metrics.splitlines():
    if line.startswith(("df11_model_kv_cache_bytes", "df11_model_weight_bytes", "df11_model_scratch_bytes",
                        "df11_shared_scratch_bytes", "df11_gpu_memory_total_bytes", "df11_gpu_memory_used_bytes")):
        print(line)
def field(num, data):  # a length-delimited protobuf field
    data = data.encode()
    return bytes([num << 3 | 2, len(data)]) + data if len(data) < 128 else bytes([num << 3 | 2, len(data) & 127 | 128, len(data) >> 7]) + data
channel = grpc.insecure_channel(f"127.0.0.1:{port}")
load = channel.unary_unary("/df11.v1.Admin/LoadModel")
try:
    load(field(1, "c") + field(2, path), timeout=600)
    print("third model: loaded (OK)")
except grpc.RpcError as e:
    print(f"third model: {e.code().name}: {e.details()}")
PY
"$bundle/run" df11 models --addr 127.0.0.1:$port >> "$log" 2>&1 || status=1
for m in a b; do
  "$bundle/run" df11 generate --addr 127.0.0.1:$port -m $m --tokens 5,6,7 -n 8 -t 0 >> "$log" 2>&1 || status=1
done
nvidia-smi --query-gpu=memory.used,memory.total --format=csv >> "$log"
kill -TERM $daemon; wait $daemon; say "df11d exit $?"
grep -E "model_ready|startup|error|listening|serving" "$out/df11d.log" >> "$log"

say "df11d with three models, --max-model-bytes for two, a host tier for one (model tiers)"
"$bundle/run" df11d --device cuda --grpc-address 127.0.0.1:$port --metrics-address 127.0.0.1:$mport \
  --model a="$work/df11" --model b="$work/df11" --model c="$work/df11" --max-model-bytes 25000000000 \
  --max-host-model-bytes 12000000000 > "$out/df11d_tiers.log" 2>&1 &
daemon=$!
wait_serving
for m in c a c; do
  say "generate on $m"
  "$bundle/run" df11 generate --addr 127.0.0.1:$port -m $m --tokens 1,2,3,4 -n 16 -t 0 >> "$log" 2>&1 || status=1
done
python3 -c "import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())" \
  "http://127.0.0.1:$mport/metrics" | grep -E "^df11_model_(tier|promotion|demotion|moved|host_tier)" >> "$log"
kill -TERM $daemon; wait $daemon; say "df11d exit $?"
grep -E "model_promoted|model_demoted|promotion_failed|waited_for_promotion|startup|error" "$out/df11d_tiers.log" | head -20 >> "$log"
rm -rf "$work"
say "status $status"
exit $status
