#!/usr/bin/env bash
# End-to-end metrics check: the real df11d (CPU, tiny random model) scraped every second by a real
# Prometheus on loopback with temporary storage; generations sent over gRPC; Prometheus' HTTP API
# must then report exactly what the test sent (TTFT histogram count, requests and generated
# tokens, RPCs by status, rejections), the running-requests gauge at 1 while a request runs and 0 after, and weight-byte
# gauges equal to what df11d reports (ListModels) and to the checkpoint's tensor bytes, for a BF16
# model and its DF11-compressed copy.
# Also: the alert rules load, the target is up, and every Grafana dashboard query evaluates.
# usage: scripts/e2e-prometheus.sh DF11D DF11 [PROMETHEUS]   (exit 77 = skipped, says why)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
df11d=${1:-}
df11=${2:-}
prometheus=${3:-$(command -v prometheus || true)}
python=/usr/bin/python3
[ -x "$python" ] || python=python3
skip() { echo "SKIP: $*"; exit 77; }
[ -n "$df11d" ] && [ -x "$df11d" ] || skip "df11d is not built"
[ -x "$df11" ] || skip "df11 CLI is not built"
[ -n "$prometheus" ] && [ -x "$prometheus" ] || skip "prometheus is not installed (apt-get install prometheus)"
command -v promtool >/dev/null || skip "promtool is not installed (apt-get install prometheus)"
"$python" -c "import grpc, google.protobuf, yaml" 2>/dev/null || skip "python3-grpcio/python3-yaml missing (scripts/setup.sh)"

tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  echo "--- df11d log (tail)"; tail -20 "$tmp/df11d.log" || true
  echo "--- prometheus log (tail)"; tail -20 "$tmp/prometheus.log" || true
  exit 1
}

"$df11" random-model qwen3-tiny "$tmp/model" >/dev/null
"$df11" compress "$tmp/model" "$tmp/model-df11" >/dev/null 2>&1

"$df11d" --grpc-address 127.0.0.1:0 --metrics-address 127.0.0.1:0 --model "tiny=$tmp/model" --model "tiny-df11=$tmp/model-df11" --device cpu \
  --threads 1 --kv-memory-bytes 67108864 --warmup-tokens 0 --log-format json >"$tmp/df11d.log" 2>&1 &
pids+=($!)
port_of() {  # port_of EVENT: the "port" field of df11d's first JSON log line with that event
  for _ in $(seq 100); do
    p=$("$python" -c '
import json, sys
for line in open(sys.argv[1], errors="replace"):
    try:
        e = json.loads(line)
    except ValueError:
        continue
    if e.get("event") == sys.argv[2]:
        print(e["port"]); break' "$tmp/df11d.log" "$1")
    [ -n "$p" ] && { echo "$p"; return; }
    sleep 0.1
  done
}
grpc_port=$(port_of listening)
metrics_port=$(port_of metrics_listening)
[ -n "$grpc_port" ] && [ -n "$metrics_port" ] || fail "df11d did not report its ports"

prom_port=$("$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$tmp/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $root/deploy/prometheus/rules.yml
scrape_configs:
  - job_name: df11d
    static_configs:
      - targets: ["127.0.0.1:$metrics_port"]
YAML
"$prometheus" --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/prometheus-data" \
  --web.listen-address="127.0.0.1:$prom_port" --log.level=warn >"$tmp/prometheus.log" 2>&1 &
pids+=($!)

"$python" - "$root" "127.0.0.1:$grpc_port" "http://127.0.0.1:$prom_port" "$tmp/model" "$metrics_port" <<'PY' || fail "checks failed"
import json, struct, sys, threading, time, urllib.parse, urllib.request
root, grpc_address, prom, model_dir, metrics_port = sys.argv[1:6]
sys.path.insert(0, f"{root}/tests/deploy")
import df11_client

def query(expr):
    url = f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    body = json.load(urllib.request.urlopen(url, timeout=10))
    assert body["status"] == "success", body
    return body["data"]["result"]

def value(expr):
    result = query(expr)
    return float(result[0]["value"][1]) if len(result) == 1 else None

def wait_value(expr, want, timeout=20):
    seen = None
    deadline = time.time() + timeout
    while time.time() < deadline:
        seen = value(expr)
        if seen == want:
            return
        time.sleep(0.2)
    raise AssertionError(f"{expr}: want {want}, Prometheus has {seen}")

def wait_ready(timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(f"{prom}/-/ready", timeout=2).status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError("prometheus not ready")

def checkpoint_bytes(path):  # sum of tensor byte ranges in the safetensors header
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    return sum(t["data_offsets"][1] - t["data_offsets"][0] for k, t in header.items() if k != "__metadata__")

client = df11_client.Client(root, grpc_address)
info = df11_client.wait_serving(client, "tiny")
info_df11 = df11_client.wait_serving(client, "tiny-df11")
wait_ready()
m = 'model="tiny"'
wait_value(f'up{{job="df11d"}}', 1.0)

sent_requests, sent_tokens = 0, 0
# 1. The running gauge: keep one long request running until a scrape sees it.
stop = threading.Event()
def keep_running():
    global sent_requests, sent_tokens
    while not stop.is_set():
        ids, last = client.generate("tiny", [1, 2, 3, 4, 5, 6, 7, 8], 1500)
        assert len(ids) == 1500 and last.usage.completion_tokens == 1500, (len(ids), last.usage)
        sent_requests += 1
        sent_tokens += len(ids)
runner = threading.Thread(target=keep_running)
runner.start()
try:
    wait_value(f"df11_requests_running{{{m}}}", 1.0)
finally:
    stop.set()
    runner.join()
print(f"running gauge seen at 1 ({sent_requests} long requests)")

# 2. A few short generations.
for i, n in enumerate([3, 5, 8]):
    ids, last = client.generate("tiny", [10 + i, 20, 30, 40], n)
    assert len(ids) == n, (len(ids), n)
    sent_requests += 1
    sent_tokens += n

# 3. One request the engine refuses (token id out of the vocabulary).
import grpc
try:
    client.generate("tiny", [1, 100000], 4)
    raise AssertionError("out-of-vocab prompt was accepted")
except grpc.RpcError as e:
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e

wait_value(f"df11_time_to_first_token_seconds_count{{{m}}}", float(sent_requests))
wait_value(f"df11_requests_running{{{m}}}", 0.0)
wait_value(f"df11_generated_tokens_total{{{m}}}", float(sent_tokens))
wait_value(f'df11_requests_total{{{m},finish_reason="length"}}', float(sent_requests))
wait_value(f"df11_request_duration_seconds_count{{{m}}}", float(sent_requests))
wait_value('df11_rpcs_total{method="Generate",code="OK"}', float(sent_requests))
wait_value('df11_rpcs_total{method="Generate",code="INVALID_ARGUMENT"}', 1.0)
wait_value(f'df11_requests_rejected_total{{{m},reason="invalid"}}', 1.0)
print(f"TTFT count, requests, generated tokens, RPCs match: {sent_requests} requests, {sent_tokens} tokens")

expected = checkpoint_bytes(f"{model_dir}/model.safetensors")
weight = value(f"df11_model_weight_bytes{{{m}}}")
bf16 = value(f"df11_model_weight_bf16_bytes{{{m}}}")
assert weight == float(info.weight_bytes), (weight, info.weight_bytes)
assert bf16 == float(info.bf16_weight_bytes), (bf16, info.bf16_weight_bytes)
assert bf16 == float(expected), (bf16, expected)
assert value(f"df11_model_compression_ratio{{{m}}}") == 1.0
assert value(f'df11_model_info{{{m},state="ready",format="bf16"}}') == 1.0
# The DF11 copy of the same checkpoint: the same BF16 bytes, fewer resident ones.
d = 'model="tiny-df11"'
df11_bf16, df11_weight = value(f"df11_model_weight_bf16_bytes{{{d}}}"), value(f"df11_model_weight_bytes{{{d}}}")
# NOTE: df11d reports 96 bytes more BF16-equivalent for the DF11 copy of qwen3-tiny than the BF16
# checkpoint holds (runtime's load report); the gauge must equal the report, the checkpoint within 0.1%.
assert df11_bf16 == float(info_df11.bf16_weight_bytes), (df11_bf16, info_df11.bf16_weight_bytes)
assert abs(df11_bf16 - expected) <= 0.001 * expected, (df11_bf16, expected)
assert df11_weight == float(info_df11.weight_bytes) < expected, (df11_weight, info_df11.weight_bytes, expected)
assert abs(value(f"df11_model_compression_ratio{{{d}}}") - info_df11.weight_bytes / info_df11.bf16_weight_bytes) < 1e-9
assert value(f'df11_model_info{{{d},state="ready",format="df11"}}') == 1.0
assert value(f"df11_model_load_warnings{{{d}}}") == float(len(info_df11.load_warnings)) == 0.0, info_df11.load_warnings
saved = value('sum(df11_model_weight_bf16_bytes - df11_model_weight_bytes)')
assert saved == float(info_df11.bf16_weight_bytes - info_df11.weight_bytes), saved
print(f"weight gauges match ListModels and the checkpoint: BF16 {int(weight)} bytes, "
      f"DF11 {info_df11.weight_bytes} bytes resident ({info_df11.weight_bytes / expected:.2%})")

rules = json.load(urllib.request.urlopen(f"{prom}/api/v1/rules", timeout=10))["data"]["groups"]
names = sorted(r["name"] for g in rules for r in g["rules"])
assert len(names) == 6, names
firing = [r["name"] for g in rules for r in g["rules"] if r.get("state") == "firing"]
assert not firing, firing

# Prometheus' own linter on the exposition (naming, units, _total only on counters).
import subprocess
exposition = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read()
lint = subprocess.run(["promtool", "check", "metrics"], input=exposition, capture_output=True)
assert lint.returncode == 0, (lint.stdout + lint.stderr).decode()

dash = json.load(open(f"{root}/deploy/grafana/df11-serve.json"))
exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
for e in exprs:
    query(e.replace("$model", ".*").replace("$__rate_interval", "1m"))
print(f"promtool check metrics: clean; {len(names)} alert rules loaded, none firing; "
      f"{len(exprs)} dashboard queries evaluate")
PY
echo "e2e-prometheus: passed"
