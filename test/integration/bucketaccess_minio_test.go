package integration_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestBucketAccessOnMinIO: keys through MinIO's admin API (accessProvider IAM with
// iam.api MinIO). Two tenants of one MinIO server, each with a claim and an access:
// each Secret's key reads and writes its own bucket only, may neither create a bucket,
// nor delete its own, nor set its policy; a ReadOnly access cannot write; a rotation
// leaves one working key, the old one refused; deleting an access removes its MinIO
// user and refuses its key, and the other tenant's key keeps working; and no call of
// TestHandedOutKeyCannotReconfigureItsBucket changes the bucket; and an access deleted
// without its finalizer loses its user to the collector. MinIO is not one of
// everyStore: this test runs a server of its own.
func TestBucketAccessOnMinIO(t *testing.T) {
	server := testenv.NewS3(t, testenv.MinIO)
	a, b := newFixture(t, server, withIAMOn(server)), newFixture(t, server, withIAMOn(server))
	if p := a.storeSpec().AccessProvider; p.IAM == nil || p.IAM.API != bkv1.IAMAPIMinIO {
		t.Fatalf("the store's access provider: %+v, want iam.api MinIO", p)
	}
	a.waitStoreCondition(bkv1.ConditionAccessProviderReady, metav1.ConditionTrue)
	b.waitStoreCondition(bkv1.ConditionAccessProviderReady, metav1.ConditionTrue)
	driver, err := iam.New(a.ctx, adminIAMConfig(server))
	must(t, err)

	sbA, sbB := a.bucket("data"), b.bucket("data")
	sbA = a.waitCondition(sbA, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	sbB = b.waitCondition(sbB, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	bucketA, bucketB := sbA.Status.BucketName, sbB.Status.BucketName
	must(t, a.admin.PutObject(a.ctx, bucketB, "seed", []byte("seed")))

	baA := a.access("app", "app-creds", bkv1.BucketGrant{Name: "data", Mode: bkv1.AccessReadWrite})
	baB := b.access("reader", "reader-creds", bkv1.BucketGrant{Name: "data", Mode: bkv1.AccessReadOnly})
	baA, baB = a.waitAccessReady(baA), b.waitAccessReady(baB)
	keyA, keyB := a.secretClient("app-creds"), b.secretClient("reader-creds")
	if baA.Status.IdentityName == "" || baA.Status.AccessKeyID != keyA.id || baA.Status.KeyCreatedAt == nil {
		t.Errorf("status lacks identity or key: %+v", baA.Status)
	}

	// Own bucket: read and write. The other tenant's bucket, new buckets, deleting or
	// opening its own: AccessDenied, and the buckets are still there.
	policyBefore, err := a.admin.GetBucketPolicy(a.ctx, bucketA)
	must(t, err)
	must(t, keyA.c.PutObject(a.ctx, bucketA, "hello", []byte("hello")))
	if body, err := keyA.c.GetObject(a.ctx, bucketA, "hello", 100); err != nil || string(body) != "hello" {
		t.Errorf("GetObject own bucket: %q, %v", body, err)
	}
	wantDenied(t, "PutObject into the other tenant's bucket", keyA.c.PutObject(a.ctx, bucketB, "x", []byte("x")))
	_, err = keyA.c.GetObject(a.ctx, bucketB, "seed", 100)
	wantDenied(t, "GetObject from the other tenant's bucket", err)
	wantDenied(t, "CreateBucket", keyA.c.CreateBucket(a.ctx, "bk-"+a.ns+"-new", ""))
	wantDenied(t, "PutBucketPolicy", keyA.c.PutBucketPolicy(a.ctx, bucketA, policyJSONString(bucketA)))
	wantDenied(t, "DeleteBucket own bucket", keyA.c.DeleteBucket(a.ctx, bucketA))
	if policy, err := a.admin.GetBucketPolicy(a.ctx, bucketA); err != nil || policy != policyBefore {
		t.Errorf("%s's policy after the key's refused PutBucketPolicy: %q (%v), was %q", bucketA, policy, err, policyBefore)
	}
	for _, bucket := range []string{bucketA, bucketB} {
		if _, err := a.admin.HeadBucket(a.ctx, bucket); err != nil {
			t.Errorf("bucket %s after the refusals: %v", bucket, err)
		}
	}
	if body, err := a.admin.GetObject(a.ctx, bucketB, "seed", 100); err != nil || string(body) != "seed" {
		t.Errorf("the other tenant's object after the refusals: %q, %v", body, err)
	}

	// ReadOnly: reads its bucket, writes nowhere.
	if body, err := keyB.c.GetObject(b.ctx, bucketB, "seed", 100); err != nil || string(body) != "seed" {
		t.Errorf("ReadOnly GetObject: %q, %v", body, err)
	}
	wantDenied(t, "ReadOnly PutObject", keyB.c.PutObject(b.ctx, bucketB, "x", []byte("x")))
	_, err = keyB.c.GetObject(b.ctx, bucketA, "hello", 100)
	wantDenied(t, "ReadOnly access on the other tenant's bucket", err)

	// Rotation on request: a new key in the Secret, the old one refused after the grace.
	rotated := a.rotateOnRequest(baA, keyA, "app-creds", bucketA)
	user := baA.Status.IdentityName
	keys, err := driver.ListKeys(a.ctx, user)
	must(t, err)
	if len(keys) != 1 || keys[0].ID != rotated.id {
		t.Errorf("keys after rotation: %+v, want only %s", keys, rotated.id)
	}

	// Revocation: deleting the access deletes its user and the key stops working.
	must(t, k8s.Delete(a.ctx, baA))
	a.waitGone(&bkv1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Namespace: a.ns, Name: baA.Name}})
	a.waitKeyRejected(rotated, bucketA)
	users, err := iam.ListUserNames(a.ctx, driver)
	must(t, err)
	if slices.Contains(users, user) {
		t.Errorf("user %s is still on MinIO after its access was deleted", user)
	}
	if !slices.Contains(users, baB.Status.IdentityName) {
		t.Errorf("the other tenant's user %s went with the first tenant's access: %v", baB.Status.IdentityName, users)
	}
	if err := k8s.Get(a.ctx, types.NamespacedName{Namespace: a.ns, Name: "app-creds"}, &corev1.Secret{}); client.IgnoreNotFound(err) != nil || err == nil {
		t.Errorf("the access's Secret outlived it: %v", err)
	}
	if _, err := keyB.c.GetObject(b.ctx, bucketB, "seed", 100); err != nil {
		t.Errorf("the other tenant's key stopped working: %v", err)
	}

	// Everything else a handed-out key might change on its own bucket, as on every
	// other IAM server (TestHandedOutKeyCannotReconfigureItsBucket). MinIO takes a
	// DELETE of a public-access block for a DeleteBucket: refused all the same.
	t.Run("reconfigure", func(t *testing.T) { testHandedOutKeyCannotReconfigure(t, server, withIAMOn(server)) })
	// An access deleted without its finalizer: the collector, paging MinIO's one user
	// list itself, removes its user (TestAccessCollectorRevokesAnAccessDeletedWithoutItsFinalizer).
	t.Run("finalizer stripped", func(t *testing.T) { testFinalizerStripped(t, server) })
}

// storeSpec is the fixture's ObjectStore's spec as the API server holds it.
func (f *fixture) storeSpec() bkv1.ObjectStoreSpec {
	f.t.Helper()
	store := &bkv1.ObjectStore{}
	must(f.t, k8s.Get(f.ctx, types.NamespacedName{Name: f.store}, store))
	return store.Spec
}
