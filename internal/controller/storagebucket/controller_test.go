package storagebucket

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
)

// TestSummarizeWhileTheStoreIsChecked: while an edited ObjectStore waits for its check,
// a verified bucket keeps its conditions whole (no Ready flip, no status write), and a
// bucket without a verdict for its spec says it waits.
func TestSummarizeWhileTheStoreIsChecked(t *testing.T) {
	verified := func() *bkv1.StorageBucket {
		sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "data", Generation: 2}}
		sb.Status.ObservedGeneration = 2
		for _, typ := range []string{bkv1.ConditionProvisioned, bkv1.ConditionConfigured, bkv1.ConditionReady} {
			reconcile.SetCondition(&sb.Status.Conditions, 2, typ, metav1.ConditionTrue, "Done", "verified")
		}
		return sb
	}
	unchecked := func() *reconcile.StepError {
		store := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "s3", Generation: 5}}
		reconcile.SetCondition(&store.Status.Conditions, 4, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady, "ok")
		se, _ := storeHealth(store).(*reconcile.StepError)
		return se
	}
	r := &Reconciler{}

	sb := verified()
	before := sb.Status.DeepCopy()
	res, err := r.summarize(context.Background(), sb, nil, bkv1.ConditionProvisioned, unchecked())
	if err != nil || res.RequeueAfter != r.SyncInterval {
		t.Fatalf("summarize = %+v, %v; want to wait for the store's watch", res, err)
	}
	if !equality.Semantic.DeepEqual(before, &sb.Status) {
		t.Errorf("a verified bucket's status changed while its store was checked:\nbefore %+v\nafter  %+v", before, sb.Status)
	}

	// A spec the operator has not verified yet has no verdict to keep.
	sb = verified()
	sb.Generation = 3
	if _, err := r.summarize(context.Background(), sb, nil, bkv1.ConditionProvisioned, unchecked()); err != nil {
		t.Fatal(err)
	}
	ready := reconcile.FindCondition(sb.Status.Conditions, bkv1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != bkv1.ReasonObjectStoreNotReady {
		t.Errorf("Ready of an unverified spec = %+v, want False, %s", ready, bkv1.ReasonObjectStoreNotReady)
	}
	if !reconcile.ConditionIsTrue(sb.Status.Conditions, bkv1.ConditionReconciling) {
		t.Errorf("an unverified spec waiting for its store is not Reconciling: %+v", sb.Status.Conditions)
	}
}
