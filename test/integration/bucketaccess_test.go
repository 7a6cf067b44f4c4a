package integration_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsiam "github.com/aws/aws-sdk-go-v2/service/iam"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestBucketAccessTenants: two tenants, each with a bucket and an access on the same
// server. Each Secret's key works on its own bucket only and can neither create
// buckets nor change policies (TestAccessSecretAloneWithTheAWSCLI runs the README's
// aws CLI recipe with a Secret alone); a ReadOnly access cannot write; a rotation ends with
// one working key in the Secret; deleting an access revokes its key.
func TestBucketAccessTenants(t *testing.T) {
	for _, srv := range everyStore() {
		t.Run(string(srv.Kind), func(t *testing.T) {
			t.Parallel()
			testBucketAccessTenants(t, srv)
		})
	}
}

func testBucketAccessTenants(t *testing.T, srv *testenv.S3Server) {
	withIAM := withIAMOn(srv)
	a, b := newFixture(t, srv, withIAM), newFixture(t, srv, withIAM)
	a.waitStoreCondition(bkv1.ConditionAccessProviderReady, metav1.ConditionTrue)
	b.waitStoreCondition(bkv1.ConditionAccessProviderReady, metav1.ConditionTrue)

	sbA, sbB := a.bucket("data"), b.bucket("data")
	sbA = a.waitCondition(sbA, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	sbB = b.waitCondition(sbB, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	bucketA, bucketB := sbA.Status.BucketName, sbB.Status.BucketName
	must(t, a.admin.PutObject(a.ctx, bucketB, "seed", []byte("seed")))

	// With the IAM provider, the StorageBucket's own Secret carries no keys.
	conn := &corev1.Secret{}
	must(t, k8s.Get(a.ctx, types.NamespacedName{Namespace: a.ns, Name: sbA.Status.ConnectionSecretName}, conn))
	if _, ok := conn.Data[bkv1.SecretKeyAWSSecretKey]; ok {
		t.Errorf("connection Secret carries a key with the IAM provider: %v", keysOf(conn.Data))
	}

	baA := a.access("app", "app-creds", bkv1.BucketGrant{Name: "data", Mode: bkv1.AccessReadWrite})
	baB := b.access("reader", "reader-creds", bkv1.BucketGrant{Name: "data", Mode: bkv1.AccessReadOnly})
	baA, baB = a.waitAccessReady(baA), b.waitAccessReady(baB)
	keyA := a.secretClient("app-creds")
	keyB := b.secretClient("reader-creds")
	if baA.Status.IdentityName == "" || baA.Status.AccessKeyID == "" || baA.Status.KeyCreatedAt == nil {
		t.Errorf("status lacks identity or key: %+v", baA.Status)
	}

	// Own bucket: read and write. Other tenant's bucket, new buckets, policies: 403.
	must(t, keyA.c.PutObject(a.ctx, bucketA, "hello", []byte("hello")))
	if body, err := keyA.c.GetObject(a.ctx, bucketA, "hello", 100); err != nil || string(body) != "hello" {
		t.Errorf("GetObject own bucket: %q, %v", body, err)
	}
	wantDenied(t, "PutObject into the other tenant's bucket", keyA.c.PutObject(a.ctx, bucketB, "x", []byte("x")))
	_, err := keyA.c.GetObject(a.ctx, bucketB, "seed", 100)
	wantDenied(t, "GetObject from the other tenant's bucket", err)
	wantDenied(t, "CreateBucket", keyA.c.CreateBucket(a.ctx, "bk-"+a.ns+"-new", ""))
	wantDenied(t, "PutBucketPolicy", keyA.c.PutBucketPolicy(a.ctx, bucketA, policyJSONString(bucketA)))

	// ReadOnly: reads its bucket, writes nowhere.
	if body, err := keyB.c.GetObject(b.ctx, bucketB, "seed", 100); err != nil || string(body) != "seed" {
		t.Errorf("ReadOnly GetObject: %q, %v", body, err)
	}
	wantDenied(t, "ReadOnly PutObject", keyB.c.PutObject(b.ctx, bucketB, "x", []byte("x")))
	wantDenied(t, "ReadOnly access on the other tenant's bucket", func() error { _, err := keyB.c.GetObject(b.ctx, bucketA, "hello", 100); return err }())

	// Rotation on request: a new key in the Secret, the old one gone after the grace.
	rotated := a.rotateOnRequest(baA, keyA, "app-creds", bucketA)
	if keys := listKeys(t, srv, baA); len(keys) != 1 || keys[0] != rotated.id {
		t.Errorf("keys after rotation: %v, want only %s", keys, rotated.id)
	}

	// Revocation: deleting the access deletes its user and the key stops working.
	got := &bkv1.BucketAccess{}
	must(t, k8s.Get(a.ctx, client.ObjectKeyFromObject(baA), got))
	user := got.Status.IdentityName
	must(t, k8s.Delete(a.ctx, baA))
	a.waitGone(&bkv1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Namespace: a.ns, Name: baA.Name}})
	a.waitKeyRejected(rotated, bucketA)
	users, err := srv.IAMClient().ListUsers(a.ctx, &awsiam.ListUsersInput{})
	must(t, err)
	for _, u := range users.Users {
		if aws.ToString(u.UserName) == user {
			t.Errorf("user %s is still on the store after its access was deleted", user)
		}
	}
	if err := k8s.Get(a.ctx, types.NamespacedName{Namespace: a.ns, Name: "app-creds"}, &corev1.Secret{}); client.IgnoreNotFound(err) != nil || err == nil {
		t.Errorf("the access's Secret outlived it: %v", err)
	}
	// The other tenant's key is untouched.
	if _, err := keyB.c.GetObject(b.ctx, bucketB, "seed", 100); err != nil {
		t.Errorf("the other tenant's key stopped working: %v", err)
	}
}

// TestBucketAccessWaitsAndRefuses: an access naming a missing StorageBucket waits
// and creates nothing on the store; on a store without IAM it stalls.
func TestBucketAccessWaitsAndRefuses(t *testing.T) {
	f := newFixture(t, seaweed, func(s *bkv1.ObjectStore) {
		s.Spec.AccessProvider = &bkv1.AccessProvider{Type: bkv1.AccessProviderIAM}
	})
	// A StorageBucket of another namespace is never found: names resolve in the
	// access's own namespace only.
	other := newFixture(t, seaweed, func(s *bkv1.ObjectStore) {
		s.Spec.AccessProvider = &bkv1.AccessProvider{Type: bkv1.AccessProviderIAM}
	})
	other.waitCondition(other.bucket("foreign"), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	before := userNames(t, seaweed)
	ba := f.access("early", "early-creds", bkv1.BucketGrant{Name: "later"})
	thief := f.access("thief", "thief-creds", bkv1.BucketGrant{Name: "foreign"})
	f.waitAccessCondition(ba, bkv1.ConditionReconciling, metav1.ConditionTrue, bkv1.ReasonBucketNotReady)
	f.waitAccessCondition(thief, bkv1.ConditionReconciling, metav1.ConditionTrue, bkv1.ReasonBucketNotReady)
	// Only additions count: the access collector may delete other tests' leftovers
	// meanwhile.
	if added := without(userNames(t, seaweed), before); len(added) > 0 {
		t.Errorf("users created while the accesses waited: %v", added)
	}
	if err := k8s.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: "thief-creds"}, &corev1.Secret{}); err == nil {
		t.Errorf("an access naming another namespace's bucket got a Secret")
	}
	f.bucket("later")
	f.waitAccessReady(ba)

	plain := newFixture(t, seaweed)
	plain.bucket("data")
	ba2 := plain.access("nope", "nope-creds", bkv1.BucketGrant{Name: "data"})
	plain.waitAccessCondition(ba2, bkv1.ConditionStalled, metav1.ConditionTrue, bkv1.ReasonAccessProviderNotIAM)
}

// secretKey is a client built from an access Secret alone, as an application would.
type secretKey struct {
	id string
	c  s3.Client
}

func (f *fixture) secretClient(name string) secretKey {
	f.t.Helper()
	secret := &corev1.Secret{}
	must(f.t, k8s.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: name}, secret))
	d := secret.Data
	c, err := s3.New(f.ctx, s3.Config{
		Endpoint: string(d[bkv1.AccessSecretKeyEndpoint]), Region: string(d[bkv1.AccessSecretKeyRegion]), ForcePathStyle: true,
		AccessKeyID: string(d[bkv1.AccessSecretKeyAccessKeyID]), SecretAccessKey: string(d[bkv1.AccessSecretKeySecretKey]),
		RequestTimeout: 10 * time.Second,
	})
	must(f.t, err)
	return secretKey{id: string(d[bkv1.AccessSecretKeyAccessKeyID]), c: c}
}

func (f *fixture) access(name, secret string, grants ...bkv1.BucketGrant) *bkv1.BucketAccess {
	return f.createAccess(&bkv1.BucketAccess{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		Spec:       bkv1.BucketAccessSpec{Buckets: grants, SecretName: secret},
	})
}

// createAccess creates ba, and deletes it when the test ends.
func (f *fixture) createAccess(ba *bkv1.BucketAccess) *bkv1.BucketAccess {
	must(f.t, k8s.Create(f.ctx, ba))
	name := ba.Name
	f.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = k8s.Delete(ctx, ba)
		f.eventually(time.Minute, "deletion of access "+name, func() error {
			err := k8s.Get(ctx, client.ObjectKeyFromObject(ba), &bkv1.BucketAccess{})
			if err == nil {
				return fmt.Errorf("still there")
			}
			return client.IgnoreNotFound(err)
		})
	})
	return ba
}

func (f *fixture) waitAccessReady(ba *bkv1.BucketAccess) *bkv1.BucketAccess {
	return f.waitAccessCondition(ba, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
}

func (f *fixture) waitAccessCondition(ba *bkv1.BucketAccess, typ string, status metav1.ConditionStatus, reason string) *bkv1.BucketAccess {
	f.t.Helper()
	got := &bkv1.BucketAccess{}
	f.eventually(90*time.Second, fmt.Sprintf("%s=%s (%s) on access %s", typ, status, reason, ba.Name), func() error {
		if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(ba), got); err != nil {
			return err
		}
		c := apimeta.FindStatusCondition(got.Status.Conditions, typ)
		if c == nil || c.Status != status || (reason != "" && c.Reason != reason) {
			return fmt.Errorf("conditions: %s", describe(got.Status.Conditions))
		}
		return nil
	})
	return got
}

func (f *fixture) waitStoreCondition(typ string, status metav1.ConditionStatus) {
	f.t.Helper()
	store := &bkv1.ObjectStore{}
	f.eventually(60*time.Second, typ+" on store "+f.store, func() error {
		if err := k8s.Get(f.ctx, types.NamespacedName{Name: f.store}, store); err != nil {
			return err
		}
		if c := findStoreCond(store, typ); c == nil || c.Status != status {
			return fmt.Errorf("conditions: %s", describe(store.Status.Conditions))
		}
		return nil
	})
}

// waitKeyRejected waits until the store refuses a revoked key (within seconds).
// rotateOnRequest asks the access for a rotation (request "r1") and waits until it is
// handled and its grace over: the Secret holds a new key that writes the bucket, and
// the old key is refused. It returns the new key.
func (f *fixture) rotateOnRequest(ba *bkv1.BucketAccess, old secretKey, secretName, bucket string) secretKey {
	t := f.t
	t.Helper()
	must(t, patchAnnotation(f.ctx, ba, bkv1.AnnotationRotateRequestedAt, "r1"))
	f.eventually(90*time.Second, "rotation r1 handled and its grace over", func() error {
		got := &bkv1.BucketAccess{}
		must(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(ba), got))
		r := got.Status.Rotation
		if r.LastHandledRequest != "r1" || r.State != bkv1.RotationIdle || got.Status.AccessKeyID == old.id {
			return fmt.Errorf("status %+v key %s", r, got.Status.AccessKeyID)
		}
		return nil
	})
	rotated := f.secretClient(secretName)
	if rotated.id == old.id {
		t.Fatalf("the Secret still holds %s after the rotation", old.id)
	}
	must(t, rotated.c.PutObject(f.ctx, bucket, "after-rotation", []byte("x")))
	f.waitKeyRejected(old, bucket)
	return rotated
}

func (f *fixture) waitKeyRejected(k secretKey, bucket string) {
	f.t.Helper()
	f.eventually(15*time.Second, "key "+k.id+" rejected", func() error {
		if err := k.c.PutObject(f.ctx, bucket, "revoked", []byte("x")); err == nil {
			return fmt.Errorf("key %s still writes", k.id)
		}
		return nil
	})
}

func wantDenied(t *testing.T, what string, err error) {
	t.Helper()
	if s3.KindOf(err) != s3.KindAccessDenied {
		t.Errorf("%s: %v, want AccessDenied", what, err)
	}
}

func patchAnnotation(ctx context.Context, obj client.Object, key, value string) error {
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value))
	return k8s.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))
}

func policyJSONString(bucket string) string {
	return `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":["s3:GetObject"],"Resource":["arn:aws:s3:::` + bucket + `/*"]}]}`
}

func listKeys(t *testing.T, srv *testenv.S3Server, ba *bkv1.BucketAccess) []string {
	t.Helper()
	got := &bkv1.BucketAccess{}
	must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(ba), got))
	out, err := srv.IAMClient().ListAccessKeys(context.Background(), &awsiam.ListAccessKeysInput{UserName: aws.String(got.Status.IdentityName)})
	must(t, err)
	var ids []string
	for _, k := range out.AccessKeyMetadata {
		ids = append(ids, aws.ToString(k.AccessKeyId))
	}
	return ids
}

// without returns the names of after that are not in before.
func without(after, before []string) []string {
	var out []string
	for _, n := range after {
		if !slices.Contains(before, n) {
			out = append(out, n)
		}
	}
	return out
}

func userNames(t *testing.T, srv *testenv.S3Server) []string {
	t.Helper()
	out, err := srv.IAMClient().ListUsers(context.Background(), &awsiam.ListUsersInput{})
	must(t, err)
	var names []string
	for _, u := range out.Users {
		names = append(names, aws.ToString(u.UserName))
	}
	slices.Sort(names)
	return names
}

// TestBucketAccessSpansBucketsRotatesUnderLoadAndFollowsItsBuckets: one access over
// two buckets works on both in its modes; a rotation under a client that writes
// continuously (and re-reads the Secret on a refusal) loses no write; deleting one of
// its StorageBuckets revokes the key at once, although the bucket is retained.
func TestBucketAccessSpansBucketsRotatesUnderLoadAndFollowsItsBuckets(t *testing.T) {
	for _, srv := range everyStore() {
		t.Run(string(srv.Kind), func(t *testing.T) {
			t.Parallel()
			testBucketAccessSpans(t, srv)
		})
	}
}

func testBucketAccessSpans(t *testing.T, srv *testenv.S3Server) {
	f := newFixture(t, srv, withIAMOn(srv))
	rw := f.waitCondition(f.bucket("logs"), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	ro := f.waitCondition(f.bucket("models"), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	must(t, f.admin.PutObject(f.ctx, ro.Status.BucketName, "model", []byte("weights")))
	ba := f.access("trainer", "trainer-creds",
		bkv1.BucketGrant{Name: "logs", Mode: bkv1.AccessReadWrite},
		bkv1.BucketGrant{Name: "models", Mode: bkv1.AccessReadOnly})
	f.waitAccessReady(ba)
	key := f.secretClient("trainer-creds")
	must(t, key.c.PutObject(f.ctx, rw.Status.BucketName, "line", []byte("1")))
	if body, err := key.c.GetObject(f.ctx, ro.Status.BucketName, "model", 100); err != nil || string(body) != "weights" {
		t.Errorf("read of the ReadOnly bucket: %q, %v", body, err)
	}
	wantDenied(t, "write into the ReadOnly bucket", key.c.PutObject(f.ctx, ro.Status.BucketName, "x", []byte("x")))
	secret := &corev1.Secret{}
	must(t, k8s.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: "trainer-creds"}, secret))
	if got, want := string(secret.Data[bkv1.AccessSecretKeyBucketNames]), "logs="+rw.Status.BucketName+",models="+ro.Status.BucketName; got != want {
		t.Errorf("%s = %q, want %q", bkv1.AccessSecretKeyBucketNames, got, want)
	}

	// A writer that re-reads the Secret when refused, through a rotation.
	stop, done := make(chan struct{}), make(chan struct{})
	var writes, lost, rereads int
	go func() {
		defer close(done)
		c := key
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			writes++
			if err := c.c.PutObject(f.ctx, rw.Status.BucketName, fmt.Sprintf("w/%d", i), []byte("x")); err == nil {
				continue
			}
			rereads++
			c = f.secretClient("trainer-creds")
			if err := c.c.PutObject(f.ctx, rw.Status.BucketName, fmt.Sprintf("w/%d", i), []byte("x")); err != nil {
				lost++
			}
		}
	}()
	must(t, patchAnnotation(f.ctx, ba, bkv1.AnnotationRotateRequestedAt, "under-load"))
	f.eventually(90*time.Second, "rotation under load finished", func() error {
		got := &bkv1.BucketAccess{}
		must(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(ba), got))
		if r := got.Status.Rotation; r.LastHandledRequest != "under-load" || r.State != bkv1.RotationIdle {
			return fmt.Errorf("rotation %+v", r)
		}
		return nil
	})
	f.waitKeyRejected(key, rw.Status.BucketName) // the old key is gone: the writer must have switched
	close(stop)
	<-done
	t.Logf("%d writes, %d re-reads of the Secret, %d lost", writes, rereads, lost)
	if lost > 0 {
		t.Errorf("%d of %d writes were lost during the rotation", lost, writes)
	}
	current := f.secretClient("trainer-creds")
	must(t, current.c.PutObject(f.ctx, rw.Status.BucketName, "after", []byte("x")))

	// Deleting one StorageBucket (retained on the store) revokes the key.
	must(t, k8s.Delete(f.ctx, ro))
	f.waitKeyRejected(current, rw.Status.BucketName)
	f.waitAccessCondition(ba, bkv1.ConditionReconciling, metav1.ConditionTrue, bkv1.ReasonBucketNotReady)
}

// TestStorageBucketImplicitAccess: spec.access keeps the one-bucket case one object;
// switching it to None revokes the key.
func TestStorageBucketImplicitAccess(t *testing.T) {
	f := newFixture(t, seaweed, func(s *bkv1.ObjectStore) {
		s.Spec.AccessProvider = &bkv1.AccessProvider{Type: bkv1.AccessProviderIAM}
	})
	sb := f.waitCondition(f.bucket("uploads", func(sb *bkv1.StorageBucket) { sb.Spec.Access = "ReadWrite" }),
		bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	ba := &bkv1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "uploads"}}
	got := f.waitAccessReady(ba)
	if !metav1.IsControlledBy(got, sb) {
		t.Errorf("the implicit access is not controlled by its StorageBucket: %v", got.OwnerReferences)
	}
	key := f.secretClient("uploads-access")
	must(t, key.c.PutObject(f.ctx, sb.Status.BucketName, "file", []byte("x")))

	f.update(k8s, sb, func() { sb.Spec.Access = "None" })
	f.waitGone(ba)
	f.waitKeyRejected(key, sb.Status.BucketName)
}

// TestBucketAccessRevokedWhileItsBucketIsRefused: when the store's admin stops
// allowing the namespace, the bucket is Stalled (NamespaceNotAllowed) and the
// access's key is revoked, its Secret deleted and the condition says why; once the
// namespace is allowed again, a new key is issued.
func TestBucketAccessRevokedWhileItsBucketIsRefused(t *testing.T) {
	for _, srv := range everyStore() {
		t.Run(string(srv.Kind), func(t *testing.T) {
			t.Parallel()
			testRevokedWhileRefused(t, srv)
		})
	}
}

func testRevokedWhileRefused(t *testing.T, srv *testenv.S3Server) {
	const allowed = "test.bucketkeeper.io/allowed"
	f := newFixture(t, srv, withIAMOn(srv), func(s *bkv1.ObjectStore) {
		s.Spec.AllowedNamespaces = &metav1.LabelSelector{MatchLabels: map[string]string{allowed: "true"}}
	})
	label := func(value *string) { f.labelNamespace(allowed, value) }
	yes := "true"
	label(&yes)
	sb := f.waitCondition(f.bucket("data"), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	ba := f.waitAccessReady(f.access("app", "app-creds", bkv1.BucketGrant{Name: "data"}))
	key := f.secretClient("app-creds")
	must(t, key.c.PutObject(f.ctx, sb.Status.BucketName, "x", []byte("x")))

	label(nil)
	f.waitCondition(sb, bkv1.ConditionStalled, metav1.ConditionTrue, bkv1.ReasonNamespaceNotAllowed)
	got := f.waitAccessCondition(ba, bkv1.ConditionStalled, metav1.ConditionTrue, bkv1.ReasonBucketRefused)
	if c := apimeta.FindStatusCondition(got.Status.Conditions, bkv1.ConditionReady); c == nil || !strings.Contains(c.Message, bkv1.ReasonNamespaceNotAllowed) {
		t.Errorf("Ready does not say why: %s", describe(got.Status.Conditions))
	}
	f.waitKeyRefused(key, sb.Status.BucketName)
	if err := k8s.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: "app-creds"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Secret of a revoked key is still there: %v", err)
	}
	if slices.Contains(allUserNames(t, srv), got.Status.IdentityName) {
		t.Errorf("user %s is still on the store", got.Status.IdentityName)
	}

	label(&yes)
	f.waitAccessReady(ba)
	again := f.secretClient("app-creds")
	if again.id == key.id {
		t.Fatalf("the revoked key %s came back", key.id)
	}
	f.eventually(30*time.Second, "the new key writes", func() error {
		return again.c.PutObject(f.ctx, sb.Status.BucketName, "y", []byte("y"))
	})
	f.waitNoOrphanUsers(srv)
}

// labelNamespace sets the label key of the fixture's namespace to value, or removes
// it (nil), as the platform team admits a namespace to a store or takes it away.
func (f *fixture) labelNamespace(key string, value *string) {
	f.t.Helper()
	v := "null"
	if value != nil {
		v = fmt.Sprintf("%q", *value)
	}
	patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, key, v))
	must(f.t, k8s.Patch(f.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}, client.RawPatch(types.MergePatchType, patch)))
}
