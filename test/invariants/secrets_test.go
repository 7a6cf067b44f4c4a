package invariants

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// TestOrphanSecret: a connection Secret whose claim is gone, as after a finalizer
// strip on a control plane whose garbage collector has not run.
func TestOrphanSecret(t *testing.T) {
	w := newWorld(t)
	w.objects = append(w.objects, secret("gone-bucket", bkv1.SecretRoleConnection,
		&bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "gone", UID: "66666666-6666-6666-6666-666666666666"}}, "StorageBucket"))
	expectOnly(t, w.check(t), SecretOwned, "secret tenant-a/gone-bucket", "owner StorageBucket gone", "is gone")
}

func TestSecretWithoutOwner(t *testing.T) {
	w := newWorld(t)
	w.objects = append(w.objects, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "loose",
		Labels: map[string]string{bkv1.LabelManagedBy: bkv1.LabelManagedByValue, bkv1.LabelSecretRole: bkv1.SecretRoleAccess}}})
	expectOnly(t, w.check(t), SecretOwned, "secret tenant-a/loose", "controlled by no object")
}

// TestStaleSecrets: a Secret of an access's earlier secretName is stale once the
// Secret of its current name holds the key, not before (an access waiting on its
// buckets writes none, and the earlier one keeps the key for the applications).
func TestStaleSecrets(t *testing.T) {
	w := newWorld(t)
	w.ba.Spec.SecretName = "app-key-2"
	w.objects = append(w.objects, secret("app-key-2", bkv1.SecretRoleAccess, w.ba, "BucketAccess"))
	expectOnly(t, w.check(t), SecretOwned, "secret tenant-a/app-key", "stale")

	w = newWorld(t)
	w.ba.Spec.SecretName = "app-key-2"
	expectNone(t, w.check(t))

	w = newWorld(t)
	w.sb.Status.ConnectionSecretName = "renamed"
	expectOnly(t, w.check(t), SecretOwned, "secret tenant-a/data-bucket", "stale")
}
