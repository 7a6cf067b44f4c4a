package store

import (
	"context"
	"fmt"
	"time"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	"github.com/bucketkeeper/bucketkeeper/internal/memo"
)

// AccessProviderOf returns the store's effective access provider: the explicit one,
// else Static when the store names application credentials (the behaviour before
// accessProvider existed), else None.
func AccessProviderOf(store *bkv1.ObjectStore) bkv1.AccessProviderType {
	return store.Spec.AccessProviderType()
}

// IAMAPIOf is the API that manages a store's users: spec.accessProvider.iam.api, else
// the AWS IAM API.
func IAMAPIOf(store *bkv1.ObjectStore) iam.API {
	if p := store.Spec.AccessProvider; p != nil && p.IAM != nil && p.IAM.API == bkv1.IAMAPIMinIO {
		return iam.APIMinIO
	}
	return iam.APIAWS
}

// iamTimeoutOf is the deadline of each of a store's IAM calls: MinIO's admin API, whose
// calls derive argon2id keys, gets longer than the IAM APIs.
func iamTimeoutOf(store *bkv1.ObjectStore) time.Duration {
	if IAMAPIOf(store) == iam.APIMinIO {
		return defaults.MinIOAdminRequestTimeout
	}
	return defaults.IAMRequestTimeout
}

// IAMConfigOf says where a store's IAM API is: the configured endpoint, else the
// store's S3 endpoint (SeaweedFS serves both on one port, MinIO its admin API), else
// AWS IAM.
func IAMConfigOf(store *bkv1.ObjectStore) (endpoint, region string) {
	endpoint, region = store.Spec.Endpoint, iam.DefaultRegion
	if p := store.Spec.AccessProvider; p != nil && p.IAM != nil {
		if p.IAM.Endpoint != "" {
			endpoint = p.IAM.Endpoint
		}
		if p.IAM.Region != "" {
			region = p.IAM.Region
		}
	}
	return endpoint, region
}

// AccessProviders hands out one IAM driver per ObjectStore, rebuilt when the store's
// spec or its credentials Secret changes. The operator's store credentials sign IAM
// requests; they never leave the operator.
type AccessProviders struct {
	Stores  *Registry
	Factory iam.Factory
	// Observer is called for every IAM request, with the store's name; may be nil.
	Observer func(store, operation string, httpStatus int, err error)

	drivers memo.Versioned[string, iam.Driver]
}

// DriverFor returns the IAM driver of a store whose access provider is IAM.
func (a *AccessProviders) DriverFor(ctx context.Context, store *bkv1.ObjectStore) (iam.Driver, error) {
	if AccessProviderOf(store) != bkv1.AccessProviderIAM {
		return nil, &Error{Reason: bkv1.ReasonAccessProviderNotIAM,
			Message: fmt.Sprintf("ObjectStore %q does not issue per-application credentials: its spec.accessProvider.type is %s, not IAM", store.Name, AccessProviderOf(store))}
	}
	creds, credsVersion, err := a.Stores.credentials(ctx, store.Spec.CredentialsSecretRef)
	if err != nil {
		return nil, err
	}
	version := fmt.Sprintf("%s/%d/%s", store.UID, store.Generation, credsVersion)
	return a.drivers.Get(store.Name, version, func() (iam.Driver, error) {
		endpoint, region := IAMConfigOf(store)
		d, err := a.Factory(ctx, iam.Config{
			API:                   IAMAPIOf(store),
			Endpoint:              endpoint,
			Region:                region,
			AccessKeyID:           creds[bkv1.CredentialsKeyAccessKeyID],
			SecretAccessKey:       creds[bkv1.CredentialsKeySecretAccessKey],
			SessionToken:          creds[bkv1.CredentialsKeySessionToken],
			CABundle:              []byte(store.Spec.CABundle),
			InsecureSkipTLSVerify: store.Spec.InsecureSkipTLSVerify,
			Timeout:               iamTimeoutOf(store),
			Observer:              a.observer(store.Name),
		})
		if err != nil {
			return nil, &Error{Reason: bkv1.ReasonAccessProviderUnavailable, Message: fmt.Sprintf("cannot build an IAM client for store %s: %v", store.Name, err)}
		}
		return d, nil
	})
}

// Forget drops the driver of a deleted store.
func (a *AccessProviders) Forget(store string) { a.drivers.Forget(store) }

// observer is Observer bound to one store's name, or nil without an Observer.
func (a *AccessProviders) observer(store string) func(op string, status int, err error) {
	if a.Observer == nil {
		return nil
	}
	return func(op string, status int, err error) { a.Observer(store, op, status, err) }
}
