package storagebucket

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

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
