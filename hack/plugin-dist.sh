#!/usr/bin/env bash
# Builds the kubectl plugin's release archives, the ones plugins/bucketkeeper.yaml (the
# krew manifest) points at, with their SHA-256 sums.
#
#   hack/plugin-dist.sh VERSION OUTDIR   build OUTDIR/kubectl-bucketkeeper_VERSION_OS_ARCH.tar.gz
#                                        and OUTDIR/SHA256SUMS
#   hack/plugin-dist.sh --list VERSION   print the archive names, one a line
#   hack/plugin-dist.sh --platforms      print the platforms (GOOS/GOARCH) on one line
#
# PLUGIN_PLATFORMS (a subset of those, space-separated) builds only those; make test's
# release dry-run builds the linux ones, which share their compiles with the
# operator's. PLUGIN_TRIMPATH (default -trimpath; empty leaves it out) is that flag of
# the builds, as the Makefile's RELEASE_TRIMPATH says.
#
# Each archive holds the binary (static, trimmed, stripped, as the image's manager),
# kubectl_complete-bucketkeeper, the script kubectl (1.26 and later) runs to complete a
# plugin's arguments, LICENSE, and THIRD_PARTY_NOTICES when PLUGIN_NOTICES names that
# file (the licence terms of every module the plugin links, which the MIT and BSD
# licences ask a binary's distribution to carry: `make plugin-dist` writes it with
# hack/release).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
platforms=(linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64)

archive() { # VERSION OS ARCH
	echo "kubectl-bucketkeeper_$1_$2_$3.tar.gz"
}

if [[ ${1:-} == --platforms ]]; then
	echo "${platforms[*]}"
	exit 0
fi
if [[ ${1:-} == --list ]]; then
	(($# == 2)) || { echo "usage: $0 --list VERSION" >&2; exit 2; }
	for p in "${platforms[@]}"; do archive "$2" "${p%/*}" "${p#*/}"; done
	exit 0
fi
(($# == 2)) || { echo "usage: $0 VERSION OUTDIR | --list VERSION" >&2; exit 2; }
version=$1
mkdir -p "$2"
out=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

build=("${platforms[@]}")
if [[ -n ${PLUGIN_PLATFORMS:-} ]]; then
	read -ra build <<<"$PLUGIN_PLATFORMS"
	for p in "${build[@]}"; do
		[[ " ${platforms[*]} " == *" $p "* ]] || { echo "PLUGIN_PLATFORMS: $p is not a platform of the plugin's (${platforms[*]})" >&2; exit 2; }
	done
fi
trimpath=${PLUGIN_TRIMPATH--trimpath}
for p in "${build[@]}"; do
	os=${p%/*} arch=${p#*/}
	dir=$work/$os-$arch
	mkdir -p "$dir"
	bin=kubectl-bucketkeeper
	[[ $os == windows ]] && bin+=.exe
	(cd cmd/kubectl-bucketkeeper && CGO_ENABLED=0 GOOS=$os GOARCH=$arch "$GO" build $trimpath -ldflags="-s -w" -o "$dir/$bin" .)
	printf '#!/bin/sh\n# kubectl runs this to complete the arguments of kubectl bucketkeeper.\nexec kubectl bucketkeeper __complete "$@"\n' >"$dir/kubectl_complete-bucketkeeper"
	chmod 755 "$dir/kubectl_complete-bucketkeeper"
	cp LICENSE "$dir/"
	[[ -z ${PLUGIN_NOTICES:-} ]] || cp "$PLUGIN_NOTICES" "$dir/THIRD_PARTY_NOTICES"
	tar -C "$dir" --owner=0 --group=0 --numeric-owner -czf "$out/$(archive "$version" "$os" "$arch")" .
done
(cd "$out" && sha256sum kubectl-bucketkeeper_"$version"_*.tar.gz >SHA256SUMS)
cat "$out/SHA256SUMS"
