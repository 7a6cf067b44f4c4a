package docs

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// SupportedVersionsPage says which versions are supported: those the tests run.
const SupportedVersionsPage = "docs/supported-versions.md"

// TestSupportedVersionsAreTheTestedOnes: docs/supported-versions.md names the versions
// of the peers the tests run (hack/peers/versions.env), and the chart's kubeVersion
// claims no Kubernetes minor version older than the one the harness runs: a claim
// wider than the tests fails here, as does a page left behind by a peer's upgrade.
func TestSupportedVersionsAreTheTestedOnes(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	env := readEnvFile(t, filepath.Join(root, "hack", "peers", "versions.env"))
	page, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(SupportedVersionsPage)))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"KUBE_VERSION", "ETCD_VERSION", "SEAWEEDFS_VERSION", "VERSITYGW_VERSION", "MINIO_VERSION", "RGW_SUITE", "MOTO_SUITE"} {
		v := env[key]
		if v == "" {
			t.Fatalf("hack/peers/versions.env has no %s", key)
		}
		if !strings.Contains(string(page), "`"+v+"`") {
			t.Errorf("%s does not name %s %s, the version the tests run", SupportedVersionsPage, key, v)
		}
	}
	m := regexp.MustCompile(`^v(\d+)\.(\d+)\.`).FindStringSubmatch(env["KUBE_VERSION"])
	if m == nil {
		t.Fatalf("KUBE_VERSION %q is not vMAJOR.MINOR.PATCH", env["KUBE_VERSION"])
	}
	want := `kubeVersion: ">= ` + m[1] + "." + m[2] + `.0-0"`
	chart, err := os.ReadFile(filepath.Join(root, "charts", "bucketkeeper", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(chart), "\n"+want+"\n") {
		t.Errorf("charts/bucketkeeper/Chart.yaml: want %s, the Kubernetes version the tests run (narrow the claim, or test the oldest version it claims)", want)
	}
	if !strings.Contains(string(page), want) {
		t.Errorf("%s does not say the chart's %s", SupportedVersionsPage, want)
	}
}

// readEnvFile reads KEY=value lines, skipping comments.
func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			out[k] = strings.Trim(v, `"`)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
