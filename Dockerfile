# capflow worker and CLI. Build: docker build -t capflow .
# (docker-compose.yml builds it for the stack; docs/deployment.md)
ARG GO_VERSION=1.26.8
ARG DEBIAN_RELEASE=bookworm

FROM golang:${GO_VERSION}-${DEBIAN_RELEASE} AS build
WORKDIR /src
# Modules first: a change in the code does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# cgo on: the sandbox's zygote is C (docs/sandbox.md#the-zygote); the
# binaries link the same Debian release's glibc as the image below.
RUN CGO_ENABLED=1 go build -trimpath -ldflags "-s -w -X github.com/capflow/capflow/internal/cli.Version=${VERSION}" -o /out/capflow ./starter && \
    CGO_ENABLED=1 go build -trimpath -ldflags "-s -w -X github.com/capflow/capflow/internal/cli.Version=${VERSION}" -o /out/capflow-worker ./worker

FROM debian:${DEBIAN_RELEASE}-slim
# python3 for command tools written in Python; curl for the health check;
# tini reaps the processes tools leave behind; bubblewrap confines command
# tools (docs/sandbox.md: inside a container it needs user namespaces,
# which Docker's default seccomp profile refuses; docs/deployment.md). WITH_CHROMIUM=true adds
# headless Chromium for the runtime kit's browser.run (~400 MB);
# EXTRA_PACKAGES more Debian packages your tools need (e.g. "ffmpeg" for
# the media kit: without it, plans using it report a dependency gap).
ARG WITH_CHROMIUM=false
ARG EXTRA_PACKAGES=""
RUN apt-get update && \
    apt-get install -y --no-install-recommends ca-certificates python3 curl tini bubblewrap \
      $( [ "$WITH_CHROMIUM" = true ] && echo chromium ) $EXTRA_PACKAGES && \
    rm -rf /var/lib/apt/lists/*
COPY --from=build /out/capflow /out/capflow-worker /usr/local/bin/
RUN useradd --create-home --uid 10001 capflow && mkdir -p /project/.capflow && chown -R capflow /project
USER capflow
WORKDIR /project
# The project (kits, tools, plans, capflow.yaml) is mounted here; run
# folders go to /project/.capflow (the compose stack mounts a volume there).
ENV CAPFLOW_METRICS_ADDR=0.0.0.0:9090
EXPOSE 9090
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 CMD curl -fsS http://127.0.0.1:9090/healthz || exit 1
ENTRYPOINT ["/usr/bin/tini", "--", "capflow-worker"]
CMD ["--project", "/project"]
