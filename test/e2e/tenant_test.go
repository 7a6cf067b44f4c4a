package e2e_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/naming"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// asTenant returns a client that acts as the namespace's tenant: a ServiceAccount whose
// only permission is a Role on storagebuckets in its own namespace (no status, no
// Secrets), impersonated the way its token would authenticate.
func asTenant(t *testing.T, f *fixture) client.Client {
	t.Helper()
	c, err := testenv.ServiceAccountClient(f.ctx, k8s, cfg, operator.Scheme(), f.ns, "tenant", []rbacv1.PolicyRule{{
		APIGroups: []string{bkv1.GroupVersion.Group}, Resources: []string{"storagebuckets"},
		Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}})
	must(t, err)
	return c
}

// adminBucket is a bucket the platform team made by hand, outside bucketkeeper, with
// data, a tag and no policy. snapshot reads it back, so a test can prove it unchanged.
type adminBucket struct {
	name string
	tags map[string]string
	data []byte
}

const adminObject = "terraform.tfstate"

func newAdminBucket(t *testing.T, f *fixture, name string) *adminBucket {
	t.Helper()
	b := &adminBucket{name: name, tags: map[string]string{"owner": "platform"}, data: []byte(`{"serial": 42}`)}
	must(t, f.s3.CreateBucket(f.ctx, name, f.srv.Region))
	must(t, f.s3.PutBucketTagging(f.ctx, name, b.tags))
	must(t, f.s3.PutObject(f.ctx, name, adminObject, b.data))
	t.Cleanup(func() {
		_ = f.s3.DeleteObjects(f.ctx, name, []s3.ObjectID{{Key: adminObject}})
		_ = f.s3.DeleteBucket(f.ctx, name)
	})
	return b
}

// assertIntact fails the test unless the bucket still holds exactly what the admin put
// there: the object, the tags (no ownership tags), and no policy.
func (b *adminBucket) assertIntact(t *testing.T, f *fixture) {
	t.Helper()
	data, err := f.s3.GetObject(f.ctx, b.name, adminObject, 1<<20)
	if err != nil || !bytes.Equal(data, b.data) {
		t.Errorf("admin bucket %s: object %s = %q, %v; want %q", b.name, adminObject, data, err, b.data)
	}
	tags, err := f.s3.GetBucketTagging(f.ctx, b.name)
	if err != nil || !maps.Equal(tags, b.tags) {
		t.Errorf("admin bucket %s: tags = %v, %v; want %v", b.name, tags, err, b.tags)
	}
	if policy, err := f.s3.GetBucketPolicy(f.ctx, b.name); err != nil || policy != "" {
		t.Errorf("admin bucket %s: policy = %q, %v; want none", b.name, policy, err)
	}
}

func randomSuffix(t *testing.T) string {
	b := make([]byte, 4)
	_, err := rand.Read(b)
	must(t, err)
	return hex.EncodeToString(b)
}

// TestTenantReachesOnlyItsOwnBuckets acts as a tenant with a Role on storagebuckets and
// tries every way the spec offers to reach a bucket the platform team did not give it.
// Each attempt is refused with a Stalled condition naming the guardrail, and the admin's
// buckets are unchanged; at the end no bucket on the store is tagged for a claim.
func TestTenantReachesOnlyItsOwnBuckets(t *testing.T) {
	startManager(t, cfg, operator.Options{})
	onEveryStore(t, testTenantReachesOnlyItsOwnBuckets)
}

// onEveryStore runs test on each server in parallel subtests, under the manager the
// parent started: what a tenant can reach depends on the store's answers (owners,
// tags, policies).
func onEveryStore(t *testing.T, test func(*testing.T, *testenv.S3Server)) {
	for _, srv := range []*testenv.S3Server{seaweed, versity, rgw} {
		t.Run(string(srv.Kind), func(t *testing.T) {
			t.Parallel()
			test(t, srv)
		})
	}
}

func testTenantReachesOnlyItsOwnBuckets(t *testing.T, srv *testenv.S3Server) {
	prefix := "tn-" + randomSuffix(t)
	f := newFixtureOn(t, srv, "", func(s *bkv1.ObjectStore) { s.Spec.BucketNamePrefix = prefix })
	tenant := asTenant(t, f)
	inPrefix := newAdminBucket(t, f, naming.LaneStem(prefix, f.ns)+"tfstate") // in the tenant's lane: only adoption guards it
	outside := newAdminBucket(t, f, "audit-"+randomSuffix(t))                 // outside the tenant's prefix

	// The tenant cannot write status: neither a forged create intent nor a bucket name.
	forged := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "status-forgery"},
		Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: f.store}, BucketName: inPrefix.name}}
	must(t, tenant.Create(f.ctx, forged))
	before := forged.DeepCopy()
	forged.Status.CreateIntent = &bkv1.CreateIntent{BucketName: inPrefix.name, UID: forged.UID}
	if err := tenant.Status().Patch(f.ctx, forged, client.MergeFrom(before)); !apierrors.IsForbidden(err) {
		t.Fatalf("tenant patching status: err = %v, want Forbidden", err)
	}

	public := `{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::%s/*"}]}`
	elsewhere := `{"Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::000000000000:root"},"Action":"s3:*","Resource":["arn:aws:s3:::%s","arn:aws:s3:::%s/*"]}]}`
	attempts := []struct {
		name   string
		reason string
		row    string // of docs/stores.md's tenant table; "" for none
		spec   func(*bkv1.StorageBucket)
	}{
		{"adopt-if-unowned", bkv1.ReasonAdoptionNotAllowed, rowTenantAdopt, func(sb *bkv1.StorageBucket) {
			sb.Spec.BucketName, sb.Spec.Adoption, sb.Spec.DeletionPolicy = inPrefix.name, bkv1.AdoptionIfUnowned, bkv1.DeletionPolicyPurge
		}},
		{"adopt-never", bkv1.ReasonBucketNotOwned, rowTenantAdopt, func(sb *bkv1.StorageBucket) {
			sb.Spec.BucketName, sb.Spec.DeletionPolicy = inPrefix.name, bkv1.DeletionPolicyPurge
		}},
		{"forged-annotation", bkv1.ReasonBucketNotOwned, rowTenantAdopt, func(sb *bkv1.StorageBucket) {
			sb.Annotations = map[string]string{"bucketkeeper.io/created-bucket": inPrefix.name}
			sb.Spec.BucketName, sb.Spec.DeletionPolicy = inPrefix.name, bkv1.DeletionPolicyPurge
		}},
		{"forged-annotation-if-unowned", bkv1.ReasonAdoptionNotAllowed, rowTenantAdopt, func(sb *bkv1.StorageBucket) {
			sb.Annotations = map[string]string{"bucketkeeper.io/created-bucket": inPrefix.name}
			sb.Spec.BucketName, sb.Spec.Adoption, sb.Spec.DeletionPolicy = inPrefix.name, bkv1.AdoptionIfUnowned, bkv1.DeletionPolicyPurge
		}},
		{"outside-prefix", bkv1.ReasonBucketNameNotAllowed, rowTenantNames, func(sb *bkv1.StorageBucket) {
			sb.Spec.BucketName, sb.Spec.Adoption, sb.Spec.DeletionPolicy = outside.name, bkv1.AdoptionIfUnowned, bkv1.DeletionPolicyPurge
		}},
		{"another-namespaces-derived-name", bkv1.ReasonBucketNameNotAllowed, rowTenantNames, func(sb *bkv1.StorageBucket) {
			sb.Spec.BucketName, sb.Spec.DeletionPolicy = naming.BucketName(prefix, "payroll", "ledger"), bkv1.DeletionPolicyPurge
		}},
		{"public-policy", bkv1.ReasonPublicAccessNotAllowed, rowTenantPublic, func(sb *bkv1.StorageBucket) {
			sb.Spec.Policy = &apiextensionsv1.JSON{Raw: fmt.Appendf(nil, public, naming.BucketName(prefix, sb.Namespace, sb.Name))}
		}},
		{"tag-charset", bkv1.ReasonInvalidTags, "", func(sb *bkv1.StorageBucket) { sb.Spec.Tags = map[string]string{"team": "<script>"} }},
		{"public-access", bkv1.ReasonPublicAccessNotAllowed, rowTenantPublic, func(sb *bkv1.StorageBucket) { sb.Spec.PublicAccess = bkv1.PublicAccessAllowed }},
		{"policy-on-admin-bucket", bkv1.ReasonPolicyNotAllowed, rowTenantPolicy, func(sb *bkv1.StorageBucket) {
			sb.Spec.Policy = &apiextensionsv1.JSON{Raw: fmt.Appendf(nil, elsewhere, outside.name, outside.name)}
		}},
	}
	claims := []*bkv1.StorageBucket{forged}
	for _, a := range attempts {
		sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: a.name},
			Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: f.store}}}
		a.spec(sb)
		must(t, tenant.Create(f.ctx, sb))
		claims = append(claims, sb)
	}
	reasons := map[string][]string{} // per table row, as the claims' conditions said
	for i, a := range attempts {
		got := f.waitCondition(claims[i+1], bkv1.ConditionStalled, metav1.ConditionTrue, a.reason, 90*time.Second)
		if a.row != "" {
			reasons[a.row] = append(reasons[a.row], findCondition(got, bkv1.ConditionStalled).Reason)
		}
		if got.Status.BucketName != "" {
			t.Errorf("%s: refused claim records bucket %q", a.name, got.Status.BucketName)
		}
		derived := naming.BucketName(prefix, f.ns, a.name)
		if _, err := f.s3.HeadBucket(f.ctx, derived); s3.KindOf(err) != s3.KindNotFound {
			t.Errorf("%s: refused claim's bucket %s exists on the store (%v)", a.name, derived, err)
		}
	}
	f.waitCondition(forged, bkv1.ConditionStalled, metav1.ConditionTrue, bkv1.ReasonBucketNotOwned, 90*time.Second)

	// A claim the guardrails allow still works for the same tenant: the refusals above
	// are the guardrails', not a broken setup.
	ok := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "allowed"},
		Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: f.store}, DeletionPolicy: bkv1.DeletionPolicyDelete}}
	must(t, tenant.Create(f.ctx, ok))
	f.waitCondition(ok, bkv1.ConditionReady, metav1.ConditionTrue, "", 90*time.Second)

	// Deleting every claim (several asked for Purge) leaves the admin's buckets as they
	// were, and no bucket tagged for any of them.
	for _, sb := range append(claims, ok) {
		must(t, client.IgnoreNotFound(tenant.Delete(f.ctx, sb)))
	}
	for _, sb := range append(claims, ok) {
		f.waitGone(sb, 90*time.Second)
	}
	inPrefix.assertIntact(t, f)
	outside.assertIntact(t, f)
	claimed, err := f.claimedBuckets()
	must(t, err)
	if len(claimed) != 0 {
		t.Errorf("buckets still tagged for this namespace's deleted claims: %v", claimed)
	}
	if t.Failed() {
		return
	}
	kind := srv.Kind
	tenantTable.Set(t, kind, rowTenantAdopt, refusedCell(reasons[rowTenantAdopt], "the bucket's data and tags unchanged, no policy on it"))
	tenantTable.Set(t, kind, rowTenantNames, refusedCell(reasons[rowTenantNames], "no bucket created, the named one unchanged"))
	tenantTable.Set(t, kind, rowTenantPublic, refusedCell(reasons[rowTenantPublic], "no bucket created"))
	tenantTable.Set(t, kind, rowTenantPolicy, refusedCell(reasons[rowTenantPolicy], "that bucket still without a policy"))
	tenantTable.Set(t, kind, rowTenantPurge, "the platform team's buckets as they were; none tagged for a claim")
}

// TestAdoptionGuardrail: adoption is off until the platform team selects the namespace
// in guardrails.adoptionAllowedNamespaces; then the same claim adopts the bucket.
func TestAdoptionGuardrail(t *testing.T) {
	startManager(t, cfg, operator.Options{})
	onEveryStore(t, testAdoptionGuardrail)
}

func testAdoptionGuardrail(t *testing.T, srv *testenv.S3Server) {
	prefix := "ad-" + randomSuffix(t)
	f := newFixtureOn(t, srv, "", func(s *bkv1.ObjectStore) {
		s.Spec.BucketNamePrefix = prefix
		s.Spec.Guardrails.AdoptionAllowedNamespaces = &metav1.LabelSelector{MatchLabels: map[string]string{"platform.example.com/adopt": "true"}}
		// SeaweedFS's and RGW's ACLs name the operator's account, not the identity
		// ListBuckets names (empty on Versity, where the two agree).
		s.Spec.Guardrails.AdoptionBucketOwner = srv.BucketOwnerID
	})
	tenant := asTenant(t, f)
	legacy := newAdminBucket(t, f, naming.LaneStem(prefix, f.ns)+"legacy")
	sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "legacy"},
		Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: f.store}, BucketName: legacy.name, Adoption: bkv1.AdoptionIfUnowned}}
	must(t, tenant.Create(f.ctx, sb))
	f.waitCondition(sb, bkv1.ConditionStalled, metav1.ConditionTrue, bkv1.ReasonAdoptionNotAllowed, 90*time.Second)
	legacy.assertIntact(t, f)

	ns := &corev1.Namespace{}
	must(t, k8s.Get(f.ctx, client.ObjectKey{Name: f.ns}, ns))
	ns.Labels["platform.example.com/adopt"] = "true"
	must(t, k8s.Update(f.ctx, ns))
	got := f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, "", 90*time.Second)
	if c := findCondition(got, bkv1.ConditionProvisioned); c == nil || c.Reason != bkv1.ReasonBucketAdopted {
		t.Errorf("Provisioned = %+v, want reason %s", c, bkv1.ReasonBucketAdopted)
	}
	tags, err := f.s3.GetBucketTagging(f.ctx, legacy.name)
	must(t, err)
	if claimUID, _, _ := strings.Cut(tags[bkv1.TagUID], "/"); claimUID != string(got.UID) {
		t.Errorf("adopted bucket's tags = %v: want this claim's uid", tags)
	}
	// Retain (the default) releases it on deletion: the admin's data stays.
	must(t, tenant.Delete(f.ctx, got))
	f.waitGone(got, 90*time.Second)
	if data, err := f.s3.GetObject(f.ctx, legacy.name, adminObject, 1<<20); err != nil || !bytes.Equal(data, legacy.data) {
		t.Errorf("adopted bucket lost its data on Retain: %q, %v", data, err)
	}
	_ = f.s3.DeleteBucketTagging(f.ctx, legacy.name)
	if t.Failed() {
		return
	}
	owner := "ListBuckets' owner for the operator's key"
	if srv.BucketOwnerID != "" {
		owner = "`adoptionBucketOwner`, the account the bucket's ACL names"
	}
	tenantTable.Set(t, srv.Kind, rowAdoptGranted, "adopted, its owner checked against "+owner+"; released with its data on Retain")
}

func findCondition(sb *bkv1.StorageBucket, typ string) *metav1.Condition {
	for i := range sb.Status.Conditions {
		if sb.Status.Conditions[i].Type == typ {
			return &sb.Status.Conditions[i]
		}
	}
	return nil
}
