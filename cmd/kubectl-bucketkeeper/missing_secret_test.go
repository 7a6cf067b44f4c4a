package main

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/remedy"
)

// TestEveryVerbOnAMissingSecret: a store whose credentials Secret does not exist, so
// nothing is provisioned and no Secret is written. why follows the claim to the store
// and tells the platform team which Secret to create; tree shows the connection Secret
// missing; env says which Secret does not exist and why; probe has nothing to probe;
// status shows the store's reason.
func TestEveryVerbOnAMissingSecret(t *testing.T) {
	f := newFixture(t, nil, func(s *bkv1.ObjectStore) { s.Spec.CredentialsSecretRef.Name = "no-such-secret" })
	sb := f.claim("photos", func(sb *bkv1.StorageBucket) { sb.Spec.Access = string(bkv1.AccessReadWrite) })
	f.waitConditions(&bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: f.store}}, "Ready=False/CredentialsMissing")
	f.waitConditions(sb, "Stalled=True/CredentialsMissing")
	rem, _ := remedy.For(bkv1.ReasonCredentialsMissing)

	r := plugin(t, f.ns, "why", "photos")
	r.contains(t, "why", "StorageBucket "+f.ns+"/photos: Stalled=True CredentialsMissing (a person must act)", "because",
		"ObjectStore "+f.store+": Stalled=True CredentialsMissing", "Secret "+f.ns+"/no-such-secret not found", rem.Do)

	r = plugin(t, f.ns, "tree", "photos")
	r.contains(t, "tree", "ObjectStore/"+f.store, "CredentialsMissing", "Secret/photos-bucket", "Missing", "not found: the operator writes it once the bucket is provisioned")

	r = plugin(t, f.ns, "env", "photos", "--", "true")
	if r.code == 0 {
		t.Errorf("env without a Secret exits 0\n%s", r)
	}
	r.contains(t, "env", "the Secret "+f.ns+"/photos-bucket of StorageBucket photos's connection does not exist", "CredentialsMissing")

	// A Secret of that name that the operator did not write (a tenant planting its own
	// endpoint and key for the plugin's users to send their data to) is never used:
	// env refuses it and does not run the command.
	planted := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "photos-bucket"}, StringData: map[string]string{
		bkv1.SecretKeyAWSAccessKeyID: "planted", bkv1.SecretKeyAWSSecretKey: "planted-secret", bkv1.SecretKeyAWSEndpointS3: "http://127.0.0.1:9",
	}}
	must(t, k8s.Create(f.ctx, planted))
	r = plugin(t, f.ns, "env", "photos", "--", "sh", "-c", "echo the command ran")
	if r.code == 0 || strings.Contains(r.stdout, "the command ran") {
		t.Errorf("env used a Secret the operator did not write\n%s", r)
	}
	r.contains(t, "env", "Secret "+f.ns+"/photos-bucket was not written for StorageBucket photos's connection by bucketkeeper; it is not used")
	noSecret := func(what string, r result) {
		if strings.Contains(r.stdout+r.stderr, "planted-secret") {
			t.Errorf("%s printed the planted Secret's value\n%s", what, r)
		}
	}
	noSecret("env", r)
	r = plugin(t, f.ns, "env", "photos", "--export")
	if r.code == 0 {
		t.Errorf("env --export printed a Secret the operator did not write\n%s", r)
	}
	noSecret("env --export", r)

	r = plugin(t, f.ns, "probe", "photos")
	r.contains(t, "probe", "has no bucket to probe yet", "CredentialsMissing")

	r = plugin(t, "", "status", f.store)
	r.contains(t, "status", "ObjectStore "+f.store+": Ready=False CredentialsMissing", "Secret "+f.ns+"/no-such-secret not found")
}
