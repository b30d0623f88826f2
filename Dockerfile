# syntax=docker/dockerfile:1
# The anchorage manager: a static binary on an empty (scratch) image, running as a
# non-root user (the Deployment in config/manager requires runAsNonRoot).
#
#   make docker-build IMG=anchorage-manager:dev     (stamps VERSION, COMMIT, DATE)
#
# The base images are named without a registry: pull them through whatever mirror your
# container tool is configured with.
ARG GO_VERSION=1.26.8

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS=linux
ARG TARGETARCH=amd64
ARG VERSION=dev
ARG COMMIT=
ARG DATE=
WORKDIR /src
# Modules first, so a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags="-s -w \
      -X anchorage/internal/version.Version=${VERSION} \
      -X anchorage/internal/version.Commit=${COMMIT} \
      -X anchorage/internal/version.BuildDate=${DATE}" \
      -o /out/manager ./cmd/manager

FROM scratch
# Certificate authorities, for a hub or plane whose kubeconfig relies on public CAs
# rather than carrying its own certificate-authority-data.
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/manager /manager
# A numeric user, so that runAsNonRoot can verify it; scratch has no /etc/passwd.
USER 65532:65532
ENTRYPOINT ["/manager"]
