package store

import (
	"context"
	"fmt"

	"golang.org/x/time/rate"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/quota"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// quotaEntry is a store's admin-API client as of one version of the store and its
// admin credentials.
// QuotaClientFor returns the client of the store's admin API (spec.adminAPI), rebuilt
// when the store or the admin credentials Secret changes. A store without an adminAPI
// has none: the error is a NotImplemented *s3.Error, so a bucket's quota on it reads as
// NotSupportedByStore. The admin credentials sign admin requests only; they are never
// copied anywhere.
func (r *Registry) QuotaClientFor(ctx context.Context, store *bkv1.ObjectStore) (quota.Client, error) {
	api := store.Spec.AdminAPI
	if api == nil {
		return nil, &s3.Error{Op: "SetBucketQuota", Kind: s3.KindNotImplemented}
	}
	creds, credsVersion, err := r.credentials(ctx, &api.CredentialsSecretRef)
	if err != nil {
		return nil, err
	}
	// The store's S3 clients hold its request budget; admin requests spend it too.
	if _, err := r.ClientFor(ctx, store); err != nil {
		return nil, err
	}
	var limiter *rate.Limiter
	if e, ok := r.clients.Current(store.Name); ok {
		limiter = e.limiter
	}
	version := fmt.Sprintf("%s/%d/%s/%p", store.UID, store.Generation, credsVersion, limiter)
	return r.quotas.Get(store.Name, version, func() (quota.Client, error) {
		factory := r.QuotaFactory
		if factory == nil {
			factory = quota.New
		}
		c, err := factory(quota.Config{
			Type:                  api.Type,
			Endpoint:              store.Spec.Endpoint,
			Region:                Region(store),
			AccessKeyID:           creds[bkv1.CredentialsKeyAccessKeyID],
			SecretAccessKey:       creds[bkv1.CredentialsKeySecretAccessKey],
			CABundle:              []byte(store.Spec.CABundle),
			InsecureSkipTLSVerify: store.Spec.InsecureSkipTLSVerify,
			RequestTimeout:        r.RequestTimeout,
			Limiter:               limiter,
			Observer:              r.observer(store.Name),
		})
		if err != nil {
			return nil, &Error{Reason: bkv1.ReasonAdminAPIUnavailable, Message: fmt.Sprintf("cannot build an admin API client for store %s: %v", store.Name, err)}
		}
		return c, nil
	})
}
