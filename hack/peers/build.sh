#!/usr/bin/env bash
# Builds the real test peers (kube-apiserver, etcd, SeaweedFS weed, Versity S3 Gateway,
# MinIO, kubectl (for the docs' runbooks), and kube-node: the kubelet, kube-proxy, kube-controller-manager and
# kube-scheduler in one binary) from the Go module proxy and caches each one in a
# directory keyed by its version and a hash of its wrapper module, so a second run costs
# nothing. The peers `rgw` (Ceph RGW), `moto` (the AWS stand-in) and `node` (containerd,
# runc, the CNI plugins and nft for the test node) are Debian root filesystems unpacked
# by PEER-root.sh instead, linked as PEER-root.
#
#   hack/peers/build.sh [peer ...]   build what is missing (default: all), then print
#                                    the bin directory holding every peer on stdout
#   hack/peers/build.sh --dir        print the bin directory without building
#
# Cache root: $BUCKETKEEPER_PEERS_CACHE, else ${XDG_CACHE_HOME:-$HOME/.cache}/bucketkeeper/peers.
# Builds run one at a time under a lock: linking kube-apiserver, weed or minio peaks near
# 2.5 GB, and parallel test packages may all ask for the peers at once.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
cache=${BUCKETKEEPER_PEERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bucketkeeper/peers}
# kube-apiserver first: it compiles most of what the operator's own builds need (see
# go_build), and those run beside the peers' build.
all_peers=(kube-apiserver etcd versitygw weed minio kubectl kube-node rgw moto node)

# go_build builds every Go peer (its -ldflags and -o follow) with the flags the operator's
# own non-race builds (vet, the tests, the install test's image; see the Makefile) compile
# with: static, no -trimpath. The build cache keys a compiled package by its flags, so
# kube-apiserver, etcd and our modules share the packages they import at one version
# (k8s.io/*, grpc, otel, the AWS SDK...; the wrapper modules require the operator's
# versions) instead of each compiling them. Static peers are also what their projects
# release. -dwarf=false: the peers are linked stripped (-s -w), so the debug information
# the compiler would write for each package is never used; make test compiles with the same
# flag, so the packages they share stay one compile.
go_build=(env CGO_ENABLED=0 "GOFLAGS=-mod=readonly -gcflags=all=-dwarf=false" go build)

version_of() {
	case $1 in
	kube-apiserver) echo "$KUBE_VERSION" ;;
	etcd) echo "$ETCD_VERSION" ;;
	weed) echo "$SEAWEEDFS_VERSION" ;;
	versitygw) echo "$VERSITYGW_VERSION" ;;
	minio) echo "$MINIO_VERSION" ;;
	kube-node | kubectl) echo "$KUBE_VERSION" ;;
	rgw) echo "$RGW_SUITE" ;;
	moto) echo "$MOTO_SUITE" ;;
	node) echo "$NODE_SUITE" ;;
	*) echo "unknown peer: $1" >&2; exit 2 ;;
	esac
}

# key_of names a peer's cache directory: its version plus a hash of every file that
# decides how it is built (wrapper module, shared lifeline module, Go version).
key_of() {
	local peer=$1 sum
	if is_root "$peer"; then # no Go: the scripts (and the package list) decide it
		sum=$(cat "$here/$peer-root.sh" "$here/debian-root.sh" | sha256sum | cut -c1-12)
		echo "$peer-$(version_of "$peer")-$sum"
		return
	fi
	sum=$( (cd "$here" && cat "$peer"/go.mod "$peer"/go.sum "$peer"/*.go "$peer"/*.sh lifeline/* 2>/dev/null; go env GOVERSION; echo "${go_build[*]}") | sha256sum | cut -c1-12)
	echo "$peer-$(version_of "$peer")-$sum"
}

# is_root tells a Debian root (unpacked by PEER-root.sh) from a Go peer.
is_root() {
	case $1 in
	rgw | moto | node) return 0 ;;
	*) return 1 ;;
	esac
}

# artifact_of is the name under which a peer sits in its cache and bin directories.
artifact_of() {
	if is_root "$1"; then echo "$1-root"; else echo "$1"; fi
}

bin_dir() {
	local keys="" p
	for p in "${all_peers[@]}"; do keys+="$(key_of "$p") "; done
	echo "$cache/bin-$(echo "$keys" | sha256sum | cut -c1-12)"
}

# lean_weed DIR copies SeaweedFS's module source into DIR/src, trims the plugins no test
# configures (weed/lean.sh: a fifth of what weed alone compiles) and prints the path of a
# go.mod, the wrapper's with SeaweedFS replaced by that copy, for go build's -modfile.
lean_weed() {
	local dir=$1 mod
	mod=$(cd "$here/weed" && go mod download -json github.com/seaweedfs/seaweedfs | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
	[ -d "$mod" ] || { echo "build.sh: SeaweedFS's source is not in the module cache" >&2; return 1; }
	mkdir -p "$dir/src" "$dir/mod"
	cp -R "$mod/." "$dir/src/"
	chmod -R u+w "$dir/src"
	"$here/weed/lean.sh" "$dir/src"
	cp "$here/weed/go.mod" "$here/weed/go.sum" "$dir/mod/"
	(cd "$here/weed" && go mod edit -modfile "$dir/mod/go.mod" -replace "github.com/seaweedfs/seaweedfs=$dir/src")
	echo "$dir/mod/go.mod"
}

build_one() {
	local peer=$1 dest="$cache/$(key_of "$1")"
	[ -x "$dest/$(artifact_of "$peer")" ] && return 0
	if is_root "$peer"; then
		mkdir -p "$dest"
		"$here/$peer-root.sh" "$dest/$peer-root" >&2
		return 0
	fi
	local start=$SECONDS ldflags="-s -w" pkg=.
	case $peer in
	kube-apiserver | kube-node | kubectl)
		local v=${KUBE_VERSION#v} major minor
		major=${v%%.*}; minor=${v#*.}; minor=${minor%%.*}
		for p in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
			ldflags+=" -X $p.gitVersion=$KUBE_VERSION -X $p.gitMajor=$major -X $p.gitMinor=$minor"
			ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
		done
		echo ">> building $peer $KUBE_VERSION (first run only: minutes on 2 cores, ~2.5 GB while linking)" >&2 ;;
	etcd) echo ">> building etcd $ETCD_VERSION (first run only: ~1 min)" >&2 ;;
	weed) pkg=github.com/seaweedfs/seaweedfs/weed
		echo ">> building SeaweedFS weed $SEAWEEDFS_VERSION (first run only: ~7 min, ~2.7 GB while linking)" >&2 ;;
	versitygw) pkg=github.com/versity/versitygw/cmd/versitygw
		echo ">> building Versity S3 Gateway $VERSITYGW_VERSION (first run only: ~2 min)" >&2 ;;
	minio) pkg=github.com/minio/minio # its main, for the internal/init import it must run first
		# The pseudo-version's time and commit stand in for a release's, where MinIO's own
		# build (buildscripts/gen-ldflags.go) stamps them: `minio --version` names the commit.
		local ts=${MINIO_VERSION#v0.0.0-} rev
		rev=${ts#*-}; ts=${ts%%-*}
		ts="${ts:0:4}-${ts:4:2}-${ts:6:2}T${ts:8:2}:${ts:10:2}:${ts:12:2}Z"
		ldflags+=" -X github.com/minio/minio/cmd.Version=$ts -X github.com/minio/minio/cmd.CommitID=$rev -X github.com/minio/minio/cmd.ShortCommitID=$rev"
		echo ">> building MinIO $MINIO_VERSION (first run only: ~3 min, ~2.5 GB while linking)" >&2 ;;
	esac
	rm -rf "$dest.tmp" && mkdir -p "$dest.tmp"
	local modfile=()
	[ "$peer" != weed ] || modfile=(-modfile "$(lean_weed "$dest.tmp")")
	(cd "$here/$peer" && "${go_build[@]}" "${modfile[@]}" -ldflags "$ldflags" -o "$dest.tmp/$peer" "$pkg") >&2
	rm -rf "$dest.tmp/src" "$dest.tmp/mod" "$dest" && mv "$dest.tmp" "$dest"
	echo ">> $peer ready in $((SECONDS - start))s" >&2
}

link_bin() {
	local dir p
	dir=$(bin_dir)
	mkdir -p "$dir"
	for p in "${all_peers[@]}"; do
		local a
		a=$(artifact_of "$p")
		[ -x "$cache/$(key_of "$p")/$a" ] && ln -sfn "$cache/$(key_of "$p")/$a" "$dir/$a"
	done
	echo "$dir"
}

if [ "${1:-}" = "--dir" ]; then
	bin_dir
	exit 0
fi
peers=("$@")
[ ${#peers[@]} -gt 0 ] || peers=("${all_peers[@]}")
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
# The Debian roots wait mostly on the mirror and dpkg, the Go peers on the CPU: the two
# kinds are made side by side, each kind one peer at a time (both roots may install
# mmdebstrap, which takes dpkg's lock). Both are waited for, so no build outlives a
# failure of the other.
roots=() gos=()
for p in "${peers[@]}"; do
	if is_root "$p"; then roots+=("$p"); else gos+=("$p"); fi
done
(for p in "${roots[@]}"; do build_one "$p"; done) &
roots_pid=$!
(for p in "${gos[@]}"; do build_one "$p"; done) &
gos_pid=$!
rc=0
wait "$gos_pid" || rc=$?
wait "$roots_pid" || rc=$?
[ "$rc" = 0 ] || exit "$rc"
link_bin
