package integration_test

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestAdoptionTakesOnlyItsAccountsBuckets: a tenant whose namespace may adopt names,
// in its own lane, an untagged bucket with data that another account of the store
// created. On every store with a second account (SeaweedFS's other identity sits in
// another account and the operator's gateway admin sees and may write its buckets;
// RGW's is another account), the claim is refused BucketNameTaken in words that name
// no owner, nothing is written to the store, and deleting the claim (it asked for
// Purge) leaves the bucket's data and tags as they were. Beside it, an untagged
// bucket of the operator's own account is adopted: with the ObjectStore's
// guardrails.adoptionBucketOwner set to that account where ACLs and ListBuckets name
// it differently (SeaweedFS, RGW), and without it where they agree (Versity). Where
// they differ and it is unset, even the operator's own bucket is refused: the
// operator does not guess who it is.
func TestAdoptionTakesOnlyItsAccountsBuckets(t *testing.T) {
	for _, server := range everyStore() {
		t.Run(string(server.Kind), func(t *testing.T) {
			t.Parallel()
			adoptAll := func(s *bkv1.ObjectStore) {
				s.Spec.Guardrails.AdoptionAllowedNamespaces = &metav1.LabelSelector{}
			}
			f := newFixture(t, server, adoptAll)
			tenant := asTenant(t, f)
			adopt := func(name, bucket string) *bkv1.StorageBucket {
				sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
					Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: f.store}, BucketName: bucket,
						Adoption: bkv1.AdoptionIfUnowned, DeletionPolicy: bkv1.DeletionPolicyPurge}}
				must(t, tenant.Create(f.ctx, sb))
				return sb
			}

			if server.Kind != testenv.Versity { // its second identity is an IAM user of our account
				theirsRefused(t, f, tenant, adopt)
			}

			mine := f.ns + "-mine"
			must(t, f.admin.CreateBucket(f.ctx, mine, ""))
			got := f.waitCondition(adopt("mine", mine), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
			if c := findCond(got, bkv1.ConditionProvisioned); c == nil || c.Reason != bkv1.ReasonBucketAdopted {
				t.Errorf("the operator's own bucket: Provisioned %+v, want BucketAdopted", c)
			}

			if server.BucketOwnerID == "" {
				return // ListBuckets names the owner bucket ACLs do: nothing to set
			}
			unset := newFixture(t, server, adoptAll, func(s *bkv1.ObjectStore) { s.Spec.Guardrails.AdoptionBucketOwner = "" })
			alsoMine := unset.ns + "-mine"
			must(t, unset.admin.CreateBucket(unset.ctx, alsoMine, ""))
			sb := unset.bucket("mine", func(sb *bkv1.StorageBucket) {
				sb.Spec.BucketName, sb.Spec.Adoption = alsoMine, bkv1.AdoptionIfUnowned
			})
			unset.waitCondition(sb, bkv1.ConditionStalled, metav1.ConditionTrue, bkv1.ReasonBucketNameTaken)
			if tags, err := unset.admin.GetBucketTagging(unset.ctx, alsoMine); err != nil || len(tags) != 0 {
				t.Errorf("a bucket refused for want of adoptionBucketOwner was tagged: %v (%v)", tags, err)
			}
		})
	}
}

// theirsRefused is the attack half of TestAdoptionTakesOnlyItsAccountsBuckets.
func theirsRefused(t *testing.T, f *fixture, tenant client.Client, adopt func(name, bucket string) *bkv1.StorageBucket) {
	t.Helper()
	server := f.server
	other, err := s3.New(f.ctx, s3.Config{Endpoint: server.Endpoint, Region: server.Region, ForcePathStyle: true,
		AccessKeyID: server.OtherAccessKeyID, SecretAccessKey: server.OtherSecretAccessKey})
	must(t, err)
	theirs := f.ns + "-theirs"
	data := []byte("another account's ledger")
	theirTags := map[string]string{"owner": "other-account"}
	must(t, other.CreateBucket(f.ctx, theirs, ""))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = other.DeleteObject(ctx, theirs, "ledger.csv")
		_ = other.DeleteBucket(ctx, theirs)
	})
	must(t, other.PutBucketTagging(f.ctx, theirs, theirTags))
	must(t, other.PutObject(f.ctx, theirs, "ledger.csv", data))
	intact := func(when string) {
		t.Helper()
		if body, err := other.GetObject(f.ctx, theirs, "ledger.csv", 64); err != nil || string(body) != string(data) {
			t.Errorf("%s: the other account's data: %q, %v", when, body, err)
		}
		if tags, err := other.GetBucketTagging(f.ctx, theirs); err != nil || !maps.Equal(tags, theirTags) {
			t.Errorf("%s: the other account's tags: %v (%v), want %v", when, tags, err, theirTags)
		}
		if policy, err := other.GetBucketPolicy(f.ctx, theirs); err != nil || policy != "" {
			t.Errorf("%s: the other account's bucket has a policy %q (%v)", when, policy, err)
		}
	}

	before := requests.snapshot(f.store)
	sb := adopt("theirs", theirs)
	got := f.waitCondition(sb, bkv1.ConditionStalled, metav1.ConditionTrue, bkv1.ReasonBucketNameTaken)
	msg := findCond(got, bkv1.ConditionStalled).Message
	for _, owner := range []string{server.OtherAccountID, "other-tenant", server.BucketOwnerID} {
		if owner != "" && strings.Contains(msg, owner) {
			t.Errorf("the refusal names an owner (%q): %s", owner, msg)
		}
	}
	if got.Status.BucketName != "" {
		t.Errorf("the refused claim records bucket %q", got.Status.BucketName)
	}
	if _, mutating, ops := since(before, requests.snapshot(f.store)); mutating != 0 {
		t.Errorf("a refused adoption wrote to the store: %v", ops)
	}
	intact("refused")

	must(t, tenant.Delete(f.ctx, sb))
	f.waitGone(sb)
	intact("after the refused claim, which asked for Purge, was deleted")
}
