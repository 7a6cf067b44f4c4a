package storagebucket

import (
	"context"
	"maps"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
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

// TestHeadBucketPastADeny: a HEAD the store refuses (a tenant's Deny of s3:ListBucket
// to everyone) is not taken for another account's bucket while the operator may still
// read the bucket's tags; refused both, it is; missing, it is missing either way.
func TestHeadBucketPastADeny(t *testing.T) {
	ctx := context.Background()
	denied := func(op string) error { return s3Err(op, s3.KindAccessDenied) }
	mine := map[string]string{"bucketkeeper.io/uid": "u"}

	f := &fakeS3{tags: mine}
	if tags, err := headBucket(ctx, f, "b"); err != nil || tags != nil {
		t.Errorf("HEAD answered: tags %v, %v; want no tags read, no error", tags, err)
	}
	f = &fakeS3{tags: mine, errs: map[string]error{"HeadBucket": denied("HeadBucket")}}
	if tags, err := headBucket(ctx, f, "b"); err != nil || !maps.Equal(tags, mine) {
		t.Errorf("HEAD denied, tags readable: tags %v, %v; want the tags", tags, err)
	}
	f = &fakeS3{errs: map[string]error{"HeadBucket": denied("HeadBucket"), "GetBucketTagging": denied("GetBucketTagging")}}
	if _, err := headBucket(ctx, f, "b"); s3.KindOf(err) != s3.KindAccessDenied {
		t.Errorf("both denied: %v, want AccessDenied", err)
	}
	f = &fakeS3{errs: map[string]error{"HeadBucket": s3Err("HeadBucket", s3.KindNotFound)}}
	if _, err := headBucket(ctx, f, "b"); s3.KindOf(err) != s3.KindNotFound {
		t.Errorf("missing: %v, want NotFound", err)
	}
}
