package s3

import (
	"context"
	"errors"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

func (c *client) ListBuckets(ctx context.Context) ([]string, error) {
	var names []string
	err := c.call(ctx, "ListBuckets", "", "", func(ctx context.Context) error {
		names = nil
		p := awss3.NewListBucketsPaginator(c.api, &awss3.ListBucketsInput{})
		for p.HasMorePages() {
			out, err := p.NextPage(ctx)
			if err != nil {
				return err
			}
			for _, b := range out.Buckets {
				names = append(names, aws.ToString(b.Name))
			}
		}
		return nil
	})
	return names, err
}

func (c *client) Ping(ctx context.Context) error {
	return c.call(ctx, "ListBuckets", "", "", func(ctx context.Context) error {
		_, err := c.firstBucketPage(ctx)
		return err
	})
}

// firstBucketPage asks for a single bucket; stores that ignore max-buckets still
// answer with a single page. A store that predates the parameter may refuse it: its
// first page without it proves just as much, and names the same owner.
func (c *client) firstBucketPage(ctx context.Context) (*awss3.ListBucketsOutput, error) {
	out, err := c.api.ListBuckets(ctx, &awss3.ListBucketsInput{MaxBuckets: aws.Int32(1)})
	if err != nil && KindOf(err) == KindInvalid {
		out, err = c.api.ListBuckets(ctx, &awss3.ListBucketsInput{})
	}
	return out, err
}

func (c *client) CreateBucket(ctx context.Context, bucket, region string) error {
	return c.createBucket(ctx, createBucketInput(bucket, region))
}

// createBucket sends one attempt: a retry after an attempt whose answer was lost would
// meet the bucket that attempt made, and its "already exists" would hide that the
// bucket is the caller's own. The caller, which records its intent, decides what an
// unanswered create means (see Unanswered).
func (c *client) createBucket(ctx context.Context, in *awss3.CreateBucketInput) error {
	return c.call(ctx, "CreateBucket", aws.ToString(in.Bucket), "", func(ctx context.Context) error {
		_, err := c.api.CreateBucket(ctx, in, func(o *awss3.Options) { o.RetryMaxAttempts = 1 })
		return err
	})
}

func createBucketInput(bucket, region string) *awss3.CreateBucketInput {
	in := &awss3.CreateBucketInput{Bucket: aws.String(bucket)}
	if region != "" && region != DefaultRegion {
		in.CreateBucketConfiguration = &types.CreateBucketConfiguration{
			LocationConstraint: types.BucketLocationConstraint(region),
		}
	}
	return in
}

func (c *client) HeadBucket(ctx context.Context, bucket string) (string, error) {
	var region string
	err := c.call(ctx, "HeadBucket", bucket, "", func(ctx context.Context) error {
		out, err := c.api.HeadBucket(ctx, &awss3.HeadBucketInput{Bucket: aws.String(bucket)})
		if err != nil {
			return c.confirmHead(ctx, bucket, err)
		}
		region = aws.ToString(out.BucketRegion)
		return nil
	})
	return region, err
}

// confirmHead double-checks a body-less 403 or 404 from HeadBucket. A HEAD
// answer cannot carry an error code, so a wrong secret looks like "access
// denied" (403) and Versity's unknown access key (404 XAdminUserNotFound)
// looks like "bucket missing", which would send the operator to create it.
// One GET (ListObjectsV2, the most widely implemented bucket read) tells
// them apart; only a credential verdict replaces the HEAD error, anything
// else keeps it. The extra request happens only on these failure paths.
func (c *client) confirmHead(ctx context.Context, bucket string, headErr error) error {
	if k, _, status := classify(headErr); !(k == KindNotFound && status == 404) && !(k == KindAccessDenied && status == 403) {
		return headErr
	}
	_, err := c.api.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String(bucket), MaxKeys: aws.Int32(1)})
	if err != nil && KindOf(err) == KindInvalidCredentials {
		return err
	}
	return headErr
}

func (c *client) DeleteBucket(ctx context.Context, bucket string) error {
	return c.call(ctx, "DeleteBucket", bucket, "", func(ctx context.Context) error {
		_, err := c.api.DeleteBucket(ctx, &awss3.DeleteBucketInput{Bucket: aws.String(bucket)})
		return err
	})
}

// hasCode reports whether err is an API error with one of codes.
func hasCode(err error, codes ...string) bool {
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	for _, c := range codes {
		if apiErr.ErrorCode() == c {
			return true
		}
	}
	return false
}

func (c *client) GetBucketTagging(ctx context.Context, bucket string) (map[string]string, error) {
	tags := map[string]string{}
	err := c.call(ctx, "GetBucketTagging", bucket, "", func(ctx context.Context) error {
		out, err := c.api.GetBucketTagging(ctx, &awss3.GetBucketTaggingInput{Bucket: aws.String(bucket)})
		if err != nil {
			// AWS says NoSuchTagSet, Ceph RGW NoSuchTagSetError.
			if hasCode(err, "NoSuchTagSet", "NoSuchTagSetError") {
				return nil
			}
			return err
		}
		for _, t := range out.TagSet {
			tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return tags, nil
}

func (c *client) PutBucketTagging(ctx context.Context, bucket string, tags map[string]string) error {
	if len(tags) == 0 {
		return c.DeleteBucketTagging(ctx, bucket)
	}
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys) // deterministic bodies: stable Content-MD5, readable diffs
	set := make([]types.Tag, 0, len(keys))
	for _, k := range keys {
		set = append(set, types.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
	}
	return c.call(ctx, "PutBucketTagging", bucket, "", func(ctx context.Context) error {
		_, err := c.api.PutBucketTagging(ctx, &awss3.PutBucketTaggingInput{
			Bucket: aws.String(bucket), Tagging: &types.Tagging{TagSet: set},
		})
		return err
	})
}

func (c *client) DeleteBucketTagging(ctx context.Context, bucket string) error {
	return c.call(ctx, "DeleteBucketTagging", bucket, "", func(ctx context.Context) error {
		_, err := c.api.DeleteBucketTagging(ctx, &awss3.DeleteBucketTaggingInput{Bucket: aws.String(bucket)})
		return err
	})
}

func (c *client) GetBucketVersioning(ctx context.Context, bucket string) (VersioningStatus, error) {
	var status VersioningStatus
	err := c.call(ctx, "GetBucketVersioning", bucket, "", func(ctx context.Context) error {
		out, err := c.api.GetBucketVersioning(ctx, &awss3.GetBucketVersioningInput{Bucket: aws.String(bucket)})
		if err != nil {
			return err
		}
		status = VersioningStatus(out.Status)
		return nil
	})
	return status, err
}

func (c *client) PutBucketVersioning(ctx context.Context, bucket string, status VersioningStatus) error {
	if status != VersioningEnabled && status != VersioningSuspended {
		return invalid("PutBucketVersioning", bucket, "versioning status must be Enabled or Suspended, got "+string(status))
	}
	return c.call(ctx, "PutBucketVersioning", bucket, "", func(ctx context.Context) error {
		_, err := c.api.PutBucketVersioning(ctx, &awss3.PutBucketVersioningInput{
			Bucket:                  aws.String(bucket),
			VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatus(status)},
		})
		return err
	})
}

func (c *client) GetPublicAccessBlock(ctx context.Context, bucket string) (*PublicAccessBlock, error) {
	var pab *PublicAccessBlock
	err := c.call(ctx, "GetPublicAccessBlock", bucket, "", func(ctx context.Context) error {
		out, err := c.api.GetPublicAccessBlock(ctx, &awss3.GetPublicAccessBlockInput{Bucket: aws.String(bucket)})
		if err != nil {
			if hasCode(err, "NoSuchPublicAccessBlockConfiguration", "NoSuchPublicAccessBlockConfigurations") {
				return nil
			}
			return err
		}
		if cfg := out.PublicAccessBlockConfiguration; cfg != nil {
			pab = &PublicAccessBlock{
				BlockPublicAcls:       aws.ToBool(cfg.BlockPublicAcls),
				IgnorePublicAcls:      aws.ToBool(cfg.IgnorePublicAcls),
				BlockPublicPolicy:     aws.ToBool(cfg.BlockPublicPolicy),
				RestrictPublicBuckets: aws.ToBool(cfg.RestrictPublicBuckets),
			}
		}
		return nil
	})
	return pab, err
}

func (c *client) PutPublicAccessBlock(ctx context.Context, bucket string, pab PublicAccessBlock) error {
	return c.call(ctx, "PutPublicAccessBlock", bucket, "", func(ctx context.Context) error {
		_, err := c.api.PutPublicAccessBlock(ctx, &awss3.PutPublicAccessBlockInput{
			Bucket: aws.String(bucket),
			PublicAccessBlockConfiguration: &types.PublicAccessBlockConfiguration{
				BlockPublicAcls:       aws.Bool(pab.BlockPublicAcls),
				IgnorePublicAcls:      aws.Bool(pab.IgnorePublicAcls),
				BlockPublicPolicy:     aws.Bool(pab.BlockPublicPolicy),
				RestrictPublicBuckets: aws.Bool(pab.RestrictPublicBuckets),
			},
		})
		return err
	})
}

func (c *client) DeletePublicAccessBlock(ctx context.Context, bucket string) error {
	return c.call(ctx, "DeletePublicAccessBlock", bucket, "", func(ctx context.Context) error {
		_, err := c.api.DeletePublicAccessBlock(ctx, &awss3.DeletePublicAccessBlockInput{Bucket: aws.String(bucket)})
		return err
	})
}

func (c *client) GetBucketPolicy(ctx context.Context, bucket string) (string, error) {
	var policy string
	err := c.call(ctx, "GetBucketPolicy", bucket, "", func(ctx context.Context) error {
		out, err := c.api.GetBucketPolicy(ctx, &awss3.GetBucketPolicyInput{Bucket: aws.String(bucket)})
		if err != nil {
			if hasCode(err, "NoSuchBucketPolicy") {
				return nil
			}
			return err
		}
		policy = aws.ToString(out.Policy)
		return nil
	})
	return policy, err
}

func (c *client) PutBucketPolicy(ctx context.Context, bucket, policy string) error {
	if policy == "" {
		return c.DeleteBucketPolicy(ctx, bucket)
	}
	return c.call(ctx, "PutBucketPolicy", bucket, "", func(ctx context.Context) error {
		_, err := c.api.PutBucketPolicy(ctx, &awss3.PutBucketPolicyInput{Bucket: aws.String(bucket), Policy: aws.String(policy)})
		return err
	})
}

func (c *client) DeleteBucketPolicy(ctx context.Context, bucket string) error {
	return c.call(ctx, "DeleteBucketPolicy", bucket, "", func(ctx context.Context) error {
		_, err := c.api.DeleteBucketPolicy(ctx, &awss3.DeleteBucketPolicyInput{Bucket: aws.String(bucket)})
		return err
	})
}
