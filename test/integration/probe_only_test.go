package integration_test

import (
	"context"
	"maps"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/controller/storagebucket"
)

// probeReconciler is a StorageBucketReconciler with a prober on a fake clock, counting
// S3 calls per bucket and operation, S3 HTTP requests per operation, and its
// Kubernetes client calls per verb.
type probeReconciler struct {
	*storagebucket.Reconciler
	calls *bucketCalls

	mu       sync.Mutex
	requests map[string]int
	k8sCalls map[string]int
}

func newProbeReconciler(t *testing.T, clk *clocktesting.FakeClock) *probeReconciler {
	t.Helper()
	h := &probeReconciler{calls: &bucketCalls{}, requests: map[string]int{}, k8sCalls: map[string]int{}}
	count := func(verb string) {
		h.mu.Lock()
		h.k8sCalls[verb]++
		h.mu.Unlock()
	}
	wrapped := interceptor.NewClient(k8sWatch, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			count("get")
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			count("list")
			return c.List(ctx, list, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			count("create")
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			count("update")
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			count("patch")
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			count("delete")
			return c.Delete(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			count("status-update")
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			count("status-patch")
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	stores := countingStores(h.calls, func(op string) {
		h.mu.Lock()
		h.requests[op]++
		h.mu.Unlock()
	})
	// Sync and heartbeat far beyond what the clock is stepped: the probes are the
	// only thing due.
	h.Reconciler = &storagebucket.Reconciler{Client: wrapped, Recorder: events.NewFakeRecorder(100), Stores: stores,
		Clock: clk, SyncInterval: 24 * time.Hour, ClusterID: clusterID,
		Prober: &storagebucket.Prober{Scheduler: &dueLog{clk: clk}, Clock: clk, Heartbeat: 24 * time.Hour, Jitter: func() float64 { return 0 }}}
	return h
}

// take returns and resets what was counted: S3 calls per bucket and operation, S3
// requests per operation, and Kubernetes calls per verb.
func (h *probeReconciler) take() (calls map[string]map[string]int, requests, k8sCalls map[string]int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	requests, k8sCalls = h.requests, h.k8sCalls
	h.requests, h.k8sCalls = map[string]int{}, map[string]int{}
	return h.calls.take(), requests, k8sCalls
}

func (h *probeReconciler) reconcile(f *fixture, sb *bkv1.StorageBucket) ctrl.Result {
	f.t.Helper()
	res, err := h.Reconcile(f.ctx, ctrl.Request{NamespacedName: objKey(sb)})
	if err != nil {
		f.t.Fatalf("reconcile %s: %v", sb.Name, err)
	}
	return res
}

// TestDueProbeIsOneHead: once a bucket is Ready, a due probe sends one HeadBucket for
// that bucket and nothing else: no other S3 request, no Kubernetes write, no list of
// Secrets, no status write for an unchanged verdict. A spec change, a deleted connection
// Secret, a store change and a suspension arriving between probes each still get the
// full pass they need, and so does the deletion.
func TestDueProbeIsOneHead(t *testing.T) {
	const interval = time.Minute
	f := newFixture(t, seaweed)
	f.waitStoreCondition(bkv1.ConditionReady, metav1.ConditionTrue)
	sb := f.bucket("lean", isolated, probeEvery(interval, bkv1.ProbeModeHead), func(sb *bkv1.StorageBucket) {
		sb.Spec.Tags = map[string]string{"team": "data"}
	})
	clk := clocktesting.NewFakeClock(time.Now())
	h := newProbeReconciler(t, clk)
	h.reconcileUntil(f, sb, "Ready and Available", func(cur *bkv1.StorageBucket) bool {
		c := findCond(cur, bkv1.ConditionAvailable)
		return c != nil && c.Status == metav1.ConditionTrue && lastVerifiedReady(cur)
	})
	got := f.get(sb)
	bucket := got.Status.BucketName
	probesBefore := got.Status.LastProbeTime

	for i := range 3 {
		h.take()
		clk.Step(2 * interval) // past the next slot, wherever the jitter put it
		res := h.reconcile(f, sb)
		calls, requests, k8sCalls := h.take()
		want := map[string]map[string]int{bucket: {"HeadBucket": 1}}
		if !maps.EqualFunc(calls, want, maps.Equal[map[string]int]) || !maps.Equal(requests, map[string]int{"HeadBucket": 1}) {
			t.Fatalf("probe %d: S3 calls per bucket %v, requests per operation %v; want one HeadBucket of %s and nothing else", i, calls, requests, bucket)
		}
		for verb, n := range k8sCalls {
			if verb != "get" {
				t.Fatalf("probe %d: %d Kubernetes %s call(s) (all: %v); a probe of a Ready bucket reads, lists and writes nothing else", i, n, verb, k8sCalls)
			}
		}
		// The next wake-up is the scheduler's: its next slot, which comes before the
		// sync (TestProbeTimerCoversTheSync), so no work-queue timer beside it.
		if due, fired, ok := h.Prober.Scheduler.Lookup(objKey(sb)); !ok || fired || !due.After(clk.Now()) || res.RequeueAfter != 0 {
			t.Fatalf("probe %d: next probe scheduled at %v (held %v, fired %v), requeue %+v; want a slot ahead and no timer", i, due, ok, fired, res)
		}
	}
	// Nothing was written for three unchanged verdicts, and they were probes: the
	// prober's state moved on (the next one is not due without a clock step).
	if cur := f.get(sb); cur.ResourceVersion != got.ResourceVersion || !cur.Status.LastProbeTime.Equal(probesBefore) {
		t.Fatalf("status changed for unchanged verdicts: %s", describe(cur.Status.Conditions))
	}
	h.reconcile(f, sb)
	if calls, _, _ := h.take(); len(calls) != 0 {
		t.Fatalf("a wake-up with no probe due sent %v", calls)
	}

	// A spec change between probes: the full pass brings the tags in line at once.
	gen := f.updateSpec(sb, func(s *bkv1.StorageBucketSpec) { s.Tags["team"] = "analytics" })
	h.reconcile(f, sb)
	calls, _, k8sCalls := h.take()
	if calls[bucket]["PutBucketTagging"] != 1 || k8sCalls["status-patch"] != 1 {
		t.Fatalf("spec change: S3 calls %v, Kubernetes calls %v; want the tags written and the status with them", calls, k8sCalls)
	}
	cur := f.get(sb)
	if cur.Status.ObservedGeneration != gen || !lastVerifiedReady(cur) {
		t.Fatalf("spec change not verified: observedGeneration %d of %d, %s", cur.Status.ObservedGeneration, gen, describe(cur.Status.Conditions))
	}
	tags, err := f.admin.GetBucketTagging(f.ctx, bucket)
	must(t, err)
	if tags["team"] != "analytics" {
		t.Fatalf("bucket tags %v after the spec change", tags)
	}

	// The connection Secret deleted between probes is written again, probe due or not.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: cur.Status.ConnectionSecretName}}
	must(t, k8s.Delete(f.ctx, secret))
	clk.Step(2 * interval)
	h.reconcile(f, sb)
	must(t, k8s.Get(f.ctx, objKey(secret), secret))
	if calls, _, k8sCalls := h.take(); calls[bucket]["HeadBucket"] != 1 || k8sCalls["create"] != 1 {
		t.Fatalf("deleted Secret: S3 calls %v, Kubernetes calls %v; want the probe and the Secret created again", calls, k8sCalls)
	}

	// The store changes between probes (a namespace selector that leaves this one
	// out): the full pass refuses, and the probe sends nothing.
	f.updateStore(func(s *bkv1.ObjectStoreSpec) {
		s.AllowedNamespaces = &metav1.LabelSelector{MatchLabels: map[string]string{"test.bucketkeeper.io/never": "true"}}
	})
	clk.Step(2 * interval)
	h.reconcile(f, sb)
	if calls, _, _ := h.take(); len(calls) != 0 {
		t.Fatalf("a namespace the store no longer allows: S3 calls %v", calls)
	}
	if c := findCond(f.get(sb), bkv1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse || c.Reason != bkv1.ReasonNamespaceNotAllowed {
		t.Fatalf("store change: %s", describe(f.get(sb).Status.Conditions))
	}
	f.updateStore(func(s *bkv1.ObjectStoreSpec) { s.AllowedNamespaces = nil })
	f.waitStoreCondition(bkv1.ConditionReady, metav1.ConditionTrue)
	h.reconcileUntil(f, sb, "Ready again once the store allows the namespace", lastVerifiedReady)

	// Suspension between probes: recorded, and no probe.
	f.updateSpec(sb, func(s *bkv1.StorageBucketSpec) { s.Suspend = true })
	h.take()
	clk.Step(2 * interval)
	h.reconcile(f, sb)
	if calls, _, _ := h.take(); len(calls) != 0 {
		t.Fatalf("a suspended bucket: S3 calls %v", calls)
	}
	if c := findCond(f.get(sb), bkv1.ConditionSuspended); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("suspension: %s", describe(f.get(sb).Status.Conditions))
	}

	// Deletion (Retain): the finalizer goes, the bucket stays.
	must(t, k8s.Delete(f.ctx, sb))
	for range 10 {
		h.reconcile(f, sb)
		if err := k8s.Get(f.ctx, objKey(sb), &bkv1.StorageBucket{}); err != nil {
			break
		}
	}
	f.waitGone(sb)
	if _, err := f.admin.HeadBucket(f.ctx, bucket); err != nil {
		t.Fatalf("the retained bucket: %v", err)
	}
}

// reconcileUntil reconciles sb until cond holds for it, as the work queue would retry.
func (h *probeReconciler) reconcileUntil(f *fixture, sb *bkv1.StorageBucket, what string, cond func(*bkv1.StorageBucket) bool) {
	f.t.Helper()
	f.eventually(60*time.Second, what, func() error {
		_, err := h.Reconcile(f.ctx, ctrl.Request{NamespacedName: objKey(sb)})
		if cur := f.get(sb); !cond(cur) {
			return errf("reconcile error %v; %s", err, describe(cur.Status.Conditions))
		}
		return nil
	})
}

// lastVerifiedReady: Ready=True with observedGeneration at the object's generation.
func lastVerifiedReady(sb *bkv1.StorageBucket) bool {
	c := findCond(sb, bkv1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == sb.Generation && sb.Status.ObservedGeneration == sb.Generation
}

// TestSpecChangeBetweenProbes: with the operator probing a Ready bucket (probes that
// skip the full pass), a tag change still reaches the bucket and the status at once.
func TestSpecChangeBetweenProbes(t *testing.T) {
	f := newFixture(t, seaweed)
	sb := f.bucket("busy", probeEvery(10*time.Second, bkv1.ProbeModeHead), func(sb *bkv1.StorageBucket) {
		sb.Spec.Tags = map[string]string{"team": "data"}
	})
	got := f.waitCondition(sb, bkv1.ConditionAvailable, metav1.ConditionTrue, bkv1.ReasonProbeSucceeded)
	before := requests.snapshot(f.store)
	f.eventually(30*time.Second, "a probe after Ready", func() error {
		if _, _, ops := since(before, requests.snapshot(f.store)); ops["HeadBucket"] < 1 {
			return errf("ops %v", ops)
		}
		return nil
	})
	gen := f.updateSpec(sb, func(s *bkv1.StorageBucketSpec) { s.Tags["team"] = "analytics" })
	f.eventually(30*time.Second, "the new tags on the bucket and in the status", func() error {
		tags, err := f.admin.GetBucketTagging(f.ctx, got.Status.BucketName)
		if err != nil {
			return err
		}
		cur := f.get(sb)
		if tags["team"] != "analytics" || cur.Status.ObservedGeneration != gen || !lastVerifiedReady(cur) {
			return errf("tags %v, observedGeneration %d of %d: %s", tags, cur.Status.ObservedGeneration, gen, describe(cur.Status.Conditions))
		}
		return nil
	})
}

// TestProbeTimerCoversTheSync: a Ready bucket whose probe comes before its next sync
// keeps no work-queue timer (RequeueAfter is zero): the probe's wake-up is the one that
// comes first, and when the sync is due that wake-up makes the full pass that corrects
// drift. A bucket probed less often than it is synced keeps the sync timer.
func TestProbeTimerCoversTheSync(t *testing.T) {
	const syncInterval = 10 * time.Minute
	f := newFixture(t, seaweed)
	f.waitStoreCondition(bkv1.ConditionReady, metav1.ConditionTrue)
	often := f.bucket("often", isolated, probeEvery(time.Minute, bkv1.ProbeModeHead), func(sb *bkv1.StorageBucket) {
		sb.Spec.Tags = map[string]string{"team": "data"}
	})
	rarely := f.bucket("rarely", isolated, probeEvery(time.Hour, bkv1.ProbeModeHead))
	clk := clocktesting.NewFakeClock(time.Now())
	h := newProbeReconciler(t, clk)
	schedule := h.Prober.Scheduler.(*dueLog)
	h.SyncInterval = syncInterval
	for _, sb := range []*bkv1.StorageBucket{often, rarely} {
		h.reconcileUntil(f, sb, sb.Name+" Ready and Available", func(cur *bkv1.StorageBucket) bool {
			c := findCond(cur, bkv1.ConditionAvailable)
			return c != nil && c.Status == metav1.ConditionTrue && lastVerifiedReady(cur)
		})
	}

	res := h.reconcile(f, often)
	due, ok := schedule.last(objKey(often))
	if !ok || due.After(clk.Now().Add(2*time.Minute)) {
		t.Fatalf("probe of %s scheduled at %v (scheduled: %v), want within its interval", often.Name, due, ok)
	}
	if res.RequeueAfter != 0 {
		t.Fatalf("%s keeps a work-queue timer (%s) its probe at %s covers", often.Name, res.RequeueAfter, due.Sub(clk.Now()))
	}
	if res := h.reconcile(f, rarely); res.RequeueAfter <= 0 || res.RequeueAfter > syncInterval {
		t.Fatalf("%s, probed hourly: RequeueAfter %s, want its next sync within %s", rarely.Name, res.RequeueAfter, syncInterval)
	}

	// Drift, then the probe wake-ups of the next sync interval, as the scheduler sends
	// them: the first one past the sync's due time brings the tags back.
	bucket := f.get(often).Status.BucketName
	must(t, f.admin.PutBucketTagging(f.ctx, bucket, map[string]string{"team": "tampered"}))
	h.take()
	synced := clk.Now() // the reconciles above synced it last
	restored := false
	for step := 0; step < 12 && !restored; step++ {
		clk.Step(time.Minute)
		if res := h.reconcile(f, often); res.RequeueAfter != 0 {
			t.Fatalf("wake-up %d: RequeueAfter %s beside the probe timer", step, res.RequeueAfter)
		}
		tags, err := f.admin.GetBucketTagging(f.ctx, bucket)
		must(t, err)
		restored = tags["team"] == "data"
		if restored && clk.Since(synced) < syncInterval {
			t.Fatalf("tags restored at wake-up %d, before the sync was due", step)
		}
	}
	if !restored {
		t.Fatalf("the drifted tag was not corrected by the probe wake-ups of a whole sync interval (S3 calls %v)", h.calls.take())
	}
}
