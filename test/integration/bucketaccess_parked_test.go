package integration_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsiam "github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/smithy-go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestParkedAccessReachesNoBucketItsSpecDoesNotGrantReady is the attack on a key whose
// access waits: a tenant edits its Ready access to name a bucket that is not Ready
// (one it suspended before it was ever made, then one on an ObjectStore that does not
// exist: neither a guardrail refusal) and deletes the bucket it named before. Another
// party then takes that bucket's name, as a recycled namespace, another tenant on a
// store that allows any name, or an adoption would. The old key reads nothing of the
// new owner's and writes nothing there, on every store; it keeps working on the Ready
// bucket its spec still names, until the spec names none; and the store's user never
// holds a policy naming a bucket the spec does not grant Ready.
func TestParkedAccessReachesNoBucketItsSpecDoesNotGrantReady(t *testing.T) {
	for _, srv := range everyStore() {
		t.Run(string(srv.Kind), func(t *testing.T) {
			t.Parallel()
			testParkedAccess(t, srv)
		})
	}
}

func testParkedAccess(t *testing.T, srv *testenv.S3Server) {
	f := newFixture(t, srv, withIAMOn(srv))
	// The next holder of the name: another namespace, on a store that lets a claim name
	// any bucket.
	next := newFixture(t, srv, func(s *bkv1.ObjectStore) { s.Spec.Guardrails.AllowBucketNamesOutsideNamespace = true })
	f.waitStoreCondition(bkv1.ConditionAccessProviderReady, metav1.ConditionTrue)
	purge := func(sb *bkv1.StorageBucket) { sb.Spec.DeletionPolicy = bkv1.DeletionPolicyPurge }
	sbData := f.waitCondition(f.bucket("data", purge), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	data := sbData.Status.BucketName
	logs := f.waitCondition(f.bucket("logs"), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady).Status.BucketName
	ba := f.waitAccessReady(f.access("app", "app-creds",
		bkv1.BucketGrant{Name: "data", Mode: bkv1.AccessReadWrite}, bkv1.BucketGrant{Name: "logs", Mode: bkv1.AccessReadWrite}))
	key := f.secretClient("app-creds")
	must(t, key.c.PutObject(f.ctx, data, "mine", []byte("a")))
	must(t, key.c.PutObject(f.ctx, logs, "line", []byte("a")))
	user := ba.Status.IdentityName
	tenant := tenantClient(t, f)

	// The tenant parks the access on a bucket of its own store that is not Ready, keeps
	// logs, and deletes data, which goes from the store.
	createAs(f, tenant, &bkv1.StorageBucket{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "park"},
		Spec:       bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: f.store}, Suspend: true},
	})
	f.update(tenant, ba, func() {
		ba.Spec.Buckets = []bkv1.BucketGrant{{Name: "logs", Mode: bkv1.AccessReadWrite}, {Name: "park", Mode: bkv1.AccessReadWrite}}
	})
	f.waitAccessCondition(ba, bkv1.ConditionReconciling, metav1.ConditionTrue, bkv1.ReasonBucketNotReady)
	must(t, tenant.Delete(f.ctx, sbData))
	f.waitGone(sbData)
	f.eventually(60*time.Second, "bucket "+data+" gone from the store", func() error {
		if _, err := f.admin.HeadBucket(f.ctx, data); s3.KindOf(err) != s3.KindNotFound {
			return fmt.Errorf("HeadBucket: %v", err)
		}
		return nil
	})

	// Someone else takes the name and writes there.
	next.waitCondition(next.bucket("taken", purge, func(sb *bkv1.StorageBucket) { sb.Spec.BucketName = data }),
		bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	must(t, next.admin.PutObject(next.ctx, data, "theirs", []byte("secret")))

	// The parked key reaches nothing of theirs, within the collector's bound (the
	// controller narrows at once), and still writes logs.
	f.waitKeyRefused(key, data)
	_, err := key.c.GetObject(f.ctx, data, "theirs", 100)
	wantRefused(t, "the parked key reading the next holder's object", err)
	wantRefused(t, "the parked key writing into the next holder's bucket", key.c.PutObject(f.ctx, data, "mine-again", []byte("a")))
	must(t, key.c.PutObject(f.ctx, logs, "still", []byte("a")))
	wantPolicyOnly(t, srv, user, logs)

	// Parked on a bucket of an ObjectStore that does not exist: the key reaches nothing.
	createAs(f, tenant, &bkv1.StorageBucket{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "ghost"},
		Spec:       bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: "no-such-store-" + f.ns}},
	})
	f.update(tenant, ba, func() { ba.Spec.Buckets = []bkv1.BucketGrant{{Name: "ghost", Mode: bkv1.AccessReadWrite}} })
	f.waitKeyRefused(key, logs)
	wantPolicyOnly(t, srv, user)

	// The next holder's bucket holds its object and nothing the parked key wrote.
	if body, err := next.admin.GetObject(next.ctx, data, "theirs", 100); err != nil || string(body) != "secret" {
		t.Errorf("the next holder's object: %q, %v", body, err)
	}
	page, err := next.admin.ListObjectVersions(next.ctx, data, nil)
	must(t, err)
	for _, v := range page.Versions {
		if v.Key != "theirs" {
			t.Errorf("the next holder's bucket holds %q, written with the parked key", v.Key)
		}
	}
}

// TestParkedAccessLosesABucketItsNamespaceLost: a tenant parks its Ready access on a
// bucket of an ObjectStore that does not exist (not Ready, and no guardrail refusal),
// so no live access names its old bucket any more; then the platform team takes the
// namespace off the old bucket's store. The old key reads and writes nothing in that
// bucket, on every store, and the store's user holds no policy naming it: nothing
// that admits the namespace grants it.
func TestParkedAccessLosesABucketItsNamespaceLost(t *testing.T) {
	for _, srv := range everyStore() {
		t.Run(string(srv.Kind), func(t *testing.T) {
			t.Parallel()
			testParkedAccessNamespaceRemoved(t, srv)
		})
	}
}

func testParkedAccessNamespaceRemoved(t *testing.T, srv *testenv.S3Server) {
	const allowed = "test.bucketkeeper.io/parked-allowed"
	f := newFixture(t, srv, withIAMOn(srv), func(s *bkv1.ObjectStore) {
		s.Spec.AllowedNamespaces = &metav1.LabelSelector{MatchLabels: map[string]string{allowed: "true"}}
	})
	yes := "true"
	f.labelNamespace(allowed, &yes)
	f.waitStoreCondition(bkv1.ConditionAccessProviderReady, metav1.ConditionTrue)
	sbData := f.waitCondition(f.bucket("data"), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	data := sbData.Status.BucketName
	ba := f.waitAccessReady(f.access("app", "app-creds", bkv1.BucketGrant{Name: "data", Mode: bkv1.AccessReadWrite}))
	key := f.secretClient("app-creds")
	must(t, key.c.PutObject(f.ctx, data, "mine", []byte("a")))
	user := ba.Status.IdentityName
	tenant := tenantClient(t, f)

	createAs(f, tenant, &bkv1.StorageBucket{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "ghost"},
		Spec:       bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: "no-such-store-" + f.ns}},
	})
	f.update(tenant, ba, func() { ba.Spec.Buckets = []bkv1.BucketGrant{{Name: "ghost", Mode: bkv1.AccessReadWrite}} })
	f.waitAccessCondition(ba, bkv1.ConditionReconciling, metav1.ConditionTrue, bkv1.ReasonBucketNotReady)

	f.labelNamespace(allowed, nil)
	f.waitCondition(sbData, bkv1.ConditionStalled, metav1.ConditionTrue, bkv1.ReasonNamespaceNotAllowed)
	f.waitKeyRefused(key, data)
	_, err := key.c.GetObject(f.ctx, data, "mine", 100)
	wantRefused(t, "the parked key reading the bucket of a namespace its store no longer admits", err)
	wantPolicyOnly(t, srv, user)
	page, err := f.admin.ListObjectVersions(f.ctx, data, nil)
	must(t, err)
	for _, v := range page.Versions {
		if v.Key != "mine" {
			t.Errorf("bucket %s holds %q, written with the parked key", data, v.Key)
		}
	}
}

// createAs creates obj with c (a tenant's client), retrying while the API server's
// authorizer has not yet learnt of the tenant's Role.
func createAs(f *fixture, c client.Client, obj client.Object) {
	f.t.Helper()
	f.eventually(30*time.Second, "creating "+obj.GetName()+" as the tenant", func() error {
		return client.IgnoreAlreadyExists(c.Create(f.ctx, obj))
	})
}

// wantRefused: the store refused the call as a bad or unauthorised key.
func wantRefused(t *testing.T, what string, err error) {
	t.Helper()
	if kind := s3.KindOf(err); kind != s3.KindAccessDenied && kind != s3.KindInvalidCredentials {
		t.Errorf("%s: %v, want AccessDenied or InvalidAccessKeyId", what, err)
	}
}

// wantPolicyOnly asserts that user's inline policy on srv names no bucket but buckets
// (none: the user has no policy, or is gone).
func wantPolicyOnly(t *testing.T, srv *testenv.S3Server, user string, buckets ...string) {
	t.Helper()
	out, err := srv.IAMClient().GetUserPolicy(t.Context(), &awsiam.GetUserPolicyInput{UserName: aws.String(user), PolicyName: aws.String(iam.PolicyName)})
	if err != nil {
		var apiErr smithy.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode() == "NoSuchEntity" {
			return // no policy, or no user
		}
		t.Fatalf("GetUserPolicy %s: %v", user, err)
	}
	named := policyBuckets(t, aws.ToString(out.PolicyDocument))
	for _, b := range named {
		if !slices.Contains(buckets, b) {
			t.Errorf("user %s holds a policy naming bucket %s; its spec grants Ready only %v", user, b, buckets)
		}
	}
}

// policyBuckets lists the buckets an IAM policy document names in its resources.
func policyBuckets(t *testing.T, doc string) []string {
	t.Helper()
	if unescaped, err := url.QueryUnescape(doc); err == nil {
		doc = unescaped // AWS and some stores answer the document URL-encoded
	}
	var policy struct {
		Statement []struct {
			Resource any
		}
	}
	must(t, json.Unmarshal([]byte(doc), &policy))
	var out []string
	add := func(r string) {
		b, _, _ := strings.Cut(strings.TrimPrefix(r, "arn:aws:s3:::"), "/")
		if !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	for _, s := range policy.Statement {
		switch r := s.Resource.(type) {
		case string:
			add(r)
		case []any:
			for _, x := range r {
				if s, ok := x.(string); ok {
					add(s)
				}
			}
		}
	}
	return out
}
