package storagebucket

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
)

// TestConnectionSecretHoldsOnlyListedKeys: whatever the store (AWS or self-hosted, with
// a CA bundle, a static key and a session token, every optional key), each key the
// connection Secret is written with is in bkv1.ConnectionSecretKeys, the list
// `kubectl bucketkeeper env` passes on and no more.
func TestConnectionSecretHoldsOnlyListedKeys(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = bkv1.AddToScheme(scheme)
	app := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "app"}, Data: map[string][]byte{
		bkv1.CredentialsKeyAccessKeyID: []byte("AKID"), bkv1.CredentialsKeySecretAccessKey: []byte("secret"), bkv1.CredentialsKeySessionToken: []byte("token"),
	}}
	for _, store := range []*bkv1.ObjectStore{
		{ObjectMeta: metav1.ObjectMeta{Name: "self-hosted"}, Spec: bkv1.ObjectStoreSpec{
			Endpoint: "https://s3.example.test:9000", ForcePathStyle: true, CABundle: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
			AccessProvider:                  &bkv1.AccessProvider{Type: bkv1.AccessProviderStatic},
			ApplicationCredentialsSecretRef: &bkv1.SecretReference{Namespace: "ops", Name: "app"},
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: "aws"}, Spec: bkv1.ObjectStoreSpec{Region: "eu-west-1", AccessProvider: &bkv1.AccessProvider{Type: bkv1.AccessProviderIAM}}},
	} {
		t.Run(store.Name, func(t *testing.T) {
			sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "data", UID: "claim-uid"}}
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(store, app.DeepCopy(), sb).Build()
			r := &Reconciler{Client: c, Stores: &stores.Registry{Client: c, APIReader: c}}
			scope := &bucketScope{sb: sb, store: store, bucket: "tenant-data", region: "eu-west-1"}
			if err := r.reconcileConnectionSecret(context.Background(), scope); err != nil {
				t.Fatal(err)
			}
			secret := &corev1.Secret{}
			if err := c.Get(context.Background(), types.NamespacedName{Namespace: "tenant", Name: "data-bucket"}, secret); err != nil {
				t.Fatal(err)
			}
			if extra := bkv1.UnlistedSecretKeys(secret.Data, bkv1.ConnectionSecretKeys); len(extra) > 0 {
				t.Errorf("the connection Secret holds keys bkv1.ConnectionSecretKeys does not list: %q", extra)
			}
			if store.Spec.CABundle != "" && len(secret.Data) != len(bkv1.ConnectionSecretKeys) {
				t.Errorf("with every optional key the Secret holds %d keys, the list %d: a listed key is never written", len(secret.Data), len(bkv1.ConnectionSecretKeys))
			}
		})
	}
}

func TestLeftByEarlierIncarnation(t *testing.T) {
	sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "data", UID: "new-uid"}}
	apiVersion := bkv1.GroupVersion.String()
	ref := func(mutate func(*metav1.OwnerReference)) []metav1.OwnerReference {
		r := metav1.OwnerReference{APIVersion: apiVersion, Kind: "StorageBucket", Name: "data", UID: "old-uid", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
		if mutate != nil {
			mutate(&r)
		}
		return []metav1.OwnerReference{r}
	}
	managed := map[string]string{bkv1.LabelManagedBy: bkv1.LabelManagedByValue, bkv1.LabelSecretRole: bkv1.SecretRoleConnection, bkv1.LabelStorageBucket: "data"}
	tests := []struct {
		name   string
		owners []metav1.OwnerReference
		labels map[string]string
		want   bool
	}{
		{"left by the earlier StorageBucket", ref(nil), managed, true},
		{"other version of the same group", ref(func(r *metav1.OwnerReference) { r.APIVersion = "bucketkeeper.io/v1" }), managed, true},
		{"no owner", nil, managed, false},
		{"owner but not controller", ref(func(r *metav1.OwnerReference) { r.Controller = nil }), managed, false},
		{"owner with controller false", ref(func(r *metav1.OwnerReference) { r.Controller = ptr.To(false) }), managed, false},
		{"controlled by this StorageBucket (not an earlier one)", ref(func(r *metav1.OwnerReference) { r.UID = sb.UID }), managed, false},
		{"controlled by another StorageBucket", ref(func(r *metav1.OwnerReference) { r.Name = "other" }), managed, false},
		{"controlled by another kind", ref(func(r *metav1.OwnerReference) { r.Kind = "ObjectStore" }), managed, false},
		{"controlled by a same-named kind of another group", ref(func(r *metav1.OwnerReference) { r.APIVersion = "example.com/v1" }), managed, false},
		{"group that merely ends like ours", ref(func(r *metav1.OwnerReference) { r.APIVersion = "notbucketkeeper.io/v1alpha1" }), managed, false},
		{"group that merely starts like ours", ref(func(r *metav1.OwnerReference) { r.APIVersion = "bucketkeeper.io.evil/v1alpha1" }), managed, false},
		{"core-group style apiVersion", ref(func(r *metav1.OwnerReference) { r.APIVersion = "v1" }), managed, false},
		{"no labels", ref(nil), nil, false},
		{"managed by someone else", ref(nil), map[string]string{bkv1.LabelManagedBy: "helm"}, false},
		{"only the managed-by label", ref(nil), map[string]string{bkv1.LabelManagedBy: bkv1.LabelManagedByValue}, true},
		{"non-controller owner plus earlier controller", append(
			[]metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "cm"}}, ref(nil)...), managed, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sb.Namespace, Name: "data-bucket", Labels: tc.labels, OwnerReferences: tc.owners}}
			if got := leftByEarlierIncarnation(s, sb); got != tc.want {
				t.Errorf("leftByEarlierIncarnation = %v, want %v", got, tc.want)
			}
		})
	}
}
