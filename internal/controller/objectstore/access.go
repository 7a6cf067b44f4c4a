package objectstore

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
)

// checkAccessProvider sets the store's AccessProviderReady condition: for IAM, a
// signed ListUsers of one item proves the endpoint answers and the operator may
// manage users; other providers carry no condition.
func (r *Reconciler) checkAccessProvider(ctx context.Context, store *bkv1.ObjectStore) {
	if r.Access == nil || stores.AccessProviderOf(store) != bkv1.AccessProviderIAM {
		reconcile.RemoveCondition(&store.Status.Conditions, bkv1.ConditionAccessProviderReady)
		return
	}
	status, reason, message := metav1.ConditionTrue, bkv1.ReasonReady, "the IAM endpoint answers and lets the operator manage users"
	d, err := r.Access.DriverFor(ctx, store)
	if err == nil {
		err = d.Check(ctx)
	}
	if err != nil {
		status, reason, message = metav1.ConditionFalse, bkv1.ReasonAccessProviderUnavailable, fmt.Sprintf("IAM check failed: %v", err)
		switch iam.KindOf(err) {
		case iam.KindAccessDenied:
			reason = bkv1.ReasonAccessDenied
		case iam.KindInvalidCredentials:
			reason = bkv1.ReasonCredentialsInvalid
		}
	}
	reconcile.SetCondition(&store.Status.Conditions, store.Generation, bkv1.ConditionAccessProviderReady, status, reason, message)
}
