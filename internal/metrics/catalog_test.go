package metrics

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestFamilies: every registered collector is read, with its type, help and labels, and
// nothing is read twice; a change of client_golang's descriptor format fails here
// rather than in an empty docs table.
func TestFamilies(t *testing.T) {
	families, err := Families()
	if err != nil {
		t.Fatal(err)
	}
	descs := 0
	for _, c := range collectors() {
		ch := make(chan *prometheus.Desc, 4)
		go func() { c.Describe(ch); close(ch) }()
		for range ch {
			descs++
		}
	}
	if len(families) != descs || descs < 20 {
		t.Fatalf("%d families read from %d descriptors", len(families), descs)
	}
	byName := map[string]Family{}
	for _, f := range families {
		if _, dup := byName[f.Name]; dup {
			t.Errorf("%s: two families", f.Name)
		}
		if f.Help == "" || f.Type == "" {
			t.Errorf("%s: type %q, help %q", f.Name, f.Type, f.Help)
		}
		byName[f.Name] = f
	}
	for name, want := range map[string]Family{
		"bucketkeeper_s3_requests_total":          {Type: "counter", Labels: []string{"store", "operation", "code"}},
		"bucketkeeper_bucket_available":           {Type: "gauge", Labels: []string{"namespace", "name"}},
		"bucketkeeper_probe_schedule_lag_seconds": {Type: "histogram"},
		"bucketkeeper_probe_duration_seconds":     {Type: "histogram", Labels: []string{"store", "mode"}},
		"bucketkeeper_bucketaccess_ready":         {Type: "gauge", Labels: []string{"namespace", "name"}},
	} {
		got, ok := byName[name]
		if !ok || got.Type != want.Type || !slices.Equal(got.Labels, want.Labels) {
			t.Errorf("%s: %+v, want type %s and labels %v", name, got, want.Type, want.Labels)
		}
	}
	if got := byName["bucketkeeper_receiver_requests_total"].Help; got != `Answers of the probe webhook, by key (id, "*" for the cluster-wide key, "" for none) and HTTP status code.` {
		t.Errorf("help with quotes read as %q", got)
	}
}
