# syntax=docker/dockerfile:1
# llmprobe container image.
#   docker build -t ghcr.io/llmprobe/llmprobe:0.1.0 .
#   docker run --rm -p 9464:9464 -v $PWD/config.yaml:/etc/llmprobe/config.yaml:ro \
#     ghcr.io/llmprobe/llmprobe:0.1.0 probe --config /etc/llmprobe/config.yaml
# The default command runs the self-contained demo (mock engine + prober). Inside a container the
# prober must listen on 0.0.0.0 (`listen: 0.0.0.0:9464` in the config) to be reachable from outside.

ARG RUST_VERSION=1

FROM rust:${RUST_VERSION}-bookworm AS builder
# cmake/clang: the rustls crypto provider (aws-lc-rs) builds C code.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends cmake clang \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin llmprobe \
 && install -D -m 0755 target/release/llmprobe /out/llmprobe

# glibc runtime (no shell, no package manager); NVML is loaded at run time with dlopen when a GPU
# driver is mounted in, which a static musl binary could not do.
FROM gcr.io/distroless/cc-debian12:nonroot
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="llmprobe" \
      org.opencontainers.image.description="Continuous open-arrival SLO prober for LLM inference services" \
      org.opencontainers.image.source="https://github.com/llmprobe/llmprobe" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=builder /out/llmprobe /usr/local/bin/llmprobe
# 65532:65532 is distroless' nonroot user (the Helm chart runs as the same ids).
USER 65532:65532
WORKDIR /home/nonroot
EXPOSE 9464
STOPSIGNAL SIGTERM
ENTRYPOINT ["llmprobe"]
CMD ["demo", "--listen", "0.0.0.0:9464"]
