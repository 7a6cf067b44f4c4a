package objectstore

import (
	"context"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
)

// accessProviderAPI is the store's AccessProviderReady condition: for IAM, a signed
// ListUsers of one item proves the endpoint answers and the operator may manage users;
// other providers carry no condition.
func (r *Reconciler) accessProviderAPI(store *bkv1.ObjectStore) sideAPI {
	return sideAPI{
		condition:   bkv1.ConditionAccessProviderReady,
		configured:  r.Access != nil && stores.AccessProviderOf(store) == bkv1.AccessProviderIAM,
		ready:       "the IAM endpoint answers and lets the operator manage users",
		failure:     "IAM check failed",
		unavailable: bkv1.ReasonAccessProviderUnavailable,
		check: func(ctx context.Context) error {
			d, err := r.Access.DriverFor(ctx, store)
			if err != nil {
				return err
			}
			return d.Check(ctx)
		},
		classify: func(err error) (denied, invalidCredentials bool) {
			kind := iam.KindOf(err)
			return kind == iam.KindAccessDenied, kind == iam.KindInvalidCredentials
		},
	}
}
