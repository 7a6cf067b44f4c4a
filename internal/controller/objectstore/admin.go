package objectstore

import (
	"context"
	"fmt"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// adminAPI is the store's AdminAPIReady condition: with spec.adminAPI, one signed
// lookup of a bucket name that cannot exist proves the admin API answers and lets the
// operator's admin identity read buckets; without it there is no condition. The store's
// Ready does not depend on it (S3 works without it); the buckets whose quota needs it
// say so themselves.
func (r *Reconciler) adminAPI(store *bkv1.ObjectStore) sideAPI {
	api := sideAPI{
		condition:   bkv1.ConditionAdminAPIReady,
		configured:  store.Spec.AdminAPI != nil,
		failure:     "admin API check failed",
		unavailable: bkv1.ReasonAdminAPIUnavailable,
		check: func(ctx context.Context) error {
			c, err := r.Stores.QuotaClientFor(ctx, store)
			if err != nil {
				return err
			}
			return c.Check(ctx)
		},
		classify: func(err error) (denied, invalidCredentials bool) {
			kind := s3.KindOf(err)
			return kind == s3.KindAccessDenied, kind == s3.KindInvalidCredentials
		},
	}
	if api.configured {
		api.ready = fmt.Sprintf("the %s admin API answers and lets the operator read buckets", store.Spec.AdminAPI.Type)
	}
	return api
}
