// Command release makes bucketkeeper's release artifacts out of what `make
// release-dry-run` built, the same on this machine and in the release workflow
// (.github/workflows/release.yaml), which then pushes and signs them. It needs no
// registry, no Docker and no network but the Go module proxy.
//
//	release licenses -root DIR -bin DIR
//	    fails naming every module linked into a shipped binary (the operator, the
//	    kubectl plugin, on each of their platforms) whose licence is unknown or not
//	    compatible with Apache-2.0; writes each binary's third-party notices and
//	    module list into -bin.
//	release package -root DIR -tag vX.Y.Z -image REPO -revision SHA -created UNIX -bin DIR -dist DIR
//	    [-trimpath=false] [-platforms 'linux/amd64 ...'] [-plugin-platforms 'linux/amd64 ...']
//	    writes into -dist the multi-arch image (an OCI layout, oci/, and one OCI
//	    archive per platform), the chart (.tgz), the kustomize bundle (one YAML), an
//	    SPDX SBOM of each shipped program and SHA256SUMS, checking each; the krew
//	    archives (hack/plugin-dist.sh) must be there already.
//	release notes -root DIR -tag vX.Y.Z
//	    prints CHANGELOG.md's section of the version: the GitHub release's text.
//
// It is a module of its own so that Helm and kustomize stay out of the operator's.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	cmd := os.Args[1]
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	var r release
	var created string
	fs.StringVar(&r.Root, "root", "../..", "the repository's root")
	fs.StringVar(&r.Bin, "bin", "", "the built binaries, and the licence step's notices and module lists")
	fs.StringVar(&r.Tag, "tag", "", "the release's tag, vX.Y.Z")
	fs.StringVar(&r.Repo, "image", "", "the image's repository")
	fs.StringVar(&r.Revision, "revision", "", "the commit released")
	fs.StringVar(&created, "created", "", "the commit's time, in seconds since 1970 (SOURCE_DATE_EPOCH)")
	fs.StringVar(&r.Dist, "dist", "", "where the artifacts go")
	fs.BoolVar(&r.Trimpath, "trimpath", true, "whether the binaries were built with -trimpath, as a release's are (make test's dry-run: not)")
	var platforms, pluginPlatforms string
	fs.StringVar(&platforms, "platforms", strings.Join(shipped[0].Platforms, " "), "the operator's platforms whose binaries are in -bin: the image's")
	fs.StringVar(&pluginPlatforms, "plugin-platforms", strings.Join(shipped[1].Platforms, " "), "the kubectl plugin's platforms whose krew archives are in -dist")
	_ = fs.Parse(os.Args[2:])
	r.Platforms = platformsOf("-platforms", platforms, shipped[0])
	r.PluginPlatforms = platformsOf("-plugin-platforms", pluginPlatforms, shipped[1])
	var err error
	if r.Root, err = filepath.Abs(r.Root); err != nil {
		fail(err)
	}
	if r.Tag != "" {
		if r.Version, err = versionOfTag(r.Tag); err != nil {
			fail(err)
		}
	}
	switch cmd {
	case "licenses":
		need(map[string]string{"-bin": r.Bin})
		fail(checkAndWriteNotices(r))
	case "package":
		need(map[string]string{"-tag": r.Tag, "-image": r.Repo, "-revision": r.Revision, "-created": created, "-bin": r.Bin, "-dist": r.Dist})
		secs, err := strconv.ParseInt(created, 10, 64)
		if err != nil {
			fail(fmt.Errorf("-created %q: %w", created, err))
		}
		r.Created = time.Unix(secs, 0).UTC()
		fail(packageRelease(r))
	case "notes":
		need(map[string]string{"-tag": r.Tag})
		changelog, err := os.ReadFile(filepath.Join(r.Root, "CHANGELOG.md"))
		if err != nil {
			fail(err)
		}
		notes, err := changelogSection(string(changelog), r.Version)
		if err != nil {
			fail(err)
		}
		fmt.Print(notes)
	default:
		usage()
	}
}

func need(flags map[string]string) {
	for name, v := range flags {
		if v == "" {
			fail(fmt.Errorf("%s %s is required", os.Args[1], name))
		}
	}
}

// fail exits with err's message, or does nothing when err is nil.
func fail(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: release licenses|package|notes [flags] (see the package's doc comment)")
	os.Exit(2)
}

// platformsOf parses a platforms flag: some of b's platforms, at least one.
func platformsOf(flagName, value string, b build) []string {
	ps := strings.Fields(value)
	if len(ps) == 0 {
		fail(fmt.Errorf("%s: no platform", flagName))
	}
	for _, p := range ps {
		if !slices.Contains(b.Platforms, p) {
			fail(fmt.Errorf("%s: %s is not one of %s's platforms %v", flagName, p, b.Name, b.Platforms))
		}
	}
	return ps
}
