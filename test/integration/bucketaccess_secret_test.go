package integration_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// TestRenamedAccessSecretLeavesNoKeyBehind: a tenant renames its BucketAccess's
// spec.secretName. The Secret of the old name goes as soon as the new one holds a
// working key, the old key is refused by the store, the store keeps exactly the new
// key, and a Secret the tenant planted with the access's labels (not controlled by
// it) is left as it was.
func TestRenamedAccessSecretLeavesNoKeyBehind(t *testing.T) {
	f := newFixture(t, seaweed, withIAMOn(seaweed))
	sb := f.waitCondition(f.bucket("data"), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	ba := f.waitAccessReady(f.access("app", "creds-a", bkv1.BucketGrant{Name: "data"}))
	old := f.secretClient("creds-a")

	// The tenant's own Secret, labelled as the access's Secrets are.
	planted := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "lookalike", Labels: map[string]string{
			bkv1.LabelManagedBy: bkv1.LabelManagedByValue, bkv1.LabelSecretRole: bkv1.SecretRoleAccess, bkv1.LabelBucketAccess: ba.Name,
		}},
		Data: map[string][]byte{bkv1.AccessSecretKeyAccessKeyID: []byte("tenant-data")},
	}
	must(t, k8s.Create(f.ctx, planted))

	must(t, k8s.Patch(f.ctx, ba, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"secretName":"creds-b"}}`))))
	f.eventually(90*time.Second, "the Secret of the old name deleted", func() error {
		err := k8s.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: "creds-a"}, &corev1.Secret{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("creds-a still exists")
	})
	current := f.secretClient("creds-b")
	if err := current.c.PutObject(f.ctx, sb.Status.BucketName, "after-rename", []byte("x")); err != nil {
		t.Fatalf("the key in the renamed Secret does not write: %v", err)
	}
	f.waitKeyRejected(old, sb.Status.BucketName)
	if keys := listKeys(t, seaweed, ba); !slices.Equal(keys, []string{current.id}) {
		t.Errorf("keys on the store after the rename: %v, want only %s", keys, current.id)
	}
	got := &corev1.Secret{}
	must(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(planted), got))
	if string(got.Data[bkv1.AccessSecretKeyAccessKeyID]) != "tenant-data" || len(got.Data) != 1 {
		t.Errorf("the tenant's look-alike Secret was changed: %v", keysOf(got.Data))
	}
}
