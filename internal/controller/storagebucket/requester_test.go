package storagebucket

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// headCounter answers HeadBucket and counts the calls per bucket.
type headCounter struct {
	s3.Client
	heads map[string]int
}

func (h *headCounter) HeadBucket(_ context.Context, bucket string) (string, error) {
	h.heads[bucket]++
	return "", nil
}

// lastSchedule remembers the due time the reconciler last asked the scheduler for, and
// says it fired once the clock reaches it, as probe.Scheduler would have by then.
type lastSchedule struct {
	clk clock.PassiveClock
	due time.Time
}

func (s *lastSchedule) Schedule(_ types.NamespacedName, _ string, due time.Time) { s.due = due }
func (s *lastSchedule) Forget(types.NamespacedName)                              { s.due = time.Time{} }
func (s *lastSchedule) Lookup(types.NamespacedName) (time.Time, bool, bool) {
	return s.due, !s.due.IsZero() && !s.clk.Now().Before(s.due), !s.due.IsZero()
}

// TestProbeRequestsAreBoundedAndCoalesced: on-demand probes happen at most once per
// MinRequestInterval. Requests inside it write no status and are served together by
// one probe when it ends (the scheduler is asked to wake the bucket then), and any
// probe that runs meanwhile serves them too.
func TestProbeRequestsAreBoundedAndCoalesced(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(t0)
	sched := &lastSchedule{clk: clk}
	s3c := &headCounter{heads: map[string]int{}}
	r := &Reconciler{Recorder: events.NewFakeRecorder(100), Clock: clk, Prober: &Prober{
		Scheduler: sched, Clock: clk, Heartbeat: 5 * time.Minute, MinRequestInterval: 10 * time.Second,
		Jitter: func() float64 { return 0.5 },
	}}
	sb := &bkv1.StorageBucket{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sb", UID: "u1", Generation: 1},
		Spec:       bkv1.StorageBucketSpec{Probe: bkv1.ProbeSpec{Interval: &metav1.Duration{Duration: time.Hour}}},
	}
	sb.Status.BucketName = "b"
	reconcile.SetCondition(&sb.Status.Conditions, 1, bkv1.ConditionProvisioned, metav1.ConditionTrue, bkv1.ReasonBucketCreated, "created")
	scope := &bucketScope{sb: sb, owner: testOwner(sb), store: &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "store"}}, s3: s3c, bucket: "b"}

	// pass runs the availability step at now; it reports whether status changed (what
	// the status patcher would write).
	pass := func(at time.Duration) (statusChanged bool) {
		t.Helper()
		clk.SetTime(t0.Add(at))
		before := sb.Status.DeepCopy()
		r.reconcileAvailability(context.Background(), scope, reconcile.NewStatusPatcher(nil, sb, func(sb *bkv1.StorageBucket) any { return sb.Status }, nil), nil)
		return !equality.Semantic.DeepEqual(*before, sb.Status)
	}
	request := func(value string) { sb.Annotations = map[string]string{bkv1.AnnotationProbeRequestedAt: value} }
	expect := func(step string, heads int, handled string) {
		t.Helper()
		if s3c.heads["b"] != heads || sb.Status.LastHandledProbeRequest != handled {
			t.Fatalf("%s: %d HeadBucket, lastHandledProbeRequest %q; want %d, %q", step, s3c.heads["b"], sb.Status.LastHandledProbeRequest, heads, handled)
		}
	}

	pass(0)
	expect("first probe", 1, "")

	// The first request is served at once.
	request("r1")
	if !pass(time.Second) {
		t.Fatal("the served request was not recorded in status")
	}
	expect("first request", 2, "r1")

	// Twenty more within the interval: no probe, no status change, a wake-up at its end.
	for i := range 20 {
		request(fmt.Sprintf("r%d", i+2))
		if pass(time.Second + time.Duration(i)*400*time.Millisecond) {
			t.Fatalf("deferred request r%d changed status: %+v", i+2, sb.Status)
		}
	}
	expect("requests inside the interval", 2, "r1")
	if want := t0.Add(11 * time.Second); !sched.due.Equal(want) {
		t.Fatalf("scheduler asked to wake the bucket at %s, want the interval's end %s", sched.due, want)
	}
	if pass(11*time.Second - time.Millisecond) {
		t.Fatal("status changed before the interval's end")
	}
	expect("just before the interval's end", 2, "r1")

	// At the end one probe serves them all, recording the latest value.
	if !pass(11 * time.Second) {
		t.Fatal("the coalesced request was not recorded in status")
	}
	expect("interval's end", 3, "r21")
	if sched.due.Sub(t0) < time.Minute {
		t.Fatalf("after serving, the next wake-up is %s, want the periodic slot", sched.due.Sub(t0))
	}
	pass(11 * time.Second) // a duplicate wake-up
	expect("duplicate wake-up", 3, "r21")

	// A probe that runs for another reason (a spec change) serves a deferred request.
	request("r22")
	pass(12 * time.Second)
	expect("deferred again", 3, "r21")
	sb.Generation = 2
	pass(13 * time.Second)
	expect("spec change", 4, "r22")

	// And that probe starts a new interval.
	request("r23")
	pass(14 * time.Second)
	expect("right after", 4, "r22")
	if want := t0.Add(23 * time.Second); !sched.due.Equal(want) {
		t.Fatalf("wake-up at %s, want %s", sched.due, want)
	}
	pass(23 * time.Second)
	expect("next interval", 5, "r23")

	// A bucket last seen with its store unreachable is probed on every pass, but not
	// on every new value: while a request is deferred, so is that probe.
	reconcile.SetCondition(&sb.Status.Conditions, sb.Generation, bkv1.ConditionAvailable, metav1.ConditionUnknown, bkv1.ReasonStoreUnreachable, "down")
	for i, at := range []time.Duration{24 * time.Second, 25 * time.Second, 32 * time.Second} {
		request(fmt.Sprintf("r%d", 24+i))
		pass(at)
	}
	expect("store unreachable, requests deferred", 5, "r23")
	pass(33 * time.Second)
	expect("store unreachable, interval's end", 6, "r26")
}
