#!/usr/bin/env bash
# Unpacks a Debian root filesystem holding moto, the AWS emulator that stands in for
# AWS S3 and IAM where only AWS's own behaviour is the subject (regions, us-east-1's
# answer to a bucket created twice, IAM names), and the aws CLI, the client users run
# with an access Secret (the dev smoke test drives it). Both are Python and not on the
# Go module proxy; Debian packages them. testenv runs the root's python3 through the
# root's own dynamic loader with PYTHONHOME in the root, so nothing is installed on the
# machine.
#
#   hack/peers/moto-root.sh DEST   build the root at DEST (via DEST.tmp, renamed when
#                                  complete), fail unless `import moto.server` and
#                                  `aws --version` work
#
# build.sh calls it for the peer `moto` under its lock and keys DEST by MOTO_SUITE and a
# hash of this script (which holds the package list) and debian-root.sh. The mirror is the machine's own
# Debian mirror as apt is configured (BUCKETKEEPER_DEBIAN_MIRROR overrides it).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
# shellcheck source=debian-root.sh
source "$here/debian-root.sh"
dest=${1:?usage: moto-root.sh DEST}

# moto and what its server mode needs beyond moto's own dependencies (Flask is only
# recommended by the package), and the aws CLI.
packages=python3-moto,python3-flask,python3-flask-cors,awscli

# run_python runs the root's python3 as testenv does: the root's loader and libraries,
# and PYTHONHOME in the root so the root's standard library and packages are used.
run_python() {
	local root=$1 loader lib
	shift
	loader=$(root_loader "$root")
	lib=$(dirname "$loader")
	PYTHONHOME="$root/usr" PYTHONNOUSERSITE=1 PYTHONDONTWRITEBYTECODE=1 \
		"$loader" --library-path "$lib" "$root/usr/bin/python3" "$@"
}

start=$SECONDS
echo ">> unpacking the moto and aws CLI root from Debian $MOTO_SUITE (first run only: about two minutes, ~90 MB download)" >&2
rm -rf "$dest.tmp"
unpack_root "$MOTO_SUITE" "$dest.tmp" "$packages"

# Debian compiles a package's Python modules when it installs it, which an unpacked root
# skips: compiled here once, moto starts on a fifth of the CPU (it imports thousands of
# modules), which on a loaded machine is what kept it from listening within a minute.
# One process: compileall's workers would start python3 without the root's loader.
run_python "$dest.tmp" -m compileall -q -s "$dest.tmp" -p "$dest" "$dest.tmp"/usr/lib/python3* >/dev/null

version=$(run_python "$dest.tmp" -c 'import moto, moto.server; print(moto.__version__)')
echo ">> moto $version, $(run_python "$dest.tmp" "$dest.tmp/usr/bin/aws" --version)" >&2
echo "$version" >"$dest.tmp/.moto-version"
rm -rf "$dest" && mv "$dest.tmp" "$dest"
echo ">> moto root ready in $((SECONDS - start))s ($(du -sh "$dest" | cut -f1))" >&2
