package manifests

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

func yamlFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(repoRoot(t), dir))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && filepath.Ext(e.Name()) == ".yaml" {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names
}

// TestChartCRDsMatchBases: charts/bucketkeeper/crds holds byte-identical copies of the
// generated config/crd/bases, no more, no less. After `make manifests`:
//
//	cp config/crd/bases/*.yaml charts/bucketkeeper/crds/
func TestChartCRDsMatchBases(t *testing.T) {
	bases, chart := yamlFiles(t, "config/crd/bases"), yamlFiles(t, "charts/bucketkeeper/crds")
	if len(bases) == 0 {
		t.Fatal("config/crd/bases has no CRDs")
	}
	if !equalStrings(bases, chart) {
		t.Fatalf("CRD files differ: config/crd/bases %v, charts/bucketkeeper/crds %v", bases, chart)
	}
	for _, name := range bases {
		a := readFile(t, filepath.Join("config/crd/bases", name))
		b := readFile(t, filepath.Join("charts/bucketkeeper/crds", name))
		if !bytes.Equal(a, b) {
			t.Errorf("charts/bucketkeeper/crds/%s differs from config/crd/bases/%s: copy it again", name, name)
		}
	}
}

// TestEveryCRDIsDeployed: config/default and the chart both install every CRD in
// config/crd/bases (config/crd/kustomization.yaml lists them by hand).
func TestEveryCRDIsDeployed(t *testing.T) {
	var want []string
	for _, name := range yamlFiles(t, "config/crd/bases") {
		for _, o := range decodeAll(t, name, readFile(t, filepath.Join("config/crd/bases", name))) {
			want = append(want, o.GetName())
		}
	}
	sort.Strings(want)
	var kust, helm []string
	for _, o := range findAll(renderKustomize(t), "CustomResourceDefinition") {
		kust = append(kust, o.GetName())
	}
	for _, o := range renderChart(t, nil).CRDs {
		helm = append(helm, o.GetName())
	}
	sort.Strings(kust)
	sort.Strings(helm)
	if !equalStrings(want, kust) {
		t.Errorf("config/default installs CRDs %v, want %v", kust, want)
	}
	if !equalStrings(want, helm) {
		t.Errorf("the chart installs CRDs %v, want %v", helm, want)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
