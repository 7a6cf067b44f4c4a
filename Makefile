# bucketkeeper: `make dev` runs it, `make test` tests it.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

# GO is exported for hack/test-bin.sh, which builds and lists with it as the recipes do.
GO ?= go
export GO
# Every build here but the race detector's is static (CGO_ENABLED=0), as the release
# image's and the test peers' are, so they share one compile of every package they have in
# common (DEVELOPMENT.md, "How make test runs"). RACE_GO turns cgo back on for -race.
export CGO_ENABLED := 0
RACE_GO := CGO_ENABLED=1 $(GO)
# The make that hack/test.sh runs make test's build steps with.
TEST_MAKE := $(MAKE)
CONTROLLER_GEN := $(GO) tool controller-gen
# Packages whose tests run with the race detector (everything with goroutines of ours).
# Longest first: hack/test-bin.sh runs a suite's packages as many at once as there are
# cores, in this order (the integration tests run in suites of their own: hack/test.sh).
RACE_PKGS := ./test/integration/ ./internal/mover/ ./internal/... ./cmd/...
# How many parallel tests of one race-suite package run at once (go test's default is
# the number of cores): they mostly wait on the stores (hack/test.sh).
RACE_PARALLEL ?= 6
# The API reference, written from the Go types of api/v1alpha1 by elastic/crd-ref-docs,
# pinned in the nested module hack/crd-ref-docs.
API_DOCS := docs/reference/api.md
# Generated files that `make verify` checks are up to date.
GENERATED := config/crd/bases config/rbac/role.yaml api/v1alpha1/zz_generated.deepcopy.go charts/bucketkeeper/crds \
	charts/bucketkeeper/files $(API_DOCS)
# make test builds its test binaries once into TEST_BIN (hack/test-bin.sh) and its suites run
# them with TEST_RUN's flags. -ldflags=-w: test binaries without DWARF link faster; stack
# traces come from the symbol table, which stays.
TEST_BIN := bin/tests
TEST_BUILD := -ldflags=-w
TEST_RUN := -test.v=true -test.count=1 -test.timeout=30m
# make test vets every module in a suite beside the tests, so its go test commands leave
# out go test's own vet (DEVELOPMENT.md says why).
TEST_VET := -vet=off
# The operator module's packages that run without the race detector, but the soak.
PLAIN_PKGS = $$($(GO) list ./... | grep -v -e /internal/ -e /cmd/ -e /test/integration -e /test/soak)
# The soak (test/soak): its short form runs in make test as a suite of its own, as it
# mostly waits on the operator settling; make soak runs its long form.
SOAK_PKG := ./test/soak/

.PHONY: all
all: build ## Build the manager (the default).

##@ Generation

.PHONY: manifests
manifests: ## Generate CRDs and RBAC from the +kubebuilder markers; copy CRDs, alerts and dashboards into the chart.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=bucketkeeper-manager paths="./internal/controller/...;./internal/store/..." output:rbac:artifacts:config=config/rbac
	cp config/crd/bases/*.yaml charts/bucketkeeper/crds/
	@# charts/bucketkeeper/files holds only copies of config/prometheus: never edit it.
	rm -rf charts/bucketkeeper/files && mkdir -p charts/bucketkeeper/files/dashboards
	cp config/prometheus/prometheusrule.yaml charts/bucketkeeper/files/
	cp config/prometheus/dashboards/*.json charts/bucketkeeper/files/dashboards/

.PHONY: generate
generate: ## Generate DeepCopy methods.
	$(CONTROLLER_GEN) object paths=./api/...

.PHONY: api-docs
api-docs: ## Write docs/reference/api.md from the Go types of api/v1alpha1.
	@cd hack/crd-ref-docs && $(GO) tool crd-ref-docs --log-level=ERROR --config=config.yaml --renderer=markdown \
	  --source-path=../../api/v1alpha1 --output-path=../../$(API_DOCS)

.PHONY: docs
docs: api-docs ## Write docs/' generated parts: the API reference, the performance tables from bench/results, the table of metrics, the operator's AWS policy.
	BUCKETKEEPER_UPDATE_DOCS=1 $(GO) test -count=1 -run '^(TestBenchFigures|TestMetricsTable)$$' ./test/docs/
	BUCKETKEEPER_UPDATE_DOCS=1 $(GO) test -count=1 -run '^TestPolicyDoc$$' ./internal/awspolicy/

##@ Checks

.PHONY: fmt
fmt: ## Format the code.
	gofmt -w $$(git ls-files --cached --others --exclude-standard '*.go')

# Nested modules: their dependencies (Versity, Helm, kustomize, the kubectl plugin's
# cli-runtime, plotting, the vet tool's golang.org/x/tools, the release packager's Helm
# and kustomize) stay out of the operator's module.
NESTED := cmd/bucketkeeper-dev cmd/kubectl-bucketkeeper test/manifests bench hack/vettool hack/release

# The operator's module is vetted first, then the nested modules side by side, with
# hack/vettool: go vet's own analyzers, minus the facts of the other modules' packages,
# which no diagnostic about our code needs (see its doc comment and DEVELOPMENT.md).
VETTOOL := $(CURDIR)/bin/vettool
.PHONY: vet
vet: ## go vet every module of ours (and the benchmark baseline's build-tagged files).
	@cd hack/vettool && $(GO) build -o $(VETTOOL) .
	@$(GO) vet -vettool=$(VETTOOL) ./... && $(GO) vet -vettool=$(VETTOOL) -tags benchbaseline ./internal/probe/ ./internal/operator/ ./cmd/bucketkeeper/
	@hack/run-suites.sh bin/vet-logs vet-lifeline 'cd hack/peers/lifeline && $(GO) vet -vettool=$(VETTOOL) ./...' \
	  $(foreach m,$(NESTED),vet-$(subst /,-,$(m)) 'cd $(m) && $(GO) vet -vettool=$(VETTOOL) ./...')

# A dependency that two of our modules compile at different versions makes the build cache
# compile everything above it once per module (see the script).
.PHONY: check-shared-deps
check-shared-deps: ## Fail when two of our modules compile a dependency at different versions.
	@hack/check-shared-deps.sh $(GO)

.PHONY: verify
verify: check-shared-deps vet verify-generated ## Fail on stale generated files, gofmt, go vet findings or modules disagreeing on a dependency.
	@echo "verify: generated files up to date, gofmt and vet clean, shared dependencies at one version"

# verify-generated is verify's check of the generated files and of gofmt. make test runs it
# before its suites, which read the CRDs, RBAC and chart files it regenerates, and runs vet
# beside them: vet reads only the sources.
.PHONY: verify-generated
verify-generated: ## Fail when a generated file is stale (and regenerate it) or code is not gofmt'ed.
	@unformatted=$$(git ls-files --cached --others --exclude-standard '*.go' | xargs -r gofmt -l); \
	if [ -n "$$unformatted" ]; then echo "not gofmt'ed (run make fmt):"; echo "$$unformatted"; exit 1; fi
	@before=$$(find $(GENERATED) -type f 2>/dev/null | sort | xargs -r sha256sum); \
	$(MAKE) --no-print-directory -s manifests generate api-docs; \
	after=$$(find $(GENERATED) -type f 2>/dev/null | sort | xargs -r sha256sum); \
	if [ "$$before" != "$$after" ]; then \
	  echo "generated files were stale; they are regenerated now: review and commit them"; \
	  diff <(echo "$$before") <(echo "$$after") || true; exit 1; fi

##@ Build, run and test

.PHONY: build
build: ## Build the manager binary and the kubectl plugin (kubectl-bucketkeeper) into bin/.
	$(GO) build -o bin/ ./cmd/...
	cd cmd/kubectl-bucketkeeper && $(GO) build -o $(CURDIR)/bin/ .

# VERSION names the plugin's release archives.
VERSION ?= dev
.PHONY: plugin-dist
plugin-dist: ## Build the kubectl plugin's krew archives and their SHA256SUMS into dist/ (VERSION=vX.Y.Z).
	@mkdir -p $(RELEASE_BIN)
	$(RELEASE_TOOL) licenses -root $(CURDIR) -bin $(CURDIR)/$(RELEASE_BIN)
	PLUGIN_NOTICES=$(RELEASE_BIN)/kubectl-bucketkeeper.notices GO=$(GO) hack/plugin-dist.sh $(VERSION) dist

.PHONY: peers
peers: ## Build the real test peers (kube-apiserver, etcd, the stores, moto, the node) if missing.
	hack/peers/build.sh

# Each suite's output goes to its own log here; the logs are printed as suites finish.
TEST_LOGS ?= bin/test-logs
# The integration tests that mostly wait (on sync and probe intervals, SeaweedFS's quota
# check, managers killed and restarted) are named TestPaced... and run in a test process
# of their own, beside the others (test/integration/doc.go).
PACED_TESTS := ^TestPaced
# The integration tests of moves (TestMove...) run in a process of their own too, without
# the race detector: they spend their CPU copying objects, the detector multiplied it, and
# the mover's and the move controller's concurrency is raced by their packages' tests and
# by MOVE_RACE_TESTS, a cancel and a cutover, which run with the paced tests under it.
MOVE_TESTS := ^TestMove
MOVE_RACE_TESTS := ^(TestMoveCancelledBeforeCutover|TestMoveEveryVersion)$$

# The install test (a real node, the release's chart and bundle as Pods) mostly waits on
# Pods: it runs as a suite of its own, after make release-dry-run with TEST_RELEASE's
# settings has written the release it installs: binaries built as the test binaries are
# (no -trimpath: see RELEASE_TRIMPATH), for linux/amd64 only, the cluster's, whose
# compiles the test binaries' share (a second architecture compiles every package
# again: 5 CPU-minutes of a cold make test); make plugin-dist and the release workflow
# build the others.
INSTALL_TESTS := ^TestInstall$$
TEST_RELEASE := RELEASE_TRIMPATH= RELEASE_PLATFORMS=linux/amd64 RELEASE_PLUGIN_PLATFORMS=linux/amd64

# test's program is hack/test.sh (DEVELOPMENT.md, "How make test runs", says what it does
# and why); the variables above are its settings. Only make test compiles without DWARF:
# make build and make dev keep the debug information a debugger reads.
.PHONY: test
test: export GOFLAGS := $(strip $(GOFLAGS) -gcflags=all=-dwarf=false)
test: ## Run every test against the real peers (built on first use): hack/test.sh.
	@TEST_MAKE='$(TEST_MAKE)' TEST_BIN='$(TEST_BIN)' TEST_RUN='$(TEST_RUN)' TEST_LOGS='$(TEST_LOGS)' \
	  RACE_PKGS='$(RACE_PKGS)' RACE_PARALLEL='$(RACE_PARALLEL)' NESTED='$(NESTED)' PACED_TESTS='$(PACED_TESTS)' MOVE_TESTS='$(MOVE_TESTS)' MOVE_RACE_TESTS='$(MOVE_RACE_TESTS)' \
	  INSTALL_TESTS='$(INSTALL_TESTS)' SOAK_PKG='$(SOAK_PKG)' FUZZ_CMDS='$(call fuzz_cmds,-parallel=1 $(TEST_VET))' \
	  TEST_RELEASE='$(TEST_RELEASE)' hack/test.sh

# test-binaries-race builds the race-instrumented test binaries first, beside
# kube-apiserver's build: nothing else compiles their packages.
.PHONY: test-binaries-race
test-binaries-race: ## Build the race-instrumented test binaries into TEST_BIN (a step of make test).
	@echo ">> building the race-instrumented test binaries"
	@CGO_ENABLED=1 hack/test-bin.sh build $(TEST_BIN)/race -race $(TEST_BUILD) $(TEST_VET) -- $(RACE_PKGS)

# test-binaries builds every plain test binary the suites run, one go command at a time
# (two go commands compiling the same packages at once each compile them); each is linked
# again only when one of its packages changed (hack/test-bin.sh).
.PHONY: test-binaries
test-binaries: ## Build the plain test binaries of every module into TEST_BIN (a step of make test).
	@echo ">> building the test binaries"
	@hack/test-bin.sh build $(TEST_BIN)/main $(TEST_BUILD) $(TEST_VET) -- $(PLAIN_PKGS) $(SOAK_PKG) ./test/integration/
	@$(foreach m,$(NESTED),(cd $(m) && $(CURDIR)/hack/test-bin.sh build $(CURDIR)/$(TEST_BIN)/$(subst /,-,$(m)) $(TEST_BUILD) $(TEST_VET) -- ./...) &&) true

# fuzz_cmds are the short fuzzing runs, with extra go test flags ($(1)): `make test` runs
# them with one worker beside the other suites. Every run happens; any failure fails.
# Their budgets are counts of inputs, not durations: a duration races Go's fuzzing
# coordinator (go.dev/issue/75804, fixed in Go 1.27), which on a loaded machine fails
# a run with "context deadline exceeded" and no failing input.
fuzz_cmds = rc=0; \
	$(GO) test $(1) -run "^$$" -fuzz FuzzBucketName -fuzztime 30000x ./internal/naming/ || rc=1; \
	$(GO) test $(1) -run "^$$" -fuzz FuzzInspectPolicy -fuzztime 20000x ./internal/guardrail/ || rc=1; \
	$(GO) test $(1) -run "^$$" -fuzz FuzzHandler -fuzztime 5000x ./internal/receiver/ || rc=1; \
	exit $$rc

.PHONY: fuzz
fuzz: ## Short fuzzing runs of the bucket names, the policy guardrail and the webhook handler.
	@$(call fuzz_cmds,)

.PHONY: store-table
store-table: ## Write docs/stores.md's store tables from what the real stores answer in the tests.
	BUCKETKEEPER_UPDATE_STORE_TABLE=1 $(GO) test -count=1 -run '^TestContract$$' ./internal/s3/
	BUCKETKEEPER_UPDATE_STORE_TABLE=1 $(GO) test -count=1 -run '^(TestContract|TestContractListUsersPages)$$' ./internal/iam/
	BUCKETKEEPER_UPDATE_STORE_TABLE=1 $(GO) test -count=1 -run '^(TestTenantReachesOnlyItsOwnBuckets|TestAdoptionGuardrail|TestAnonymousPrincipalForms)$$' ./test/e2e/
	BUCKETKEEPER_UPDATE_STORE_TABLE=1 $(GO) test -count=1 -run '^(TestQuotaGuardrailsOnRGW|TestPacedQuotaOnSeaweedFS|TestQuotaNotSupportedByStore|TestPacedUsageFollowsWritesAndDeletes|TestObjectLock[A-Za-z]*|TestPacedObjectLock[A-Za-z]*|TestMoveKeepsEveryAcknowledgedWrite|TestMoveOffMinIOFreezesItsKeys|TestMoveOntoItselfIsRefused)$$' ./test/integration/

.PHONY: reasons-doc
reasons-doc: ## Write the table of condition reasons and remedies (internal/remedy) into docs/kubectl-plugin.md.
	BUCKETKEEPER_UPDATE_DOCS=1 $(GO) test -count=1 -run '^TestReasonsDoc$$' ./internal/remedy/

# The soak's long form: random operations, SIGKILLs and store outages for SOAK_DURATION,
# the invariant checker after every round; its summary goes to bench/results/soak.json
# and soak.md, to be committed. SOAK_SEED replays a seed. The operator's logs and the
# operations run are kept in SOAK_LOGS, to read a finding against.
SOAK_DURATION ?= 30m
SOAK_LOGS ?= $(CURDIR)/bin/soak
.PHONY: soak
soak: ## The long soak (SOAK_DURATION, default 30m; SOAK_SEED replays one): bench/results/soak.{json,md}; not in make test.
	rm -rf $(SOAK_LOGS)
	BUCKETKEEPER_SOAK_DURATION=$(SOAK_DURATION) BUCKETKEEPER_SOAK_RESULTS=$(CURDIR)/bench/results \
	  BUCKETKEEPER_SOAK_LOGS=$(SOAK_LOGS) BUCKETKEEPER_SOAK_TRACE=$(SOAK_LOGS)/trace.log \
	  $(if $(SOAK_SEED),BUCKETKEEPER_SOAK_SEED=$(SOAK_SEED)) \
	  $(GO) test -count=1 -v -timeout 3h -run '^TestSoak$$' $(SOAK_PKG)

.PHONY: dev
dev: ## Run bucketkeeper on this machine: real control plane, embedded S3, the samples.
	cd cmd/bucketkeeper-dev && $(GO) run . $(DEV_FLAGS)

.PHONY: bench
bench: ## Measure convergence, probing, memory, outage and failover (BENCH_N, BENCH_SCENARIOS); not in make test.
	cd bench && $(GO) run .

.PHONY: help
help: ## List the targets, one line each.
	@awk 'BEGIN {FS = ":.*## "} /^##@/ { printf "\n%s\n", substr($$0, 5) } /^[a-zA-Z_-]+:.*## / { printf "  %-20s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

##@ Release

# A release is made from a tag vX.Y.Z (docs/versioning.md); without one, the chart's
# version names it. The release workflow (.github/workflows/release.yaml) runs
# `make release-dry-run RELEASE_TAG=<the tag>`, then pushes and signs what it wrote.
RELEASE_TAG ?= v$(shell sed -n 's/^version: *//p' charts/bucketkeeper/Chart.yaml)
# Where the image goes; the chart's values and config/manager name it too.
RELEASE_IMAGE := ghcr.io/bucketkeeper/bucketkeeper
RELEASE_PLATFORMS := linux/amd64 linux/arm64
# The kubectl plugin's platforms built (hack/plugin-dist.sh's, all by default).
RELEASE_PLUGIN_PLATFORMS ?= $(shell hack/plugin-dist.sh --platforms)
# Every release binary is static, stripped and built with -trimpath. make test's
# dry-run leaves -trimpath out (RELEASE_TRIMPATH=), as its test binaries do, so that the
# linux/amd64 binaries reuse every package those compiled: -trimpath compiles each again
# only to change the file names in stack traces. hack/release checks the binaries were
# built as it is told.
RELEASE_TRIMPATH ?= -trimpath
RELEASE_BIN := bin/release
# The commit and its time: every date in the artifacts is the commit's, so that one
# commit makes one image digest (SOURCE_DATE_EPOCH, as reproducible builds name it).
RELEASE_REVISION ?= $(shell git rev-parse HEAD)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct)
# hack/release, the release's packager: a module of its own (Helm, kustomize).
RELEASE_TOOL = $(GO) -C hack/release run .

.PHONY: release-dry-run
release-dry-run: ## Build every release artifact into dist/ (RELEASE_TAG=vX.Y.Z), pushing nothing: image archives, chart, bundle, krew archives, SBOMs, SHA256SUMS.
	@rm -rf dist $(RELEASE_BIN) && mkdir -p dist $(RELEASE_BIN)
	@echo ">> licences of every module the operator and the plugin link"
	@$(RELEASE_TOOL) licenses -root $(CURDIR) -bin $(CURDIR)/$(RELEASE_BIN)
	@echo ">> the operator for $(RELEASE_PLATFORMS)"
	@$(foreach p,$(RELEASE_PLATFORMS),GOOS=$(firstword $(subst /, ,$(p))) GOARCH=$(lastword $(subst /, ,$(p))) \
	  $(GO) build $(RELEASE_TRIMPATH) -ldflags="-s -w" -o $(RELEASE_BIN)/bucketkeeper_$(subst /,_,$(p)) ./cmd/bucketkeeper &&) true
	@echo ">> the kubectl plugin for $(RELEASE_PLUGIN_PLATFORMS)"
	@PLUGIN_NOTICES=$(RELEASE_BIN)/kubectl-bucketkeeper.notices PLUGIN_PLATFORMS='$(RELEASE_PLUGIN_PLATFORMS)' \
	  PLUGIN_TRIMPATH='$(RELEASE_TRIMPATH)' GO=$(GO) hack/plugin-dist.sh $(RELEASE_TAG) dist >/dev/null
	@echo ">> the image, chart, bundle, SBOMs and SHA256SUMS"
	@$(RELEASE_TOOL) package -root $(CURDIR) -tag $(RELEASE_TAG) -image $(RELEASE_IMAGE) -revision $(RELEASE_REVISION) \
	  -created $(SOURCE_DATE_EPOCH) -trimpath=$(if $(RELEASE_TRIMPATH),true,false) -platforms '$(RELEASE_PLATFORMS)' -plugin-platforms '$(RELEASE_PLUGIN_PLATFORMS)' \
	  -bin $(CURDIR)/$(RELEASE_BIN) -dist $(CURDIR)/dist

.PHONY: release-notes
release-notes: ## Print CHANGELOG.md's section of RELEASE_TAG: the GitHub release's text.
	@$(RELEASE_TOOL) notes -root $(CURDIR) -tag $(RELEASE_TAG)
