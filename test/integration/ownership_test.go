package integration_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestPacedOwnershipMatrix: only a bucket tagged for this claim counts as ours; everything
// else is adopted only when allowed and unowned, and never touched otherwise.
func TestPacedOwnershipMatrix(t *testing.T) {
	t.Parallel() // mostly waiting on intervals: see the package doc in suite_test.go
	for _, server := range everyStore() {
		t.Run(string(server.Kind), func(t *testing.T) {
			t.Parallel()
			ownershipMatrix(t, server)
		})
	}
}

func ownershipMatrix(t *testing.T, server *testenv.S3Server) {
	// The store lets every namespace adopt: what is tested here is ownership; the
	// adoption guardrail has tests of its own (test/e2e).
	f := newFixture(t, server, func(s *bkv1.ObjectStore) { s.Spec.Guardrails.AdoptionAllowedNamespaces = &metav1.LabelSelector{} })

	t.Run("unowned bucket is not adopted by default", func(t *testing.T) {
		name := f.ns + "-unowned" // in the namespace's lane: only ownership decides
		must(t, f.admin.CreateBucket(f.ctx, name, ""))
		must(t, f.admin.PutBucketTagging(f.ctx, name, map[string]string{"owner": "someone"}))
		sb := f.bucket("never", func(sb *bkv1.StorageBucket) { sb.Spec.BucketName = name })
		got := f.waitCondition(sb, bkv1.ConditionStalled, metav1.ConditionTrue, bkv1.ReasonBucketNotOwned)
		if c := findCond(got, bkv1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse || c.Reason != bkv1.ReasonBucketNotOwned {
			t.Errorf("Ready: %s", describe(got.Status.Conditions))
		}
		if tags, _ := f.admin.GetBucketTagging(f.ctx, name); len(tags) != 1 || tags["owner"] != "someone" {
			t.Errorf("an unowned bucket was touched: tags %v", tags)
		}
		if ev := f.waitEvent(got, bkv1.ReasonBucketNotOwned); ev[bkv1.ReasonBucketNotOwned] != 1 {
			t.Errorf("want one BucketNotOwned warning, events %v", ev)
		}
	})

	t.Run("unowned bucket is adopted with IfUnowned", func(t *testing.T) {
		name := "adoptable-" + f.ns
		must(t, f.admin.CreateBucket(f.ctx, name, ""))
		sb := f.bucket("adopter", func(sb *bkv1.StorageBucket) {
			sb.Spec.BucketName = name
			sb.Spec.Adoption = bkv1.AdoptionIfUnowned
		})
		got := f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
		if c := findCond(got, bkv1.ConditionProvisioned); c.Reason != bkv1.ReasonBucketAdopted {
			t.Errorf("Provisioned reason %q, want BucketAdopted", c.Reason)
		}
		tags, err := f.admin.GetBucketTagging(f.ctx, name)
		must(t, err)
		if tags[bkv1.TagUID] != f.uidTagOf(got) {
			t.Errorf("adopted bucket tags %v", tags)
		}
		if ev := f.waitEvent(got, bkv1.ReasonBucketAdopted); ev[bkv1.ReasonBucketAdopted] != 1 {
			t.Errorf("want one BucketAdopted event, got %v", ev)
		}
	})

	t.Run("bucket of another claim is never taken", func(t *testing.T) {
		name := "claimed-" + f.ns
		must(t, f.admin.CreateBucket(f.ctx, name, ""))
		theirs := map[string]string{bkv1.TagClaim: "other/claim", bkv1.TagUID: "1234"}
		must(t, f.admin.PutBucketTagging(f.ctx, name, theirs))
		sb := f.bucket("thief", func(sb *bkv1.StorageBucket) {
			sb.Spec.BucketName = name
			sb.Spec.Adoption = bkv1.AdoptionIfUnowned
		})
		f.waitCondition(sb, bkv1.ConditionStalled, metav1.ConditionTrue, bkv1.ReasonOwnedByAnotherClaim)
		if tags, _ := f.admin.GetBucketTagging(f.ctx, name); tags[bkv1.TagClaim] != "other/claim" || tags[bkv1.TagUID] != "1234" || len(tags) != 2 {
			t.Errorf("another claim's bucket was touched: %v", tags)
		}
	})

	t.Run("bucket of another account", func(t *testing.T) {
		name := f.ns + "-foreign-account"
		other, err := s3.New(f.ctx, s3.Config{Endpoint: server.Endpoint, Region: server.Region, ForcePathStyle: true,
			AccessKeyID: server.OtherAccessKeyID, SecretAccessKey: server.OtherSecretAccessKey})
		must(t, err)
		must(t, other.CreateBucket(f.ctx, name, ""))
		must(t, other.PutBucketTagging(f.ctx, name, map[string]string{bkv1.TagClaim: "elsewhere/x", bkv1.TagUID: "9"}))
		sb := f.bucket("squatter", func(sb *bkv1.StorageBucket) { sb.Spec.BucketName = name })
		got := f.waitCondition(sb, bkv1.ConditionStalled, metav1.ConditionTrue, "")
		if r := findCond(got, bkv1.ConditionStalled).Reason; r != bkv1.ReasonBucketNameTaken && r != bkv1.ReasonOwnedByAnotherClaim {
			t.Errorf("Stalled reason %q, want BucketNameTaken or OwnedByAnotherClaim", r)
		}
	})

	t.Run("vanished bucket is recreated", func(t *testing.T) {
		sb := f.bucket("phoenix")
		got := f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
		must(t, f.admin.DeleteBucket(f.ctx, got.Status.BucketName))
		f.eventually(4*syncInterval, "bucket to be recreated", func() error {
			if _, err := f.admin.HeadBucket(f.ctx, got.Status.BucketName); err != nil {
				return err
			}
			if ev := f.eventReasons(got); ev[bkv1.ReasonBucketRecreated] == 0 {
				return errf("no BucketRecreated event yet: %v", ev)
			}
			return nil
		})
		f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	})
}
