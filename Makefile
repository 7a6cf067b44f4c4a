# bucketkeeper: `make dev` runs it, `make test` tests it.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

# GO is exported for hack/test-bin.sh, which builds and lists with it as the recipes do.
GO ?= go
export GO
# Every build here but the race detector's is static (CGO_ENABLED=0), as the release
# image's (Dockerfile) and the test peers' (hack/peers/build.sh) are: the build cache keys
# each compiled package by it, so vet, the test binaries, the peers and the install test's
# manager image share one compile of every package they have in common. With cgo on here,
# the image alone compiled some 1,200 packages a second time (536 CPU seconds). The race
# detector needs cgo; RACE_GO turns it back on for the -race builds only.
export CGO_ENABLED := 0
RACE_GO := CGO_ENABLED=1 $(GO)
CONTROLLER_GEN := $(GO) tool controller-gen
# Packages whose tests run with the race detector (everything with goroutines of ours).
RACE_PKGS := ./internal/... ./cmd/...
# Generated files that `make verify` checks are up to date.
GENERATED := config/crd/bases config/rbac/role.yaml api/v1alpha1/zz_generated.deepcopy.go charts/bucketkeeper/crds \
	charts/bucketkeeper/files
# make test builds its test binaries once into TEST_BIN (hack/test-bin.sh) and its suites run
# them with TEST_RUN's flags. -ldflags=-w: test binaries without DWARF link about a quarter
# faster (the race-built controller suite: 7.7 s instead of 10 s); stack traces come from
# the symbol table, which stays.
TEST_BIN := bin/tests
TEST_BUILD := -ldflags=-w
TEST_RUN := -test.v=true -test.count=1 -test.timeout=30m
# make test vets every module (go vet, all its analyzers) in a suite beside the tests, so
# its go test commands leave out go test's own vet: a subset of the same analyzers, which go
# test runs again on every dependency too (for their facts), once for each way the packages
# are compiled (plain, -race, fuzz-instrumented), as vet results are keyed by the compile.
TEST_VET := -vet=off
# The operator module's packages that run without the race detector.
PLAIN_PKGS = $$($(GO) list ./... | grep -v -e /internal/ -e /cmd/)

.PHONY: all
all: build

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

##@ Checks

.PHONY: fmt
fmt: ## Format the code.
	gofmt -w $$(git ls-files --cached --others --exclude-standard '*.go')

# Nested modules: their dependencies (Versity, Helm, kustomize, plotting, the vet tool's
# golang.org/x/tools) stay out of the operator's module.
NESTED := cmd/bucketkeeper-dev test/manifests bench hack/vettool

# Vetting a module compiles every package it imports. The operator's module goes first:
# the nested modules import most of its packages, and separate go commands started side by
# side each compile a package neither has in the build cache yet, so on a cold cache a
# side-by-side start compiled the shared thousand packages three times over. Once those are
# cached, the nested modules (mostly loading, not the CPU) are vetted side by side.
#
# go vet runs with hack/vettool: go vet's own analyzers, minus the facts of the other
# modules' packages, which no diagnostic about our code needs and which cost most of vet's
# CPU on an empty cache (see its doc comment).
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
verify: check-shared-deps vet verify-generated ## Fail when generated files are stale, code is not gofmt'ed or vet finds a problem, or modules disagree on a dependency.
	@echo "verify: generated files up to date, gofmt and vet clean, shared dependencies at one version"

# verify-generated is verify's check of the generated files and of gofmt. make test runs it
# before its suites, which read the CRDs, RBAC and chart files it regenerates, and runs vet
# beside them: vet reads only the sources.
.PHONY: verify-generated
verify-generated:
	@unformatted=$$(git ls-files --cached --others --exclude-standard '*.go' | xargs -r gofmt -l); \
	if [ -n "$$unformatted" ]; then echo "not gofmt'ed (run make fmt):"; echo "$$unformatted"; exit 1; fi
	@before=$$(find $(GENERATED) -type f 2>/dev/null | sort | xargs -r sha256sum); \
	$(MAKE) --no-print-directory -s manifests generate; \
	after=$$(find $(GENERATED) -type f 2>/dev/null | sort | xargs -r sha256sum); \
	if [ "$$before" != "$$after" ]; then \
	  echo "generated files were stale; they are regenerated now: review and commit them"; \
	  diff <(echo "$$before") <(echo "$$after") || true; exit 1; fi

##@ Build and test

.PHONY: build
build: ## Build the manager binary into bin/.
	$(GO) build -o bin/ ./cmd/...

.PHONY: peers
peers: ## Build the real test peers (kube-apiserver, etcd, SeaweedFS, Versity, kube-node, the Ceph RGW, moto and node roots) if missing.
	hack/peers/build.sh

# Each suite's output goes to its own log here; the logs are printed as suites finish.
TEST_LOGS ?= bin/test-logs
# The controller tests that mostly wait (on sync and probe intervals, SeaweedFS's
# once-a-minute quota check, managers killed and restarted) run in a test process of
# their own, beside the others, so that the other process is not the last to end: -run
# and -skip take the same pattern, so a test left off or misspelt here still runs, with
# the rest.
CONTROLLER_WAITING := ^(TestStatusEconomy|TestStoreOutage|TestStalledObjectSendsNoRequestStorm|TestVanishedBucketIsReportedAndRecreated|TestDriftIsCorrected|TestEquivalentPolicyIsNotRewritten|TestOwnershipMatrix|TestCredentialsProblemsAndRecovery|TestBucketAccessRotationSurvivesManagerKills|TestQuotaOnSeaweedFS|TestUsageFollowsWritesAndDeletes)$$

# The install test (a real node, the chart and config/default as Pods) mostly waits on
# Pods: it runs beside the other suites, not after the rest of test/manifests.
INSTALL_TESTS := ^TestInstall$$

# test builds the peers in the background while it checks the generated files and compiles
# the test binaries (different packages, so nothing is compiled twice, and the peers'
# single-threaded links overlap with compiling), then runs the suites side by side on warm
# binaries, go vet among them. Every peer is built before the suites start: kube-node,
# built by the install suite beside the others instead, took 731 s there against some 220 s
# before them on an empty cache, and made that suite the last by almost four minutes, as the
# suites leave no CPU idle.
.PHONY: test
# make test's compiles write no DWARF (debug information): its test binaries are linked
# without it (-ldflags=-w, TEST_BUILD) and the peers stripped, so it was only ever thrown
# away, and writing it is a quarter of the compile's CPU (421 against 322 CPU seconds for
# client-go and controller-runtime on an empty cache). Stack traces and race reports come
# from the symbol table, which stays. The peers are compiled with the same flag
# (hack/peers/build.sh), and the binaries the tests build inherit it, so the packages they
# share are still compiled once. Only make test sets it: make build and make dev keep the
# debug information a debugger reads.
test: export GOFLAGS := $(strip $(GOFLAGS) -gcflags=all=-dwarf=false)
test: ## Run every test against the real peers (built on first use).
	@mkdir -p bin; hack/peers/build.sh >bin/peers.out 2>bin/peers.log & peers=$$!; \
	rc=0; for step in test-binaries-race check-shared-deps verify-generated test-binaries; do \
	  start=$$SECONDS; $(MAKE) --no-print-directory $$step || { rc=$$?; break; }; \
	  echo ">> $$step took $$((SECONDS - start))s"; \
	done; \
	wait $$peers || { echo ">> building the peers failed:"; cat bin/peers.log; exit 1; }; \
	cat bin/peers.log; [ $$rc = 0 ] || exit $$rc; \
	bin=$$(tail -n1 bin/peers.out); export BUCKETKEEPER_PEERS_BIN=$$bin; \
	echo ">> peers in $$bin after $${SECONDS}s"; \
	hack/run-suites.sh $(TEST_LOGS) \
	  race 'hack/test-bin.sh run $(TEST_BIN)/race $(TEST_RUN) -test.skip "$(CONTROLLER_WAITING)" -- $(RACE_PKGS)' \
	  race-waiting 'hack/test-bin.sh run $(TEST_BIN)/race $(TEST_RUN) -test.run "$(CONTROLLER_WAITING)" -- ./internal/controller/' \
	  rest 'hack/test-bin.sh run $(TEST_BIN)/main $(TEST_RUN) -- $(PLAIN_PKGS)' \
	  install 'cd test/manifests && $(CURDIR)/hack/test-bin.sh run $(CURDIR)/$(TEST_BIN)/test-manifests $(TEST_RUN) -test.run "$(INSTALL_TESTS)" -- .' \
	  nested 'rc=0; \
	    (cd test/manifests && $(CURDIR)/hack/test-bin.sh run $(CURDIR)/$(TEST_BIN)/test-manifests $(TEST_RUN) -test.skip "$(INSTALL_TESTS)" -- ./...) || rc=1; \
	    $(foreach m,$(filter-out test/manifests,$(NESTED)),(cd $(m) && $(CURDIR)/hack/test-bin.sh run $(CURDIR)/$(TEST_BIN)/$(subst /,-,$(m)) $(TEST_RUN) -- ./...) || rc=1;) \
	    exit $$rc' \
	  fuzz '$(call fuzz_cmds,-parallel=1 $(TEST_VET))' \
	  vet '$(MAKE) --no-print-directory vet'

# test-binaries-race builds the race-instrumented test binaries first, beside
# kube-apiserver's build: nothing else compiles their packages, while vet and the plain
# test binaries reuse much of what kube-apiserver compiles (hack/peers/build.sh) once it has.
.PHONY: test-binaries-race
test-binaries-race:
	@echo ">> building the race-instrumented test binaries"
	@CGO_ENABLED=1 hack/test-bin.sh build $(TEST_BIN)/race -race $(TEST_BUILD) $(TEST_VET) -- $(RACE_PKGS)

# test-binaries builds every plain test binary the suites run (make test runs
# test-binaries-race, for the race-instrumented ones, first), one go command at a time:
# the suites start side by side, and two go commands compiling the same packages at once
# each compile them. Each binary is linked into TEST_BIN once, and again only when one of
# its packages changed (hack/test-bin.sh): go test would link each one on every run, the
# race-built controller suite twice (two suites run it): 118 CPU seconds of a warm
# make test.
.PHONY: test-binaries
test-binaries:
	@echo ">> building the test binaries"
	@hack/test-bin.sh build $(TEST_BIN)/main $(TEST_BUILD) $(TEST_VET) -- $(PLAIN_PKGS)
	@$(foreach m,$(NESTED),(cd $(m) && $(CURDIR)/hack/test-bin.sh build $(CURDIR)/$(TEST_BIN)/$(subst /,-,$(m)) $(TEST_BUILD) $(TEST_VET) -- ./...) &&) true

# fuzz_cmds are the short fuzzing runs, with extra go test flags ($(1)): `make test` runs
# them with one worker beside the other suites. Every run happens; any failure fails.
fuzz_cmds = rc=0; \
	$(GO) test $(1) -run "^$$" -fuzz FuzzBucketName -fuzztime 15s ./internal/naming/ || rc=1; \
	$(GO) test $(1) -run "^$$" -fuzz FuzzInspectPolicy -fuzztime 10s ./internal/guardrail/ || rc=1; \
	$(GO) test $(1) -run "^$$" -fuzz FuzzHandler -fuzztime 15s ./internal/receiver/ || rc=1; \
	exit $$rc

.PHONY: fuzz
fuzz: ## Short fuzzing runs of the bucket-name derivation, the policy guardrail and the webhook handler.
	@$(call fuzz_cmds,)

.PHONY: store-table
store-table: ## Write the README's store tables from what the real stores answer in the S3 and IAM contract tests, the e2e tenant suite and the quota tests.
	BUCKETKEEPER_UPDATE_STORE_TABLE=1 $(GO) test -count=1 -run '^TestContract$$' ./internal/s3/
	BUCKETKEEPER_UPDATE_STORE_TABLE=1 $(GO) test -count=1 -run '^(TestContract|TestContractListUsersPages)$$' ./internal/iam/
	BUCKETKEEPER_UPDATE_STORE_TABLE=1 $(GO) test -count=1 -run '^(TestTenantReachesOnlyItsOwnBuckets|TestAdoptionGuardrail|TestAnonymousPrincipalForms)$$' ./test/e2e/
	BUCKETKEEPER_UPDATE_STORE_TABLE=1 $(GO) test -count=1 -run '^(TestQuotaGuardrailsOnRGW|TestQuotaOnSeaweedFS|TestQuotaNotSupportedByStore|TestUsageFollowsWritesAndDeletes)$$' ./internal/controller/

.PHONY: dev
dev: ## Run bucketkeeper on this machine: real control plane, embedded S3, the samples.
	cd cmd/bucketkeeper-dev && $(GO) run . $(DEV_FLAGS)

.PHONY: bench
bench: ## Measure convergence, probing, change latency, memory and outage cost (BENCH_N, BENCH_SCENARIOS).
	cd bench && $(GO) run .

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-12s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
