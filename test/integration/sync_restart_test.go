package integration_test

import (
	"fmt"
	"maps"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// TestRestartDoesNotResyncAtOnce: after a restart (a reconciler with nothing in memory),
// Ready buckets whose desired configuration matches status.applied.hash send no request
// at all at start; each is checked at its own slot within the sync interval. A bucket
// whose spec changed while no operator ran is synced at once. Time is a fake clock.
func TestRestartDoesNotResyncAtOnce(t *testing.T) {
	const interval = time.Hour
	f := newFixture(t, seaweed)
	f.waitStoreCondition(bkv1.ConditionReady, metav1.ConditionTrue)
	spec := func(sb *bkv1.StorageBucket) {
		isolated(sb)
		sb.Spec.DeletionPolicy = bkv1.DeletionPolicyDelete
		sb.Spec.Versioning = bkv1.VersioningEnabled
		sb.Spec.Tags = map[string]string{"team": "data"}
		sb.Spec.Lifecycle = &bkv1.Lifecycle{Rules: []bkv1.LifecycleRule{{ID: "tmp", Prefix: "tmp/", ExpirationDays: ptr32(1)}}}
	}
	var steady []*bkv1.StorageBucket
	for i := range 4 {
		steady = append(steady, f.bucket(fmt.Sprintf("steady-%d", i), spec))
	}
	changed := f.bucket("changed", spec)
	all := append(append([]*bkv1.StorageBucket{}, steady...), changed)

	before := newHandReconciler(t, clocktesting.NewFakeClock(time.Now()), interval)
	bucketOf := map[string]string{}
	for _, sb := range all {
		bucketOf[sb.Name] = before.reconcileUntilReady(f, sb).Status.BucketName
	}
	// The record of what was applied rides on the status write creation makes anyway:
	// the intent to create, then the verdict; nothing more per bucket.
	if _, writes := before.snapshot(); len(writes) != len(all) {
		t.Errorf("status writes while creating: %v", writes)
	} else {
		for name, n := range writes {
			if n != 2 {
				t.Errorf("%s: %d status writes to create and configure, want 2 (intent, verdict)", name, n)
			}
		}
	}
	// While no operator runs, one spec changes.
	f.updateSpec(changed, func(s *bkv1.StorageBucketSpec) { s.Tags = map[string]string{"team": "data", "env": "prod"} })

	clk := clocktesting.NewFakeClock(time.Now())
	r := newHandReconciler(t, clk, interval)
	reconcileAll := func(sbs []*bkv1.StorageBucket) map[string]time.Duration {
		t.Helper()
		requeue := map[string]time.Duration{}
		for _, sb := range sbs {
			res, err := r.Reconcile(f.ctx, ctrl.Request{NamespacedName: objKey(sb)})
			must(t, err)
			requeue[sb.Name] = res.RequeueAfter
		}
		return requeue
	}

	requeue := reconcileAll(all)
	calls := r.calls.take()
	requests, writes := r.snapshot()
	for _, sb := range steady {
		if n := calls[bucketOf[sb.Name]]; len(n) != 0 {
			t.Errorf("%s (unchanged, Ready) was read at start: %v", sb.Name, n)
		}
		if writes[sb.Name] != 0 {
			t.Errorf("%s: %d status writes at start", sb.Name, writes[sb.Name])
		}
		if d := requeue[sb.Name]; d <= 0 || d > interval {
			t.Errorf("%s: requeued after %s, want its slot within the interval", sb.Name, d)
		}
	}
	got := calls[bucketOf[changed.Name]]
	if got["GetBucketTagging"] == 0 || got["PutBucketTagging"] != 1 || got["GetBucketLifecycle"] != 1 || got["GetBucketVersioning"] != 1 {
		t.Errorf("the changed bucket was not synced at once: %v", got)
	}
	if writes[changed.Name] != 1 {
		t.Errorf("the changed bucket: %d status writes, want 1", writes[changed.Name])
	}
	// Every HTTP request at start was the changed bucket's.
	sum := 0
	for _, n := range got {
		sum += n
	}
	total := 0
	for _, n := range requests {
		total += n
	}
	if total != sum {
		t.Errorf("%d S3 requests at start (%v), but the changed bucket made %d calls (%v)", total, requests, sum, got)
	}
	t.Logf("at start: %d requests, all for the changed bucket; the others wait %v", total, requeue)

	// The checks come one by one, each at its own slot.
	order := append([]*bkv1.StorageBucket{}, steady...)
	for i := 1; i < len(order); i++ {
		for j := i; j > 0 && requeue[order[j].Name] < requeue[order[j-1].Name]; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	elapsed := time.Duration(0)
	for _, next := range order {
		clk.Step(requeue[next.Name] - elapsed)
		elapsed = requeue[next.Name]
		reconcileAll(steady)
		calls := r.calls.take()
		_, writes := r.snapshot()
		for _, sb := range steady {
			due := requeue[sb.Name] <= elapsed
			n := calls[bucketOf[sb.Name]]
			switch {
			case sb.Name == next.Name && (n["HeadBucket"] != 1 || n["GetBucketTagging"] == 0 || n["GetBucketLifecycle"] != 1):
				t.Errorf("%s was not checked at its slot (+%s): %v", sb.Name, elapsed, n)
			case !due && len(n) != 0:
				t.Errorf("%s was read at +%s, before its slot +%s: %v", sb.Name, elapsed, requeue[sb.Name], n)
			case due && sb.Name != next.Name && len(n) != 0:
				t.Errorf("%s was read again at +%s, after its check at +%s: %v", sb.Name, elapsed, requeue[sb.Name], n)
			}
			for op := range n {
				if s3.IsMutating(op) {
					t.Errorf("%s: a check of a converged bucket called %s", sb.Name, op)
				}
			}
		}
		if len(writes) != 0 {
			t.Errorf("status writes at +%s: %v", elapsed, writes)
		}
	}
	// One interval on, each is checked once more, and in steady state nothing is written.
	clk.Step(interval)
	reconcileAll(steady)
	calls = r.calls.take()
	_, writes = r.snapshot()
	for _, sb := range steady {
		if n := calls[bucketOf[sb.Name]]; n["HeadBucket"] != 1 {
			t.Errorf("%s: one interval later, %v", sb.Name, n)
		}
	}
	if len(writes) != 0 {
		t.Errorf("status writes in steady state: %v", maps.Clone(writes))
	}

	for _, sb := range all {
		must(t, k8s.Delete(f.ctx, sb))
		for range 10 {
			if _, err := r.Reconcile(f.ctx, ctrl.Request{NamespacedName: objKey(sb)}); err == nil {
				if err := k8s.Get(f.ctx, objKey(sb), &bkv1.StorageBucket{}); err != nil {
					break
				}
			}
		}
		f.waitGone(sb)
	}
}
