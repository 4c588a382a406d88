# df11-serve image (CPU build of the df11 CLI for now; the daemon image with a CUDA base, non-root
# user and ports lands with the shipping issue).
FROM debian:bookworm AS build
WORKDIR /src
COPY . .
RUN bash scripts/setup.sh && TARGETS=df11 bash scripts/build.sh build -DDF11_CUDA=OFF

FROM debian:bookworm-slim
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends libonig5 && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 df11
COPY --from=build /src/build/cli/df11 /usr/local/bin/df11
USER df11
ENTRYPOINT ["/usr/local/bin/df11"]
