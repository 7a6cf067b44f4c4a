package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"regexp"
	"runtime"
	"slices"
	"testing"
	"time"
)

// TestSBOM: the SPDX document describes the binary with its SHA-256 and lists every
// module its build information names (and the standard library) as a package it
// DEPENDS_ON, with its version, package URL and the licence the check found; its IDs
// are SPDX's and unique. The test binary stands in for a release binary.
func TestSBOM(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	p := runtime.GOOS + "/" + runtime.GOARCH
	bin, err := readBinary("release.test", p, data)
	if err != nil {
		t.Fatal(err)
	}
	if len(bin.Info.Deps) == 0 {
		t.Fatal("the test binary lists no modules")
	}
	licences := map[string][]string{"helm.sh/helm/v3": {"Apache-2.0"}}
	out, err := writeSBOM("release.test", "1.2.3", "https://example.com/sbom", time.Unix(0, 0), []shippedBinary{bin}, licences)
	if err != nil {
		t.Fatal(err)
	}
	var doc spdxDocument
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.DataLicense != "CC0-1.0" || doc.CreationInfo.Created != "1970-01-01T00:00:00Z" {
		t.Errorf("document %+v", doc)
	}
	byID := map[string]spdxPackage{}
	idChars := regexp.MustCompile(`^SPDXRef-[A-Za-z0-9.-]+$`)
	for _, pkg := range doc.Packages {
		if _, dup := byID[pkg.SPDXID]; dup || !idChars.MatchString(pkg.SPDXID) {
			t.Errorf("package ID %q repeated or not SPDX's", pkg.SPDXID)
		}
		byID[pkg.SPDXID] = pkg
	}
	if len(doc.DocumentDescribes) != 1 {
		t.Fatalf("describes %v", doc.DocumentDescribes)
	}
	binPkg := byID[doc.DocumentDescribes[0]]
	sum := sha256.Sum256(data)
	if len(binPkg.Checksums) != 1 || binPkg.Checksums[0].Value != hex.EncodeToString(sum[:]) || binPkg.LicenseConcluded != "Apache-2.0" {
		t.Errorf("binary package %+v", binPkg)
	}
	deps := map[string]spdxPackage{}
	for _, r := range doc.Relationships {
		if r.Element == binPkg.SPDXID && r.Type == "DEPENDS_ON" {
			deps[byID[r.Related].Name] = byID[r.Related]
		}
	}
	for _, d := range append(bin.Info.Deps, nil) {
		name, ver := "stdlib", bin.Info.GoVersion
		if d != nil {
			name, ver = d.Path, d.Version
		}
		pkg, ok := deps[name]
		if !ok || pkg.VersionInfo != ver || len(pkg.ExternalRefs) != 1 || pkg.ExternalRefs[0].Type != "purl" {
			t.Errorf("module %s %s: package %+v (listed %t)", name, ver, pkg, ok)
		}
	}
	if got := deps["helm.sh/helm/v3"].LicenseConcluded; got != "Apache-2.0" {
		t.Errorf("helm's licence %q", got)
	}
	if got := deps["sigs.k8s.io/yaml"].LicenseConcluded; got != "NOASSERTION" {
		t.Errorf("a module the check did not classify says %q", got)
	}
	if len(deps) != len(bin.Info.Deps)+1 || !slices.ContainsFunc(doc.Relationships, func(r spdxRelationship) bool {
		return r.Element == "SPDXRef-DOCUMENT" && r.Type == "DESCRIBES" && r.Related == binPkg.SPDXID
	}) {
		t.Errorf("%d dependencies for %d modules, relationships %v", len(deps), len(bin.Info.Deps), doc.Relationships)
	}
}
