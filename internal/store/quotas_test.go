package store

import (
	"context"
	"testing"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/quota"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// TestQuotaClientSpendsTheStoreBudget: a store's admin client signs with the admin
// Secret's key, not the S3 one, spends the budget its S3 clients spend, and a store
// without an admin API has none (NotImplemented, so a quota there reads as
// NotSupportedByStore).
func TestQuotaClientSpendsTheStoreBudget(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	secret := func(name, key string) *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: name, Labels: map[string]string{bkv1.LabelSecretRole: bkv1.SecretRoleCredentials}},
			Data:       map[string][]byte{bkv1.CredentialsKeyAccessKeyID: []byte(key), bkv1.CredentialsKeySecretAccessKey: []byte("secret-" + key)},
		}
	}
	k8s := fake.NewClientBuilder().WithScheme(scheme).WithObjects(secret("s3", "S3KEY"), secret("admin", "ADMINKEY")).Build()
	var s3Limiters []*rate.Limiter
	var adminCfg []quota.Config
	reg := &Registry{Client: k8s, APIReader: k8s,
		Factory: func(ctx context.Context, cfg s3.Config) (s3.Client, error) {
			s3Limiters = append(s3Limiters, cfg.Limiter)
			return s3.New(ctx, cfg)
		},
		QuotaFactory: func(cfg quota.Config) (quota.Client, error) {
			adminCfg = append(adminCfg, cfg)
			return quota.New(cfg)
		},
	}
	store := &bkv1.ObjectStore{
		ObjectMeta: metav1.ObjectMeta{Name: "rgw", UID: "store-uid", Generation: 1},
		Spec: bkv1.ObjectStoreSpec{Endpoint: "http://127.0.0.1:1", ForcePathStyle: true,
			CredentialsSecretRef: &bkv1.SecretReference{Namespace: "ops", Name: "s3"},
			RequestsPerSecond:    5, Burst: 5},
	}
	ctx := context.Background()
	if _, err := reg.QuotaClientFor(ctx, store); s3.KindOf(err) != s3.KindNotImplemented {
		t.Fatalf("a store without an admin API: %v, want NotImplemented", err)
	}

	store.Spec.AdminAPI = &bkv1.AdminAPI{Type: bkv1.AdminAPIRGWAdminOps, CredentialsSecretRef: bkv1.SecretReference{Namespace: "ops", Name: "admin"}}
	store.Generation = 2
	if _, err := reg.QuotaClientFor(ctx, store); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.QuotaClientFor(ctx, store); err != nil {
		t.Fatal(err)
	}
	if len(adminCfg) != 1 {
		t.Fatalf("the admin client was built %d times for one store version, want once", len(adminCfg))
	}
	got := adminCfg[0]
	if got.AccessKeyID != "ADMINKEY" || got.SecretAccessKey != "secret-ADMINKEY" {
		t.Errorf("the admin client signs with %q, want the admin Secret's key", got.AccessKeyID)
	}
	if got.Limiter == nil || got.Limiter != s3Limiters[len(s3Limiters)-1] {
		t.Errorf("the admin client's budget %p is not the store's S3 budget %v", got.Limiter, s3Limiters)
	}
}
