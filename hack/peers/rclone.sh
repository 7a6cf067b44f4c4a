#!/usr/bin/env bash
# Prints the path of Debian's rclone, unpacked (never installed) into a cache beside the
# peers' from the package this machine's apt offers: the benchmark's move scenario measures
# the mover against it, a tool users run today for the same job. rclone is a static Go
# program besides the C library, so the package's own binary runs as it is; nothing
# is unpacked again once it is cached.
#
# Cache root: $BUCKETKEEPER_TOOLS_CACHE, else ${XDG_CACHE_HOME:-$HOME/.cache}/bucketkeeper/tools
# (not the peers' cache: build.sh owns that).
set -euo pipefail

cache=${BUCKETKEEPER_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bucketkeeper/tools}
version=$(apt-cache policy rclone | awk '/Candidate:/ {print $2}')
if [ -z "$version" ] || [ "$version" = "(none)" ]; then
	echo "rclone.sh: apt offers no rclone (run apt-get update?)" >&2
	exit 1
fi
dest="$cache/rclone-${version//[:+~]/_}"
if [ ! -x "$dest/usr/bin/rclone" ]; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	echo ">> unpacking Debian's rclone $version into $dest" >&2
	(cd "$tmp" && apt-get download -qq "rclone=$version" >&2)
	mkdir -p "$tmp/root"
	dpkg -x "$tmp"/rclone_*.deb "$tmp/root"
	rm -rf "$dest"
	mkdir -p "$cache"
	mv "$tmp/root" "$dest"
fi
echo "$dest/usr/bin/rclone"
