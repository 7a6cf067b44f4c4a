# bucketkeeper: `make dev` runs it, `make test` tests it.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

GO ?= go
CONTROLLER_GEN := $(GO) tool controller-gen
# Packages whose tests run with the race detector (everything with goroutines of ours).
RACE_PKGS := ./internal/... ./cmd/...
# Generated files that `make verify` checks are up to date.
GENERATED := config/crd/bases config/rbac/role.yaml api/v1alpha1/zz_generated.deepcopy.go
TEST_FLAGS ?= -count=1 -timeout 30m

.PHONY: all
all: build

##@ Generation

.PHONY: manifests
manifests: ## Generate CRDs and RBAC from the +kubebuilder markers.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=bucketkeeper-manager paths=./internal/controller/... output:rbac:artifacts:config=config/rbac

.PHONY: generate
generate: ## Generate DeepCopy methods.
	$(CONTROLLER_GEN) object paths=./api/...

##@ Checks

.PHONY: fmt
fmt: ## Format the code.
	gofmt -w $$(git ls-files --cached --others --exclude-standard '*.go')

.PHONY: vet
vet: ## go vet the module and the peers' shared helper.
	$(GO) vet ./...
	cd hack/peers/lifeline && $(GO) vet ./...

.PHONY: verify
verify: vet ## Fail when generated files are stale or code is not gofmt'ed.
	@unformatted=$$(git ls-files --cached --others --exclude-standard '*.go' | xargs -r gofmt -l); \
	if [ -n "$$unformatted" ]; then echo "not gofmt'ed (run make fmt):"; echo "$$unformatted"; exit 1; fi
	@before=$$(find $(GENERATED) -type f 2>/dev/null | sort | xargs -r sha256sum); \
	$(MAKE) --no-print-directory -s manifests generate; \
	after=$$(find $(GENERATED) -type f 2>/dev/null | sort | xargs -r sha256sum); \
	if [ "$$before" != "$$after" ]; then \
	  echo "generated files were stale; they are regenerated now: review and commit them"; \
	  diff <(echo "$$before") <(echo "$$after") || true; exit 1; fi
	@echo "verify: generated files up to date, gofmt and vet clean"

##@ Build and test

.PHONY: build
build: ## Build the manager binary into bin/.
	$(GO) build -o bin/ ./cmd/...

.PHONY: peers
peers: ## Build the real test peers (kube-apiserver, etcd, SeaweedFS, Versity) if missing.
	hack/peers/build.sh

.PHONY: test
test: verify ## Run every test against the real peers (built on first use).
	@bin=$$(hack/peers/build.sh | tail -n1); export BUCKETKEEPER_PEERS_BIN=$$bin; \
	echo ">> peers in $$bin"; \
	$(GO) test $(TEST_FLAGS) -race -v $(RACE_PKGS); \
	$(GO) test $(TEST_FLAGS) -v $$($(GO) list ./... | grep -v -e /internal/ -e /cmd/)

.PHONY: dev
dev: ## Run bucketkeeper on this machine with no cluster and no cloud (coming soon).
	@echo "make dev is not built yet: it arrives with the dev-mode work (see README)."; exit 1

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-12s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
