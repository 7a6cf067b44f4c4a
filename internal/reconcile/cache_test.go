package reconcile

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// TestTransformSecret: Secrets are cached without data but with a digest that tells
// any two data apart, whatever their role: a tenant can label its own Secrets with any
// of them. The credentials the operator needs are read past the cache (secretData).
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
	if creds.Data != nil || creds.Labels[bkv1.LabelCachedDataDigest] != ConnectionDataDigest(map[string][]byte{"accessKeyID": []byte("id")}) || creds.ManagedFields != nil {
		t.Fatalf("credentials Secret cached as %+v", creds)
	}

	a := cached(secret(bkv1.SecretRoleConnection, map[string][]byte{"a": []byte("bc")}))
	if a.Data != nil || a.ManagedFields != nil {
		t.Fatalf("connection Secret cached with data or managedFields: %+v", a)
	}
	if a.Labels[bkv1.LabelCachedDataDigest] != ConnectionDataDigest(map[string][]byte{"a": []byte("bc")}) {
		t.Fatalf("digest %q is not the data's", a.Labels[bkv1.LabelCachedDataDigest])
	}
	// Key and value boundaries count: "a"+"bc" is not "ab"+"c".
	b := cached(secret(bkv1.SecretRoleConnection, map[string][]byte{"ab": []byte("c")}))
	if a.Labels[bkv1.LabelCachedDataDigest] == b.Labels[bkv1.LabelCachedDataDigest] {
		t.Fatal("two different data hash alike")
	}
	// What the server says is overwritten: a forged digest never survives.
	forged := secret(bkv1.SecretRoleConnection, map[string][]byte{"ab": []byte("c")})
	forged.Labels[bkv1.LabelCachedDataDigest] = a.Labels[bkv1.LabelCachedDataDigest]
	if cached(forged).Labels[bkv1.LabelCachedDataDigest] != b.Labels[bkv1.LabelCachedDataDigest] {
		t.Fatal("a digest label from the server survived the transform")
	}
}

// TestTransformSecretIsIdempotent: a summary passed through the transform again, as a
// watch-list reflector does (its temporary store, then the informer's Replace), is
// kept as it is: the digest still names the server's data, an access Secret keeps its
// key pair, a truncated summary stays marked. Before, the second pass took the digest
// of the summary's empty data, and a restarted operator rewrote every connection
// Secret on each sync.
func TestTransformSecretIsIdempotent(t *testing.T) {
	transform := TransformSecret()
	once := func(in *corev1.Secret) *corev1.Secret {
		out, err := transform(in)
		if err != nil {
			t.Fatal(err)
		}
		return out.(*corev1.Secret)
	}
	big := map[string]string{}
	for i := range 100 {
		big[fmt.Sprintf("tenant.example/label-%03d", i)] = strings.Repeat("v", 60)
	}
	tests := map[string]*corev1.Secret{
		"connection":  {Data: map[string][]byte{"BUCKET_NAME": []byte("b")}},
		"credentials": {Data: map[string][]byte{"accessKeyID": []byte("id"), "secretAccessKey": []byte("sk")}},
		"access":      {Data: map[string][]byte{bkv1.SecretKeyAWSAccessKeyID: []byte("AK"), bkv1.SecretKeyAWSSecretKey: []byte("SK"), "BUCKET_NAME": []byte("b")}},
		"truncated":   {ObjectMeta: metav1.ObjectMeta{Labels: big}, Data: map[string][]byte{"BUCKET_NAME": []byte("b")}},
	}
	roles := map[string]string{"connection": bkv1.SecretRoleConnection, "credentials": bkv1.SecretRoleCredentials,
		"access": bkv1.SecretRoleAccess, "truncated": bkv1.SecretRoleConnection}
	for name, s := range tests {
		t.Run(name, func(t *testing.T) {
			if s.Labels == nil {
				s.Labels = map[string]string{}
			}
			s.Name, s.Labels[bkv1.LabelSecretRole] = "s", roles[name]
			s.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "bucketkeeper"}}
			first := once(s)
			if first.Labels[bkv1.LabelCachedDataDigest] != ConnectionDataDigest(s.Data) {
				t.Fatalf("first pass: digest %q is not the data's", first.Labels[bkv1.LabelCachedDataDigest])
			}
			again := once(first.DeepCopy())
			if !equality.Semantic.DeepEqual(first, again) {
				t.Errorf("a second pass changed the summary:\nfirst %+v\nagain %+v", first, again)
			}
		})
	}
}

// TestTransformSecretBoundsWhatATenantWrites: a labelled Secret of a tenant's, with a
// megabyte of data and of metadata, costs the cache a few kilobytes; what was left out
// is marked so that no write sends back the shortened copy.
func TestTransformSecretBoundsWhatATenantWrites(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	labels := map[string]string{bkv1.LabelSecretRole: bkv1.SecretRoleAccess, bkv1.LabelBucketAccess: "app"}
	annotations := map[string]string{}
	for i := range 2000 {
		labels[fmt.Sprintf("tenant.example/l%04d", i)] = strings.Repeat("v", 63)
		annotations[fmt.Sprintf("tenant.example/a%04d", i)] = strings.Repeat("v", 100)
	}
	controllerRef := metav1.OwnerReference{Kind: "BucketAccess", Name: "app", UID: "u", Controller: ptr.To(true)}
	owners := []metav1.OwnerReference{}
	for i := range 50 {
		owners = append(owners, metav1.OwnerReference{Kind: "ConfigMap", Name: fmt.Sprint(i), UID: types.UID(fmt.Sprint(i))})
	}
	owners = append(owners, controllerRef)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Labels: labels, Annotations: annotations, OwnerReferences: owners,
		Finalizers: []string{"tenant.example/hold"}},
		Data: map[string][]byte{"payload": []byte(big), bkv1.AccessSecretKeyAccessKeyID: []byte(big), bkv1.AccessSecretKeySecretKey: []byte("k")}}

	got := summarizeSecret(s)
	if got.Data != nil {
		t.Errorf("kept %d data keys of a Secret whose key ID is a megabyte", len(got.Data))
	}
	size := 0
	for k, v := range got.Labels {
		size += len(k) + len(v)
	}
	for k, v := range got.Annotations {
		size += len(k) + len(v)
	}
	if size > 2*maxCachedMetadata+1024 {
		t.Errorf("cached labels and annotations are %d bytes, want at most %d", size, 2*maxCachedMetadata+1024)
	}
	if got.Labels[bkv1.LabelSecretRole] != bkv1.SecretRoleAccess || got.Labels[bkv1.LabelBucketAccess] != "app" {
		t.Errorf("the operator's own labels were not kept: %v", got.Labels)
	}
	if len(got.OwnerReferences) != maxCachedOwnerRefs || !metav1.IsControlledBy(got, &metav1.ObjectMeta{UID: "u"}) {
		t.Errorf("owner references %v: want %d with the controller's", got.OwnerReferences, maxCachedOwnerRefs)
	}
	if got.Labels[bkv1.LabelCachedTruncated] == "" || got.Finalizers != nil {
		t.Errorf("a shortened copy is not marked, or kept finalizers: %v %v", got.Labels, got.Finalizers)
	}

	// The key pair of a real access Secret is kept: the reconcile resumes from it.
	s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Labels: map[string]string{bkv1.LabelSecretRole: bkv1.SecretRoleAccess}},
		Data: map[string][]byte{bkv1.AccessSecretKeyAccessKeyID: []byte("AKIA1"), bkv1.AccessSecretKeySecretKey: []byte("secret"), bkv1.AccessSecretKeyRegion: []byte("r")}}
	got = summarizeSecret(s)
	if len(got.Data) != 2 || string(got.Data[bkv1.AccessSecretKeyAccessKeyID]) != "AKIA1" || got.Labels[bkv1.LabelCachedTruncated] != "" {
		t.Errorf("access Secret cached as %v %v", got.Data, got.Labels)
	}
	if got.Labels[bkv1.LabelCachedDataDigest] != ConnectionDataDigest(s.Data) {
		t.Error("the digest is not of the whole data")
	}
	// CachedDigest hands back the digest and leaves a copy fit to write.
	if d := CachedDigest(got); d != ConnectionDataDigest(s.Data) || got.Labels[bkv1.LabelCachedDataDigest] != "" {
		t.Errorf("CachedDigest = %q, labels %v", d, got.Labels)
	}
}
