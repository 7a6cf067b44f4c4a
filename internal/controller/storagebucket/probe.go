package storagebucket

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/memo"
	"github.com/bucketkeeper/bucketkeeper/internal/probe"
	"github.com/bucketkeeper/bucketkeeper/internal/quota"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// ProbeScheduler wakes a StorageBucket when its next probe is due: an event source
// outside the cluster, fed by the reconciler after every probe. It is the one holder of
// each bucket's due time (probe.Scheduler): the reconcile asks it whether it fired,
// rather than keeping a copy and comparing it with the clock. SetupWithManager runs it
// with the manager and watches its events, so it must also be a manager.Runnable with a
// Source.
type ProbeScheduler interface {
	Schedule(key types.NamespacedName, store string, due time.Time)
	Forget(key types.NamespacedName)
	// Lookup returns the due time key was last scheduled for and whether the
	// scheduler fired for it (sent its event) since; ok is false for a key it does
	// not hold.
	Lookup(key types.NamespacedName) (due time.Time, fired, ok bool)
}

// Prober decides whether a bucket's probe is due, runs it and remembers the result. A
// periodic probe is due when the scheduler fired for the bucket's slot, whatever woke the
// reconcile: duplicate or extra wake-ups never cause extra probes.
type Prober struct {
	// Scheduler holds each bucket's next due time and wakes the bucket then (required).
	Scheduler ProbeScheduler
	Clock     clock.PassiveClock
	// Heartbeat bounds how often lastProbeTime alone is rewritten (status economy).
	Heartbeat time.Duration
	// Observe records one probe for metrics; may be nil.
	Observe func(store string, mode bkv1.ProbeMode, reason string, latency time.Duration)
	// Available reports a bucket's verdict for the availability gauge (nil = unknown,
	// forgotten = deleted); may be nil.
	Available func(key types.NamespacedName, available *bool, forget bool)
	// Succeeded reports every successful probe with its time and the bucket's interval,
	// for the last-successful-probe gauge (status.lastProbeTime moves only once per
	// heartbeat); may be nil. The series go with Available's forget.
	Succeeded func(key types.NamespacedName, at time.Time, interval time.Duration)
	// Usage reports every measurement of a bucket's usage, with the quota in force, for
	// the usage and quota gauges; may be nil. The series go with Available's forget.
	Usage func(key types.NamespacedName, usage quota.Usage, limits quota.Limits)
	// UsageInterval is the least time between two reads of a bucket's usage, which
	// ride on its successful probes (defaults.UsageInterval if zero).
	UsageInterval time.Duration
	// Jitter draws from [0,1); nil means math/rand.
	Jitter func() float64
	// DefaultInterval applies to StorageBuckets that set no probe interval
	// (defaults.ProbeInterval if zero).
	DefaultInterval time.Duration
	// MinRequestInterval bounds on-demand probes (the probe-requested-at annotation,
	// which the webhook sets too) to one per bucket per interval, however many new
	// values arrive; zero means no bound. A request inside the interval is deferred,
	// not dropped: the first probe at or after the interval's end serves all requests
	// that arrived meanwhile, and only then is status.lastHandledProbeRequest written.
	MinRequestInterval time.Duration
	// Naive probes on every reconcile and writes lastProbeTime every time, as a design
	// with a single global ticker would; only the benchmark's baseline (the operator's
	// global-ticker probe strategy, built with the benchbaseline tag) sets it. Its
	// ticker holds no due times, so nothing is scheduled.
	Naive bool

	states memo.Map[types.NamespacedName, probeState]
}

// probeState is kept by name, so a deleted object (known only by name by then) is
// forgotten; the UID tells a re-created object of the same name from the old one. The
// next due time is not here: the scheduler holds it (ProbeScheduler).
type probeState struct {
	uid        types.UID
	generation int64
	// lastServed is when a probe last served a probe request (zero: never, in this
	// process). It lives in memory only: a new leader may serve one request at once.
	lastServed time.Time
	// lastUsage is when the bucket's usage was last read (zero: not in this process).
	lastUsage time.Time
}

type probeResult struct {
	status  metav1.ConditionStatus
	reason  string
	message string
	latency time.Duration
}

func (p *Prober) forget(key types.NamespacedName) {
	if p == nil {
		return
	}
	p.Scheduler.Forget(key)
	known := p.states.Delete(key)
	// Only a bucket this prober probed can have series of its own. Another manager in
	// the same process (a shard of the dev binary, the tests) may be told about a
	// bucket it does not serve, e.g. through its connection Secret, and must not
	// delete the series of the manager that serves it.
	if known && p.Available != nil {
		p.Available(key, nil, true)
	}
}

func (p *Prober) state(key types.NamespacedName, uid types.UID) (probeState, bool) {
	st, ok := p.states.Get(key)
	if !ok || st.uid != uid {
		return probeState{}, false
	}
	return st, true
}

func (p *Prober) save(key types.NamespacedName, st probeState) { p.states.Set(key, st) }

func (p *Prober) jitter() float64 {
	if p.Jitter != nil {
		return p.Jitter()
	}
	return rand.Float64()
}

func (p *Prober) interval(sb *bkv1.StorageBucket) time.Duration {
	switch {
	case sb.Spec.Probe.Interval != nil && sb.Spec.Probe.Interval.Duration > 0:
		return sb.Spec.Probe.Interval.Duration
	case p.DefaultInterval > 0:
		return p.DefaultInterval
	default:
		return defaults.ProbeInterval
	}
}

// probeTimeout is spec.probe.timeout; the API server defaults it, the fallback is for an
// object that did not pass through its defaulting.
func probeTimeout(sb *bkv1.StorageBucket) time.Duration {
	if sb.Spec.Probe.Timeout != nil && sb.Spec.Probe.Timeout.Duration > 0 {
		return sb.Spec.Probe.Timeout.Duration
	}
	return defaults.ProbeTimeout
}

// reconcileAvailability keeps the Available verdict current. A store known to be down
// answers for all its buckets; otherwise a provisioned bucket is probed when its probe
// is due, the spec changed or a probe was requested. It returns a requeue delay when the
// probe found something the provisioning path must fix at once (a vanished bucket), and
// records in scope.probeWake when the scheduler will wake the bucket next.
func (r *Reconciler) reconcileAvailability(ctx context.Context, scope *bucketScope, patcher *reconcile.StatusPatcher, failure *reconcile.StepError) time.Duration {
	p, sb := r.Prober, scope.sb
	if p == nil {
		return 0
	}
	if failure != nil && failure.Reason == bkv1.ReasonStoreUnreachable {
		// Known from the store's health check (no client) or from a step of this pass:
		// either way the bucket's availability is unknown until the store answers.
		r.recordProbe(patcher, sb, probeResult{status: metav1.ConditionUnknown, reason: bkv1.ReasonStoreUnreachable,
			message: fmt.Sprintf("ObjectStore %q is unreachable; the bucket is probed again when it is back", sb.HomeStore())}, p.Clock.Now(), false)
		if scope.store != nil {
			r.Stores.RequestCheck(scope.store.Name)
		}
		return 0
	}
	if scope.s3 == nil {
		return 0
	}
	if sb.Status.BucketName != scope.bucket || !reconcile.ConditionIsTrue(sb.Status.Conditions, bkv1.ConditionProvisioned) {
		return 0
	}

	key := client.ObjectKeyFromObject(sb)
	interval, now := p.interval(sb), p.Clock.Now()
	requested := sb.Annotations[bkv1.AnnotationProbeRequestedAt]
	pending := requested != "" && requested != sb.Status.LastHandledProbeRequest
	st, known := p.state(key, sb.UID)
	// A request is served at once unless one was served less than MinRequestInterval
	// ago; then it waits (without any status write) for the interval's end.
	requestAllowedAt := time.Time{}
	if known && !st.lastServed.IsZero() && p.MinRequestInterval > 0 {
		requestAllowedAt = st.lastServed.Add(p.MinRequestInterval)
	}
	deferred := pending && now.Before(requestAllowedAt)
	// A bucket last seen with its store unreachable is probed on every pass until it
	// answers; a deferred request must not turn that into a probe per new value.
	recovering := availabilityReason(sb) == bkv1.ReasonStoreUnreachable && !deferred
	// The scheduler holds the bucket's next slot and says whether it fired for it.
	scheduledFor, fired, scheduled := p.Scheduler.Lookup(key)
	next := scheduledFor
	due := (pending && !deferred) || p.Naive || recovering
	switch {
	case !known && sb.Status.LastProbeTime == nil:
		due = true // never probed: probe at once
	case !known || !scheduled:
		// Probed by an earlier leader: continue at this bucket's phase slot, so a
		// restart or failover never turns into a burst of N probes.
		st = probeState{uid: sb.UID, generation: sb.Generation}
		next = probe.NextSlot(key, interval, now.Add(-interval/2), 0, nil)
	case st.generation != sb.Generation:
		due = true
	case fired:
		due = true
		log.FromContext(ctx).V(1).Info("probe due", "slot", scheduledFor)
	}

	var requeue time.Duration
	if due {
		res := r.runProbe(ctx, scope)
		next = probe.NextSlot(key, interval, now, 0.1, p.jitter)
		st = probeState{uid: sb.UID, generation: sb.Generation, lastServed: st.lastServed, lastUsage: st.lastUsage}
		if pending {
			// Any probe after the request serves it, a periodic one included.
			sb.Status.LastHandledProbeRequest = requested
			st.lastServed = now
		}
		r.recordProbe(patcher, sb, res, now, true)
		if res.status == metav1.ConditionTrue {
			if p.Succeeded != nil {
				p.Succeeded(key, now, interval)
			}
			st.lastUsage = r.measureUsage(ctx, scope, st.lastUsage, now)
		}
		switch res.reason {
		case bkv1.ReasonBucketNotFound:
			// The provisioning path recreates it (with its event) on the next pass.
			r.synced.expire(key)
			requeue = time.Second
		case bkv1.ReasonStoreUnreachable:
			r.Stores.RequestCheck(scope.store.Name)
		}
	} else if c := reconcile.FindCondition(sb.Status.Conditions, bkv1.ConditionAvailable); c != nil && c.ObservedGeneration != sb.Generation {
		reconcile.SetCondition(&sb.Status.Conditions, sb.Generation, c.Type, c.Status, c.Reason, c.Message)
	}
	p.save(key, st)
	if p.Naive {
		return requeue // the global ticker wakes every bucket on its own
	}
	wake := next
	if deferred && !due {
		log.FromContext(ctx).V(1).Info("probe request deferred", "until", requestAllowedAt)
		wake = earliest(wake, requestAllowedAt)
	}
	if !scheduled || fired || !wake.Equal(scheduledFor) {
		p.Scheduler.Schedule(key, scope.store.Name, wake)
	}
	scope.probeWake = wake
	return requeue
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// withoutCoveredTimer drops a requeue the probe scheduler already covers: it wakes the
// bucket at wake, no later than the requeue would, and that reconcile does all a
// requeued one would (a full pass once the sync is due, see probeOnly). With the
// default intervals (probe 1m, sync 10m) every Ready bucket would otherwise keep a
// timer in the work queue for its next sync beside its probe timer: about 400 bytes of
// queue per bucket, for a wake-up that never comes first.
func withoutCoveredTimer(res ctrl.Result, now, wake time.Time) ctrl.Result {
	if !wake.IsZero() && res.RequeueAfter > 0 && !now.Add(res.RequeueAfter).Before(wake) {
		res.RequeueAfter = 0
	}
	return res
}

// earliestDelay is the shorter of two requeue delays, where zero means none.
func earliestDelay(a, b time.Duration) time.Duration {
	if a == 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

func availabilityReason(sb *bkv1.StorageBucket) string {
	if c := reconcile.FindCondition(sb.Status.Conditions, bkv1.ConditionAvailable); c != nil {
		return c.Reason
	}
	return ""
}

// runProbe sends the probe: HeadBucket, or a canary object written, read back and
// deleted. Messages are fixed per verdict, so a steady verdict never rewrites status.
func (r *Reconciler) runProbe(ctx context.Context, scope *bucketScope) probeResult {
	sb, c, bucket := scope.sb, scope.s3, scope.bucket
	timeout := probeTimeout(sb)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := r.Prober.Clock.Now()
	var err error
	mode := sb.Spec.Probe.Mode
	if mode == bkv1.ProbeModeReadWrite && !lockedByDefault(sb) {
		err = canaryProbe(ctx, c, bucket, bkv1.CanaryPrefix+string(sb.UID))
	} else {
		mode = bkv1.ProbeModeHead
		_, err = c.HeadBucket(ctx, bucket)
	}
	res := probeResult{latency: r.Prober.Clock.Since(start)}
	switch {
	case err == nil:
		res.status, res.reason, res.message = metav1.ConditionTrue, bkv1.ReasonProbeSucceeded, fmt.Sprintf("bucket %q answered the %s probe", bucket, mode)
	case errors.Is(err, errCanaryMismatch) || errors.Is(err, errCanaryLost):
		res.status, res.reason, res.message = metav1.ConditionFalse, bkv1.ReasonProbeFailed, fmt.Sprintf("the ReadWrite probe of bucket %q failed: %v", bucket, err)
	default:
		res.status, res.reason = reconcile.ProbeVerdictOf(ctx, err)
		kind := s3.KindOf(err)
		switch res.reason {
		case bkv1.ReasonBucketNotFound:
			res.message = fmt.Sprintf("bucket %q does not exist on the store; it is being created again", bucket)
		case bkv1.ReasonAccessDenied:
			res.message = fmt.Sprintf("the store refused the %s probe of bucket %q (%s)", mode, bucket, kind)
		case bkv1.ReasonProbeTimeout:
			res.message = fmt.Sprintf("bucket %q did not answer the %s probe within %s", bucket, mode, timeout)
		case bkv1.ReasonStoreUnreachable:
			res.message = fmt.Sprintf("ObjectStore %q is unreachable", scope.store.Name)
		default:
			res.message = fmt.Sprintf("the %s probe of bucket %q failed (%s)", mode, bucket, kind)
		}
	}
	if r.Prober.Observe != nil {
		r.Prober.Observe(scope.store.Name, mode, res.reason, res.latency)
	}
	return res
}

// errCanaryMismatch and errCanaryLost are data-path failures of a bucket that exists.
var (
	errCanaryMismatch = errors.New("canary object read back with different content")
	errCanaryLost     = errors.New("canary object missing right after it was written")
)

func canaryProbe(ctx context.Context, c s3.Client, bucket, key string) error {
	body := fmt.Appendf(nil, "bucketkeeper canary %d", time.Now().UnixNano())
	if err := c.PutObject(ctx, bucket, key, body); err != nil {
		return err
	}
	got, readErr := c.GetObject(ctx, bucket, key, 1024)
	// Delete every version even when the read failed, so no canary is left behind.
	delErr := c.PurgeObject(context.WithoutCancel(ctx), bucket, key)
	var s3err *s3.Error
	switch {
	case errors.As(readErr, &s3err) && s3err.Code == "NoSuchKey":
		// The bucket is there (the write succeeded); the object it just took is not.
		return errCanaryLost
	case readErr != nil:
		return readErr
	case !bytes.Equal(got, body):
		return errCanaryMismatch
	}
	return delErr
}

// recordProbe writes a probe's verdict into status, economically (after Kubernetes'
// node heartbeats, KEP-589): status changes when the verdict or the failure count does,
// and lastProbeTime is otherwise refreshed at most once per heartbeat.
func (r *Reconciler) recordProbe(patcher *reconcile.StatusPatcher, sb *bkv1.StorageBucket, res probeResult, now time.Time, probed bool) {
	p := r.Prober
	prev := reconcile.FindCondition(sb.Status.Conditions, bkv1.ConditionAvailable)
	changed := prev == nil || prev.Status != res.status || prev.Reason != res.reason
	// A bucket's first verdict is announced only when it is bad news: a first probe that
	// succeeds confirms what the creation (or binding) event already told, and a second
	// Event per new bucket would be a fifth of the API requests of provisioning it.
	// Never probed: only NotProbed or StoreUnreachable (no probe sent) came before.
	firstVerdict := sb.Status.LastProbeTime == nil

	failures := sb.Status.ConsecutiveProbeFailures
	var available *bool
	switch res.status {
	case metav1.ConditionTrue:
		failures, available = 0, ptr.To(true)
	case metav1.ConditionFalse:
		failures, available = failures+1, ptr.To(false)
	}
	if probed && (p.Naive || changed || failures != sb.Status.ConsecutiveProbeFailures || sb.Status.LastProbeTime == nil || now.Sub(sb.Status.LastProbeTime.Time) >= p.Heartbeat) {
		t := metav1.NewTime(now)
		sb.Status.LastProbeTime = &t
		sb.Status.LastProbeLatency = &metav1.Duration{Duration: res.latency.Round(time.Millisecond)}
	}
	sb.Status.Available, sb.Status.ConsecutiveProbeFailures = available, failures
	reconcile.SetCondition(&sb.Status.Conditions, sb.Generation, bkv1.ConditionAvailable, res.status, res.reason, res.message)
	if p.Available != nil {
		p.Available(client.ObjectKeyFromObject(sb), available, false)
	}
	if changed && (!firstVerdict || res.status == metav1.ConditionFalse) {
		eventType := corev1.EventTypeNormal
		if res.status != metav1.ConditionTrue {
			eventType = corev1.EventTypeWarning
		}
		patcher.AfterWrite(func() { r.Recorder.Eventf(sb, nil, eventType, res.reason, "Probe", "%s", res.message) })
	}
}
