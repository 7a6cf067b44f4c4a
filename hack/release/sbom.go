package main

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// shippedBinary is one binary of a release as its build information describes it.
type shippedBinary struct {
	Name     string // bucketkeeper, kubectl-bucketkeeper
	Platform string // GOOS/GOARCH
	SHA256   string
	Info     *buildinfo.BuildInfo
}

// readBinary reads a Go binary's build information: the modules the linker put in it.
func readBinary(name, platform string, data []byte) (shippedBinary, error) {
	info, err := buildinfo.Read(bytes.NewReader(data))
	if err != nil {
		return shippedBinary{}, fmt.Errorf("%s %s: %w", name, platform, err)
	}
	if goos, goarch, _ := strings.Cut(platform, "/"); setting(info, "GOOS") != goos || setting(info, "GOARCH") != goarch {
		return shippedBinary{}, fmt.Errorf("%s %s was built for %s/%s", name, platform, setting(info, "GOOS"), setting(info, "GOARCH"))
	}
	sum := sha256.Sum256(data)
	return shippedBinary{Name: name, Platform: platform, SHA256: hex.EncodeToString(sum[:]), Info: info}, nil
}

func setting(info *buildinfo.BuildInfo, key string) string {
	for _, s := range info.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}

// The SPDX 2.3 document: https://spdx.github.io/spdx-spec/v2.3/
type spdxDocument struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreation       `json:"creationInfo"`
	DocumentDescribes []string           `json:"documentDescribes"`
	Packages          []spdxPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreation struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	SPDXID           string         `json:"SPDXID"`
	Name             string         `json:"name"`
	VersionInfo      string         `json:"versionInfo,omitempty"`
	PackageFileName  string         `json:"packageFileName,omitempty"`
	DownloadLocation string         `json:"downloadLocation"`
	FilesAnalyzed    bool           `json:"filesAnalyzed"`
	Checksums        []spdxChecksum `json:"checksums,omitempty"`
	LicenseConcluded string         `json:"licenseConcluded"`
	LicenseDeclared  string         `json:"licenseDeclared"`
	CopyrightText    string         `json:"copyrightText"`
	Purpose          string         `json:"primaryPackagePurpose,omitempty"`
	ExternalRefs     []spdxRef      `json:"externalRefs,omitempty"`
	Comment          string         `json:"comment,omitempty"`
}

type spdxChecksum struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"checksumValue"`
}

type spdxRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

var spdxIDChars = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// writeSBOM returns an SPDX 2.3 document of bins (one program, on several platforms):
// a package per binary, with its SHA-256, that DEPENDS_ON a package per module its
// build information lists (and the Go standard library), each with its version, its
// package URL and the licences classify found in its files (licences, from the
// licence check, by module path). The document's name and namespace say the release.
func writeSBOM(name, version, namespace string, created time.Time, bins []shippedBinary, licences map[string][]string) ([]byte, error) {
	doc := spdxDocument{
		SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT",
		Name: name + "-" + version, DocumentNamespace: namespace,
		CreationInfo: spdxCreation{Created: created.UTC().Format(time.RFC3339),
			Creators: []string{"Organization: bucketkeeper", "Tool: bucketkeeper-hack-release"}},
	}
	licence := func(path string) string {
		ids := licences[path]
		if len(ids) == 0 {
			return "NOASSERTION"
		}
		return strings.Join(ids, " AND ")
	}
	modIDs := map[string]string{} // module path@version -> SPDX ID
	// addModule adds a module's package once; licences are by the path a binary
	// requires, whatever replaces it.
	addModule := func(path, ver, purl string) string {
		key := path + "@" + ver
		if id, ok := modIDs[key]; ok {
			return id
		}
		id := "SPDXRef-Module-" + strings.Trim(spdxIDChars.ReplaceAllString(key, "-"), "-")
		modIDs[key] = id
		dl := sourceURL(module{Path: path, Version: ver})
		if dl == "" {
			dl = "NOASSERTION"
		}
		doc.Packages = append(doc.Packages, spdxPackage{SPDXID: id, Name: path, VersionInfo: ver, DownloadLocation: dl,
			LicenseConcluded: licence(path), LicenseDeclared: "NOASSERTION", CopyrightText: "NOASSERTION", Purpose: "LIBRARY",
			ExternalRefs: []spdxRef{{Category: "PACKAGE-MANAGER", Type: "purl", Locator: purl}}})
		return id
	}
	for _, b := range bins {
		id := "SPDXRef-Binary-" + spdxIDChars.ReplaceAllString(b.Name+"-"+b.Platform, "-")
		doc.DocumentDescribes = append(doc.DocumentDescribes, id)
		doc.Packages = append(doc.Packages, spdxPackage{SPDXID: id, Name: b.Name, VersionInfo: version,
			PackageFileName: b.Name + " (" + b.Platform + ")", DownloadLocation: "https://" + ourModule, Purpose: "APPLICATION",
			Checksums:        []spdxChecksum{{Algorithm: "SHA256", Value: b.SHA256}},
			LicenseConcluded: "Apache-2.0", LicenseDeclared: "Apache-2.0", CopyrightText: "NOASSERTION",
			ExternalRefs: []spdxRef{{Category: "PACKAGE-MANAGER", Type: "purl",
				Locator: "pkg:golang/" + b.Info.Path + "@v" + version + "?" + platformQualifiers(b.Platform)}},
			Comment: "built by " + b.Info.GoVersion + " with " + buildFlags(b.Info)})
		goVer := strings.TrimPrefix(b.Info.GoVersion, "go")
		rel := []string{addModule("stdlib", b.Info.GoVersion, "pkg:golang/stdlib@"+goVer)}
		for _, d := range b.Info.Deps {
			ver := d.Version
			switch {
			case d.Replace != nil && d.Replace.Version == "": // a directory of this repository
				ver = "v" + version
			case d.Replace != nil:
				ver = d.Replace.Version
			}
			rel = append(rel, addModule(d.Path, ver, "pkg:golang/"+d.Path+"@"+ver))
		}
		for _, r := range rel {
			doc.Relationships = append(doc.Relationships, spdxRelationship{Element: id, Type: "DEPENDS_ON", Related: r})
		}
		doc.Relationships = append(doc.Relationships, spdxRelationship{Element: "SPDXRef-DOCUMENT", Type: "DESCRIBES", Related: id})
	}
	slices.SortStableFunc(doc.Packages, func(a, b spdxPackage) int {
		return strings.Compare(a.Purpose+a.SPDXID, b.Purpose+b.SPDXID)
	})
	return json.MarshalIndent(doc, "", "  ")
}

func platformQualifiers(p string) string {
	goos, goarch, _ := strings.Cut(p, "/")
	return "goos=" + goos + "&goarch=" + goarch
}

// buildFlags says how a binary was built, from its build settings.
func buildFlags(info *buildinfo.BuildInfo) string {
	var out []string
	for _, s := range info.Settings {
		switch s.Key {
		case "-trimpath", "-ldflags", "CGO_ENABLED", "GOOS", "GOARCH":
			out = append(out, s.Key+"="+s.Value)
		}
	}
	return strings.Join(out, " ")
}
