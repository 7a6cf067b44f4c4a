package storagebucket

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
)

// Timings of the rig: a 10s call deadline and a 30s settle time, on a fake clock.
const (
	rigDeadline = 10 * time.Second
	rigSettle   = 30 * time.Second
	rigBucket   = "tenant-data-0123abcd"
)

// rig is a Reconciler over a fake API server holding the store "store", the
// namespace "tenant" and the claim, whose S3 client is bucket.
type rig struct {
	r      *Reconciler
	clock  *clocktesting.FakeClock
	events *events.FakeRecorder
	sb     *bkv1.StorageBucket
}

func newRig(t *testing.T, bucket *fakeS3, mutate ...func(*bkv1.StorageBucket)) *rig {
	t.Helper()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = bkv1.AddToScheme(scheme)
	sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "data", UID: "claim-uid"}}
	sb.Spec.ObjectStoreRef.Name = "store"
	sb.Spec.BucketName = rigBucket
	sb.Spec.DeletionPolicy = bkv1.DeletionPolicyDelete
	controllerutil.AddFinalizer(sb, bkv1.Finalizer)
	for _, m := range mutate {
		m(sb)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&bkv1.StorageBucket{}).
		WithObjects(&bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "store"}},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant", UID: "ns-uid"}}, sb.DeepCopy()).Build()
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(sb), sb); err != nil {
		t.Fatal(err)
	}
	rec := events.NewFakeRecorder(100)
	clock := clocktesting.NewFakeClock(time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC))
	registry := &stores.Registry{Client: c, APIReader: c, RequestTimeout: rigDeadline,
		Factory: func(context.Context, s3.Config) (s3.Client, error) { return bucket, nil }}
	return &rig{r: &Reconciler{Client: c, Recorder: rec, Stores: registry, Clock: clock, CreateSettleTime: rigSettle, ClusterID: "cluster"},
		clock: clock, events: rec, sb: sb}
}

func (g *rig) patcher() *reconcile.StatusPatcher {
	return reconcile.NewStatusPatcher(g.r.Client, g.sb, func(sb *bkv1.StorageBucket) any { return sb.Status }, nil)
}

// intentSentAt records in the claim's status a CreateBucket of the rig's bucket sent at t.
func (g *rig) intentSentAt(t time.Time) {
	at := metav1.NewTime(t).Rfc3339Copy()
	g.sb.Status.CreateIntent = &bkv1.CreateIntent{BucketName: rigBucket, UID: g.sb.UID, SentAt: &at}
}

// drained returns the Events recorded so far.
func (g *rig) drained() []string {
	var out []string
	for {
		select {
		case e := <-g.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func hasEvent(events []string, reason string) bool {
	for _, e := range events {
		if strings.Contains(e, " "+reason+" ") {
			return true
		}
	}
	return false
}

// TestCreatesLandBy: until when a CreateBucket of a claim may still land, from what this
// process saw and, for a CreateBucket it did not see end, from the intent in status.
func TestCreatesLandBy(t *testing.T) {
	g := newRig(t, &fakeS3{})
	now := g.clock.Now()
	key := client.ObjectKeyFromObject(g.sb)
	if got := g.r.createsLandBy(g.sb); !got.IsZero() {
		t.Fatalf("no intent: %v, want none", got)
	}
	g.intentSentAt(now)
	statusBound := now.Add(time.Second + rigDeadline + rigSettle)
	if got := g.r.createsLandBy(g.sb); !got.Equal(statusBound) {
		t.Errorf("a create this process did not see end: %v, want %v (sentAt + 1s + deadline + settle)", got, statusBound)
	}
	g.r.creates.ended(key, g.sb.UID, g.sb.Status.CreateIntent.SentAt.Time, time.Time{})
	if got := g.r.createsLandBy(g.sb); !got.IsZero() {
		t.Errorf("answered: %v, want none", got)
	}
	g.r.creates.ended(key, "earlier-object", g.sb.Status.CreateIntent.SentAt.Time, now.Add(time.Hour))
	if got := g.r.createsLandBy(g.sb); !got.Equal(statusBound) {
		t.Errorf("a record of an earlier object of the same name counts: %v", got)
	}
	g.r.creates.ended(key, g.sb.UID, now, now.Add(5*time.Second))
	g.r.creates.ended(key, g.sb.UID, now.Add(time.Second), time.Time{})
	if got := g.r.createsLandBy(g.sb); !got.Equal(now.Add(5 * time.Second)) {
		t.Errorf("an earlier unanswered create is forgotten by a later answered one: %v", got)
	}
	g.intentSentAt(now.Add(2 * time.Second))
	if got := g.r.createsLandBy(g.sb); !got.Equal(now.Add(3*time.Second + rigDeadline + rigSettle)) {
		t.Errorf("a later create than this process saw (another process's) is bounded from status: %v", got)
	}
	g.sb.Status.CreateIntent.SentAt = nil
	if got := g.r.createsLandBy(g.sb); !got.IsZero() {
		t.Errorf("an intent without sentAt (an earlier version's): %v, want none", got)
	}
}

// TestAnsweredIntentOutlivesTheProcess: a process that did not see a CreateBucket end
// (a restart, a new leader) reads from status that it was answered, and waits only for an
// earlier one that was not.
func TestAnsweredIntentOutlivesTheProcess(t *testing.T) {
	g := newRig(t, &fakeS3{})
	now := g.clock.Now()
	g.intentSentAt(now)
	answered(g.sb.Status.CreateIntent, time.Time{}, now)
	if got := g.r.createsLandBy(g.sb); !got.IsZero() {
		t.Errorf("answered, none earlier unanswered: %v, want none", got)
	}
	earlier := now.Add(20*time.Second + 300*time.Millisecond)
	answered(g.sb.Status.CreateIntent, earlier, now)
	if got, want := g.r.createsLandBy(g.sb), now.Add(21*time.Second); !got.Equal(want) {
		t.Errorf("answered after an earlier unanswered one: %v, want %v (rounded up to the second)", got, want)
	}
	answered(g.sb.Status.CreateIntent, now.Add(-time.Second), now)
	if g.sb.Status.CreateIntent.LandBy != nil {
		t.Errorf("a landBy already past is kept: %v", g.sb.Status.CreateIntent.LandBy)
	}
	// What this process saw of a later CreateBucket still wins over status.
	key := client.ObjectKeyFromObject(g.sb)
	g.r.creates.ended(key, g.sb.UID, now, now.Add(7*time.Second))
	if got := g.r.createsLandBy(g.sb); !got.Equal(now.Add(7 * time.Second)) {
		t.Errorf("this process's own record: %v", got)
	}
}

// TestVanishedClaimIsDeletedAsItsPolicySays: the API server removed a claim whose
// finalizer it had reported added (its deletion raced the finalizer), after this process
// sent a CreateBucket for it: no deletion pass will ever run. Its reconcile, finding it
// gone, carries out the deletion policy from what was recorded before the create; while
// the API server still has the claim (a cache behind it), nothing is touched.
func TestVanishedClaimIsDeletedAsItsPolicySays(t *testing.T) {
	bucket := &fakeS3{}
	g := newRig(t, bucket)
	ctx, key := context.Background(), client.ObjectKeyFromObject(g.sb)
	g.intentSentAt(g.clock.Now())
	g.r.creates.sending(key, g.sb)
	g.r.creates.ended(key, g.sb.UID, g.sb.Status.CreateIntent.SentAt.Time, time.Time{})
	bucket.tags = g.r.ownerIn(g.sb, "ns-uid").tags()

	if res, err := g.r.vanished(ctx, key); err != nil || res.RequeueAfter == 0 || bucket.absent {
		t.Fatalf("claim still on the API server: result %+v, err %v, bucket deleted %v; want a retry and nothing touched", res, err, bucket.absent)
	}

	live := &bkv1.StorageBucket{}
	if err := g.r.Client.Get(ctx, key, live); err != nil {
		t.Fatal(err)
	}
	live.Finalizers = nil
	if err := g.r.Client.Update(ctx, live); err != nil {
		t.Fatal(err)
	}
	if err := g.r.Client.Delete(ctx, live); err != nil {
		t.Fatal(err)
	}
	if res, err := g.r.vanished(ctx, key); err != nil || !res.IsZero() {
		t.Fatalf("vanished = %+v, %v; want done", res, err)
	}
	if !bucket.absent {
		t.Errorf("the vanished claim's bucket is still there (Delete policy)")
	}
	if ev := g.drained(); !hasEvent(ev, bkv1.EventReasonBucketDeleted) {
		t.Errorf("events %v, want %s", ev, bkv1.EventReasonBucketDeleted)
	}
	if _, ok := g.r.creates.claim(key); ok {
		t.Errorf("the claim is still remembered once its deletion was carried out")
	}
	if res, err := g.r.vanished(ctx, key); err != nil || !res.IsZero() || len(bucket.writes) != 1 {
		t.Errorf("a second look: %+v, %v, store writes %v; want nothing more", res, err, bucket.writes)
	}
}
