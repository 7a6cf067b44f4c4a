package bucketaccess

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
)

// TestAccessSecretHoldsOnlyListedKeys: each key an access's Secret is written with, by
// the writer of a key (first and again) and by the keyless writer, with every optional
// key present (a CA bundle, an STS endpoint), is in the list for its kind:
// bkv1.AccessSecretKeys, which `kubectl bucketkeeper env` passes on and no more, or
// bkv1.KeylessAccessSecretKeys.
func TestAccessSecretHoldsOnlyListedKeys(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = bkv1.AddToScheme(scheme)
	store := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "store"}, Spec: bkv1.ObjectStoreSpec{
		Endpoint: "https://s3.example.test:9000", ForcePathStyle: true, CABundle: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
		AccessProvider: &bkv1.AccessProvider{Type: bkv1.AccessProviderIAM, WebIdentity: &bkv1.WebIdentity{
			Issuer: "https://oidc.example.test", Audience: "sts.example.test", STSEndpoint: "https://sts.example.test:9000",
		}},
	}}
	for _, tc := range []struct {
		name   string
		sa     string
		listed []string
		write  func(*Reconciler, *accessScope) error
	}{
		{"key", "", bkv1.AccessSecretKeys, func(r *Reconciler, s *accessScope) error {
			if err := r.writeAccessSecret(context.Background(), s, "AKID", "secret"); err != nil {
				return err
			}
			secret, err := r.currentAccessSecret(context.Background(), s.ba)
			if err != nil {
				return err
			}
			return r.writeAccessSecretFrom(context.Background(), s, secret)
		}},
		{"keyless", "app", bkv1.KeylessAccessSecretKeys, func(r *Reconciler, s *accessScope) error {
			return r.writeKeylessSecret(context.Background(), s)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ba := &bkv1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "app", UID: "access-uid"},
				Spec:   bkv1.BucketAccessSpec{Buckets: []bkv1.BucketGrant{{Name: "data"}, {Name: "logs"}}, SecretName: "app-creds", ServiceAccountName: tc.sa},
				Status: bkv1.BucketAccessStatus{RoleARN: "arn:aws:iam:::role/app"}}
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(store, ba).Build()
			r := &Reconciler{Client: c, Stores: &stores.Registry{Client: c, APIReader: c}}
			s := &accessScope{ba: ba, store: store, grants: []iam.Grant{{Bucket: "tenant-data"}, {Bucket: "tenant-logs"}},
				names: []string{"data=tenant-data", "logs=tenant-logs"}}
			if err := tc.write(r, s); err != nil {
				t.Fatal(err)
			}
			secret := &corev1.Secret{}
			if err := c.Get(context.Background(), types.NamespacedName{Namespace: "tenant", Name: "app-creds"}, secret); err != nil {
				t.Fatal(err)
			}
			if extra := bkv1.UnlistedSecretKeys(secret.Data, tc.listed); len(extra) > 0 {
				t.Errorf("the Secret holds keys its list does not: %q", extra)
			}
			if len(secret.Data) != len(tc.listed) {
				t.Errorf("with every optional key the Secret holds %d keys, its list %d: a listed key is never written", len(secret.Data), len(tc.listed))
			}
		})
	}
}
