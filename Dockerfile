# syntax=docker/dockerfile:1
#
# Signet container image: a multi-stage build.
#
#   docker build -t signet .
#   docker run --rm -p 8080:8080 signet serve --dev          # dev mode, SQLite in /var/lib/signet
#   docker run --rm signet migrate --database-url postgres://...
#
# The build stage compiles the `signet` binary from the locked dependency set
# (`--locked`: Cargo.lock is authoritative). The runtime stage is Debian slim
# with CA certificates and nothing else; it runs as an unprivileged user,
# writes only to /var/lib/signet (SQLite and the dev key; nothing at all on
# PostgreSQL), and so works with a read-only root filesystem.
# This file is checked by CI for structure only (no Docker engine there);
# see docs/OPERATIONS.md.

ARG RUST_VERSION=1.95
ARG DEBIAN_RELEASE=bookworm

FROM rust:${RUST_VERSION}-${DEBIAN_RELEASE} AS build
WORKDIR /src
COPY . .
# BuildKit cache mounts keep the registry and target dir between builds.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin signet \
 && install -D -m 0755 target/release/signet /out/signet

FROM debian:${DEBIAN_RELEASE}-slim AS runtime
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 signet \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/signet --no-create-home --shell /usr/sbin/nologin signet \
 && install -d -o 10001 -g 10001 -m 0750 /var/lib/signet
COPY --from=build /out/signet /usr/local/bin/signet

# Listen on all interfaces inside the container; data under the volume.
# Logs are JSON for collectors; OTLP export stays off unless
# OTEL_EXPORTER_OTLP_ENDPOINT (or [telemetry]) turns it on.
ENV SIGNET_LISTEN=0.0.0.0:8080 \
    SIGNET_DATA_DIR=/var/lib/signet \
    SIGNET_LOG_FORMAT=json

USER 10001:10001
WORKDIR /var/lib/signet
VOLUME ["/var/lib/signet"]
EXPOSE 8080
STOPSIGNAL SIGTERM

# Liveness without extra packages: bash's /dev/tcp speaks just enough HTTP.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/8080 && printf 'GET /healthz HTTP/1.0\\r\\nHost: localhost\\r\\n\\r\\n' >&3 && head -n1 <&3 | grep -q ' 200 '"]

ENTRYPOINT ["/usr/local/bin/signet"]
CMD ["serve"]
