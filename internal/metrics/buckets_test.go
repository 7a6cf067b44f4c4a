package metrics

import (
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func clearBuckets() {
	buckets.mu.Lock()
	buckets.records = nil
	buckets.mu.Unlock()
}

// resetBuckets empties the shared records for one test and again after it.
func resetBuckets(t testing.TB) {
	clearBuckets()
	t.Cleanup(clearBuckets)
}

func gather(t *testing.T) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(BucketAvailable, BucketLastSuccessfulProbe, BucketProbeInterval)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := make([]string, 0, 2)
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			lines = append(lines, f.GetName()+"{"+strings.Join(labels, ",")+"} "+strconv.FormatFloat(m.GetGauge().GetValue(), 'g', -1, 64))
		}
	}
	return strings.Join(lines, "\n")
}

// expectSeries fails the test unless the gathered series are exactly want, in order.
func expectSeries(t *testing.T, what string, want ...string) {
	t.Helper()
	if got := gather(t); got != strings.Join(want, "\n") {
		t.Fatalf("%s:\n%s\nwant\n%s", what, got, strings.Join(want, "\n"))
	}
}

// TestBucketSeries: the series a bucket shows through its life, exposed as gauges
// with namespace and name labels, as the GaugeVecs they replace were.
func TestBucketSeries(t *testing.T) {
	resetBuckets(t)
	yes, no := true, false
	at := time.Unix(1700000000, 500_000_000)

	SetAvailable("team-a", "logs", &yes, false)
	expectSeries(t, "available, never probed successfully",
		"bucketkeeper_bucket_available{name=logs,namespace=team-a} 1")

	SetProbeSucceeded("team-a", "logs", at, time.Hour)
	SetAvailable("team-b", "data", &no, false)
	expectSeries(t, "after a success and another bucket's failure",
		"bucketkeeper_bucket_available{name=data,namespace=team-b} 0",
		"bucketkeeper_bucket_available{name=logs,namespace=team-a} 1",
		"bucketkeeper_bucket_last_successful_probe_timestamp_seconds{name=logs,namespace=team-a} 1.7000000005e+09",
		"bucketkeeper_bucket_probe_interval_seconds{name=logs,namespace=team-a} 3600")

	// Unknown availability (store unreachable) drops that series only: the last success
	// stays, for a staleness alert to see it age.
	SetAvailable("team-a", "logs", nil, false)
	expectSeries(t, "after availability became unknown",
		"bucketkeeper_bucket_available{name=data,namespace=team-b} 0",
		"bucketkeeper_bucket_last_successful_probe_timestamp_seconds{name=logs,namespace=team-a} 1.7000000005e+09",
		"bucketkeeper_bucket_probe_interval_seconds{name=logs,namespace=team-a} 3600")

	// Forgetting a bucket removes all its series, and its record with them.
	SetAvailable("team-a", "logs", nil, true)
	SetAvailable("team-b", "data", nil, false)
	expectSeries(t, "after both buckets went")
	if n := len(buckets.records); n != 0 {
		t.Fatalf("%d records left with no series to show", n)
	}
}

// TestBucketSeriesHelpAndType: the exposition keeps the metric names, help and type
// the dashboards and alerts were written against.
func TestBucketSeriesHelpAndType(t *testing.T) {
	resetBuckets(t)
	SetProbeSucceeded("ns", "b", time.Unix(10, 0), 30*time.Second)
	const want = `
# HELP bucketkeeper_bucket_probe_interval_seconds Probe interval of a bucket, as of its last successful probe.
# TYPE bucketkeeper_bucket_probe_interval_seconds gauge
bucketkeeper_bucket_probe_interval_seconds{name="b",namespace="ns"} 30
`
	if err := testutil.CollectAndCompare(BucketProbeInterval, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkBucketSeriesHeap reports the live heap per bucket of its three series, for
// the compact records and, as the baseline in the same run, three GaugeVecs.
func BenchmarkBucketSeriesHeap(b *testing.B) {
	const n = 5000
	yes := true
	names := make([]string, n)
	for i := range names {
		names[i] = "bucket-" + strconv.Itoa(i)
	}
	// reset drops what the previous iteration kept, before the heap is read.
	measure := func(b *testing.B, reset, fill func()) {
		var before, after runtime.MemStats
		for b.Loop() {
			reset()
			runtime.GC()
			runtime.ReadMemStats(&before)
			fill()
			runtime.GC()
			runtime.ReadMemStats(&after)
		}
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/bucket")
	}
	b.Run("records", func(b *testing.B) {
		resetBuckets(b)
		measure(b, clearBuckets, func() {
			for _, name := range names {
				SetAvailable("tenant", name, &yes, false)
				SetProbeSucceeded("tenant", name, time.Now(), time.Minute)
			}
		})
	})
	b.Run("gaugevecs", func(b *testing.B) {
		var vecs []*prometheus.GaugeVec
		measure(b, func() { vecs = nil }, func() {
			for _, metric := range []string{"available", "last", "interval"} {
				vec := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: metric}, []string{"namespace", "name"})
				for _, name := range names {
					vec.WithLabelValues("tenant", name).Set(1)
				}
				vecs = append(vecs, vec)
			}
		})
		runtime.KeepAlive(vecs)
	})
}
