package integration_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// TestOneOwnerWhenTwoClaimsCreateOneName: on a store that answers a repeat
// CreateBucket by its owner with 200 (Ceph RGW here, AWS in us-east-1), two claims of
// one namespace name the same bucket at the same instant. Exactly one creates and owns
// it; the other finds it tagged for the first and is refused OwnedByAnotherClaim, with
// no status claiming the bucket. Only one CreateBucket reaches the store.
func TestOneOwnerWhenTwoClaimsCreateOneName(t *testing.T) {
	f := newFixture(t, rgw)
	name := f.ns + "-contested"
	before := requests.snapshot(f.store)
	first := f.bucket("first", func(sb *bkv1.StorageBucket) { sb.Spec.BucketName = name })
	second := f.bucket("second", func(sb *bkv1.StorageBucket) { sb.Spec.BucketName = name })

	var winner, loser *bkv1.StorageBucket
	f.eventually(90*time.Second, "one claim Ready and the other refused", func() error {
		a, b := f.get(first), f.get(second)
		switch {
		case isReady(a) && isStalledBy(b, bkv1.ReasonOwnedByAnotherClaim):
			winner, loser = a, b
		case isReady(b) && isStalledBy(a, bkv1.ReasonOwnedByAnotherClaim):
			winner, loser = b, a
		default:
			return errf("first: %s; second: %s", describe(a.Status.Conditions), describe(b.Status.Conditions))
		}
		return nil
	})
	tags, err := f.admin.GetBucketTagging(f.ctx, name)
	must(t, err)
	if tags[bkv1.TagClaim] != f.ns+"/"+winner.Name || tags[bkv1.TagUID] != f.uidTagOf(winner) {
		t.Errorf("bucket tags %v do not name the winner %s", tags, winner.Name)
	}
	if loser.Status.BucketName != "" {
		t.Errorf("the refused claim records bucket %q", loser.Status.BucketName)
	}
	if _, _, ops := since(before, requests.snapshot(f.store)); ops["CreateBucket"] != 1 {
		t.Errorf("CreateBucket sent %d times, want once: %v", ops["CreateBucket"], ops)
	}
}

func isReady(sb *bkv1.StorageBucket) bool {
	c := findCond(sb, bkv1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue
}

func isStalledBy(sb *bkv1.StorageBucket, reason string) bool {
	c := findCond(sb, bkv1.ConditionStalled)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == reason
}
