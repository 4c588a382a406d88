#!/usr/bin/env bash
# End to end on the demo model (CPU, 127.0.0.1 only): df11d with --http-address; `curl -N`
# streams a completion; the official OpenAI Node SDK (openai_sdk_test.mjs) lists models, streams
# chat and completions, checks the error objects and a mid-stream cancel; completions equal the
# gRPC Generate text (`df11 generate`) of the same greedy request.
# Usage: openai_sdk_test.sh DF11D DF11 MODEL_DIR ; env DF11_OPENAI_SDK_DIR from
# scripts/fetch-test-openai-sdk.sh (required).
set -euo pipefail
df11d=$1 df11=$2 model_dir=$3
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "openai_sdk_test: $*" >&2; [ -f "${log:-}" ] && tail -20 "$log" >&2; exit 1; }
[ -n "${DF11_OPENAI_SDK_DIR:-}" ] && [ -f "$DF11_OPENAI_SDK_DIR/node_modules/openai/package.json" ] \
  || fail "DF11_OPENAI_SDK_DIR is not set or has no openai package: run scripts/fetch-test-openai-sdk.sh"
command -v node >/dev/null || fail "node not found (scripts/setup.sh installs it)"
work=$(mktemp -d)
log=$work/df11d.log
"$df11d" --model demo="$model_dir" --kv-memory-bytes 67108864 --threads 1 --grpc-address 127.0.0.1:0 \
  --http-address 127.0.0.1:0 --metrics-address 127.0.0.1:0 >"$log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$work"' EXIT
port_of() { { grep -m1 "^.* $1 " "$log" || true; } | sed -n 's/.* port=\([0-9]*\).*/\1/p'; }
for _ in $(seq 200); do
  grpc=$(port_of listening) http=$(port_of http_listening) metrics=$(port_of metrics_listening)
  [ -n "$grpc" ] && [ -n "$http" ] && [ -n "$metrics" ] && curl -sf "http://127.0.0.1:$http/health" >/dev/null && break
  kill -0 $pid 2>/dev/null || fail "df11d exited"
  sleep 0.1
done
curl -sf "http://127.0.0.1:$http/health" >/dev/null || fail "never healthy"

prompt="def fibonacci(n):"
max_tokens=24
expected=$("$df11" generate --addr "127.0.0.1:$grpc" -m demo -t 0 -n $max_tokens "$prompt")
[ -n "$expected" ] || fail "gRPC Generate gave no text"

# curl -N: server-sent events, [DONE] last, the text equal to gRPC's.
body=$(printf '{"model": "demo", "prompt": %s, "max_tokens": %d, "temperature": 0, "stream": true}' \
  "$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$prompt")" $max_tokens)
curl -sfN "http://127.0.0.1:$http/v1/completions" -H 'Content-Type: application/json' -d "$body" >"$work/sse.txt" \
  || fail "curl -N streaming failed"
python3 - "$work/sse.txt" "$expected" <<'PY' || fail "curl -N stream check"
import json, sys
events = [l[6:] for l in open(sys.argv[1], encoding="utf-8").read().split("\n\n") if l.startswith("data: ")]
assert events and events[-1] == "[DONE]", events[-3:]
text = "".join(json.loads(e)["choices"][0]["text"] for e in events[:-1])
assert text == sys.argv[2], (text, sys.argv[2])
print(f"curl -N: {len(events) - 1} events, text equals gRPC Generate")
PY

BASE_URL="http://127.0.0.1:$http/v1" METRICS_URL="http://127.0.0.1:$metrics/metrics" MODEL=demo PROMPT="$prompt" \
  MAX_TOKENS=$max_tokens EXPECTED="$expected" node "$here/openai_sdk_test.mjs" || fail "OpenAI SDK checks"
kill -TERM $pid
wait $pid || fail "df11d did not exit 0 after SIGTERM"
grep -q 'peer=http:127.0.0.1' "$log" || fail "no HTTP request in the request log"
echo "openai_sdk_test: ok"
