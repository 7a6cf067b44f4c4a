package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"
)

// TestSourceTreeVersionsAgree: the source tree is the release it last made (or is
// about to make, docs/versioning.md): the chart's version and appVersion, the image
// config/manager deploys and passes as --mover-image, config/default's newTag and the
// CHANGELOG's newest release are one version, and the chart and config/manager name
// the repository the release pushes to (the Makefile's RELEASE_IMAGE).
func TestSourceTreeVersionsAgree(t *testing.T) {
	root := repoRoot(t)
	read := func(rel string) []byte {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	unmarshal := func(rel string, v any) {
		t.Helper()
		if err := yaml.Unmarshal(read(rel), v); err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
	}
	m := regexp.MustCompile(`(?m)^## \[(\d+\.\d+\.\d+[^\]]*)\] - \d{4}-\d{2}-\d{2}$`).FindSubmatch(read("CHANGELOG.md"))
	if m == nil {
		t.Fatal("CHANGELOG.md has no released version")
	}
	version := string(m[1])
	m = regexp.MustCompile(`(?m)^RELEASE_IMAGE := (\S+)$`).FindSubmatch(read("Makefile"))
	if m == nil {
		t.Fatal("the Makefile sets no RELEASE_IMAGE")
	}
	image := string(m[1]) + ":" + version

	var chart struct{ Version, AppVersion string }
	unmarshal("charts/bucketkeeper/Chart.yaml", &chart)
	var values struct {
		Image struct{ Repository, Tag, Digest string }
	}
	unmarshal("charts/bucketkeeper/values.yaml", &values)
	var deployment struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Name, Image string
						Args        []string
					}
				}
			}
		}
	}
	unmarshal("config/manager/manager.yaml", &deployment)
	var kust types.Kustomization
	unmarshal("config/default/kustomization.yaml", &kust)

	got := map[string]string{
		"charts/bucketkeeper/Chart.yaml version":    chart.Version,
		"charts/bucketkeeper/Chart.yaml appVersion": chart.AppVersion,
		"charts/bucketkeeper/values.yaml image":     values.Image.Repository + ":" + chart.AppVersion + values.Image.Tag + values.Image.Digest,
		"config/default/kustomization.yaml images":  "",
		"config/manager/manager.yaml image":         "",
		"config/manager/manager.yaml --mover-image": "",
	}
	if len(kust.Images) == 1 {
		got["config/default/kustomization.yaml images"] = kust.Images[0].Name + ":" + kust.Images[0].NewTag + kust.Images[0].NewName + kust.Images[0].Digest
	}
	for _, c := range deployment.Spec.Template.Spec.Containers {
		if c.Name != "manager" {
			continue
		}
		got["config/manager/manager.yaml image"] = c.Image
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, "--mover-image="); ok {
				got["config/manager/manager.yaml --mover-image"] = v
			}
		}
	}
	// The install commands of README.md and docs/install.md name the release too (but
	// the upgrade's example of a newer one).
	install := string(read("docs/install.md"))
	if i := strings.Index(install, "## Upgrading the CRDs"); i >= 0 {
		j := strings.Index(install[i+1:], "\n## ")
		install = install[:i] + install[i+1+j:]
	}
	named := regexp.MustCompile(`(?:--version |releases/download/v|refs/tags/v|bucketkeeper/bucketkeeper:|bucketkeeper-|bucketkeeper_v?)(\d+\.\d+\.\d+)`)
	for doc, text := range map[string]string{"README.md": string(read("README.md")), "docs/install.md": install} {
		found := named.FindAllStringSubmatch(text, -1)
		if len(found) == 0 {
			t.Errorf("%s names no release", doc)
		}
		for _, f := range found {
			if f[1] != version {
				t.Errorf("%s: %q names %s, want %s", doc, f[0], f[1], version)
			}
		}
	}
	for where, v := range got {
		want := image
		if strings.HasSuffix(where, "version") || strings.HasSuffix(where, "appVersion") {
			want = version
		}
		if v != want {
			t.Errorf("%s: %q, want %q (CHANGELOG.md's newest release, the Makefile's RELEASE_IMAGE)", where, v, want)
		}
	}
}
