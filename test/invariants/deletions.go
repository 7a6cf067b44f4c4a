package invariants

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
)

// checkDeletions holds DeletionExplained: an object waiting on the operator's
// finalizer says, in a Ready=False condition, why; a StorageBucket also says what to do
// (abandon the bucket with the deletion-policy annotation). Objects held only by
// someone else's finalizer are not the operator's to explain.
func checkDeletions(snap *snapshot) []Violation {
	var out []Violation
	for i := range snap.buckets {
		sb := &snap.buckets[i]
		if sb.DeletionTimestamp.IsZero() || !controllerutil.ContainsFinalizer(sb, bkv1.Finalizer) {
			continue
		}
		if found := unexplained(sb.DeletionTimestamp, sb.Status.Conditions, bkv1.AnnotationDeletionPolicy); found != "" {
			out = append(out, Violation{Invariant: DeletionExplained, Object: claimObject(sb), Found: found})
		}
	}
	for i := range snap.accesses {
		ba := &snap.accesses[i]
		if ba.DeletionTimestamp.IsZero() || !controllerutil.ContainsFinalizer(ba, bkv1.Finalizer) {
			continue
		}
		if found := unexplained(ba.DeletionTimestamp, ba.Status.Conditions, ""); found != "" {
			out = append(out, Violation{Invariant: DeletionExplained, Object: "bucketaccess " + ba.Namespace + "/" + ba.Name, Found: found})
		}
	}
	return out
}

// unexplained says what is missing from the conditions of an object whose deletion
// waits ("" when nothing): Ready=False with a reason and a message, which mentions
// wayOut when it is set.
func unexplained(since *metav1.Time, conds []metav1.Condition, wayOut string) string {
	pending := fmt.Sprintf("deletion pending since %s", since.UTC().Format("15:04:05"))
	c := reconcile.FindCondition(conds, bkv1.ConditionReady)
	switch {
	case c == nil:
		return pending + " with no Ready condition saying why"
	case c.Status != metav1.ConditionFalse || c.Reason == "" || c.Message == "":
		return fmt.Sprintf("%s, but Ready is %s (%s: %q), which does not say why", pending, c.Status, c.Reason, c.Message)
	case wayOut != "" && !strings.Contains(c.Message, wayOut):
		return fmt.Sprintf("%s (%s: %q), without saying what to do (%s)", pending, c.Reason, c.Message, wayOut)
	}
	return ""
}
