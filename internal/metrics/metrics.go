// Package metrics defines bucketkeeper's Prometheus metrics on controller-runtime's
// registry, so they are served with the controller metrics on the manager's endpoint.
package metrics

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

var (
	// S3Requests counts every HTTP attempt to a store, by operation and answer: S3's, and
	// the admin API's (AdminCheck, GetBucketUsage, GetBucketQuota, SetBucketQuota), which
	// go to the same endpoint and spend the same budget.
	S3Requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bucketkeeper_s3_requests_total",
		Help: "Requests sent to a store's endpoint (S3 and admin API), by store, operation and HTTP status code (or error kind when no answer arrived).",
	}, []string{"store", "operation", "code"})

	// IAMRequests counts every HTTP attempt to a store's IAM endpoint (the BucketAccess
	// controller's and the access collector's), by operation and answer.
	IAMRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bucketkeeper_iam_requests_total",
		Help: "Requests sent to a store's IAM endpoint, by store, operation and HTTP status code (or error kind when no answer arrived).",
	}, []string{"store", "operation", "code"})

	// AccessCollectorPasses, AccessCollectorSweeps and AccessCollectorKeyChecks count the
	// access collector's passes over each IAM store, the sweeps they completed (every
	// user judged) and the users whose keys they listed (users of another store's
	// accesses, on an account both stores share): a sweep that does not end, or
	// rechecks the same users, shows here.
	AccessCollectorPasses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bucketkeeper_access_collector_passes_total",
		Help: "Passes of the access collector over a store's IAM users, by store.",
	}, []string{"store"})
	AccessCollectorSweeps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bucketkeeper_access_collector_sweeps_total",
		Help: "Sweeps of the access collector that judged every IAM user of a store, by store.",
	}, []string{"store"})
	AccessCollectorKeyChecks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bucketkeeper_access_collector_key_checks_total",
		Help: "IAM users whose access keys the access collector listed, by store.",
	}, []string{"store"})

	// StatusWrites counts status patches; the operator skips writes that change nothing.
	StatusWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bucketkeeper_status_writes_total",
		Help: "Status writes to the API server, by kind.",
	}, []string{"kind"})

	// ProbeDuration is the latency of bucket probes.
	ProbeDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "bucketkeeper_probe_duration_seconds",
		Help:    "Duration of bucket health probes, by store and mode.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"store", "mode"})

	// Probes counts probes by verdict reason (ProbeSucceeded, BucketNotFound, ...).
	Probes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bucketkeeper_probes_total",
		Help: "Bucket health probes, by store and result (the verdict's reason: ProbeSucceeded, BucketNotFound, AccessDenied, ProbeTimeout, ProbeFailed).",
	}, []string{"store", "result"})

	// ObjectStoreReady is 1 while a store passes its health check and 0 while it does
	// not (unreachable, credentials refused, TLS not trusted); absent before the first
	// check and after the store is deleted.
	ObjectStoreReady = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "bucketkeeper_objectstore_ready",
		Help: "Whether an ObjectStore passed its last health check (1) or not (0); absent before its first check and after its deletion.",
	}, []string{"store"})

	// StoreRetirementBuckets counts a retiring store's StorageBuckets by where they are
	// (its status.retirement): moved, moving, queued, skipped, remaining; absent for a
	// store that does not retire.
	StoreRetirementBuckets = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "bucketkeeper_objectstore_retirement_buckets",
		Help: "StorageBuckets of a retiring ObjectStore (spec.retire) by state: moved, moving, queued, skipped, remaining (not started); absent when the store does not retire.",
	}, []string{"store", "state"})

	// StoreRetirementPaused is 1 while a retiring store's spec.retire.paused holds new
	// moves back, 0 while it does not: the retirement's alert leaves a paused one be.
	StoreRetirementPaused = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "bucketkeeper_objectstore_retirement_paused",
		Help: "Whether a retiring ObjectStore's retirement is paused (1: spec.retire.paused, no new move starts) or not (0); absent when the store does not retire.",
	}, []string{"store"})

	// BucketDeletionBlocked is, for each StorageBucket whose deletion waits for locked
	// object versions, since when (unix seconds): present only while it waits, so
	// count() of it is how many buckets are blocked. Few buckets are ever in it.
	BucketDeletionBlocked = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "bucketkeeper_bucket_deletion_blocked_since_timestamp_seconds",
		Help: "Unix time since when a StorageBucket's deletion policy has been waiting for locked object versions (object lock); absent when it is not.",
	}, []string{"namespace", "name"})

	// MoveCopiedBytes, MoveCopiedObjects and MoveObjectsLeft follow a bucket's move to
	// another store while it runs (status.move); MoveWritePause is the write pause of
	// its last cutover, kept after the move is done.
	MoveCopiedBytes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "bucketkeeper_move_copied_bytes",
		Help: "Bytes a running move of a StorageBucket's bucket to another store has written to the target, over all its passes.",
	}, []string{"namespace", "name"})
	MoveCopiedObjects = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "bucketkeeper_move_copied_objects",
		Help: "Objects a running move has written to the target, over all its passes.",
	}, []string{"namespace", "name"})
	MoveObjectsLeft = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "bucketkeeper_move_objects_left",
		Help: "Objects of the source the running pass of a move has not reached yet.",
	}, []string{"namespace", "name"})
	// MoveLastProgress is when a running move's figures last changed as the operator
	// read them: a move whose mover is stuck (its Jobs cannot run) or whose objects
	// will not copy (MoveFailed) shows here as a time that no longer moves.
	MoveLastProgress = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "bucketkeeper_move_last_progress_timestamp_seconds",
		Help: "Unix time a running move of a StorageBucket last made progress (its copied bytes or objects, or the objects its pass has left, changed); absent when no move runs.",
	}, []string{"namespace", "name"})
	MoveWritePause = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "bucketkeeper_move_last_write_pause_seconds",
		Help: "How long the last cutover of a StorageBucket's move refused writes: from the source's freeze to the connection Secret naming the target.",
	}, []string{"namespace", "name"})

	// BucketAccessReady is 1 while a BucketAccess is Ready (its key or role issued and
	// in its Secret) and 0 while it is not; absent once it is deleted. One series per
	// access, whatever its state: no reason label, whose values would churn.
	BucketAccessReady = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "bucketkeeper_bucketaccess_ready",
		Help: "Whether a BucketAccess is Ready (1: its key or role is issued and in its Secret) or not (0); absent once it is deleted.",
	}, []string{"namespace", "name"})

	// ReceiverRequests counts the probe webhook's answers by key and status code. The key
	// label is a namespaced key's id, "*" for the cluster-wide key, or "" when a request
	// established no key (missing, unknown or malformed headers): what a caller sends
	// never becomes a label value, so the series grow with the platform team's keys only,
	// and a key's go when its Secret is deleted.
	ReceiverRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bucketkeeper_receiver_requests_total",
		Help: "Answers of the probe webhook, by key (id, \"*\" for the cluster-wide key, \"\" for none) and HTTP status code.",
	}, []string{"key", "code"})

	// ReceiverKeys is how many Secrets labelled as probe-webhook keys this replica uses
	// (state "loaded") and how many it refuses as malformed ("invalid"); each refused
	// one has a ReceiverKeyInvalid Event.
	ReceiverKeys = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "bucketkeeper_receiver_keys",
		Help: "Namespaced keys of the probe webhook, by state (loaded, invalid).",
	}, []string{"state"})

	// ProbeScheduleLag is how late probe events leave the scheduler, budget delays included.
	ProbeScheduleLag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "bucketkeeper_probe_schedule_lag_seconds",
		Help:    "Delay between a probe's due time and its event leaving the scheduler.",
		Buckets: []float64{.001, .01, .1, .5, 1, 2, 5, 10, 30, 60},
	})
)

// The per-bucket series (buckets.go). One series per bucket each: they can be turned
// off for huge installs (--disable-availability-metric).
var (
	// BucketAvailable is 1 for an available bucket, 0 for an unavailable one and absent
	// while unknown.
	BucketAvailable prometheus.Collector = newBucketGauge("bucketkeeper_bucket_available",
		"Whether a bucket answered its last probe (1) or not (0); absent while unknown (its store unreachable).", availableValue)

	// BucketLastSuccessfulProbe is when a bucket last answered a probe, in unix seconds:
	// status.lastProbeTime is refreshed only once per heartbeat, this on every success.
	BucketLastSuccessfulProbe prometheus.Collector = newBucketGauge("bucketkeeper_bucket_last_successful_probe_timestamp_seconds",
		"Unix time of the last probe a bucket answered; absent until its first success.", lastSuccessValue)

	// BucketProbeInterval is the probe interval in force at a bucket's last successful
	// probe, so a staleness alert can judge each bucket by its own interval (10s to 24h).
	BucketProbeInterval prometheus.Collector = newBucketGauge("bucketkeeper_bucket_probe_interval_seconds",
		"Probe interval of a bucket, as of its last successful probe.", intervalValue)

	// BucketUsageBytes and BucketUsageObjects are what a bucket held at its last usage
	// measurement (stores with an admin API that reports it, every --usage-interval);
	// BucketQuotaBytes and BucketQuotaObjects the quota in force then, absent for no
	// limit. Every measurement shows here; status.usage only takes moves of 1% or more.
	BucketUsageBytes prometheus.Collector = newBucketGauge("bucketkeeper_bucket_usage_bytes",
		"Bytes a bucket held at its last usage measurement (the store's logical size).", usageBytesValue)
	BucketUsageObjects prometheus.Collector = newBucketGauge("bucketkeeper_bucket_usage_objects",
		"Objects a bucket held at its last usage measurement.", usageObjectsValue)
	BucketQuotaBytes prometheus.Collector = newBucketGauge("bucketkeeper_bucket_quota_bytes",
		"A bucket's size quota, as of its last usage measurement; absent for none.", quotaBytesValue)
	BucketQuotaObjects prometheus.Collector = newBucketGauge("bucketkeeper_bucket_quota_objects",
		"A bucket's object quota, as of its last usage measurement; absent for none.", quotaObjectsValue)
)

var registerOnce sync.Once

// collectors is every collector Register adds: the one list the registry and the
// table of metrics in docs/operations.md (Families) are made from.
func collectors() []prometheus.Collector {
	return []prometheus.Collector{S3Requests, IAMRequests, AccessCollectorPasses, AccessCollectorSweeps, AccessCollectorKeyChecks, StatusWrites, ProbeDuration, Probes, BucketAvailable,
		BucketLastSuccessfulProbe, BucketProbeInterval, BucketUsageBytes, BucketUsageObjects,
		BucketQuotaBytes, BucketQuotaObjects, ObjectStoreReady, StoreRetirementBuckets, StoreRetirementPaused, ProbeScheduleLag, BucketDeletionBlocked, ReceiverRequests, ReceiverKeys,
		MoveCopiedBytes, MoveCopiedObjects, MoveObjectsLeft, MoveLastProgress, MoveWritePause, BucketAccessReady}
}

// Register adds the metrics to controller-runtime's registry (once per process).
func Register() {
	registerOnce.Do(func() {
		crmetrics.Registry.MustRegister(collectors()...)
	})
}

// ObserveS3 records one S3 attempt. Without an HTTP answer the code is the error kind,
// e.g. "Unreachable", so outages are visible in the same series.
func ObserveS3(store, operation string, status int, err error) {
	S3Requests.WithLabelValues(store, operation, attemptCode(status, err, func(err error) string { return s3.KindOf(err).String() })).Inc()
}

// ObserveIAM records one IAM attempt, coded as ObserveS3 codes S3's.
func ObserveIAM(store, operation string, status int, err error) {
	IAMRequests.WithLabelValues(store, operation, attemptCode(status, err, func(err error) string { return iam.KindOf(err).String() })).Inc()
}

// attemptCode is an attempt's HTTP status, or without an answer its error's kind.
func attemptCode(status int, err error, kind func(error) string) string {
	switch {
	case status != 0:
		return strconv.Itoa(status)
	case err != nil:
		return kind(err)
	default:
		return "none"
	}
}

// ObserveCollectorPass records one access collector pass over a store; sweepDone
// says it judged the store's last user.
func ObserveCollectorPass(store string, keyChecks int, sweepDone bool) {
	AccessCollectorPasses.WithLabelValues(store).Inc()
	AccessCollectorKeyChecks.WithLabelValues(store).Add(float64(keyChecks))
	if sweepDone {
		AccessCollectorSweeps.WithLabelValues(store).Inc()
	}
}

// ObserveStatusWrite records one status write of the given kind.
func ObserveStatusWrite(kind string) {
	StatusWrites.WithLabelValues(kind).Inc()
}

// ObserveProbe records one probe.
func ObserveProbe(store, mode, result string, latency time.Duration) {
	ProbeDuration.WithLabelValues(store, mode).Observe(latency.Seconds())
	Probes.WithLabelValues(store, result).Inc()
}

// SetDeletionBlocked sets since when a StorageBucket's deletion has been waiting for
// locked object versions, or removes its series when since is nil.
func SetDeletionBlocked(namespace, name string, since *time.Time) {
	if since == nil {
		BucketDeletionBlocked.DeleteLabelValues(namespace, name)
		return
	}
	BucketDeletionBlocked.WithLabelValues(namespace, name).Set(float64(since.Unix()))
}

// ObserveReceiverAnswer records one answer of the probe webhook (receiver.Options.Observe).
func ObserveReceiverAnswer(key string, code int) {
	ReceiverRequests.WithLabelValues(key, strconv.Itoa(code)).Inc()
}

// ForgetReceiverKey drops the series of a key whose Secret was deleted.
func ForgetReceiverKey(key string) {
	ReceiverRequests.DeletePartialMatch(prometheus.Labels{"key": key})
}

// SetReceiverKeys sets how many namespaced keys are loaded and refused.
func SetReceiverKeys(loaded, invalid int) {
	ReceiverKeys.WithLabelValues("loaded").Set(float64(loaded))
	ReceiverKeys.WithLabelValues("invalid").Set(float64(invalid))
}

// SetStoreReady sets a store's health series, or removes it when ready is nil.
func SetStoreReady(store string, ready *bool) {
	if ready == nil {
		ObjectStoreReady.DeleteLabelValues(store)
		return
	}
	v := 0.0
	if *ready {
		v = 1
	}
	ObjectStoreReady.WithLabelValues(store).Set(v)
}

// SetStoreRetirement records a retiring store's counts (nil: it retires no more, or is
// gone).
func SetStoreRetirement(store string, st *bkv1.RetirementStatus) {
	if st == nil {
		StoreRetirementBuckets.DeletePartialMatch(prometheus.Labels{"store": store})
		StoreRetirementPaused.DeleteLabelValues(store)
		return
	}
	paused := 0.0
	if st.Paused {
		paused = 1
	}
	StoreRetirementPaused.WithLabelValues(store).Set(paused)
	for state, n := range map[string]int32{"moved": st.Moved, "moving": st.Moving, "queued": st.Queued, "skipped": st.Skipped, "remaining": st.Remaining} {
		StoreRetirementBuckets.WithLabelValues(store, state).Set(float64(n))
	}
}

// moveFigures are the figures of a running move whose change is progress.
type moveFigures struct{ bytes, objects, left int64 }

// moves holds each running move's last figures, to tell progress from a repeat.
var moves = struct {
	mu   sync.Mutex
	last map[bucketKey]moveFigures
}{last: map[bucketKey]moveFigures{}}

// now is the clock of MoveLastProgress (a test sets it).
var now = time.Now

// SetMoveProgress records a running move's figures, and when they last changed.
func SetMoveProgress(namespace, name string, copiedBytes, copiedObjects, objectsLeft int64) {
	MoveCopiedBytes.WithLabelValues(namespace, name).Set(float64(copiedBytes))
	MoveCopiedObjects.WithLabelValues(namespace, name).Set(float64(copiedObjects))
	MoveObjectsLeft.WithLabelValues(namespace, name).Set(float64(objectsLeft))
	key, cur := bucketKey{namespace, name}, moveFigures{copiedBytes, copiedObjects, objectsLeft}
	moves.mu.Lock()
	defer moves.mu.Unlock()
	if prev, ok := moves.last[key]; !ok || prev != cur {
		moves.last[key] = cur
		MoveLastProgress.WithLabelValues(namespace, name).Set(float64(now().Unix()))
	}
}

// EndMove drops a move's running figures and, for a move that cut over, records its
// write pause.
func EndMove(namespace, name string, pause *time.Duration) {
	MoveCopiedBytes.DeleteLabelValues(namespace, name)
	MoveCopiedObjects.DeleteLabelValues(namespace, name)
	MoveObjectsLeft.DeleteLabelValues(namespace, name)
	moves.mu.Lock()
	delete(moves.last, bucketKey{namespace, name})
	MoveLastProgress.DeleteLabelValues(namespace, name)
	moves.mu.Unlock()
	if pause != nil {
		MoveWritePause.WithLabelValues(namespace, name).Set(pause.Seconds())
	}
}

// SetAccessReady sets whether a BucketAccess is Ready, or removes its series when
// ready is nil (the access is gone or being deleted).
func SetAccessReady(namespace, name string, ready *bool) {
	if ready == nil {
		BucketAccessReady.DeleteLabelValues(namespace, name)
		return
	}
	v := 0.0
	if *ready {
		v = 1
	}
	BucketAccessReady.WithLabelValues(namespace, name).Set(v)
}
