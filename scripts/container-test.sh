#!/usr/bin/env bash
# The image test: builds the Dockerfile's CPU variant with podman on a Debian bookworm base made
# here with debootstrap (no registry needed), starts df11d from the image, and talks to it from
# the host over gRPC (df11 health, df11 generate) and HTTP (/metrics).
#   - base: debootstrap --variant=minbase bookworm, cached as a tarball under
#     ${DF11_CACHE_DIR:-~/.cache/df11-serve}, imported as localhost/df11-bookworm;
#   - build: podman build --isolation chroot --network host (this sandbox refuses podman run's
#     rlimits, so the container runs through buildah run --isolation chroot --network host);
#   - model: the committed demo model (deploy/demo-model) or $DF11_CONTAINER_MODEL; with the demo
#     model the greedy tokens must equal transformers' (deploy/demo-model/reference.json);
#   - client: $DF11_CLI, else build/cli/df11 (scripts/test.sh builds it), else the image's df11.
# Needs root (debootstrap, podman, buildah), podman, buildah, debootstrap, curl. Prints the time of
# each phase; cleans up its container on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
cache=${DF11_CACHE_DIR:-$HOME/.cache/df11-serve}
mirror=${DF11_DEBIAN_MIRROR:-http://deb.debian.org/debian}
base=localhost/df11-bookworm
image=${DF11_TEST_IMAGE:-localhost/df11-serve:cpu-test}
work=$(mktemp -d)
ctr="" server_pid=""
t0=$(date +%s)
phase() { echo "-- container-test [$(($(date +%s) - t0)) s] $*"; }

# Processes below a pid (buildah run -> buildah-chroot-runtime -> ... -> df11d).
descendants() { local k; for k in $(pgrep -P "$1"); do echo "$k"; descendants "$k"; done; }
# The pid of df11d started by this script's buildah run.
df11d_pid() { local d; for d in $(descendants "$server_pid"); do [ "$(cat "/proc/$d/comm" 2>/dev/null)" = df11d ] && echo "$d"; done; }

cleanup() {
  local rc=$?
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    for d in $(descendants "$server_pid"); do kill -KILL "$d" 2>/dev/null || true; done
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  [ -n "$ctr" ] && buildah rm "$ctr" >/dev/null 2>&1 || true
  [ $rc -ne 0 ] && [ -f "$work/df11d.log" ] && { echo "--- df11d log"; tail -50 "$work/df11d.log"; }
  rm -rf "$work"
  exit $rc
}
trap cleanup EXIT

fail() { echo "container-test: FAILED: $*" >&2; exit 1; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# 1. The bookworm base image.
if ! podman image exists "$base"; then
  tarball="$cache/bookworm-minbase.tar"
  if [ ! -s "$tarball" ]; then
    phase "debootstrap bookworm ($mirror)"
    mkdir -p "$cache"
    debootstrap --variant=minbase bookworm "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
      || { tail -20 "$work/debootstrap.log"; fail "debootstrap"; }
    tar -C "$work/rootfs" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
    rm -rf "$work/rootfs"
  fi
  phase "podman import $tarball"
  podman import "$tarball" "$base" >/dev/null
fi

# 2. The CPU image, from the Dockerfile.
phase "podman build (VARIANT=cpu)"
build_start=$(date +%s)
podman build --isolation chroot --network host --build-arg VARIANT=cpu --build-arg DEBIAN_IMAGE="$base" \
  --build-arg JOBS="${DF11_CONTAINER_JOBS:-2}" -t "$image" -f Dockerfile . >"$work/build.log" 2>&1 \
  || { tail -60 "$work/build.log"; fail "podman build"; }
grep "runtime packages:" "$work/build.log" || true
# Earlier test images and unused build layers (each run re-tags the image) go after three days.
podman image prune -f --filter until=72h >/dev/null 2>&1 || true
phase "image built in $(($(date +%s) - build_start)) s: $(podman image inspect "$image" --format '{{.Size}}') bytes"
[ "$(podman image inspect "$image" --format '{{.Config.User}}')" = 10001 ] || fail "the image does not run as uid 10001"

# 3. The model it serves: the committed demo model (or $DF11_CONTAINER_MODEL).
model=$(realpath "${DF11_CONTAINER_MODEL:-$repo/deploy/demo-model}")
[ -f "$model/config.json" ] || fail "no model at $model"

# 4. df11d from the image, on free loopback ports, model mounted read-only.
grpc_port=$(free_port)
metrics_port=$(free_port)
ctr=$(buildah from --pull=never "$image")
phase "starting df11d in $ctr (gRPC :$grpc_port, metrics :$metrics_port)"
buildah run --isolation chroot --network host --volume "$model:/models/demo:ro" "$ctr" -- \
  /usr/local/bin/df11d --model demo=/models/demo --grpc-address "127.0.0.1:$grpc_port" \
  --metrics-address "127.0.0.1:$metrics_port" >"$work/df11d.log" 2>&1 &
server_pid=$!

cli=${DF11_CLI:-$repo/build/cli/df11}
if [ ! -x "$cli" ]; then
  cli="$work/df11"
  mnt=$(buildah mount "$ctr")
  cp "$mnt/usr/local/bin/df11" "$cli"
  buildah umount "$ctr" >/dev/null
fi
addr="127.0.0.1:$grpc_port"
for _ in $(seq 1 120); do
  kill -0 "$server_pid" 2>/dev/null || fail "df11d exited during startup"
  "$cli" health --addr "$addr" --timeout 5 >/dev/null 2>&1 && break
  sleep 1
done
"$cli" health --addr "$addr" || fail "df11d never became SERVING"
phase "df11d is SERVING"

# 5. The image's own health check command, run inside the container.
buildah run --isolation chroot --network host "$ctr" -- /usr/local/bin/df11 health --addr "$addr" >/dev/null \
  || fail "the image's HEALTHCHECK command (df11 health) fails"

# 6. A greedy generation over gRPC, checked against transformers' fp32 CPU reference when the
#    model has one (same BF16 weights; DF11 decodes them bit for bit), then the metrics it moved.
prompt="def fibonacci(n):"
steps=16
"$cli" generate --addr "$addr" --model demo --max-tokens "$steps" --temperature 0 --ignore-eos --show-ids \
  "$prompt" >"$work/generated.txt" 2>"$work/ids.txt" || { cat "$work/ids.txt"; fail "df11 generate"; }
echo "generated: $prompt$(cat "$work/generated.txt")"
[ -s "$work/generated.txt" ] || fail "df11 generate printed nothing"
if [ -f "$model/reference.json" ]; then
  python3 - "$model/reference.json" "$prompt" "$steps" "$work/ids.txt" <<'PY' || fail "greedy tokens differ from the reference"
import json, re, sys
ref_path, prompt, steps, ids_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
ref = next(p for p in json.load(open(ref_path))["prompts"] if p["prompt"] == prompt)
want = ref["greedy_fp32_cpu"]["ids"][:steps]
got = [int(x) for x in re.findall(r"\[(-?\d+)\]", open(ids_path).read())]
print(f"greedy ids vs transformers fp32 CPU: {'equal' if got == want else 'DIFFERENT'} ({len(got)} tokens)")
if got != want:
    print(f"  got  {got}\n  want {want}")
sys.exit(0 if got == want else 1)
PY
fi
curl -sf "http://127.0.0.1:$metrics_port/metrics" >"$work/metrics.txt" || fail "GET /metrics"
generated=$(awk '/^df11_generated_tokens_total\{.*model="demo"/ {s += $NF} END {print s + 0}' "$work/metrics.txt")
[ "${generated%.*}" -ge "$steps" ] || fail "df11_generated_tokens_total{model=\"demo\"} is $generated after a generation"
grep -q '^df11_time_to_first_token_seconds_count{.*model="demo"' "$work/metrics.txt" \
  || fail "/metrics has no df11_time_to_first_token_seconds for model demo"
phase "/metrics: df11_generated_tokens_total{model=\"demo\"} = $generated"

# 7. SIGTERM: df11d drains and exits 0.
pid=$(df11d_pid)
[ -n "$pid" ] || fail "cannot find the df11d process under buildah run $server_pid"
kill -TERM "$pid"
for _ in $(seq 1 40); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.5; done
kill -0 "$server_pid" 2>/dev/null && fail "df11d still running 20 s after SIGTERM"
wait "$server_pid" && rc=0 || rc=$?
server_pid=""
[ "$rc" = 0 ] || fail "df11d exited with $rc after SIGTERM"
phase "df11d exited 0 after SIGTERM"
echo "container-test: OK (image built, df11d served, generated, exported metrics, drained)"
