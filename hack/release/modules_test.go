package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestShippedPlatforms: the licence check covers the platforms a release builds: the
// Makefile's RELEASE_PLATFORMS for the operator, hack/plugin-dist.sh's for the plugin.
func TestShippedPlatforms(t *testing.T) {
	root := repoRoot(t)
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^RELEASE_PLATFORMS := (.*)$`).FindSubmatch(makefile)
	if m == nil {
		t.Fatal("the Makefile sets no RELEASE_PLATFORMS")
	}
	if got := strings.Fields(string(m[1])); !slices.Equal(got, shipped[0].Platforms) {
		t.Errorf("the Makefile builds the operator for %v; the licence check covers %v", got, shipped[0].Platforms)
	}
	out, err := exec.Command(filepath.Join(root, "hack", "plugin-dist.sh"), "--platforms").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(out)); !slices.Equal(got, shipped[1].Platforms) {
		t.Errorf("hack/plugin-dist.sh builds the plugin for %v; the licence check covers %v", got, shipped[1].Platforms)
	}
}
