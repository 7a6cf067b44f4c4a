package integration_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// TestMoveTakesCORSToTheTarget moves a claim with spec.cors from SeaweedFS to Ceph RGW:
// a move configures its target from the spec, so by Done (the first pass on the new
// home configured it before its connection Secret named it) the target bucket has the
// spec's CORS, and the claim is Ready there.
func TestMoveTakesCORSToTheTarget(t *testing.T) {
	f := newFixture(t, seaweed)
	target := f.storeOn(rgw)
	sb := f.waitCondition(f.bucket("data", func(sb *bkv1.StorageBucket) {
		sb.Spec.CORS = claimCORS
		sb.Spec.DeletionPolicy = bkv1.DeletionPolicyPurge
	}), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	bucket := sb.Status.BucketName
	f.seedObjects(f.admin, bucket, 5)
	tgtAdmin := adminOf(t, f.ctx, rgw)
	if have, err := tgtAdmin.GetBucketCors(f.ctx, bucket); err == nil && have != nil {
		t.Fatalf("the target has CORS before the move: %+v", have)
	}

	f.moveTo(sb, target, "")
	moved := f.waitMove(sb, bkv1.MoveDone, 4*time.Minute)
	have, err := tgtAdmin.GetBucketCors(f.ctx, bucket)
	must(t, err)
	if !sameCORSOnStore(have, storedCORS) {
		t.Errorf("CORS on the target when the move is Done = %+v\nwant %+v", have, storedCORS)
	}
	f.waitCondition(moved, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
}
