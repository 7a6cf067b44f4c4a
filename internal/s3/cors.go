package s3

import (
	"context"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// CORSRule is one rule of a bucket's CORS configuration, as S3 has it. Empty lists are
// nil, so that a rule read back compares equal to the one written.
type CORSRule struct {
	ID             string
	AllowedOrigins []string
	AllowedMethods []string
	AllowedHeaders []string
	ExposeHeaders  []string
	// MaxAgeSeconds is nil when the rule sets none.
	MaxAgeSeconds *int32
}

// GetBucketCors returns the bucket's CORS rules in the store's order, nil when it has no
// CORS configuration (NoSuchCORSConfiguration).
func (c *client) GetBucketCors(ctx context.Context, bucket string) ([]CORSRule, error) {
	var rules []CORSRule
	err := c.call(ctx, "GetBucketCors", bucket, "", func(ctx context.Context) error {
		out, err := c.api.GetBucketCors(ctx, &awss3.GetBucketCorsInput{Bucket: aws.String(bucket)})
		if err != nil {
			if hasCode(err, "NoSuchCORSConfiguration") {
				return nil
			}
			return err
		}
		rules = fromSDKCORS(out.CORSRules)
		return nil
	})
	return rules, err
}

// PutBucketCors replaces the bucket's CORS configuration; no rules deletes it, as S3
// refuses an empty one.
func (c *client) PutBucketCors(ctx context.Context, bucket string, rules []CORSRule) error {
	if len(rules) == 0 {
		return c.DeleteBucketCors(ctx, bucket)
	}
	cfg := &types.CORSConfiguration{CORSRules: toSDKCORS(rules)}
	return c.call(ctx, "PutBucketCors", bucket, "", func(ctx context.Context) error {
		_, err := c.api.PutBucketCors(ctx, &awss3.PutBucketCorsInput{Bucket: aws.String(bucket), CORSConfiguration: cfg})
		return err
	})
}

// DeleteBucketCors removes the bucket's CORS configuration; a bucket without one is
// not a failure on the stores that answer 204 for it.
func (c *client) DeleteBucketCors(ctx context.Context, bucket string) error {
	return c.call(ctx, "DeleteBucketCors", bucket, "", func(ctx context.Context) error {
		_, err := c.api.DeleteBucketCors(ctx, &awss3.DeleteBucketCorsInput{Bucket: aws.String(bucket)})
		return err
	})
}

func toSDKCORS(rules []CORSRule) []types.CORSRule {
	out := make([]types.CORSRule, 0, len(rules))
	for _, r := range rules {
		sr := types.CORSRule{
			AllowedOrigins: slices.Clone(r.AllowedOrigins),
			AllowedMethods: slices.Clone(r.AllowedMethods),
			AllowedHeaders: slices.Clone(r.AllowedHeaders),
			ExposeHeaders:  slices.Clone(r.ExposeHeaders),
			MaxAgeSeconds:  r.MaxAgeSeconds,
		}
		if r.ID != "" {
			sr.ID = aws.String(r.ID)
		}
		out = append(out, sr)
	}
	return out
}

// fromSDKCORS keeps the rules' order, which is meaningful (a request is answered by the
// first rule that matches it), and turns empty lists into nil.
func fromSDKCORS(in []types.CORSRule) []CORSRule {
	var out []CORSRule
	for _, r := range in {
		out = append(out, CORSRule{
			ID:             aws.ToString(r.ID),
			AllowedOrigins: nilIfEmpty(r.AllowedOrigins),
			AllowedMethods: nilIfEmpty(r.AllowedMethods),
			AllowedHeaders: nilIfEmpty(r.AllowedHeaders),
			ExposeHeaders:  nilIfEmpty(r.ExposeHeaders),
			MaxAgeSeconds:  r.MaxAgeSeconds,
		})
	}
	return out
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return slices.Clone(s)
}
