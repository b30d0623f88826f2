# syntax=docker/dockerfile:1
# The anchorage manager: a static binary on a distroless base, running as a non-root
# user (the Deployment in config/manager requires runAsNonRoot).
#
#   docker build -t anchorage-manager:latest .
ARG GO_VERSION=1.26.8

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS=linux
ARG TARGETARCH=amd64
WORKDIR /src
# Modules first, so a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags="-s -w" -o /out/manager ./cmd/manager

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/manager /manager
# distroless's nonroot user, numeric so that runAsNonRoot can verify it.
USER 65532:65532
ENTRYPOINT ["/manager"]
