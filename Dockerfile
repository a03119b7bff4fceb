# syntax=docker/dockerfile:1
#
# Pinfold container image: a multi-stage build.
#
#   docker build -t pinfold .
#   docker run --rm -p 8080:8080 pinfold serve --dev          # dev mode, SQLite in /var/lib/pinfold
#   docker run --rm pinfold migrate --database-url postgres://...
#
# The build stage compiles the `pinfold` binary from the locked dependency set
# (`--locked`: Cargo.lock is authoritative). The runtime stage is Debian slim
# with CA certificates and nothing else; it runs as an unprivileged user,
# writes only to /var/lib/pinfold (SQLite and the dev key; nothing at all on
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
    cargo build --release --locked --bin pinfold \
 && install -D -m 0755 target/release/pinfold /out/pinfold

FROM debian:${DEBIAN_RELEASE}-slim AS runtime
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 pinfold \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/pinfold --no-create-home --shell /usr/sbin/nologin pinfold \
 && install -d -o 10001 -g 10001 -m 0750 /var/lib/pinfold
COPY --from=build /out/pinfold /usr/local/bin/pinfold

# Listen on all interfaces inside the container; data under the volume.
# Logs are JSON for collectors; OTLP export stays off unless
# OTEL_EXPORTER_OTLP_ENDPOINT (or [telemetry]) turns it on.
ENV PINFOLD_LISTEN=0.0.0.0:8080 \
    PINFOLD_DATA_DIR=/var/lib/pinfold \
    PINFOLD_LOG_FORMAT=json

USER 10001:10001
WORKDIR /var/lib/pinfold
VOLUME ["/var/lib/pinfold"]
EXPOSE 8080
STOPSIGNAL SIGTERM

# Liveness without extra packages: bash's /dev/tcp speaks just enough HTTP.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/8080 && printf 'GET /healthz HTTP/1.0\\r\\nHost: localhost\\r\\n\\r\\n' >&3 && head -n1 <&3 | grep -q ' 200 '"]

ENTRYPOINT ["/usr/local/bin/pinfold"]
CMD ["serve"]
