#!/usr/bin/env bash
# Unpacks a Debian root filesystem holding what a Kubernetes node runs beside the kubelet:
# containerd (with ctr and the runc shim), runc, the CNI plugins and nft (kube-proxy's
# nftables mode). None of them is on the Go module proxy at a version that builds alone;
# Debian packages them. Nothing is installed on the machine: testenv's node runs the
# binaries from the root.
#
#   hack/peers/node-root.sh DEST   build the root at DEST (via DEST.tmp, renamed when
#                                  complete), fail unless containerd, runc and nft run
#
# The suite is the machine's own (NODE_SUITE, Debian stable): containerd execs runc, its
# shim and the CNI plugins by path, so those run with the machine's own dynamic loader and
# C library, which must be as new as the ones they were built against. nft alone needs
# libraries the machine lacks; it runs through a wrapper (see nft_wrapper).
#
# build.sh calls it for the peer `node` under its lock and keys DEST by NODE_SUITE and a
# hash of this script (which holds the package list) and debian-root.sh.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
# shellcheck source=debian-root.sh
source "$here/debian-root.sh"
dest=${1:?usage: node-root.sh DEST}

packages=containerd,runc,containernetworking-plugins,nftables

start=$SECONDS
echo ">> unpacking the node root (containerd, runc, CNI plugins, nft) from Debian $NODE_SUITE (first run only: about a minute, ~40 MB download)" >&2
rm -rf "$dest.tmp"
unpack_root "$NODE_SUITE" "$dest.tmp" "$packages"

# nft_wrapper: kube-proxy runs `nft` from its PATH; this one runs the root's nft with the
# machine's C library (the root has none: the extract variant leaves out what is
# essential to Debian) and the root's other libraries.
mkdir -p "$dest.tmp/wrap"
cat >"$dest.tmp/wrap/nft" <<'WRAP'
#!/bin/sh
root=$(cd "$(dirname "$0")/.." && pwd)
LD_LIBRARY_PATH=$(echo "$root"/usr/lib/*-linux-gnu) exec "$root/usr/sbin/nft" "$@"
WRAP
chmod +x "$dest.tmp/wrap/nft"

containerd=$("$dest.tmp/usr/bin/containerd" --version)
runc=$("$dest.tmp/usr/sbin/runc" --version | head -n1)
nft=$("$dest.tmp/wrap/nft" --version)
echo ">> $containerd; $runc; $nft" >&2
echo "$containerd" >"$dest.tmp/.containerd-version"
rm -rf "$dest" && mv "$dest.tmp" "$dest"
echo ">> node root ready in $((SECONDS - start))s ($(du -sh "$dest" | cut -f1))" >&2
