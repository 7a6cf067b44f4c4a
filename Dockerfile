# syntax=docker/dockerfile:1
# The manager image: a static binary on distroless, running as nonroot (65532).
#   docker build -t bucketkeeper:dev .
# Without Docker, `ko build ./cmd/bucketkeeper` builds the same image (see .ko.yaml).

FROM --platform=$BUILDPLATFORM golang:1.26 AS builder
ARG TARGETOS=linux
ARG TARGETARCH
WORKDIR /src
# Dependencies first, so that a source change reuses the module download layer.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags="-s -w" -o /out/manager ./cmd/bucketkeeper

FROM gcr.io/distroless/static:nonroot
COPY --from=builder /out/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
