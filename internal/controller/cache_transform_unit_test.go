package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// TestTransformSecret: connection Secrets are cached without data but with a digest
// that tells any two data apart; credentials Secrets, which the operator reads, keep
// their data.
func TestTransformSecret(t *testing.T) {
	secret := func(role string, data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Labels: map[string]string{bkv1.LabelSecretRole: role},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}, Data: data}
	}
	transform := TransformSecret()
	cached := func(s *corev1.Secret) *corev1.Secret {
		out, err := transform(s)
		if err != nil {
			t.Fatal(err)
		}
		return out.(*corev1.Secret)
	}

	creds := cached(secret(bkv1.SecretRoleCredentials, map[string][]byte{"accessKeyID": []byte("id")}))
	if string(creds.Data["accessKeyID"]) != "id" || creds.Labels[cachedDataDigest] != "" || creds.ManagedFields != nil {
		t.Fatalf("credentials Secret cached as %+v", creds)
	}

	a := cached(secret(bkv1.SecretRoleConnection, map[string][]byte{"a": []byte("bc")}))
	if a.Data != nil || a.ManagedFields != nil {
		t.Fatalf("connection Secret cached with data or managedFields: %+v", a)
	}
	if a.Labels[cachedDataDigest] != connectionDataDigest(map[string][]byte{"a": []byte("bc")}) {
		t.Fatalf("digest %q is not the data's", a.Labels[cachedDataDigest])
	}
	// Key and value boundaries count: "a"+"bc" is not "ab"+"c".
	b := cached(secret(bkv1.SecretRoleConnection, map[string][]byte{"ab": []byte("c")}))
	if a.Labels[cachedDataDigest] == b.Labels[cachedDataDigest] {
		t.Fatal("two different data hash alike")
	}
	// What the server says is overwritten: a forged digest never survives.
	forged := secret(bkv1.SecretRoleConnection, map[string][]byte{"ab": []byte("c")})
	forged.Labels[cachedDataDigest] = a.Labels[cachedDataDigest]
	if cached(forged).Labels[cachedDataDigest] != b.Labels[cachedDataDigest] {
		t.Fatal("a digest label from the server survived the transform")
	}
}
