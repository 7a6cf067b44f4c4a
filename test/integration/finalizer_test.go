package integration_test

import (
	"context"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
)

const otherFinalizer = "example.com/backup-protection"

// TestFinalizerPatchKeepsOtherFinalizers races the operator's finalizer change against
// another controller's: the operator works from a copy read before the other finalizer
// was added (as a reconcile from a stale cache does). A merge patch replaces the whole
// list, so without the optimistic lock it would drop the other finalizer; with it the
// patch conflicts, and the retry from a fresh copy keeps both.
func TestFinalizerPatchKeepsOtherFinalizers(t *testing.T) {
	f := newFixture(t, seaweed)
	isolated := func(sb *bkv1.StorageBucket) { sb.Labels = map[string]string{isolatedLabel: f.ns} } // no manager touches it
	addOther := func(sb *bkv1.StorageBucket) *bkv1.StorageBucket {
		stale := f.get(sb)
		fresh := stale.DeepCopy()
		controllerutil.AddFinalizer(fresh, otherFinalizer)
		must(t, k8s.Update(f.ctx, fresh))
		return stale
	}
	addOurs := func(o *bkv1.StorageBucket) { controllerutil.AddFinalizer(o, bkv1.Finalizer) }
	t.Cleanup(func() {
		for _, name := range []string{"raced", "premise"} {
			sb := &bkv1.StorageBucket{}
			if err := k8s.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: name}, sb); err == nil {
				sb.Finalizers = nil
				_ = k8s.Update(f.ctx, sb)
			}
		}
	})

	// The premise: a plain merge patch from the stale copy drops the other finalizer.
	premise := f.bucket("premise", isolated)
	stale := addOther(premise)
	before := stale.DeepCopy()
	addOurs(stale)
	must(t, k8s.Patch(f.ctx, stale, client.MergeFrom(before)))
	if got := f.get(premise).Finalizers; slices.Contains(got, otherFinalizer) {
		t.Fatalf("premise failed: a merge patch from a stale copy kept %v; the race below proves nothing", got)
	}

	raced := f.bucket("raced", isolated)
	stale = addOther(raced)
	err := reconcile.PatchMetadata(f.ctx, k8s, stale, addOurs)
	if !apierrors.IsConflict(err) {
		t.Fatalf("finalizer patch from a stale copy: err = %v, want a conflict", err)
	}
	if got := f.get(raced).Finalizers; !slices.Equal(got, []string{otherFinalizer}) {
		t.Fatalf("after the refused patch finalizers = %v, want only %s", got, otherFinalizer)
	}
	must(t, reconcile.PatchMetadata(f.ctx, k8s, f.get(raced), addOurs))
	if got := sets.New(f.get(raced).Finalizers...); !got.Equal(sets.New(otherFinalizer, bkv1.Finalizer)) {
		t.Fatalf("after the retry finalizers = %v, want both", sets.List(got))
	}
}

// TestRemovedFinalizerComesBack: the operator is not woken by its own finalizer's
// addition, but is by its removal: a finalizer taken off a provisioned bucket is put
// back, or deleting the claim would skip the deletion policy. The manager here resyncs
// and probes hourly, so only the removal's own event can bring it back within the test.
func TestRemovedFinalizerComesBack(t *testing.T) {
	f := newFixture(t, seaweed)
	ctx, stop := context.WithCancel(f.ctx)
	done, err := startManager(ctx, operator.Options{WatchLabelSelector: isolatedLabel + "=" + f.ns, SyncInterval: time.Hour})
	must(t, err)
	t.Cleanup(func() { stop(); <-done })
	sb := f.bucket("unguarded", func(sb *bkv1.StorageBucket) {
		sb.Labels = map[string]string{isolatedLabel: f.ns}
		sb.Spec.Probe = bkv1.ProbeSpec{Interval: &metav1.Duration{Duration: time.Hour}}
	})
	f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	cur := f.get(sb)
	before := cur.DeepCopy()
	controllerutil.RemoveFinalizer(cur, bkv1.Finalizer)
	must(t, k8s.Patch(f.ctx, cur, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})))
	f.eventually(30*time.Second, "the finalizer back", func() error {
		if got := f.get(sb).Finalizers; !slices.Contains(got, bkv1.Finalizer) {
			return errf("finalizers %v", got)
		}
		return nil
	})
}
