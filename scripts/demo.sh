#!/usr/bin/env bash
# The main job on the default model, from a fresh Debian bookworm machine without a GPU: install,
# build, start the daemon df11d serving the committed demo model (deploy/demo-model: a 5.8M-param
# Llama trained on the Python standard library, DF11-compressed) on the CPU backend, wait until
# its gRPC health says SERVING, stream two completions with `df11 generate` and one with `curl -N`
# over the OpenAI-compatible HTTP API, show what /metrics recorded, then stop the daemon with
# SIGTERM (it drains and exits 0).
# Env: DEVICE=cuda to serve on a GPU; GRPC_PORT / METRICS_PORT / HTTP_PORT (default 50051 / 8000 / 8080).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
[ -n "${BUILD_DIR:-}" ] || TARGETS="df11 df11d" scripts/build.sh build
df11=${BUILD_DIR:-build}/cli/df11
grpc=127.0.0.1:${GRPC_PORT:-50051}
metrics=127.0.0.1:${METRICS_PORT:-8000}
http=127.0.0.1:${HTTP_PORT:-8080}
log=$(mktemp)
${BUILD_DIR:-build}/server/df11d --model demo=deploy/demo-model --device "${DEVICE:-cpu}" --kv-memory-bytes 268435456 \
  --grpc-address "$grpc" --metrics-address "$metrics" --http-address "$http" >"$log" 2>&1 &
daemon=$!
trap 'kill -TERM $daemon 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 120); do
  "$df11" health --addr "$grpc" >/dev/null 2>&1 && break
  kill -0 $daemon 2>/dev/null || { cat "$log"; echo "demo: df11d exited"; exit 1; }
  sleep 0.5
done
"$df11" health --addr "$grpc"
"$df11" models --addr "$grpc"
echo "== greedy"
"$df11" generate --addr "$grpc" -m demo -t 0 -n 80 --stats "def fibonacci(n):"
echo
echo "== sampled (temperature 0.8, top-p 0.95, seed 7)"
"$df11" generate --addr "$grpc" -m demo -t 0.8 --top-p 0.95 --seed 7 -n 80 --stats "class Stack:"
echo
echo "== OpenAI-compatible HTTP API: curl -N (server-sent events)"
curl -sN "http://$http/v1/completions" -H 'Content-Type: application/json' \
  -d '{"model": "demo", "prompt": "def fibonacci(n):", "max_tokens": 24, "temperature": 0, "stream": true}'
echo "== /metrics (a few of them)"
curl -s "http://$metrics/metrics" | grep -E '^df11_(time_to_first_token_seconds_count|generated_tokens_total|model_weight_bytes|model_bf16_weight_bytes)' || true
kill -TERM $daemon
wait $daemon && echo "demo: df11d drained and exited 0"
trap 'rm -f "$log"' EXIT
