package integration_test

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestMinIOAdoptionOnASingleAccountStore: on a MinIO whose ObjectStore states that the
// store has one account (guardrails.adoptionSingleAccount), the buckets whose ACLs name
// no owner are the operator's account's. A tenant's claim, in a namespace the store
// allows to adopt, adopts an untagged bucket: Ready, Provisioned BucketAdopted, the
// bucket's own tags kept beside the claim's ownership tags, its object and versioning
// unchanged. The same tenant cannot use the statement to take what tags say is taken:
// the bucket of another namespace's live claim (OwnedByAnotherClaim) and the bucket of
// another cluster sharing the store (OwnedByAnotherCluster) are refused, and every
// bucket on the store, the victims' data, tags, policy and versioning, is as it was.
func TestMinIOAdoptionOnASingleAccountStore(t *testing.T) {
	server := testenv.NewS3(t, testenv.MinIO)
	f := newFixture(t, server, func(store *bkv1.ObjectStore) {
		store.Spec.AccessProvider = &bkv1.AccessProvider{Type: bkv1.AccessProviderNone}
		store.Spec.Guardrails.AdoptionAllowedNamespaces = &metav1.LabelSelector{}
		store.Spec.Guardrails.AdoptionSingleAccount = true
	})
	tenant := asTenant(t, f)

	// The victims: a live claim of another namespace, whose bucket has data, and a bucket another cluster's operator tagged as one of its claims'.
	victimNS := f.tenantNamespace("victim-")
	victim := f.waitCondition(f.bucketIn(victimNS.Name, "ledger", func(sb *bkv1.StorageBucket) {
		sb.Spec.Versioning = bkv1.VersioningEnabled
		sb.Spec.Tags = map[string]string{"team": "finance"}
	}), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	claimed := victim.Status.BucketName
	must(t, f.admin.PutObject(f.ctx, claimed, "entries", []byte("the victim's")))
	foreign := f.ns + "-other-cluster"
	must(t, f.admin.CreateBucket(f.ctx, foreign, ""))
	must(t, f.admin.PutObject(f.ctx, foreign, "state", []byte("another cluster's")))
	must(t, f.admin.PutBucketTagging(f.ctx, foreign, map[string]string{
		bkv1.TagClaim: "apps/state", bkv1.TagUID: string(uuid.NewUUID()) + "/" + string(uuid.NewUUID()), bkv1.TagCluster: "another-cluster"}))
	must(t, f.admin.PutBucketPolicy(f.ctx, foreign, policyJSONString(foreign)))
	// The bucket the tenant may adopt: untagged but for the platform team's own tag.
	mine := f.ns + "-mine"
	must(t, f.admin.CreateBucket(f.ctx, mine, ""))
	must(t, f.admin.PutBucketVersioning(f.ctx, mine, s3.VersioningEnabled))
	must(t, f.admin.PutObject(f.ctx, mine, "report", []byte("the platform team's")))
	must(t, f.admin.PutBucketTagging(f.ctx, mine, map[string]string{"owner": "platform"}))
	for _, b := range []string{foreign, mine} {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			emptyAndDelete(ctx, f.admin, b)
		})
	}

	before := minioStoreState(t, f)
	for _, attack := range []struct {
		name, bucket, reason string
	}{
		{"thief", claimed, bkv1.ReasonOwnedByAnotherClaim},
		{"squatter", foreign, bkv1.ReasonOwnedByAnotherCluster},
	} {
		sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: attack.name},
			Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: f.store}, BucketName: attack.bucket,
				Adoption: bkv1.AdoptionIfUnowned, DeletionPolicy: bkv1.DeletionPolicyPurge}}
		must(t, tenant.Create(f.ctx, sb))
		f.waitCondition(sb, bkv1.ConditionStalled, metav1.ConditionTrue, attack.reason)
		// Purge of a refused claim deletes nothing of the bucket it never held.
		must(t, tenant.Delete(f.ctx, sb))
		f.waitGone(sb)
	}
	if after := minioStoreState(t, f); !reflect.DeepEqual(after, before) {
		t.Errorf("the store after the refused adoptions:\n%v\nwas\n%v", after, before)
	}
	if got := f.waitCondition(victim, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady); got.Status.BucketName != claimed {
		t.Errorf("the victim's claim now holds %q, want %q", got.Status.BucketName, claimed)
	}

	// The bucket of no claim and no cluster, naming no owner: adopted.
	sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "mine"},
		Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: f.store}, BucketName: mine,
			Adoption: bkv1.AdoptionIfUnowned, DeletionPolicy: bkv1.DeletionPolicyRetain, Tags: map[string]string{"owner": "platform"}}}
	must(t, tenant.Create(f.ctx, sb))
	got := f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	if c := findCond(got, bkv1.ConditionProvisioned); c == nil || c.Reason != bkv1.ReasonBucketAdopted {
		t.Errorf("Provisioned: %s", describe(got.Status.Conditions))
	}
	tags, err := f.admin.GetBucketTagging(f.ctx, mine)
	must(t, err)
	expectTags(t, got, tags, map[string]string{"owner": "platform"})
	if body, err := f.admin.GetObject(f.ctx, mine, "report", 64); err != nil || string(body) != "the platform team's" {
		t.Errorf("the adopted bucket's object: %q, %v", body, err)
	}
	if v, err := f.admin.GetBucketVersioning(f.ctx, mine); err != nil || v != s3.VersioningEnabled {
		t.Errorf("the adopted bucket's versioning: %q, %v", v, err)
	}
}

// minioStoreState is every bucket on the fixture's store with its tags, policy,
// versioning and object versions with their bodies, read with the admin's key.
func minioStoreState(t *testing.T, f *fixture) map[string]string {
	t.Helper()
	names, err := f.admin.ListBuckets(f.ctx)
	must(t, err)
	slices.Sort(names)
	out := map[string]string{}
	for _, name := range names {
		tags, err := f.admin.GetBucketTagging(f.ctx, name)
		must(t, err)
		policy, err := f.admin.GetBucketPolicy(f.ctx, name)
		must(t, err)
		versioning, err := f.admin.GetBucketVersioning(f.ctx, name)
		must(t, err)
		page, err := f.admin.ListObjectVersions(f.ctx, name, nil)
		must(t, err)
		var objects []string
		for _, v := range page.Versions {
			body, err := f.admin.GetObject(f.ctx, name, v.Key, 1<<10)
			must(t, err)
			objects = append(objects, v.Key+"@"+v.VersionID+"="+string(body))
		}
		slices.Sort(objects)
		var tagList []string
		for _, k := range slices.Sorted(maps.Keys(tags)) {
			tagList = append(tagList, k+"="+tags[k])
		}
		out[name] = fmt.Sprintf("tags %v policy %q versioning %q objects %v", tagList, policy, versioning, objects)
	}
	return out
}
