#!/usr/bin/env bash
# Installs what df11-serve needs to build and test on Debian bookworm (idempotent).
# CUDA is optional: the toolkit at /usr/local/cuda is used when present, never installed here.
set -euo pipefail
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libonig-dev libcli11-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libspdlog-dev prometheus-cpp-dev libmicrohttpd-dev
  clang libclang-rt-14-dev clang-format clang-tidy
  python3 python3-jinja2 python3-grpcio python3-protobuf python3-yaml openssl
  prometheus podman buildah debootstrap curl
)
# npm fetches test fixtures; a Node.js that already ships npm (e.g. NodeSource's) conflicts with
# Debian's npm package, so install Debian's only when no npm is on the PATH.
command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "setup: dependencies present"
