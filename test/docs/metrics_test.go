package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/bucketkeeper/bucketkeeper/internal/metrics"
)

// TestMetricsTable: the table of metrics in docs/operations.md is what the operator
// registers, every family with its type, labels and help; BUCKETKEEPER_UPDATE_DOCS=1
// (make docs) writes it.
func TestMetricsTable(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, MetricsPage)
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	generated, stale, err := MetricsBlock(string(data))
	if err != nil {
		t.Fatal(err)
	}
	if !stale {
		return
	}
	if os.Getenv(UpdateEnv) == "1" {
		if err := os.WriteFile(file, []byte(generated), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: table of metrics written", MetricsPage)
		return
	}
	want, _ := MetricsTable()
	t.Errorf("%s: the table of metrics differs from what the operator registers (run make docs; never edit it by hand); it should be:\n%s", MetricsPage, want)
}

// metricNameRE finds our metric names in the alert rules and the dashboard.
var metricNameRE = regexp.MustCompile(`\bbucketkeeper_[a-z0-9_]+`)

// TestMonitoringNamesRegisteredMetrics: every bucketkeeper_ name the alert rules and the
// dashboard use is a family the operator registers (a histogram's _bucket, _sum and
// _count series count as it), so an alert on a series that shows only now and then (a
// running move, a blocked deletion) cannot watch a misspelt name.
func TestMonitoringNamesRegisteredMetrics(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	families, err := metrics.Families()
	if err != nil {
		t.Fatal(err)
	}
	registered := map[string]bool{}
	for _, f := range families {
		registered[f.Name] = true
		if f.Type == "histogram" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				registered[f.Name+s] = true
			}
		}
	}
	files, err := filepath.Glob(filepath.Join(root, "config", "prometheus", "dashboards", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards: %v", err)
	}
	files = append(files, filepath.Join(root, "config", "prometheus", "prometheusrule.yaml"))
	seen := 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range metricNameRE.FindAllString(string(data), -1) {
			if strings.HasSuffix(name, "_") {
				continue // a family in prose: bucketkeeper_bucket_usage_*
			}
			seen++
			if !registered[name] {
				rel, _ := filepath.Rel(root, file)
				t.Errorf("%s names %s, which the operator does not register", rel, name)
			}
		}
	}
	if seen < 20 {
		t.Fatalf("only %d metric names found in the rules and dashboards", seen)
	}
}
