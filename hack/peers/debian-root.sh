# Sourced by rgw-root.sh and moto-root.sh: what both need to unpack a Debian root
# filesystem the harness runs programs from (through the root's own dynamic loader,
# with no chroot and no mount). build.sh keys both roots by this file too.

# unpack_root SUITE DEST PACKAGES unpacks PACKAGES (comma-separated) and their
# dependencies from Debian SUITE into DEST, installing mmdebstrap from Debian first
# when it is missing. The extract variant runs none of the packages' maintainer
# scripts (no users, services, triggers; no chroot, no mount): testenv runs the
# binaries, nothing installs them. The testing suite's Release file is often past its
# Valid-Until date on snapshot mirrors; its signature is still checked. Downloaded
# packages, package lists, documentation, manuals and locales are removed: nothing
# reads them.
unpack_root() {
	local suite=$1 dest=$2 packages=$3 mirror
	if ! command -v mmdebstrap >/dev/null; then
		echo ">> installing mmdebstrap from Debian" >&2
		apt-get update -qq >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap >&2
	fi
	mirror=$(debian_mirror)
	mmdebstrap --quiet --variant=extract --skip=chroot/mount \
		--aptopt='Acquire::Check-Valid-Until "false"' \
		--aptopt='APT::Install-Recommends "false"' \
		--include="$packages" \
		"$suite" "$dest" ${mirror:+"$mirror"} >&2
	rm -rf "$dest"/var/cache/apt/archives/*.deb "$dest"/var/lib/apt/lists/* \
		"$dest"/usr/share/{doc,man,info,locale,lintian}
}

# debian_mirror prints the mirror apt on this machine uses for Debian's main archive
# (not the security one), or nothing, in which case mmdebstrap picks its default.
# BUCKETKEEPER_DEBIAN_MIRROR overrides it.
debian_mirror() {
	if [ -n "${BUCKETKEEPER_DEBIAN_MIRROR:-}" ]; then
		echo "$BUCKETKEEPER_DEBIAN_MIRROR"
		return
	fi
	cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
		grep -v '^[[:space:]]*#' | grep -oE '(https?|file)://[^ ]*/debian/?( |$)' | grep -v security | head -n1 | tr -d ' ' || true
}

# root_loader prints the root's own dynamic loader. (Not lib64/ld-linux-*.so.2: that
# is an absolute symlink, which outside the root names the machine's own loader.)
root_loader() {
	echo "$1"/usr/lib/*-linux-gnu/ld-linux*.so.*
}
