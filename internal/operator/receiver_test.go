package operator

import (
	"os"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

const testKeyValue = "hmac-key-of-a-test-0123456789"

func keySecret(mutate func(*corev1.Secret)) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "bucketkeeper-system", Name: "team-a-ci", UID: "u1", ResourceVersion: "7",
			Labels:      map[string]string{bkv1.LabelSecretRole: bkv1.SecretRoleReceiverKey, "team": "a"},
			Annotations: map[string]string{bkv1.AnnotationReceiverNamespaces: "team-a, team-a-staging", "note": "x"}},
		Data: map[string][]byte{bkv1.ReceiverKeySecretKey: []byte(testKeyValue + "\n"), "other": []byte("unrelated")},
	}
	if mutate != nil {
		mutate(s)
	}
	return s
}

// A key Secret becomes a key named by the Secret, with its trimmed HMAC key and its
// namespaces; a malformed one is refused with an error that names what is wrong and
// never the key.
func TestKeyFromSecret(t *testing.T) {
	k, err := keyFromSecret(keySecret(nil))
	if err != nil {
		t.Fatal(err)
	}
	if k.ID != "team-a-ci" || string(k.Secret) != testKeyValue || !slices.Equal(k.Namespaces, []string{"team-a", "team-a-staging"}) {
		t.Fatalf("key %q %q %q", k.ID, k.Secret, k.Namespaces)
	}
	for name, c := range map[string]struct {
		mutate  func(*corev1.Secret)
		wantErr string
	}{
		"no HMAC key":       {func(s *corev1.Secret) { delete(s.Data, bkv1.ReceiverKeySecretKey) }, `data key "secret"`},
		"only a newline":    {func(s *corev1.Secret) { s.Data[bkv1.ReceiverKeySecretKey] = []byte("\n") }, `data key "secret"`},
		"no annotation":     {func(s *corev1.Secret) { s.Annotations = nil }, bkv1.AnnotationReceiverNamespaces + " is missing"},
		"a bad namespace":   {func(s *corev1.Secret) { s.Annotations[bkv1.AnnotationReceiverNamespaces] = "team-a,*" }, `"*" is not a namespace name`},
		"every namespace?":  {func(s *corev1.Secret) { s.Annotations[bkv1.AnnotationReceiverNamespaces] = "*" }, `"*" is not a namespace name`},
		"bad HMAC key name": {func(s *corev1.Secret) { s.Data = map[string][]byte{"hmac": []byte(testKeyValue)} }, `data key "secret"`},
	} {
		_, err := keyFromSecret(keySecret(c.mutate))
		if err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%s: %v, want an error containing %q", name, err, c.wantErr)
		} else if strings.Contains(err.Error(), testKeyValue) {
			t.Errorf("%s: the error reveals the key: %v", name, err)
		}
	}
}

// The key cache keeps of a key Secret its identity, the namespace list and the HMAC
// key: no other data, labels or annotations.
func TestReceiverKeyTransform(t *testing.T) {
	out, err := receiverKeyTransform(keySecret(nil))
	if err != nil {
		t.Fatal(err)
	}
	s := out.(*corev1.Secret)
	want := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "bucketkeeper-system", Name: "team-a-ci", UID: "u1", ResourceVersion: "7",
			Annotations: map[string]string{bkv1.AnnotationReceiverNamespaces: "team-a, team-a-staging"}},
		Data: map[string][]byte{bkv1.ReceiverKeySecretKey: []byte(testKeyValue + "\n")},
	}
	if s.Name != want.Name || s.Namespace != want.Namespace || s.UID != want.UID || s.ResourceVersion != want.ResourceVersion ||
		len(s.Labels) != 0 || len(s.Annotations) != 1 || s.Annotations[bkv1.AnnotationReceiverNamespaces] != want.Annotations[bkv1.AnnotationReceiverNamespaces] ||
		len(s.Data) != 1 || string(s.Data[bkv1.ReceiverKeySecretKey]) != string(want.Data[bkv1.ReceiverKeySecretKey]) {
		t.Fatalf("transformed %+v, want %+v", s, want)
	}
}

// The keys' namespace: the one named, else the pod's; outside a cluster only a
// cluster-wide key may go without one.
func TestReceiverKeysNamespace(t *testing.T) {
	if _, err := os.Stat(inClusterNamespaceFile); err == nil {
		t.Skip("running in a pod: the pod's namespace is the default")
	}
	if ns, err := (&Options{ReceiverKeysNamespace: "keys"}).receiverKeysNamespace(); ns != "keys" || err != nil {
		t.Errorf("named: %q, %v", ns, err)
	}
	if ns, err := (&Options{ReceiverClusterWideSecret: []byte(testKeyValue)}).receiverKeysNamespace(); ns != "" || err != nil {
		t.Errorf("cluster-wide key only: %q, %v; want no namespaced keys", ns, err)
	}
	_, err := (&Options{}).receiverKeysNamespace()
	if err == nil || !strings.Contains(err.Error(), "--receiver-keys-namespace") {
		t.Errorf("no key at all outside a cluster: %v, want an error naming --receiver-keys-namespace", err)
	}
}
