#!/usr/bin/env bash
# Starts df11d on loopback with one model and runs bench/metrics_scrape_bench.py against it
# (100 concurrent streams, with and without a tight /metrics scrape loop); prints its JSON line.
# usage: bench/metrics_scrape_bench.sh BUILD_DIR [MODEL_DIR] [-- extra df11d flags]
#   MODEL_DIR defaults to a random qwen3-tiny checkpoint (CPU); on a GPU pass e.g. -- --device cuda
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: $0 BUILD_DIR [MODEL_DIR] [-- df11d flags]}
shift
model=""
if [ $# -gt 0 ] && [ "$1" != "--" ]; then model=$1; shift; fi
[ "${1:-}" = "--" ] && shift
tmp=$(mktemp -d)
trap 'kill $daemon 2>/dev/null || true; wait $daemon 2>/dev/null || true; rm -rf "$tmp"' EXIT
if [ -z "$model" ]; then
  "$build/cli/df11" random-model qwen3-tiny "$tmp/model" >/dev/null
  model=$tmp/model
fi
grpc_port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
metrics_port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$build/server/df11d" --grpc-address "127.0.0.1:$grpc_port" --metrics-address "127.0.0.1:$metrics_port" \
  --model "bench=$model" --kv-memory-bytes $((1 << 30)) --max-seqs 128 --log-level warn "$@" >"$tmp/df11d.log" 2>&1 &
daemon=$!
/usr/bin/python3 "$root/bench/metrics_scrape_bench.py" --grpc "127.0.0.1:$grpc_port" \
  --metrics "http://127.0.0.1:$metrics_port/metrics" --model bench ${BENCH_ARGS:-}
