package main

import (
	"testing"

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

	r = plugin(t, f.ns, "probe", "photos")
	r.contains(t, "probe", "has no bucket to probe yet", "CredentialsMissing")

	r = plugin(t, "", "status", f.store)
	r.contains(t, "status", "ObjectStore "+f.store+": Ready=False CredentialsMissing", "Secret "+f.ns+"/no-such-secret not found")
}
