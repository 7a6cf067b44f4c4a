package s3

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
)

// Owners is who owns a bucket and who is asking, as the store names them.
type Owners struct {
	// Bucket is the canonical ID of the bucket's owner (GetBucketAcl's Owner).
	Bucket string
	// Caller is the canonical ID of the identity the credentials act for
	// (ListBuckets' Owner).
	Caller string
}

// Same says whether the bucket belongs to the caller: both IDs known and equal.
func (o Owners) Same() bool { return o.Bucket != "" && o.Bucket == o.Caller }

// BucketOwners reads both owners with two reads: the bucket's ACL and one page of
// the caller's bucket list. S3 names a bucket's owner nowhere else every store
// serves (AWS's ExpectedBucketOwner wants an account ID, which ListBuckets does not
// give), and both answers use the same canonical ID, so they compare. A store that
// keeps no owner per bucket, or does not serve bucket ACLs, answers with an empty
// Bucket or an error (KindNotImplemented), never a guess.
func (c *client) BucketOwners(ctx context.Context, bucket string) (Owners, error) {
	var o Owners
	err := c.call(ctx, "GetBucketAcl", bucket, "", func(ctx context.Context) error {
		out, err := c.api.GetBucketAcl(ctx, &awss3.GetBucketAclInput{Bucket: aws.String(bucket)})
		if err == nil && out.Owner != nil {
			o.Bucket = aws.ToString(out.Owner.ID)
		}
		return err
	})
	if err != nil {
		return o, err
	}
	err = c.call(ctx, "ListBuckets", "", "", func(ctx context.Context) error {
		out, err := c.api.ListBuckets(ctx, &awss3.ListBucketsInput{MaxBuckets: aws.Int32(1)})
		if err != nil && KindOf(err) == KindInvalid {
			out, err = c.api.ListBuckets(ctx, &awss3.ListBucketsInput{}) // see Ping
		}
		if err == nil && out.Owner != nil {
			o.Caller = aws.ToString(out.Owner.ID)
		}
		return err
	})
	return o, err
}
