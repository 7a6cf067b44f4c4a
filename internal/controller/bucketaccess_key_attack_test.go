package controller_test

import (
	"maps"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestHandedOutKeyCannotReconfigureItsBucket: the key of a ReadWrite access, the most a
// tenant is handed, tries every call that would change what the operator owns on its
// own bucket: the ownership tags, the policy, lifecycle, versioning, the public-access
// block, and the bucket's deletion. Each is refused on every IAM server the harness
// runs, and the bucket's tags, policy, versioning and data are as the operator left
// them; the key still does what it was given (write and read an object).
func TestHandedOutKeyCannotReconfigureItsBucket(t *testing.T) {
	for _, srv := range []*testenv.S3Server{seaweed, versity} {
		t.Run(string(srv.Kind), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, srv, withIAMOn(srv))
			f.waitStoreCondition(bkv1.ConditionAccessProviderReady, metav1.ConditionTrue)
			sb := f.waitCondition(f.bucket("data"), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
			bucket := sb.Status.BucketName
			f.waitAccessReady(f.access("app", "app-creds", bkv1.BucketGrant{Name: "data", Mode: bkv1.AccessReadWrite}))
			key := f.secretClient("app-creds")
			must(t, key.c.PutObject(f.ctx, bucket, "mine", []byte("data")))

			tagsBefore, err := f.admin.GetBucketTagging(f.ctx, bucket)
			must(t, err)
			policyBefore, err := f.admin.GetBucketPolicy(f.ctx, bucket)
			must(t, err)
			versioningBefore, err := f.admin.GetBucketVersioning(f.ctx, bucket)
			must(t, err)

			forged := maps.Clone(tagsBefore)
			forged[bkv1.TagClaim] = "victim/claim"
			attempts := map[string]func() error{
				"PutBucketTagging": func() error { return key.c.PutBucketTagging(f.ctx, bucket, forged) },
				"PutBucketPolicy": func() error {
					return key.c.PutBucketPolicy(f.ctx, bucket, string(publicReadPolicy(t, bucket).Raw))
				},
				"DeleteBucketPolicy": func() error { return key.c.DeleteBucketPolicy(f.ctx, bucket) },
				"PutBucketLifecycleConfiguration": func() error {
					return key.c.PutBucketLifecycle(f.ctx, bucket, []s3.LifecycleRule{{ID: "wipe", ExpirationDays: ptr32(1)}})
				},
				"PutBucketVersioning":     func() error { return key.c.PutBucketVersioning(f.ctx, bucket, s3.VersioningEnabled) },
				"DeletePublicAccessBlock": func() error { return key.c.DeletePublicAccessBlock(f.ctx, bucket) },
				"PutPublicAccessBlock": func() error {
					return key.c.PutPublicAccessBlock(f.ctx, bucket, s3.PublicAccessBlock{})
				},
				"DeleteBucket": func() error { return key.c.DeleteBucket(f.ctx, bucket) },
			}
			for op, attempt := range attempts {
				if err := attempt(); err == nil {
					t.Errorf("%s with the handed-out key succeeded on %s", op, srv.Kind)
				} else if k := s3.KindOf(err); k != s3.KindAccessDenied && k != s3.KindNotImplemented {
					// Refused for another reason (a non-empty bucket, a malformed
					// request) says nothing about the permission: it must be denied.
					t.Errorf("%s refused as %s, not AccessDenied: %v", op, k, err)
				}
			}

			if tags, err := f.admin.GetBucketTagging(f.ctx, bucket); err != nil || !maps.Equal(tags, tagsBefore) {
				t.Errorf("tags = %v, %v; want %v", tags, err, tagsBefore)
			}
			if policy, err := f.admin.GetBucketPolicy(f.ctx, bucket); err != nil || policy != policyBefore {
				t.Errorf("policy = %q, %v; want %q", policy, err, policyBefore)
			}
			if v, err := f.admin.GetBucketVersioning(f.ctx, bucket); err != nil || v != versioningBefore {
				t.Errorf("versioning = %q, %v; want %q", v, err, versioningBefore)
			}
			if have, err := key.c.GetObject(f.ctx, bucket, "mine", 1<<10); err != nil || string(have) != "data" {
				t.Errorf("the key's own object = %q, %v", have, err)
			}
		})
	}
}
