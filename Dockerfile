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

# The kubectl plugin (kubectl bucketkeeper), shipped beside the image: built from the
# same sources for the same platforms with
#   docker build --target plugin --platform linux/arm64 --output type=local,dest=dist/ .
# A plain docker build stops at the image and never builds these two stages. krew's
# archives (plugins/bucketkeeper.yaml) come from make plugin-dist, without Docker.
FROM builder AS plugin-builder
ARG TARGETOS=linux
ARG TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    cd cmd/kubectl-bucketkeeper && go mod download && \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags="-s -w" -o /out/kubectl-bucketkeeper .

FROM scratch AS plugin
COPY --from=plugin-builder /out/kubectl-bucketkeeper /kubectl-bucketkeeper

FROM gcr.io/distroless/static:nonroot
COPY --from=builder /out/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
