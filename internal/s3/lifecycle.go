package s3

import (
	"context"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

func (c *client) GetBucketLifecycle(ctx context.Context, bucket string) ([]LifecycleRule, error) {
	var rules []LifecycleRule
	err := c.call(ctx, "GetBucketLifecycleConfiguration", bucket, "", func(ctx context.Context) error {
		out, err := c.api.GetBucketLifecycleConfiguration(ctx,
			&awss3.GetBucketLifecycleConfigurationInput{Bucket: aws.String(bucket)})
		if err != nil {
			if hasCode(err, "NoSuchLifecycleConfiguration") {
				return nil
			}
			return err
		}
		rules = fromSDKRules(out.Rules)
		return nil
	})
	return rules, err
}

func (c *client) PutBucketLifecycle(ctx context.Context, bucket string, rules []LifecycleRule) error {
	if len(rules) == 0 {
		// S3 refuses an empty configuration; "no rules" means delete it.
		return c.DeleteBucketLifecycle(ctx, bucket)
	}
	cfg := &types.BucketLifecycleConfiguration{Rules: toSDKRules(rules)}
	return c.call(ctx, "PutBucketLifecycleConfiguration", bucket, "", func(ctx context.Context) error {
		_, err := c.api.PutBucketLifecycleConfiguration(ctx, &awss3.PutBucketLifecycleConfigurationInput{
			Bucket: aws.String(bucket), LifecycleConfiguration: cfg,
		})
		return err
	})
}

func (c *client) DeleteBucketLifecycle(ctx context.Context, bucket string) error {
	return c.call(ctx, "DeleteBucketLifecycle", bucket, "", func(ctx context.Context) error {
		_, err := c.api.DeleteBucketLifecycle(ctx, &awss3.DeleteBucketLifecycleInput{Bucket: aws.String(bucket)})
		return err
	})
}

// toSDKRules writes every rule Enabled (or Disabled) with the modern Filter
// form, which all our stores accept; the legacy top-level Prefix is rejected
// by AWS alongside a Filter. A rule read in a form the fields do not model
// is sent back as it was read.
func toSDKRules(rules []LifecycleRule) []types.LifecycleRule {
	out := make([]types.LifecycleRule, 0, len(rules))
	for _, r := range rules {
		if r.verbatim != nil {
			out = append(out, *r.verbatim)
			continue
		}
		sr := types.LifecycleRule{
			Status: types.ExpirationStatusEnabled,
			Filter: &types.LifecycleRuleFilter{Prefix: aws.String(r.Prefix)},
		}
		if r.Disabled {
			sr.Status = types.ExpirationStatusDisabled
		}
		if r.ID != "" {
			sr.ID = aws.String(r.ID)
		}
		if r.ExpirationDays != nil {
			sr.Expiration = &types.LifecycleExpiration{Days: aws.Int32(*r.ExpirationDays)}
		}
		if r.NoncurrentVersionExpirationDays != nil {
			sr.NoncurrentVersionExpiration = &types.NoncurrentVersionExpiration{
				NoncurrentDays: aws.Int32(*r.NoncurrentVersionExpirationDays),
			}
		}
		if r.AbortIncompleteMultipartUploadDays != nil {
			sr.AbortIncompleteMultipartUpload = &types.AbortIncompleteMultipartUpload{
				DaysAfterInitiation: aws.Int32(*r.AbortIncompleteMultipartUploadDays),
			}
		}
		out = append(out, sr)
	}
	return out
}

// fromSDKRules normalises what a store returns so that reading back what
// PutBucketLifecycle wrote compares equal with ==-style deep equality:
//   - the prefix may come as Filter.Prefix, Filter.And.Prefix or the legacy
//     top-level Prefix (older stores echo it there);
//   - a zero or missing day count is "no such action" (nil), since some
//     stores serialise absent actions as <Days>0</Days>;
//   - disabled rules are marked Disabled (the operator writes enabled ones
//     only, but must keep someone else's disabled rule when it writes);
//   - a rule using what the fields do not model keeps its store form (see
//     LifecycleRule);
//   - rules are sorted by ID, as stores do not all keep the order.
//
// Nil is returned for no rules.
func fromSDKRules(in []types.LifecycleRule) []LifecycleRule {
	var out []LifecycleRule
	for _, r := range in {
		lr := LifecycleRule{ID: aws.ToString(r.ID), Prefix: rulePrefix(r), Disabled: r.Status != types.ExpirationStatusEnabled}
		if r.Expiration != nil {
			lr.ExpirationDays = positive(r.Expiration.Days)
		}
		if r.NoncurrentVersionExpiration != nil {
			lr.NoncurrentVersionExpirationDays = positive(r.NoncurrentVersionExpiration.NoncurrentDays)
		}
		if r.AbortIncompleteMultipartUpload != nil {
			lr.AbortIncompleteMultipartUploadDays = positive(r.AbortIncompleteMultipartUpload.DaysAfterInitiation)
		}
		if !modelled(r) {
			rule := r
			lr.verbatim = &rule
		}
		out = append(out, lr)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// modelled says whether LifecycleRule's fields describe r completely, so that
// writing the fields back gives the same rule.
func modelled(r types.LifecycleRule) bool {
	if len(r.Transitions) > 0 || len(r.NoncurrentVersionTransitions) > 0 {
		return false
	}
	if e := r.Expiration; e != nil && (e.Date != nil || aws.ToBool(e.ExpiredObjectDeleteMarker)) {
		return false
	}
	if n := r.NoncurrentVersionExpiration; n != nil && n.NewerNoncurrentVersions != nil {
		return false
	}
	if f := r.Filter; f != nil {
		if f.Tag != nil || f.ObjectSizeGreaterThan != nil || f.ObjectSizeLessThan != nil {
			return false
		}
		if a := f.And; a != nil && (len(a.Tags) > 0 || a.ObjectSizeGreaterThan != nil || a.ObjectSizeLessThan != nil) {
			return false
		}
	}
	return true
}

func rulePrefix(r types.LifecycleRule) string {
	if f := r.Filter; f != nil {
		if f.Prefix != nil {
			return *f.Prefix
		}
		if f.And != nil && f.And.Prefix != nil {
			return *f.And.Prefix
		}
	}
	return aws.ToString(r.Prefix)
}

func positive(p *int32) *int32 {
	if p == nil || *p <= 0 {
		return nil
	}
	v := *p
	return &v
}
