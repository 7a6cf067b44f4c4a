package invariants

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

func TestStuckClaim(t *testing.T) {
	w := newWorld(t)
	deleting(w.sb)
	// Still Ready from before its deletion: nothing says why it waits.
	got := w.check(t)
	var stuck []Violation
	for _, v := range got {
		if v.Invariant == DeletionExplained {
			stuck = append(stuck, v)
		}
	}
	expectOnly(t, stuck, DeletionExplained, "storagebucket tenant-a/data", "does not say why")

	// Why, but not what to do.
	w.sb.Status.Conditions[0] = metav1.Condition{Type: bkv1.ConditionReady, Status: metav1.ConditionFalse, Reason: bkv1.ReasonBucketNotEmpty, Message: "bucket is not empty"}
	w.ba.Spec.Buckets = nil // the access no longer grants it: keep the finding to the claim
	w.without(string(w.ba.UID), "app-key")
	delete(w.iam.users, userOf(w.ba))
	expectOnly(t, w.check(t), DeletionExplained, "storagebucket tenant-a/data", "without saying what to do")

	// Why and what to do: explained.
	w.sb.Status.Conditions[0].Message = "bucket is not empty; to abandon the bucket instead, annotate this StorageBucket " + bkv1.AnnotationDeletionPolicy + "=" + bkv1.DeletionPolicyOrphan
	expectNone(t, w.check(t))

	// Held only by someone else's finalizer: not the operator's to explain.
	w.sb.Finalizers = []string{"example.com/backup"}
	w.sb.Status.Conditions = nil
	expectNone(t, w.check(t))
}

func TestStuckAccess(t *testing.T) {
	w := newWorld(t)
	deleting(w.ba)
	delete(w.iam.users, userOf(w.ba))
	expectOnly(t, w.check(t), DeletionExplained, "bucketaccess tenant-a/app", "does not say why")
}
