package integration_test

import (
	"context"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// countingClient counts the per-bucket calls a reconcile makes; the HTTP requests are
// counted by the registry's Observer, which catches any call not listed here.
type countingClient struct {
	s3.Client
	calls *bucketCalls
}

func (c countingClient) HeadBucket(ctx context.Context, b string) (string, error) {
	c.calls.add(b, "HeadBucket")
	return c.Client.HeadBucket(ctx, b)
}

func (c countingClient) CreateBucket(ctx context.Context, b, region string) error {
	c.calls.add(b, "CreateBucket")
	return c.Client.CreateBucket(ctx, b, region)
}

func (c countingClient) GetBucketTagging(ctx context.Context, b string) (map[string]string, error) {
	c.calls.add(b, "GetBucketTagging")
	return c.Client.GetBucketTagging(ctx, b)
}

func (c countingClient) PutBucketTagging(ctx context.Context, b string, tags map[string]string) error {
	c.calls.add(b, "PutBucketTagging")
	return c.Client.PutBucketTagging(ctx, b, tags)
}

func (c countingClient) GetBucketVersioning(ctx context.Context, b string) (s3.VersioningStatus, error) {
	c.calls.add(b, "GetBucketVersioning")
	return c.Client.GetBucketVersioning(ctx, b)
}

func (c countingClient) PutBucketVersioning(ctx context.Context, b string, v s3.VersioningStatus) error {
	c.calls.add(b, "PutBucketVersioning")
	return c.Client.PutBucketVersioning(ctx, b, v)
}

func (c countingClient) GetBucketLifecycle(ctx context.Context, b string) ([]s3.LifecycleRule, error) {
	c.calls.add(b, "GetBucketLifecycle")
	return c.Client.GetBucketLifecycle(ctx, b)
}

func (c countingClient) PutBucketLifecycle(ctx context.Context, b string, rules []s3.LifecycleRule) error {
	c.calls.add(b, "PutBucketLifecycle")
	return c.Client.PutBucketLifecycle(ctx, b, rules)
}

func (c countingClient) DeleteBucketLifecycle(ctx context.Context, b string) error {
	c.calls.add(b, "DeleteBucketLifecycle")
	return c.Client.DeleteBucketLifecycle(ctx, b)
}

func (c countingClient) GetPublicAccessBlock(ctx context.Context, b string) (*s3.PublicAccessBlock, error) {
	c.calls.add(b, "GetPublicAccessBlock")
	return c.Client.GetPublicAccessBlock(ctx, b)
}

func (c countingClient) PutPublicAccessBlock(ctx context.Context, b string, pab s3.PublicAccessBlock) error {
	c.calls.add(b, "PutPublicAccessBlock")
	return c.Client.PutPublicAccessBlock(ctx, b, pab)
}

func (c countingClient) GetBucketPolicy(ctx context.Context, b string) (string, error) {
	c.calls.add(b, "GetBucketPolicy")
	return c.Client.GetBucketPolicy(ctx, b)
}

func (c countingClient) PutBucketPolicy(ctx context.Context, b, policy string) error {
	c.calls.add(b, "PutBucketPolicy")
	return c.Client.PutBucketPolicy(ctx, b, policy)
}

func (c countingClient) DeleteBucketPolicy(ctx context.Context, b string) error {
	c.calls.add(b, "DeleteBucketPolicy")
	return c.Client.DeleteBucketPolicy(ctx, b)
}

func (c countingClient) GetBucketCors(ctx context.Context, b string) ([]s3.CORSRule, error) {
	c.calls.add(b, "GetBucketCors")
	return c.Client.GetBucketCors(ctx, b)
}

func (c countingClient) PutBucketCors(ctx context.Context, b string, rules []s3.CORSRule) error {
	c.calls.add(b, "PutBucketCors")
	return c.Client.PutBucketCors(ctx, b, rules)
}

func (c countingClient) DeleteBucketCors(ctx context.Context, b string) error {
	c.calls.add(b, "DeleteBucketCors")
	return c.Client.DeleteBucketCors(ctx, b)
}
