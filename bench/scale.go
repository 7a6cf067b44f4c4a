package main

import (
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// scaleProbeInterval is the scale scenario's default probe interval (BENCH_SCALE_INTERVAL):
// N/interval probes a second is the load the scheduler spreads (10000 buckets: about 33
// a second).
const scaleProbeInterval = 5 * time.Minute

// scale: BENCH_SCALE_N StorageBuckets (default ten times BENCH_N) created at once and
// probing every BENCH_SCALE_INTERVAL (default 5m), to see how the figures the default
// N measures hold ten times over: time until all are Ready, RSS and live heap once they
// are, and how late probes run (p99 of the scheduler's lag) over one probe interval
// (BENCH_SCALE_WINDOW sets another window). It runs only when BENCH_SCENARIOS names
// it: at 10000 buckets it takes about ten minutes on two cores, beside the default
// run's 25.
func (e *env) scale() error {
	const ns = "scale"
	n := e.n * 10
	if v := os.Getenv("BENCH_SCALE_N"); v != "" {
		parsed, err := strconv.Atoi(v)
		if err != nil || parsed <= 0 {
			return fmt.Errorf("BENCH_SCALE_N=%q: want a positive number", v)
		}
		n = parsed
	}
	interval, err := durationFromEnv("BENCH_SCALE_INTERVAL", scaleProbeInterval)
	if err != nil {
		return err
	}
	// One probe interval: every bucket's first scheduled probe falls into it.
	window, err := durationFromEnv("BENCH_SCALE_WINDOW", interval)
	if err != nil {
		return err
	}
	m, err := e.namespaceWithManager(ns)
	if err != nil {
		return err
	}
	defer m.stop()
	start := time.Now()
	if err := e.createBuckets(ns, ns, n, interval); err != nil {
		return err
	}
	if err := e.waitAll(ns, bkv1.ConditionReady, n, 60*time.Minute); err != nil {
		return err
	}
	converged := time.Since(start)
	m.collect()
	rss, peak := m.rss()
	live, err := m.liveHeap()
	if err != nil {
		return err
	}

	// Probe lag over one window once every bucket is Ready: the histogram's counts
	// in the window are the difference of two scrapes.
	before, err := m.scrape()
	if err != nil {
		return err
	}
	time.Sleep(window)
	after, err := m.scrape()
	if err != nil {
		return err
	}
	const lagMetric = "bucketkeeper_probe_schedule_lag_seconds"
	p99, probes, err := histogramQuantile(0.99, histogramOf(before, lagMetric), histogramOf(after, lagMetric))
	if err != nil {
		return fmt.Errorf("probe lag: %w", err)
	}

	e.note("scale", fmt.Sprintf("N=%d: time to all Ready", n), fmt.Sprintf("%.1fs (%.1f buckets/s)", converged.Seconds(), float64(n)/converged.Seconds()), "")
	e.note("scale", "RSS (peak) and live heap at N", fmt.Sprintf("%.1f (%.1f) MiB, %.1f MiB", rss/(1<<20), peak/(1<<20), live/(1<<20)), "")
	e.note("scale", fmt.Sprintf("probe lag p99 over %s (%.0f probes)", window, probes), fmt.Sprintf("%.2fs", p99), "")
	return e.writeResult("scale", map[string]any{
		"n": n, "convergeSeconds": converged.Seconds(), "rssBytes": rss, "peakRSSBytes": peak, "liveHeapBytes": live,
		"probeWindowSeconds": window.Seconds(), "probes": probes, "probeLagP99Seconds": p99,
	})
}

// histogramOf sums a histogram's series (all label values) from one scrape; nil when
// the scrape has none.
func histogramOf(f metricFamilies, name string) *dto.Histogram {
	var sum *dto.Histogram
	for _, l := range f.matching(name, nil) {
		h := l.metric.GetHistogram()
		if h == nil {
			continue
		}
		if sum == nil {
			sum = &dto.Histogram{}
			for _, b := range h.Bucket {
				sum.Bucket = append(sum.Bucket, &dto.Bucket{UpperBound: b.UpperBound, CumulativeCount: new(uint64)})
			}
			sum.SampleCount = new(uint64)
		}
		*sum.SampleCount += h.GetSampleCount()
		for i, b := range h.Bucket {
			if i < len(sum.Bucket) {
				*sum.Bucket[i].CumulativeCount += b.GetCumulativeCount()
			}
		}
	}
	return sum
}

// histogramQuantile is the q-quantile of the observations made between two scrapes of
// a cumulative histogram, interpolated within its bucket as Prometheus'
// histogram_quantile does; it also returns how many observations there were.
func histogramQuantile(q float64, before, after *dto.Histogram) (float64, float64, error) {
	if after == nil {
		return 0, 0, fmt.Errorf("no histogram in the scrape")
	}
	type bucket struct{ upper, count float64 }
	var buckets []bucket
	for i, b := range after.Bucket {
		c := float64(b.GetCumulativeCount())
		if before != nil && i < len(before.Bucket) {
			c -= float64(before.Bucket[i].GetCumulativeCount())
		}
		buckets = append(buckets, bucket{b.GetUpperBound(), c})
	}
	total := float64(after.GetSampleCount())
	if before != nil {
		total -= float64(before.GetSampleCount())
	}
	if total <= 0 {
		return 0, 0, fmt.Errorf("no observations in the window")
	}
	sort.Slice(buckets, func(i, j int) bool { return buckets[i].upper < buckets[j].upper })
	rank := q * total
	lower, below := 0.0, 0.0
	for _, b := range buckets {
		if b.count >= rank {
			if b.count == below {
				return b.upper, total, nil
			}
			return lower + (b.upper-lower)*(rank-below)/(b.count-below), total, nil
		}
		lower, below = b.upper, b.count
	}
	return math.Inf(1), total, nil // in the +Inf bucket: later than the largest bound
}

// durationFromEnv reads a positive duration from the environment variable name, or
// returns def when it is unset.
func durationFromEnv(name string, def time.Duration) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive duration", name, v)
	}
	return d, nil
}
