package invariants

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
)

func userOf(ba *bkv1.BucketAccess) string { return iam.UserName(cluster, string(ba.UID)) }

func policyFor(t *testing.T, grants ...iam.Grant) string {
	t.Helper()
	doc, err := iam.PolicyDocument(grants)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestStrayUser: a user named as this cluster names them, whose access is gone.
func TestStrayUser(t *testing.T) {
	w := newWorld(t)
	w.without(string(w.ba.UID), "app-key")
	expectOnly(t, w.check(t), IdentityGranted, "user "+store+"/"+userOf(w.ba), "no live BucketAccess")

	// The hashed form too (a cluster id that makes the plain name too long).
	w = newWorld(t)
	stray := iam.UserName(cluster+"-with-a-rather-long-cluster-identity", "55555555-5555-5555-5555-555555555555")
	w.iam.users[stray] = &fakeUser{}
	if got := w.check(t); len(got) != 0 {
		t.Fatalf("another cluster's hashed user was judged: %v", got)
	}
	longCluster := cluster + "-with-a-rather-long-cluster-identity"
	w.s3.buckets["bk-tenant-a-data"][bkv1.TagCluster] = longCluster
	got := Check(t.Context(), fakeClient(w), viewsOf(w), longCluster)
	if len(got) != 1 || got[0].Object != "user "+store+"/"+stray {
		t.Fatalf("violations = %v, want the stray hashed user of %s", got, longCluster)
	}
}

func TestUserOfDeletingAccess(t *testing.T) {
	w := newWorld(t)
	deleting(w.ba)
	w.ba.Status.Conditions[0] = metav1.Condition{Type: bkv1.ConditionReady, Status: metav1.ConditionFalse, Reason: bkv1.ReasonRevoking, Message: "revoking: store down"}
	expectOnly(t, w.check(t), IdentityGranted, "user "+store+"/"+userOf(w.ba), "being deleted")
}

func TestUserReachesBeyondItsGrant(t *testing.T) {
	user := func(w *world) *fakeUser { return w.iam.users[userOf(w.ba)] }
	object := func(w *world) string { return "user " + store + "/" + userOf(w.ba) }

	// ReadWrite where the grant says ReadOnly.
	w := newWorld(t)
	user(w).policies[iam.PolicyName] = policyFor(t, iam.Grant{Bucket: "bk-tenant-a-data", Mode: iam.ReadWrite})
	expectOnly(t, w.check(t), IdentityGranted, object(w), "s3:PutObject on arn:aws:s3:::bk-tenant-a-data/*")

	// A bucket the access no longer names.
	w = newWorld(t)
	user(w).policies[iam.PolicyName] = policyFor(t, iam.Grant{Bucket: "bk-tenant-a-data", Mode: iam.ReadOnly}, iam.Grant{Bucket: "bk-tenant-a-old", Mode: iam.ReadOnly})
	expectOnly(t, w.check(t), IdentityGranted, object(w), "arn:aws:s3:::bk-tenant-a-old")

	// A second policy, and a wildcard.
	w = newWorld(t)
	user(w).policies["extra"] = `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"*"}]}`
	expectOnly(t, w.check(t), IdentityGranted, object(w), "s3:* on * (policy extra)")

	// The bucket's claim no longer Ready (refused by a guardrail): nothing is granted.
	w = newWorld(t)
	w.sb.Status.Conditions = append(w.sb.Status.Conditions, metav1.Condition{Type: bkv1.ConditionStalled, Status: metav1.ConditionTrue, Reason: bkv1.ReasonNamespaceNotAllowed, Message: "no"})
	expectOnly(t, w.check(t), IdentityGranted, object(w), "grants nothing on this store")

	// The store no longer admits the namespace: the policy reaches a bucket not granted now.
	w = newWorld(t)
	w.ns.Labels = nil
	expectOnly(t, w.check(t), IdentityGranted, object(w), "reaches beyond", "grants now (nothing)")

	// The store's own reformatting (URL-encoded, one-element lists as strings) is not a breach.
	w = newWorld(t)
	user(w).policies[iam.PolicyName] = "%7B%22Statement%22%3A%5B%7B%22Effect%22%3A%22Allow%22%2C%22Action%22%3A%22s3%3AGetObject%22%2C%22Resource%22%3A%22arn%3Aaws%3As3%3A%3A%3Abk-tenant-a-data%2F%2A%22%7D%5D%7D"
	expectNone(t, w.check(t))
}

func TestUserWithKeysItsAccessDoesNotName(t *testing.T) {
	w := newWorld(t)
	w.iam.users[userOf(w.ba)].keys = []string{"AKIACURRENT", "AKIALOST"}
	expectOnly(t, w.check(t), IdentityGranted, "user "+store+"/"+userOf(w.ba), "key AKIALOST")

	// During a rotation's grace period the previous key is named too.
	w.ba.Status.Rotation.PreviousKeyID = "AKIALOST"
	expectNone(t, w.check(t))
}

func TestUserLeftOnAStoreTheAccessLeft(t *testing.T) {
	w := newWorld(t)
	w.sb.Spec.ObjectStoreRef.Name = "store-b"
	delete(w.s3.buckets, "bk-tenant-a-data") // the bucket moved with its claim
	expectOnly(t, w.check(t), IdentityGranted, "user "+store+"/"+userOf(w.ba), `its grant is on "store-b"`)
}

// TestStrayRole: the roles of keyless accesses are identities too. A role named as this
// cluster names them whose access is gone, is being deleted, asks for a key, or grants
// on another store is reported; a live keyless access's role is not, nor another
// cluster's.
func TestStrayRole(t *testing.T) {
	keyless := func(w *world) {
		w.ba.Spec.ServiceAccountName = "app"
		w.ba.Status.AccessKeyID = ""
		delete(w.iam.users, userOf(w.ba))
		w.iam.roles = []string{userOf(w.ba), iam.UserName("other", "44444444-4444-4444-4444-444444444444")}
	}
	w := newWorld(t)
	keyless(w)
	expectNone(t, w.check(t))

	for _, tc := range []struct {
		name, fragment string
		breach         func(w *world)
	}{
		{"access gone", "no live BucketAccess", func(w *world) { w.without(string(w.ba.UID), "app-key") }},
		{"access deleting", "being deleted", func(w *world) { deleting(w.ba) }},
		{"access asks for a key", "asks for a key", func(w *world) { w.ba.Spec.ServiceAccountName = "" }},
		{"grant elsewhere", "grants nothing on this store", func(w *world) { w.sb.Spec.ObjectStoreRef.Name = "store-b" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			keyless(w)
			tc.breach(w)
			var got []Violation
			for _, v := range w.check(t) {
				if strings.HasPrefix(v.Object, "role ") {
					got = append(got, v)
				}
			}
			expectOnly(t, got, IdentityGranted, "role "+store+"/"+userOf(w.ba), tc.fragment)
		})
	}
}
