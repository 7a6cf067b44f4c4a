package s3

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
)

// BucketOwner reads the canonical ID of bucket's owner from its ACL: the one place
// every store we test names a bucket's owner (AWS's ExpectedBucketOwner wants an
// account ID, which no S3 call of the caller's gives). A store that keeps no owner
// per bucket answers "" or an error (KindNotImplemented), never a guess.
func (c *client) BucketOwner(ctx context.Context, bucket string) (string, error) {
	var owner string
	err := c.call(ctx, "GetBucketAcl", bucket, "", func(ctx context.Context) error {
		out, err := c.api.GetBucketAcl(ctx, &awss3.GetBucketAclInput{Bucket: aws.String(bucket)})
		if err == nil && out.Owner != nil {
			owner = aws.ToString(out.Owner.ID)
		}
		return err
	})
	return owner, err
}

// CallerOwner reads the canonical ID ListBuckets names as the owner of the
// caller's buckets. On AWS and Versity that is the ID bucket ACLs name for the
// caller's buckets; SeaweedFS and Ceph RGW name the caller's identity here but its
// account in ACLs, so there the two never compare equal.
func (c *client) CallerOwner(ctx context.Context) (string, error) {
	var owner string
	err := c.call(ctx, "ListBuckets", "", "", func(ctx context.Context) error {
		out, err := c.firstBucketPage(ctx)
		if err == nil && out.Owner != nil {
			owner = aws.ToString(out.Owner.ID)
		}
		return err
	})
	return owner, err
}
