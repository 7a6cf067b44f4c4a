#!/usr/bin/env bash
# Unpacks a Debian root filesystem holding Ceph's radosgw, ceph-mon and ceph-osd: the
# Ceph RGW test store. Ceph cannot be built from the Go module proxy like the other
# peers, and Debian stable's Ceph (Pacific) predates IAM accounts, so the root comes
# from Debian's testing suite. testenv runs its binaries through the root's own dynamic
# loader (no chroot, no mount), so nothing of it is installed on the machine.
#
#   hack/peers/rgw-root.sh DEST   build the root at DEST (via DEST.tmp, renamed when
#                                 complete), fail unless its radosgw is 19.2 or later
#
# build.sh calls it for the peer `rgw` under its lock and keys DEST by RGW_SUITE and a
# hash of this script (which holds the package list) and debian-root.sh. The mirror is the machine's own
# Debian mirror as apt is configured (BUCKETKEEPER_DEBIAN_MIRROR overrides it).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
# shellcheck source=debian-root.sh
source "$here/debian-root.sh"
dest=${1:?usage: rgw-root.sh DEST}

# What the store needs: the gateway (with radosgw-admin), one monitor, one OSD.
packages=radosgw,ceph-mon,ceph-osd

# Accounts (the IAM API on the S3 port) arrived in Squid, 19.2.
min_major=19 min_minor=2

# The root's own loader, with the root's libraries, runs the root's binaries, as
# testenv does.
run_in_root() {
	local root=$1 bin=$2 loader lib
	shift 2
	loader=$(root_loader "$root")
	lib=$(dirname "$loader")
	"$loader" --library-path "$lib:$lib/ceph" "$root$bin" "$@"
}

start=$SECONDS
echo ">> unpacking the Ceph RGW root from Debian $RGW_SUITE (first run only: minutes, ~250 MB download)" >&2
rm -rf "$dest.tmp"
unpack_root "$RGW_SUITE" "$dest.tmp" "$packages"

version=$(run_in_root "$dest.tmp" /usr/bin/radosgw --version)
echo ">> $version" >&2
if ! [[ $version =~ ceph\ version\ ([0-9]+)\.([0-9]+) ]]; then
	echo "rgw-root.sh: cannot read the radosgw version from: $version" >&2
	exit 1
fi
major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[2]}
if ((major < min_major || (major == min_major && minor < min_minor))); then
	echo "rgw-root.sh: radosgw $major.$minor in Debian $RGW_SUITE has no IAM accounts; need $min_major.$min_minor or later" >&2
	exit 1
fi
echo "$version" >"$dest.tmp/.radosgw-version"
rm -rf "$dest" && mv "$dest.tmp" "$dest"
echo ">> Ceph RGW root ready in $((SECONDS - start))s ($(du -sh "$dest" | cut -f1))" >&2
