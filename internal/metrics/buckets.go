package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The per-bucket gauges are made at scrape time from one compact record per bucket.
// Three GaugeVecs would keep three labelled series per bucket, each with its own
// label pairs, hash entry and metric struct: about 1.5 KiB of heap per bucket, more
// than a cached StorageBucket costs. A record is one map entry of a few words.

// bucketKey names a bucket's series; the strings are the reconcile key's, shared with
// the cached object.
type bucketKey struct{ namespace, name string }

// bucketRecord is what the per-bucket series show of one bucket.
type bucketRecord struct {
	// lastSuccess is the unix time (ns) of the last probe the bucket answered; 0 none.
	lastSuccess int64
	// interval is the probe interval in force at that probe.
	interval time.Duration
	// available is 1 or 0, or -1 while unknown (no series).
	available int8
	// usageBytes and usageObjects are the last usage measured, -1 before any (no
	// series); quotaBytes and quotaObjects the quota in force then, 0 for no limit (no
	// series).
	usageBytes, usageObjects int64
	quotaBytes, quotaObjects int64
}

func newBucketRecord() bucketRecord {
	return bucketRecord{available: -1, usageBytes: -1, usageObjects: -1}
}

func (r bucketRecord) empty() bool {
	return r.lastSuccess == 0 && r.available < 0 && r.usageBytes < 0 && r.quotaBytes == 0 && r.quotaObjects == 0
}

// bucketRecords holds every bucket's record.
type bucketRecords struct {
	mu      sync.RWMutex
	records map[bucketKey]bucketRecord
}

// update applies change to the bucket's record (a new one starts empty) and drops the
// record once it has nothing left to show.
func (b *bucketRecords) update(key bucketKey, change func(*bucketRecord)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	rec, ok := b.records[key]
	if !ok {
		rec = newBucketRecord()
	}
	change(&rec)
	switch {
	case rec.empty():
		delete(b.records, key)
	case b.records == nil:
		b.records = map[bucketKey]bucketRecord{key: rec}
	default:
		b.records[key] = rec
	}
}

func (b *bucketRecords) forget(key bucketKey) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.records, key)
}

// buckets backs BucketAvailable, BucketLastSuccessfulProbe and BucketProbeInterval.
var buckets = &bucketRecords{}

// bucketGauge is one per-bucket gauge family, read from the shared records: value
// says what a record shows in this family, and whether it shows anything.
type bucketGauge struct {
	desc    *prometheus.Desc
	records *bucketRecords
	value   func(bucketRecord) (float64, bool)
}

func newBucketGauge(name, help string, value func(bucketRecord) (float64, bool)) *bucketGauge {
	return &bucketGauge{
		desc:    prometheus.NewDesc(name, help, []string{"namespace", "name"}, nil),
		records: buckets,
		value:   value,
	}
}

// Describe implements prometheus.Collector.
func (g *bucketGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

// Collect implements prometheus.Collector. The series are built under the read lock
// and sent after it, so a slow scrape never holds up a probe recording its result.
func (g *bucketGauge) Collect(ch chan<- prometheus.Metric) {
	g.records.mu.RLock()
	out := make([]prometheus.Metric, 0, len(g.records.records))
	for key, rec := range g.records.records {
		if v, ok := g.value(rec); ok {
			out = append(out, prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, v, key.namespace, key.name))
		}
	}
	g.records.mu.RUnlock()
	for _, m := range out {
		ch <- m
	}
}

func availableValue(r bucketRecord) (float64, bool) {
	return float64(r.available), r.available >= 0
}

func lastSuccessValue(r bucketRecord) (float64, bool) {
	return float64(r.lastSuccess) / 1e9, r.lastSuccess != 0
}

func intervalValue(r bucketRecord) (float64, bool) {
	return r.interval.Seconds(), r.lastSuccess != 0
}

// SetAvailable sets (or, when available is nil, removes) a bucket's availability series.
// forget removes every per-bucket series: the bucket is gone.
func SetAvailable(namespace, name string, available *bool, forget bool) {
	key := bucketKey{namespace, name}
	if forget {
		buckets.forget(key)
		return
	}
	buckets.update(key, func(r *bucketRecord) {
		switch {
		case available == nil:
			r.available = -1
		case *available:
			r.available = 1
		default:
			r.available = 0
		}
	})
}

// SetProbeSucceeded records a successful probe of a bucket taken at the given time. An
// unknown verdict (store unreachable) leaves the series alone: that staleness is what
// an alert on it must see.
func SetProbeSucceeded(namespace, name string, at time.Time, interval time.Duration) {
	ns := at.UnixNano()
	if ns == 0 { // the epoch itself: one nanosecond later still reads as 0 seconds
		ns = 1
	}
	buckets.update(bucketKey{namespace, name}, func(r *bucketRecord) {
		r.lastSuccess, r.interval = ns, interval
	})
}

func usageBytesValue(r bucketRecord) (float64, bool) { return float64(r.usageBytes), r.usageBytes >= 0 }
func usageObjectsValue(r bucketRecord) (float64, bool) {
	return float64(r.usageObjects), r.usageObjects >= 0
}
func quotaBytesValue(r bucketRecord) (float64, bool) { return float64(r.quotaBytes), r.quotaBytes > 0 }
func quotaObjectsValue(r bucketRecord) (float64, bool) {
	return float64(r.quotaObjects), r.quotaObjects > 0
}

// SetUsage records a measurement of a bucket's usage and the quota in force (0: no
// limit). The series go with the bucket's other series (SetAvailable's forget).
func SetUsage(namespace, name string, bytes, objects, quotaBytes, quotaObjects int64) {
	buckets.update(bucketKey{namespace, name}, func(r *bucketRecord) {
		r.usageBytes, r.usageObjects, r.quotaBytes, r.quotaObjects = bytes, objects, quotaBytes, quotaObjects
	})
}
