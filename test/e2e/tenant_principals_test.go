package e2e_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/naming"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// principalForms are principals that are not one specific identity, as a tenant would
// try them to make a bucket public past a check that knows only "*": Ceph RGW's two
// names for its anonymous user (the empty tenant's user "anonymous", and the empty
// tenant itself) first, then RGW's federated reading of the same, a bare "anonymous",
// a bare name (a tenant, to RGW) and the principal types the guardrail cannot tie to one
// identity.
var principalForms = []struct{ label, typ, id string }{
	{"`arn:aws:iam:::user/anonymous`", "AWS", "arn:aws:iam:::user/anonymous"},
	{"`arn:aws:iam:::root`", "AWS", "arn:aws:iam:::root"},
	{"Federated `arn:aws:iam:::root`", "Federated", "arn:aws:iam:::root"},
	{"`anonymous`", "AWS", "anonymous"},
	{"a bare name", "AWS", "tenant"},
	{"CanonicalUser", "CanonicalUser", "anonymous"},
	{"Service", "Service", "s3.amazonaws.com"},
}

// since is what the log saw sent to store since before (a snapshot), by operation.
func since(log *testenv.RequestLog, store string, before map[string]int) map[string]int {
	out := map[string]int{}
	for op, n := range log.Snapshot(store) {
		if n > before[op] {
			out[op] = n - before[op]
		}
	}
	return out
}

// TestAnonymousPrincipalForms acts as a tenant and grants each principal form read,
// write and list on a bucket. Where the store allows no public buckets each is refused
// as public before any request to the store (a new claim creates nothing; an existing
// one keeps its policy), and anyone's unsigned GET, PUT and List of the bucket are
// refused. With allowPublicBuckets the guardrail lets each through, and what the store
// makes of it goes to the README's tenant table; turning public buckets off again
// withdraws it.
func TestAnonymousPrincipalForms(t *testing.T) {
	counter := &testenv.RequestLog{}
	startManager(t, cfg, operator.Options{S3Observer: counter.Observe})
	onEveryStore(t, func(t *testing.T, srv *testenv.S3Server) { testAnonymousPrincipalForms(t, srv, counter) })
}

func testAnonymousPrincipalForms(t *testing.T, srv *testenv.S3Server, counter *testenv.RequestLog) {
	prefix := "ap-" + randomSuffix(t)
	f := newFixtureOn(t, srv, "", func(s *bkv1.ObjectStore) { s.Spec.BucketNamePrefix = prefix })
	tenant := asTenant(t, f)
	grant := func(bucket, typ, id string) *apiextensionsv1.JSON {
		return &apiextensionsv1.JSON{Raw: fmt.Appendf(nil, `{"Version":"2012-10-17","Statement":[{"Sid":"Anyone","Effect":"Allow","Principal":{%q:%q},`+
			`"Action":["s3:GetObject","s3:PutObject","s3:ListBucket"],"Resource":["arn:aws:s3:::%s","arn:aws:s3:::%[3]s/*"]}]}`, typ, id, bucket)}
	}
	anonymous := func(bucket string) testenv.AnonymousAccess {
		t.Helper()
		a, err := srv.Anonymous(f.ctx, bucket, "report.csv", "from-anyone.txt")
		must(t, err)
		return a
	}
	idle := func(ops map[string]int) bool { // nothing but the store's health checks
		for op := range ops {
			if op != "ListBuckets" {
				return false
			}
		}
		return true
	}

	// New claims, on a store that serves no other yet: refused before any request to
	// it.
	before := counter.Snapshot(f.store)
	var fresh []*bkv1.StorageBucket
	for i, p := range principalForms {
		name := fmt.Sprintf("form-%d", i)
		c := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
			Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: f.store}, DeletionPolicy: bkv1.DeletionPolicyPurge,
				Policy: grant(naming.BucketName(prefix, f.ns, name), p.typ, p.id)}}
		must(t, tenant.Create(f.ctx, c))
		fresh = append(fresh, c)
	}
	for i, c := range fresh {
		got := f.waitCondition(c, bkv1.ConditionStalled, metav1.ConditionTrue, bkv1.ReasonPublicAccessNotAllowed, 90*time.Second)
		if msg := findCondition(got, bkv1.ConditionStalled).Message; !strings.Contains(msg, fmt.Sprintf("%q: %q", principalForms[i].typ, principalForms[i].id)) {
			t.Errorf("%s: the refusal does not name the principal: %s", principalForms[i].label, msg)
		}
	}
	if ops := since(counter, f.store, before); !idle(ops) {
		t.Errorf("refused claims sent the store %v", ops)
	}
	for _, c := range fresh {
		if _, err := f.s3.HeadBucket(f.ctx, naming.BucketName(prefix, f.ns, c.Name)); s3.KindOf(err) != s3.KindNotFound {
			t.Errorf("%s: the refused claim's bucket exists (%v)", c.Name, err)
		}
		must(t, tenant.Delete(f.ctx, c))
	}

	// The tenant's bucket, private, with data.
	sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "data"},
		Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: f.store}, DeletionPolicy: bkv1.DeletionPolicyPurge}}
	must(t, tenant.Create(f.ctx, sb))
	sb = f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, "", 90*time.Second)
	bucket := sb.Status.BucketName
	must(t, f.s3.PutObject(f.ctx, bucket, "report.csv", []byte("a,b\n")))
	if a := anonymous(bucket); !a.Denied() {
		t.Fatalf("the private bucket answers anyone: %s", a)
	}

	// The tenant's own bucket: each form refused, nothing written, anyone still refused.
	for _, p := range principalForms {
		before := counter.Snapshot(f.store)
		setPolicy(t, f, tenant, sb, grant(bucket, p.typ, p.id))
		f.waitCondition(sb, bkv1.ConditionStalled, metav1.ConditionTrue, bkv1.ReasonPublicAccessNotAllowed, 90*time.Second)
		for op := range since(counter, f.store, before) {
			if s3.IsMutating(op) {
				t.Errorf("%s: the refused policy sent %s", p.label, op)
			}
		}
		if a := anonymous(bucket); !a.Denied() {
			t.Errorf("%s, refused: anyone gets %s", p.label, a)
		}
	}
	if policy, err := f.s3.GetBucketPolicy(f.ctx, bucket); err != nil || policy != "" {
		t.Errorf("the bucket's policy after the refusals: %q, %v; want none", policy, err)
	}
	if t.Failed() {
		return
	}

	// With allowPublicBuckets the guardrail lets each through; the store decides.
	updateStore(t, f, func(s *bkv1.ObjectStoreSpec) { s.Guardrails.AllowPublicBuckets = true })
	f.waitVerdict(sb) // the operator has seen the store's change
	outcomes := map[string][]string{}
	var order []string
	for _, p := range principalForms {
		setPolicy(t, f, tenant, sb, grant(bucket, p.typ, p.id))
		got := f.waitVerdict(sb)
		outcome := ""
		if c := findCondition(got, bkv1.ConditionReady); c.Status == metav1.ConditionTrue && c.ObservedGeneration == got.Generation {
			a := anonymous(bucket)
			switch {
			case a.Granted():
				outcome = "applied (with the store's public-access block on), and anyone's unsigned GET, PUT and List answer 200"
			case a.Denied():
				outcome = "applied; unsigned requests still 403"
			default:
				outcome = "applied; unsigned " + a.String()
			}
		} else {
			c := findCondition(got, bkv1.ConditionStalled)
			outcome = fmt.Sprintf("refused by the store (`%s`)", storeAnswer(c.Reason, c.Message))
		}
		t.Logf("%s with allowPublicBuckets: %s", p.label, outcome)
		if outcomes[outcome] == nil {
			order = append(order, outcome)
		}
		outcomes[outcome] = append(outcomes[outcome], p.label)
	}

	// Turned off again: withdrawn, anyone refused.
	setPolicy(t, f, tenant, sb, grant(bucket, principalForms[0].typ, principalForms[0].id))
	f.waitVerdict(sb)
	updateStore(t, f, func(s *bkv1.ObjectStoreSpec) { s.Guardrails.AllowPublicBuckets = false })
	f.waitCondition(sb, bkv1.ConditionStalled, metav1.ConditionTrue, bkv1.ReasonPublicAccessNotAllowed, 90*time.Second)
	f.eventually(60*time.Second, "the public policy withdrawn", func() error {
		if a := anonymous(bucket); !a.Denied() {
			return fmt.Errorf("anyone gets %s", a)
		}
		return nil
	})
	if t.Failed() {
		return
	}
	var with []string
	for _, o := range order {
		with = append(with, joinLabels(outcomes[o])+": "+o)
	}
	tenantTable.Set(t, srv.Kind, rowTenantPrincipals, refusedCell([]string{bkv1.ReasonPublicAccessNotAllowed},
		"nothing sent to the store, anyone's unsigned GET, PUT and List 403. With `allowPublicBuckets`: "+strings.Join(with, "; ")+". Turned off again: refused, unsigned requests 403"))
}

// setPolicy sets the claim's policy as the tenant.
func setPolicy(t *testing.T, f *fixture, tenant client.Client, sb *bkv1.StorageBucket, policy *apiextensionsv1.JSON) {
	t.Helper()
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := tenant.Get(f.ctx, client.ObjectKeyFromObject(sb), sb); err != nil {
			return err
		}
		sb.Spec.Policy = policy
		return tenant.Update(f.ctx, sb)
	}))
}

// updateStore changes the fixture's ObjectStore as the platform team.
func updateStore(t *testing.T, f *fixture, mutate func(*bkv1.ObjectStoreSpec)) {
	t.Helper()
	store := &bkv1.ObjectStore{}
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(f.ctx, client.ObjectKey{Name: f.store}, store); err != nil {
			return err
		}
		mutate(&store.Spec)
		return k8s.Update(f.ctx, store)
	}))
}

// waitVerdict waits for the verdict on sb's current generation under a store that
// allows public buckets: Ready with its configuration applied, or Stalled by the store's
// refusal of it (a PublicAccessNotAllowed is the verdict of a store spec not yet seen).
func (f *fixture) waitVerdict(sb *bkv1.StorageBucket) *bkv1.StorageBucket {
	f.t.Helper()
	got := &bkv1.StorageBucket{}
	f.eventually(90*time.Second, "the verdict on "+sb.Name, func() error {
		if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(sb), got); err != nil {
			return err
		}
		at := func(typ string) *metav1.Condition {
			if c := apimeta.FindStatusCondition(got.Status.Conditions, typ); c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == got.Generation {
				return c
			}
			return nil
		}
		if at(bkv1.ConditionReady) != nil && at(bkv1.ConditionConfigured) != nil {
			return nil
		}
		if c := at(bkv1.ConditionStalled); c != nil && c.Reason != bkv1.ReasonPublicAccessNotAllowed {
			return nil
		}
		return fmt.Errorf("conditions: %s", testenv.DescribeConditions(got.Status.Conditions))
	})
	return got
}

// storeAnswer is the S3 error code a condition message quotes, or its reason.
func storeAnswer(reason, message string) string {
	for _, code := range []string{"MalformedPolicy", "InvalidArgument", "AccessDenied", "NotImplemented"} {
		if strings.Contains(message, code) {
			return code
		}
	}
	return reason
}

// joinLabels is "a", "a and b", "a, b and c".
func joinLabels(labels []string) string {
	if len(labels) < 2 {
		return strings.Join(labels, "")
	}
	return strings.Join(labels[:len(labels)-1], ", ") + " and " + labels[len(labels)-1]
}
