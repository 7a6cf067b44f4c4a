package storagebucket

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// TestOwnedReason: a bucket this claim's tags already mark as its own, with no
// Provisioned condition yet (the pass that tagged it lost its status write), is
// reported as what that pass did, read from the status and spec it started from.
func TestOwnedReason(t *testing.T) {
	const bucket = "team-a-logs"
	claim := func(adoption bkv1.AdoptionPolicy, intent *bkv1.CreateIntent) *bkv1.StorageBucket {
		sb := &bkv1.StorageBucket{}
		sb.UID = types.UID("uid-1")
		sb.Spec.Adoption = adoption
		sb.Status.CreateIntent = intent
		return sb
	}
	for _, tc := range []struct {
		name string
		sb   *bkv1.StorageBucket
		want string
	}{
		{"created by this object", claim(bkv1.AdoptionNever, &bkv1.CreateIntent{BucketName: bucket, UID: "uid-1"}), bkv1.ReasonBucketCreated},
		{"created by this object, adoption allowed", claim(bkv1.AdoptionIfUnowned, &bkv1.CreateIntent{BucketName: bucket, UID: "uid-1"}), bkv1.ReasonBucketCreated},
		{"adopted", claim(bkv1.AdoptionIfUnowned, nil), bkv1.ReasonBucketAdopted},
		{"intent of an earlier object of the same name", claim(bkv1.AdoptionIfUnowned, &bkv1.CreateIntent{BucketName: bucket, UID: "uid-0"}), bkv1.ReasonBucketAdopted},
		{"intent for another bucket", claim(bkv1.AdoptionNever, &bkv1.CreateIntent{BucketName: "other", UID: "uid-1"}), bkv1.ReasonBucketBound},
		{"neither", claim(bkv1.AdoptionNever, nil), bkv1.ReasonBucketBound},
	} {
		if got, _ := ownedReason(tc.sb, bucket); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
