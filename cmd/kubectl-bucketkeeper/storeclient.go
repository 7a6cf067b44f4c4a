package main

import (
	"context"
	"fmt"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/quota"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// The one verb that talks to a store, adopt, does it through the operator's own S3 and
// admin-API clients (internal/s3, internal/quota), built from the ObjectStore and the
// Secrets it names as the operator builds them, but read-only: a middleware refuses
// every operation that would change the store before it is signed or sent, so no flag,
// bug or future edit of the verb can make it write there.

// storeReadOnly is the error of a write the plugin refused to send.
type storeReadOnly struct{ op string }

func (e *storeReadOnly) Error() string {
	return fmt.Sprintf("the plugin only reads from stores: %s was not sent", e.op)
}

// readOnlyMiddleware fails every mutating S3 operation (s3.IsMutating) at the start of
// the SDK's stack.
func readOnlyMiddleware(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("bucketkeeperPluginReadOnly",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if op := awsmiddleware.GetOperationName(ctx); s3.IsMutating(op) {
				return middleware.InitializeOutput{}, middleware.Metadata{}, &storeReadOnly{op: op}
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.Before)
}

// storeCredentials reads the Secret a store names: the caller needs get on it, which a
// platform admin has and a tenant has not.
func storeCredentials(ctx context.Context, c client.Client, ref *bkv1.SecretReference, what string) (access, secret, token string, err error) {
	s := &corev1.Secret{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return "", "", "", fmt.Errorf("the %s Secret %s/%s does not exist", what, ref.Namespace, ref.Name)
		}
		return "", "", "", fmt.Errorf("reading the %s Secret %s/%s: %w", what, ref.Namespace, ref.Name, err)
	}
	access, secret = string(s.Data[bkv1.CredentialsKeyAccessKeyID]), string(s.Data[bkv1.CredentialsKeySecretAccessKey])
	if access == "" || secret == "" {
		return "", "", "", fmt.Errorf("the %s Secret %s/%s lacks %s or %s", what, ref.Namespace, ref.Name,
			bkv1.CredentialsKeyAccessKeyID, bkv1.CredentialsKeySecretAccessKey)
	}
	return access, secret, string(s.Data[bkv1.CredentialsKeySessionToken]), nil
}

// storeRegion is the region the operator signs a store's requests for.
func storeRegion(store *bkv1.ObjectStore) string {
	return orDefault(store.Spec.Region, defaults.StoreRegion)
}

// storeClient builds a read-only S3 client for the store with the credentials its
// Secret holds, every call bounded by timeout and paced by the store's request budget.
// A store without credentialsSecretRef is reached with the SDK's default chain: yours,
// which may not be the operator's.
func storeClient(ctx context.Context, c client.Client, store *bkv1.ObjectStore, timeout time.Duration) (s3.Client, error) {
	cfg := s3.Config{
		Endpoint:              store.Spec.Endpoint,
		Region:                storeRegion(store),
		ForcePathStyle:        store.Spec.ForcePathStyle,
		CABundle:              []byte(store.Spec.CABundle),
		InsecureSkipTLSVerify: store.Spec.InsecureSkipTLSVerify,
		RequestTimeout:        timeout,
		RequestsPerSecond:     float64(store.Spec.RequestsPerSecond),
		Burst:                 int(store.Spec.Burst),
		APIOptions:            []func(*middleware.Stack) error{readOnlyMiddleware},
	}
	if ref := store.Spec.CredentialsSecretRef; ref != nil {
		var err error
		if cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken, err = storeCredentials(ctx, c, ref, "credentials"); err != nil {
			return nil, err
		}
	}
	return s3.New(ctx, cfg)
}

// quotaReader reads bucket quotas through the store's admin API; nil when the store has
// none. It only ever calls BucketQuota.
func quotaReader(ctx context.Context, c client.Client, store *bkv1.ObjectStore, timeout time.Duration) (quota.Client, error) {
	api := store.Spec.AdminAPI
	if api == nil {
		return nil, nil
	}
	access, secret, _, err := storeCredentials(ctx, c, &api.CredentialsSecretRef, "admin API credentials")
	if err != nil {
		return nil, err
	}
	return quota.New(quota.Config{
		Type:                  api.Type,
		Endpoint:              store.Spec.Endpoint,
		Region:                storeRegion(store),
		AccessKeyID:           access,
		SecretAccessKey:       secret,
		CABundle:              []byte(store.Spec.CABundle),
		InsecureSkipTLSVerify: store.Spec.InsecureSkipTLSVerify,
		RequestTimeout:        timeout,
	})
}
