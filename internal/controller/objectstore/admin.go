package objectstore

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// checkAdminAPI sets the store's AdminAPIReady condition: with spec.adminAPI, one
// signed lookup of a bucket name that cannot exist proves the admin API answers and
// lets the operator's admin identity read buckets; without it there is no condition.
// The store's Ready does not depend on it (S3 works without it); the buckets whose
// quota needs it say so themselves.
func (r *Reconciler) checkAdminAPI(ctx context.Context, store *bkv1.ObjectStore) {
	if store.Spec.AdminAPI == nil {
		reconcile.RemoveCondition(&store.Status.Conditions, bkv1.ConditionAdminAPIReady)
		return
	}
	status, reason, message := metav1.ConditionTrue, bkv1.ReasonReady, fmt.Sprintf("the %s admin API answers and lets the operator read buckets", store.Spec.AdminAPI.Type)
	c, err := r.Stores.QuotaClientFor(ctx, store)
	if err == nil {
		err = c.Check(ctx)
	}
	if err != nil {
		status, reason, message = metav1.ConditionFalse, bkv1.ReasonAdminAPIUnavailable, fmt.Sprintf("admin API check failed: %v", err)
		switch s3.KindOf(err) {
		case s3.KindAccessDenied:
			reason = bkv1.ReasonAccessDenied
		case s3.KindInvalidCredentials:
			reason = bkv1.ReasonCredentialsInvalid
		}
	}
	reconcile.SetCondition(&store.Status.Conditions, store.Generation, bkv1.ConditionAdminAPIReady, status, reason, message)
}
