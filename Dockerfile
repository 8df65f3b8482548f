# bloom-server container image. A thin wrapper over the scripts CI runs: the build stage uses
# the README's install and build scripts, the runtime stage installs the runtime package list
# that tests/image_test.cc checks against the binaries' shared libraries.
#
#   docker build -t bloom-server .
#   docker run -p 50051:50051 -v bloom-data:/data bloom-server

FROM debian:bookworm-slim AS build
WORKDIR /src
COPY . .
RUN ./scripts/install-deps.sh \
 && BUILD_DIR=/build BUILD_TYPE=Release BUILD_TARGETS="bloom-server bloom-cli" ./scripts/build.sh \
 && strip /build/server/bloom-server /build/client/bloom-cli

FROM debian:bookworm-slim
COPY scripts/install-runtime-deps.sh scripts/runtime-packages.txt /tmp/
RUN /tmp/install-runtime-deps.sh \
 && rm -rf /var/lib/apt/lists/* /tmp/install-runtime-deps.sh /tmp/runtime-packages.txt \
 && groupadd --system --gid 10001 bloom \
 && useradd --system --uid 10001 --gid bloom --home-dir /data --no-create-home bloom \
 && mkdir /data && chown bloom:bloom /data
COPY --from=build /build/server/bloom-server /build/client/bloom-cli /usr/local/bin/
USER 10001:10001
ENV BLOOM_DATA_DIR=/data \
    BLOOM_LISTEN=0.0.0.0:50051
VOLUME ["/data"]
# 50051: gRPC. 9090: reserved for Prometheus metrics.
EXPOSE 50051 9090
ENTRYPOINT ["bloom-server"]
