package store

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
)

// TestDriverForPicksTheStoresAPI: a store's iam.api reaches the driver's Config (MinIO's
// admin API on the store's S3 endpoint, signed with the store's credentials), absent
// means the AWS IAM API, and a changed api builds a new driver.
func TestDriverForPicksTheStoresAPI(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	creds := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "creds", Labels: map[string]string{bkv1.LabelSecretRole: bkv1.SecretRoleCredentials}},
		Data:       map[string][]byte{bkv1.CredentialsKeyAccessKeyID: []byte("operator"), bkv1.CredentialsKeySecretAccessKey: []byte("operator-secret")},
	}
	k8s := fake.NewClientBuilder().WithScheme(scheme).WithObjects(creds).Build()
	var built []iam.Config
	access := &AccessProviders{Stores: &Registry{Client: k8s, APIReader: k8s}, Factory: func(ctx context.Context, cfg iam.Config) (iam.Driver, error) {
		built = append(built, cfg)
		return iam.New(ctx, cfg)
	}}
	store := &bkv1.ObjectStore{
		ObjectMeta: metav1.ObjectMeta{Name: "minio", UID: "store-uid", Generation: 1},
		Spec: bkv1.ObjectStoreSpec{Endpoint: "http://127.0.0.1:9000", CredentialsSecretRef: &bkv1.SecretReference{Namespace: "ops", Name: "creds"},
			AccessProvider: &bkv1.AccessProvider{Type: bkv1.AccessProviderIAM}},
	}
	ctx := context.Background()
	if _, err := access.DriverFor(ctx, store); err != nil {
		t.Fatal(err)
	}
	store.Spec.AccessProvider.IAM, store.Generation = &bkv1.IAMAccessProvider{API: bkv1.IAMAPIMinIO}, 2
	if _, err := access.DriverFor(ctx, store); err != nil {
		t.Fatal(err)
	}
	var apis []iam.API
	for _, c := range built {
		apis = append(apis, c.API)
	}
	if len(apis) != 2 || apis[0] != iam.APIAWS || apis[1] != iam.APIMinIO {
		t.Fatalf("drivers built for APIs %q, want AWS then MinIO", apis)
	}
	if c := built[1]; c.Endpoint != store.Spec.Endpoint || c.AccessKeyID != "operator" || c.SecretAccessKey != "operator-secret" {
		t.Errorf("the MinIO driver's config: endpoint %q, key %q, want the store's endpoint and credentials", c.Endpoint, c.AccessKeyID)
	}
	if a, m := built[0].Timeout, built[1].Timeout; a != defaults.IAMRequestTimeout || m != defaults.MinIOAdminRequestTimeout {
		t.Errorf("call deadlines: IAM %v, MinIO %v; want %v and %v", a, m, defaults.IAMRequestTimeout, defaults.MinIOAdminRequestTimeout)
	}
}
