package integration_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/guardrail"
	"github.com/bucketkeeper/bucketkeeper/internal/naming"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestTenantPolicyAttacks acts as a tenant (a Role on storagebuckets, nothing else)
// against the suite's manager and each real store, and tries what a policy checked
// loosely would let through: a public "statement" hidden beside a harmless "Statement"
// (Go-based stores read both as one key), a grant of s3:PutBucketTagging, with which a
// principal of the tenant's could rewrite the ownership tags, grants that would weaken
// an object lock (the Governance bypass, a version's retention, the bucket's lock
// configuration), Ceph RGW's two names for its anonymous user, and Deny statements that
// would shield a public grant from its withdrawal or lock the operator out. Each is
// refused with PolicyNotAllowed or PublicAccessNotAllowed naming the key, action or
// principal, and the store is left exactly as it was: no write, the policy it had, the
// tags it had, no anonymous read. A valid policy is then accepted, and what the store
// holds is the canonical document.
func TestTenantPolicyAttacks(t *testing.T) {
	for _, srv := range everyStore() {
		t.Run(string(srv.Kind), func(t *testing.T) { testTenantPolicyAttacks(t, srv) })
	}
}

func testTenantPolicyAttacks(t *testing.T, server *testenv.S3Server) {
	f := newFixture(t, server)
	tenant := asTenant(t, f)
	bucket := naming.BucketName("", f.ns, "data")
	keep := `{"Sid":"KeepProtected","Effect":"Deny","Principal":"*","Action":["s3:DeleteObject","s3:DeleteObjectVersion"],"Resource":"arn:aws:s3:::` + bucket + `/protected/*"}`
	publicRead := `{"Sid":"Everyone","Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::` + bucket + `/*"}`

	// The claim starts with a valid policy, written the way the store would refuse it
	// if it got the tenant's bytes (Versity takes only a list of statements), and
	// becomes Ready with the canonical document on the store.
	first := `{"Version":"2012-10-17","Statement":` + keep + `}`
	sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "data"},
		Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: f.store},
			Policy: &apiextensionsv1.JSON{Raw: []byte(first)}}}
	must(t, tenant.Create(f.ctx, sb))
	f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	f.assertStorePolicy(bucket, canonicalPolicy(t, first, bucket))
	must(t, f.admin.PutObject(f.ctx, bucket, "public/report.csv", []byte("a,b\n")))
	assertNoAnonymousRead(t, server, bucket, "public/report.csv")
	tags, err := f.admin.GetBucketTagging(f.ctx, bucket)
	must(t, err)

	// A new claim with a refused policy creates nothing.
	twin := `{"Version":"2012-10-17","Statement":[` + keep + `],"statement":[` + publicRead + `]}`
	fresh := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "fresh"},
		Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: f.store},
			Policy: &apiextensionsv1.JSON{Raw: []byte(strings.ReplaceAll(twin, bucket, naming.BucketName("", f.ns, "fresh")))}}}
	must(t, tenant.Create(f.ctx, fresh))
	if got := f.waitStalled(fresh, bkv1.ReasonPolicyNotAllowed, `"statement"`); got.Status.BucketName != "" {
		t.Errorf("the refused claim records bucket %q", got.Status.BucketName)
	}
	if _, err := f.admin.HeadBucket(f.ctx, naming.BucketName("", f.ns, "fresh")); s3.KindOf(err) != s3.KindNotFound {
		t.Errorf("the refused claim's bucket exists on the store (%v)", err)
	}

	both := `"Resource":["arn:aws:s3:::` + bucket + `","arn:aws:s3:::` + bucket + `/*"]`
	withPublicRead := func(principal string) string {
		return `{"Version":"2012-10-17","Statement":[` + strings.Replace(publicRead, `"Principal":"*"`, `"Principal":`+principal, 1) + `]}`
	}
	attacks := []struct {
		name, policy, reason, names string
	}{
		{"statement twin", twin, bkv1.ReasonPolicyNotAllowed, `"statement"`},
		{"principal twin", withPublicRead(`{"AWS":"arn:aws:iam::000000000000:root"},"principal":"*"`), bkv1.ReasonPolicyNotAllowed, `"principal"`},
		{"aws principal type", withPublicRead(`{"aws":"*"}`), bkv1.ReasonPolicyNotAllowed, `"aws"`},
		{"bucket tagging grant", `{"Version":"2012-10-17","Statement":[` + keep + `,{"Sid":"Retag","Effect":"Allow","Principal":{"AWS":"arn:aws:iam::000000000000:root"},"Action":["s3:GetObject","s3:PutBucketTagging"],` + both + `}]}`, bkv1.ReasonPolicyNotAllowed, `"s3:PutBucketTagging"`},
		{"every action", `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::000000000000:root"},"Action":"s3:*","Resource":"arn:aws:s3:::` + bucket + `"}]}`, bkv1.ReasonPolicyNotAllowed, `"s3:*"`},
		{"governance bypass grant", `{"Version":"2012-10-17","Statement":[` + keep + `,{"Sid":"Unlock","Effect":"Allow","Principal":{"AWS":"arn:aws:iam::000000000000:root"},"Action":["s3:DeleteObjectVersion","s3:BypassGovernanceRetention"],"Resource":"arn:aws:s3:::` + bucket + `/*"}]}`, bkv1.ReasonPolicyNotAllowed, `"s3:BypassGovernanceRetention"`},
		{"retention grant", `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::000000000000:root"},"Action":["s3:PutObject","s3:PutObjectRetention"],"Resource":"arn:aws:s3:::` + bucket + `/*"}]}`, bkv1.ReasonPolicyNotAllowed, `"s3:PutObjectRetention"`},
		{"lock configuration grant", `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::000000000000:root"},"Action":"s3:PutBucketObjectLockConfiguration","Resource":"arn:aws:s3:::` + bucket + `"}]}`, bkv1.ReasonPolicyNotAllowed, `"s3:PutBucketObjectLockConfiguration"`},
		// Ceph RGW's anonymous user, by its two names: a check that knows only "*"
		// calls them private.
		{"RGW's anonymous user", withPublicRead(`{"AWS":"arn:aws:iam:::user/anonymous"}`), bkv1.ReasonPublicAccessNotAllowed, `arn:aws:iam:::user/anonymous`},
		{"RGW's empty tenant", withPublicRead(`{"AWS":"arn:aws:iam:::root"}`), bkv1.ReasonPublicAccessNotAllowed, `arn:aws:iam:::root`},
		// A Deny that shields a public grant from its withdrawal, and two that lock
		// the operator out of the bucket.
		{"Deny shield", `{"Version":"2012-10-17","Statement":[` + keep + `,{"Sid":"Shield","Effect":"Deny","Principal":"*","Action":["s3:GetBucketPublicAccessBlock","s3:PutBucketPublicAccessBlock","s3:PutBucketPolicy","s3:DeleteBucketPolicy"],"Resource":"arn:aws:s3:::` + bucket + `"}]}`,
			bkv1.ReasonPolicyNotAllowed, `statement "Shield" denies the action "s3:GetBucketPublicAccessBlock"`},
		{"Deny lock-out", `{"Version":"2012-10-17","Statement":[{"Sid":"LockOut","Effect":"Deny","Principal":"*","Action":"s3:*",` + both + `}]}`,
			bkv1.ReasonPolicyNotAllowed, `statement "LockOut" denies the wildcard action "s3:*"`},
		{"Deny lock-out but for the app", `{"Version":"2012-10-17","Statement":[{"Sid":"AppOnly","Effect":"Deny","NotPrincipal":{"AWS":"arn:aws:iam::000000000000:root"},"Action":"s3:GetObject",` + both + `}]}`,
			bkv1.ReasonPolicyNotAllowed, `statement "AppOnly" is a Deny with NotPrincipal`},
	}
	for _, a := range attacks {
		before := requests.snapshot(f.store)
		latest := sb.DeepCopy()
		f.update(tenant, latest, func() { latest.Spec.Policy = &apiextensionsv1.JSON{Raw: []byte(a.policy)} })
		got := f.waitStalled(sb, a.reason, a.names)
		t.Logf("%s: %s", a.name, findCond(got, bkv1.ConditionStalled).Message)

		if _, mutating, ops := since(before, requests.snapshot(f.store)); mutating != 0 {
			t.Errorf("%s: the refused policy wrote to the store: %v", a.name, ops)
		}
		f.assertStorePolicy(bucket, canonicalPolicy(t, first, bucket))
		now, err := f.admin.GetBucketTagging(f.ctx, bucket)
		must(t, err)
		if !maps.Equal(now, tags) {
			t.Errorf("%s: tags changed from %v to %v", a.name, tags, now)
		}
		assertNoAnonymousRead(t, server, bucket, "public/report.csv")
	}

	// The tenant fixes its policy: accepted, and the store holds the canonical form.
	// Keys out of order, the second account as principal. (Actions keep their case as
	// written: Versity refuses "s3:getobject", which AWS would take.)
	fixed := fmt.Sprintf(`{"Statement":[%s,{"Effect":"Allow","Sid":"Readers","Action":["s3:GetObject","s3:ListBucket"],"Principal":{"AWS":[%q]},`+
		`"Resource":["arn:aws:s3:::%s/*","arn:aws:s3:::%[3]s"]}],"Version":"2012-10-17"}`, keep, principalOf(server), bucket)
	latest := sb.DeepCopy()
	f.update(tenant, latest, func() { latest.Spec.Policy = &apiextensionsv1.JSON{Raw: []byte(fixed)} })
	f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	f.assertStorePolicy(bucket, canonicalPolicy(t, fixed, bucket))
	assertNoAnonymousRead(t, server, bucket, "public/report.csv")
}

// TestStoresReadCaseVariantPolicyKeys is why the guardrail reads keys strictly, and the
// proof that assertNoAnonymousRead can fail: given a harmless "Statement" beside a
// public "statement" directly, as an operator that sent the tenant's bytes would, each
// store applies the public one.
func TestStoresReadCaseVariantPolicyKeys(t *testing.T) {
	for _, c := range []struct {
		name   string
		server *testenv.S3Server
	}{{"seaweedfs", seaweed}, {"versity", versity}} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, c.server)
			bucket := naming.BucketName("", f.ns, "twin")
			must(t, f.admin.CreateBucket(f.ctx, bucket, c.server.Region))
			t.Cleanup(func() {
				_ = f.admin.DeleteBucketPolicy(f.ctx, bucket)
				_ = f.admin.DeleteObjects(f.ctx, bucket, []s3.ObjectID{{Key: "report.csv"}})
				_ = f.admin.DeleteBucket(f.ctx, bucket)
			})
			must(t, f.admin.PutObject(f.ctx, bucket, "report.csv", []byte("a,b\n")))
			assertNoAnonymousRead(t, c.server, bucket, "report.csv")
			twin := fmt.Sprintf(`{"Version":"2012-10-17","Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:DeleteObject","Resource":"arn:aws:s3:::%s/protected/*"}],`+
				`"statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::%[1]s/*"}]}`, bucket)
			must(t, f.admin.PutBucketPolicy(f.ctx, bucket, twin))
			f.eventually(30*time.Second, "an anonymous read under the twin policy", func() error {
				if status, body := anonymousGet(t, c.server, bucket, "report.csv"); status != http.StatusOK {
					return fmt.Errorf("%d %.200s", status, body)
				}
				return nil
			})
		})
	}
}

// principalOf names the suite's second account the way the store's policies do.
func principalOf(server *testenv.S3Server) string {
	switch server.Kind {
	case testenv.Versity:
		return "arn:aws:iam::000000000000:user/other-tenant" // an IAM user of its standalone IAM service
	case testenv.RGW:
		return "arn:aws:iam::" + server.OtherAccountID + ":root" // the second account
	}
	return "arn:aws:iam::other-tenant:user/other-tenant" // the identity's account and name
}

// canonicalPolicy is the document the guardrails pass on for doc.
func canonicalPolicy(t *testing.T, doc, bucket string) string {
	t.Helper()
	report, err := guardrail.InspectPolicy([]byte(doc), bucket, nil)
	if err != nil {
		t.Fatalf("the test's own policy is refused: %v", err)
	}
	return report.Canonical
}

// assertStorePolicy fails unless the bucket's policy, read back with the admin's
// credentials, is want by the comparison the operator uses (awspolicyequivalence).
func (f *fixture) assertStorePolicy(bucket, want string) {
	f.t.Helper()
	have, err := f.admin.GetBucketPolicy(f.ctx, bucket)
	must(f.t, err)
	if same, err := s3.EquivalentPolicies(have, want); err != nil || !same {
		f.t.Errorf("the store holds the policy %s, want %s (%v)", have, want, err)
	}
}

// waitStalled waits until sb is Stalled for reason at its current generation, with a
// message that names what.
func (f *fixture) waitStalled(sb *bkv1.StorageBucket, reason, what string) *bkv1.StorageBucket {
	f.t.Helper()
	var got *bkv1.StorageBucket
	f.eventually(60*time.Second, fmt.Sprintf("Stalled (%s) naming %s on %s", reason, what, sb.Name), func() error {
		got = &bkv1.StorageBucket{}
		if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(sb), got); err != nil {
			return err
		}
		c := apimeta.FindStatusCondition(got.Status.Conditions, bkv1.ConditionStalled)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != reason || c.ObservedGeneration != got.Generation || !strings.Contains(c.Message, what) {
			return fmt.Errorf("generation %d, conditions: %s", got.Generation, describe(got.Status.Conditions))
		}
		return nil
	})
	return got
}

// assertNoAnonymousRead fails unless an unsigned GET of the object is refused.
func assertNoAnonymousRead(t *testing.T, server *testenv.S3Server, bucket, key string) {
	t.Helper()
	status, body := anonymousGet(t, server, bucket, key)
	if status != http.StatusForbidden {
		t.Errorf("anonymous GET %s/%s: %d %.200s, want 403", bucket, key, status, body)
	}
}

// anonymousGet is an unsigned GET of an object, path style, as anyone on the network.
func anonymousGet(t *testing.T, server *testenv.S3Server, bucket, key string) (int, string) {
	t.Helper()
	status, body, err := server.AnonymousRequest(context.Background(), http.MethodGet, "/"+bucket+"/"+key, nil)
	must(t, err)
	return status, body
}

// asTenant returns a client that acts as the namespace's tenant: a ServiceAccount whose
// only permission is a Role on storagebuckets in its own namespace (no status, no
// Secrets), impersonated the way its token would authenticate, once the API server
// grants the Role.
func asTenant(t *testing.T, f *fixture) client.Client {
	t.Helper()
	c, err := testenv.ServiceAccountClient(f.ctx, k8s, cfg, operator.Scheme(), f.ns, "tenant", []rbacv1.PolicyRule{{
		APIGroups: []string{bkv1.GroupVersion.Group}, Resources: []string{"storagebuckets"},
		Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}})
	must(t, err)
	// The authorizer learns of the Role from its own watch: wait until it does.
	f.eventually(30*time.Second, "the tenant's Role to take effect", func() error {
		return c.List(f.ctx, &bkv1.StorageBucketList{}, client.InNamespace(f.ns))
	})
	return c
}
