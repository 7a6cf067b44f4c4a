package integration_test

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/naming"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// TestNamesStayInTheirLane: a tenant of namespace N, sharing a store (and its prefix)
// with the namespace N-b, tries to take ahead of time the name N-b's claim will derive,
// an explicit name in N-b's lane (through the longer namespace's stem that starts like
// its own) and one in a third namespace's lane, and to learn from the refusals which of
// those names exist. Every attempt is refused BucketNameNotAllowed before anything is
// sent to the store, with the same message whether the bucket exists or not; the
// victim's claims then get their buckets, and its data is untouched by the attempts.
// The tenant's own lane still works.
func TestNamesStayInTheirLane(t *testing.T) {
	const prefix = "lane"
	f := newFixture(t, seaweed, func(s *bkv1.ObjectStore) { s.Spec.BucketNamePrefix = prefix })
	victimNS := f.ns + "-b"
	must(t, k8s.Create(f.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: victimNS}}))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = k8s.DeleteAllOf(ctx, &bkv1.StorageBucket{}, client.InNamespace(victimNS))
		removeNamespace(t, ctx, victimNS)
	})
	victim := &fixture{t: t, ctx: f.ctx, ns: victimNS, store: f.store, server: f.server, admin: f.admin}

	// A bucket in the victim's lane exists already, with data and tags (the platform
	// team made it; no claim holds it, so the store sees no request of a claim below).
	held := naming.LaneStem(prefix, victimNS) + "reports"
	heldTags := map[string]string{"owner": "victim"}
	data := []byte("the victim's reports")
	must(t, f.admin.CreateBucket(f.ctx, held, ""))
	must(t, f.admin.PutBucketTagging(f.ctx, held, heldTags))
	must(t, f.admin.PutObject(f.ctx, held, "q3.csv", data))

	tenant := asTenant(t, f)

	derived := naming.BucketName(prefix, victimNS, "data") // what the victim's claim will derive
	attempts := map[string]string{
		"derived":        derived,
		"victim-held":    held,                                             // exists
		"victim-missing": naming.LaneStem(prefix, victimNS) + "archive",    // does not
		"longer-stem":    naming.LaneStem(prefix, f.ns) + "b-invoices",     // starts with the tenant's stem too
		"third-lane":     naming.LaneStem(prefix, "someone-else") + "logs", // a namespace that does not exist
		"prefix-only":    prefix + "-shared",
	}
	before := requests.snapshot(f.store)
	var claims []*bkv1.StorageBucket
	for name, bucket := range attempts {
		sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
			Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: f.store}, BucketName: bucket,
				DeletionPolicy: bkv1.DeletionPolicyPurge}}
		must(t, tenant.Create(f.ctx, sb))
		claims = append(claims, sb)
	}
	messages := map[string]string{}
	for _, sb := range claims {
		got := f.waitCondition(sb, bkv1.ConditionStalled, metav1.ConditionTrue, bkv1.ReasonBucketNameNotAllowed)
		if got.Status.BucketName != "" || got.Status.CreateIntent != nil {
			t.Errorf("%s: refused claim records bucket %q, intent %v", sb.Name, got.Status.BucketName, got.Status.CreateIntent)
		}
		messages[sb.Name] = strings.ReplaceAll(findCond(got, bkv1.ConditionStalled).Message, sb.Spec.BucketName, "NAME")
	}
	// Whether the name exists shows nowhere: the two refusals read the same.
	if messages["victim-held"] != messages["victim-missing"] {
		t.Errorf("the refusal tells an existing name from a missing one:\n%s\n%s", messages["victim-held"], messages["victim-missing"])
	}
	// Nothing but the store's own health checks reached the store meanwhile.
	if _, _, ops := since(before, requests.snapshot(f.store)); len(ops) > 1 || (len(ops) == 1 && ops["ListBuckets"] == 0) {
		t.Errorf("refused claims sent requests to the store: %v", ops)
	}
	for _, bucket := range []string{derived, attempts["victim-missing"], attempts["longer-stem"], attempts["third-lane"], attempts["prefix-only"]} {
		if _, err := f.admin.HeadBucket(f.ctx, bucket); s3.KindOf(err) != s3.KindNotFound {
			t.Errorf("bucket %s exists after a refused claim (%v)", bucket, err)
		}
	}

	// The victim's claim gets the name it derives, as a bucket it created; its held
	// bucket keeps data and tags.
	got := victim.waitCondition(victim.bucket("data"), bkv1.ConditionReady, metav1.ConditionTrue, "")
	if got.Status.BucketName != derived {
		t.Errorf("the victim's claim got %q, want its derived %q", got.Status.BucketName, derived)
	}
	if c := findCond(got, bkv1.ConditionProvisioned); c == nil || c.Reason != bkv1.ReasonBucketCreated {
		t.Errorf("Provisioned = %+v, want BucketCreated", c)
	}
	if body, err := f.admin.GetObject(f.ctx, held, "q3.csv", 64); err != nil || string(body) != string(data) {
		t.Errorf("the victim's data: %q, %v", body, err)
	}
	if tags, err := f.admin.GetBucketTagging(f.ctx, held); err != nil || !maps.Equal(tags, heldTags) {
		t.Errorf("the victim's tags: %v (%v), want %v", tags, err, heldTags)
	}

	// The tenant's own lane works, with an explicit name as with a derived one.
	own := f.waitCondition(f.bucket("own", func(sb *bkv1.StorageBucket) {
		sb.Spec.BucketName = naming.LaneStem(prefix, f.ns) + "own"
	}), bkv1.ConditionReady, metav1.ConditionTrue, "")
	if own.Status.BucketName != naming.LaneStem(prefix, f.ns)+"own" {
		t.Errorf("own claim bound %q", own.Status.BucketName)
	}

	// Deleting the refused claims (they asked for Purge) touches nothing of the victim's.
	for _, sb := range claims {
		must(t, client.IgnoreNotFound(tenant.Delete(f.ctx, sb)))
	}
	for _, sb := range claims {
		f.waitGone(sb)
	}
	if body, err := f.admin.GetObject(f.ctx, held, "q3.csv", 64); err != nil || string(body) != string(data) {
		t.Errorf("the victim's data after the refused claims were deleted: %q, %v", body, err)
	}
	if _, err := f.admin.HeadBucket(context.Background(), derived); err != nil {
		t.Errorf("the victim's derived bucket after the refused claims were deleted: %v", err)
	}
}
