# df11-serve image: the df11d daemon (entrypoint) and the df11 CLI, non-root, models mounted
# read-only at /models. Two variants (docs/deploy.md):
#   docker build -t df11-serve .                          CUDA: builds on the CUDA devel image,
#                                                         ships on the matching runtime image
#   docker build -t df11-serve:cpu --build-arg VARIANT=cpu .   CPU only: Debian bookworm, no CUDA
# Base images are build arguments so an offline builder can point them at local images
# (scripts/container-test.sh uses DEBIAN_IMAGE=localhost/df11-bookworm for both CPU stages).
# Run: docker run --gpus all -p 50051:50051 -p 8000:8000 -v /srv/models:/models:ro df11-serve \
#        --model qwen=/models/Qwen3-8B-DF11
ARG VARIANT=cuda
ARG CUDA_VERSION=13.0.1
ARG CUDA_DEVEL_IMAGE=docker.io/nvidia/cuda:${CUDA_VERSION}-devel-ubuntu24.04
ARG CUDA_RUNTIME_IMAGE=docker.io/nvidia/cuda:${CUDA_VERSION}-runtime-ubuntu24.04
ARG DEBIAN_IMAGE=docker.io/library/debian:bookworm
ARG DEBIAN_SLIM_IMAGE=${DEBIAN_IMAGE}
# GPU architectures the CUDA kernels are compiled for (CMAKE_CUDA_ARCHITECTURES syntax; 90 = H100/H200).
ARG CUDA_ARCHS=90

# ---- build stages: one per variant, the same steps -------------------------------------------
FROM ${CUDA_DEVEL_IMAGE} AS build-cuda
ENV DF11_CUDA=ON

FROM ${DEBIAN_IMAGE} AS build-cpu
ENV DF11_CUDA=OFF

FROM build-${VARIANT} AS build
ARG TARGETS="df11d df11"
ARG JOBS=2
ARG CUDA_ARCHS
ENV DEBIAN_FRONTEND=noninteractive
# The build packages of scripts/setup.sh, less the test tools (gtest, fuzzing, prometheus, podman),
# plus ccache: compiler outputs persist in a build cache mount between image builds.
RUN apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends build-essential cmake ninja-build pkg-config ccache \
       ca-certificates nlohmann-json3-dev libonig-dev libcli11-dev libgrpc++-dev libprotobuf-dev \
       protobuf-compiler protobuf-compiler-grpc libspdlog-dev prometheus-cpp-dev libmicrohttpd-dev >/dev/null \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
ENV CCACHE_DIR=/ccache CCACHE_BASEDIR=/src CCACHE_MAXSIZE=2G
RUN --mount=type=cache,id=df11-serve-ccache,target=/ccache \
    cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDF11_TESTS=OFF -DDF11_CUDA="${DF11_CUDA}" \
       -DDF11_CUDA_ARCH="${CUDA_ARCHS}" -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache \
       -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache >/tmp/cmake.log || { cat /tmp/cmake.log; exit 1; } \
    && cmake --build /build -j "${JOBS}" --target ${TARGETS} \
    && mkdir -p /out/bin \
    && for t in ${TARGETS}; do cp "$(find /build -type f -name "$t" -perm -u+x | head -1)" /out/bin/; done \
    && strip /out/bin/* && (ccache -s | grep -E 'Hits|Misses' || true) && rm -rf /build
# The runtime packages: whichever Debian/Ubuntu packages own the shared libraries the binaries
# load (CUDA's own libraries under /usr/local come with the CUDA runtime image). dpkg knows a
# library by its /usr/lib or its /lib path (merged /usr), so both are asked.
RUN for lib in $(ldd /out/bin/* | awk '$3 ~ /^\// {print $3}' | sort -u); do \
      case "$lib" in /usr/local/*) continue ;; esac; \
      real=$(realpath "$lib"); \
      owner=$(dpkg -S "$real" 2>/dev/null || dpkg -S "${real#/usr}" 2>/dev/null) \
        || { echo "no package owns $lib" >&2; exit 1; }; \
      echo "${owner%%:*}" >>/tmp/packages; \
    done \
    && sort -u /tmp/packages >/out/runtime-packages.txt && echo "runtime packages:" $(cat /out/runtime-packages.txt)

# ---- runtime stages --------------------------------------------------------------------------
FROM ${CUDA_RUNTIME_IMAGE} AS run-cuda
ENV DF11D_DEVICE=cuda

FROM ${DEBIAN_SLIM_IMAGE} AS run-cpu
# The CPU backend needs an explicit KV-cache budget (1 GiB here; override with -e).
ENV DF11D_DEVICE=cpu DF11D_KV_MEMORY_BYTES=1073741824

FROM run-${VARIANT}
COPY --from=build /out/runtime-packages.txt /tmp/runtime-packages.txt
RUN apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive xargs -a /tmp/runtime-packages.txt \
       apt-get install -y -qq --no-install-recommends >/dev/null \
    && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages.txt \
    && (getent passwd 10001 >/dev/null || useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin df11) \
    && mkdir -p /models
COPY --from=build /out/bin/ /usr/local/bin/
# The 6M-parameter demo model (PSF-licensed training data: deploy/demo-model/README.md), so the
# image answers without a mount: docker run -p 50051:50051 df11-serve:cpu --model demo=/usr/share/df11-serve/demo-model
COPY deploy/demo-model/ /usr/share/df11-serve/demo-model/
# Every df11d flag is also an environment variable DF11D_<FLAG> (df11d --help).
ENV DF11D_GRPC_ADDRESS=0.0.0.0:50051 \
    DF11D_METRICS_ADDRESS=0.0.0.0:8000
VOLUME ["/models"]
USER 10001
EXPOSE 50051 8000
HEALTHCHECK --interval=15s --timeout=5s --start-period=300s --retries=3 \
    CMD ["/usr/local/bin/df11", "health", "--addr", "127.0.0.1:50051"]
ENTRYPOINT ["/usr/local/bin/df11d"]
