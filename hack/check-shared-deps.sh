#!/usr/bin/env bash
# Fails when two of our Go modules compile packages of one dependency at different
# versions, naming the dependency and each module's version.
#
#   hack/check-shared-deps.sh [GO]
#
# Why: the build cache keys a compiled package by its source and by every dependency's
# compiled output. A nested module (cmd/bucketkeeper-dev, test/manifests, bench) that
# selects, say, logr v1.4.4 where the operator's module has v1.4.3 compiles logr and then
# everything above it (client-go, controller-runtime, our own packages: a thousand
# packages) a second time, for vet and again for its tests. On CI's cold cache that was
# the larger part of `make vet`. The fix is to raise the lower requirement:
#   (cd MODULE && go get DEP@HIGHER) then go mod tidy in every module.
#
# The wrapper modules of kube-apiserver, kube-node, kubectl and etcd are in the list: hack/peers/build.sh
# builds them with the flags our non-race builds use, so the packages they share with us
# (k8s.io/*, grpc, otel, x/*) are compiled once on a cold cache, not twice. weed and
# versitygw are not: weed builds on a grpc development snapshot none of our modules
# should take, and versitygw shares little beyond the AWS SDK (their wrappers require
# our versions where theirs were lower). Nor is hack/vettool: it pins the x/tools the Go
# toolchain vendors for cmd/vet, and compiles almost nothing else our modules do.
#
# Only dependencies that provide packages to more than one module's build (its packages
# and their tests, as go list -deps -test sees them, and the operator's benchbaseline
# build) are compared: a module that is only in one module's graph, or in two graphs but
# compiled by one, costs nothing. This loads packages and compiles nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${1:-${GO:-go}}

# The operator's module, every nested module and two peers; "benchbaseline" adds that build of ours.
modules=(. cmd/bucketkeeper-dev cmd/kubectl-bucketkeeper test/manifests bench hack/release hack/peers/lifeline hack/peers/kube-apiserver hack/peers/kube-node hack/peers/kubectl hack/peers/etcd)
ours=$(sed -n 's/^module //p' go.mod)

list() { # MODULE [go list flags]: "MODULE DEP VERSION" for each dependency compiled
	local m=$1
	shift
	(cd "$m" && "$GO" list -deps -test "$@" \
		-f '{{with .Module}}{{if not .Main}}{{.Path}} {{with .Replace}}{{.Path}}@{{.Version}}{{else}}{{$.Module.Path}}@{{$.Module.Version}}{{end}}{{end}}{{end}}' ./...) |
		awk -v m="$m" -v ours="$ours" 'NF && $1 != ours && index($1, ours "/") != 1 { print m, $1, $2 }'
}

out=$(mktemp)
trap 'rm -f "$out" "$out.bad"' EXIT
for m in "${modules[@]}"; do list "$m"; done >"$out"
list . -tags benchbaseline >>"$out"

# Group by dependency; fail on any dependency with more than one version.
sort -u "$out" | awk '
	{ key = $2; ver[key, $1] = $3; if (!((key, $1) in seen)) { seen[key, $1] = 1; mods[key] = mods[key] " " $1 }
	  if (!((key, $3) in vs)) { vs[key, $3] = 1; nv[key]++ } }
	END {
		bad = 0
		for (k in nv) if (nv[k] > 1) {
			n = split(substr(mods[k], 2), ms, " "); line = ""
			for (i = 1; i <= n; i++) line = line "  " (ms[i] == "." ? "root" : ms[i]) "=" ver[k, ms[i]]
			print k ":" line; bad = 1
		}
		exit bad
	}' | sort -t: -k1,1 >"$out.bad" && rc=0 || rc=$?
if ((rc != 0)); then
	echo "modules of ours compile these dependencies at different versions, so the build" >&2
	echo "cache cannot share what is built on them; raise the lower requirement (go get" >&2
	echo "DEP@HIGHER in that module, then go mod tidy in every module):" >&2
	cat "$out.bad" >&2
	exit 1
fi
echo "shared dependencies: one version each across ${#modules[@]} modules"
