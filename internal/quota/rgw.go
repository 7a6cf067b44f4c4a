package quota

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// rgw speaks Ceph RGW's admin-ops API: JSON under /admin/ on the S3 endpoint, signed
// like S3 (SigV4, service s3) by a user with the "buckets" capability. Bucket quotas
// are enforced by RGW on every write (an upload past the limit is refused with
// QuotaExceeded), from its bucket index stats.
type rgw struct{ api *signedAPI }

func newRGW(cfg Config) (*rgw, error) {
	api, err := newSignedAPI(cfg)
	if err != nil {
		return nil, err
	}
	return &rgw{api: api}, nil
}

// rgwQuota is RGW's RGWQuotaInfo as JSON: a negative limit is none.
type rgwQuota struct {
	Enabled    bool  `json:"enabled"`
	MaxSize    int64 `json:"max_size"`
	MaxObjects int64 `json:"max_objects"`
}

// rgwBucketInfo is the part of GET /admin/bucket?bucket=... the operator reads.
type rgwBucketInfo struct {
	Bucket string   `json:"bucket"`
	Quota  rgwQuota `json:"bucket_quota"`
	// Usage by category; rgw.main holds the objects (rgw.multimeta the uploads in
	// progress). Size is the logical size, what the quota counts.
	Usage map[string]struct {
		Size       int64 `json:"size"`
		NumObjects int64 `json:"num_objects"`
	} `json:"usage"`
}

// checkBucket is a name no S3 bucket can have (too short): a lookup of it proves the
// admin identity may read buckets without listing or touching any.
const checkBucket = "0"

func (c *rgw) Check(ctx context.Context) error {
	err := c.do(ctx, "AdminCheck", http.MethodGet, "", url.Values{"bucket": {checkBucket}}, nil)
	if s3.KindOf(err) == s3.KindNotFound {
		return nil
	}
	return err
}

func (c *rgw) info(ctx context.Context, op, bucket string, stats bool) (rgwBucketInfo, error) {
	q := url.Values{"bucket": {bucket}}
	if stats {
		q.Set("stats", "true")
	}
	var info rgwBucketInfo
	err := c.do(ctx, op, http.MethodGet, bucket, q, &info)
	if err == nil && info.Bucket != bucket {
		err = s3.APIError(op, bucket, http.StatusOK, "", fmt.Sprintf("the admin API answered for bucket %q", info.Bucket), nil)
	}
	return info, err
}

func (c *rgw) BucketQuota(ctx context.Context, bucket string) (Limits, error) {
	info, err := c.info(ctx, "GetBucketQuota", bucket, false)
	if err != nil || !info.Quota.Enabled {
		return Limits{}, err
	}
	return Limits{MaxBytes: max(info.Quota.MaxSize, 0), MaxObjects: max(info.Quota.MaxObjects, 0)}, nil
}

func (c *rgw) SetBucketQuota(ctx context.Context, bucket string, limits Limits) error {
	// The bucket must exist: RGW would answer a missing one with NoSuchKey.
	if _, err := c.info(ctx, "SetBucketQuota", bucket, false); err != nil {
		return err
	}
	// The quota goes as query parameters with an empty body: RGW refuses a SigV4
	// signed admin request whose body it would have to hash (501 NotImplemented).
	maxSize, maxObjects := int64(-1), int64(-1)
	if limits.MaxBytes > 0 {
		maxSize = limits.MaxBytes
	}
	if limits.MaxObjects > 0 {
		maxObjects = limits.MaxObjects
	}
	// uid must be present, and names a user to load when not empty; the bucket's owner
	// is an account, no user, so it goes empty (the bucket then has no tenant).
	q := url.Values{"quota": {""}, "uid": {""}, "bucket": {bucket},
		"enabled": {strconv.FormatBool(!limits.IsZero())}, "max-size": {strconv.FormatInt(maxSize, 10)}, "max-objects": {strconv.FormatInt(maxObjects, 10)}}
	return c.do(ctx, "SetBucketQuota", http.MethodPut, bucket, q, nil)
}

func (c *rgw) BucketUsage(ctx context.Context, bucket string) (Usage, error) {
	info, err := c.info(ctx, "GetBucketUsage", bucket, true)
	main := info.Usage["rgw.main"]
	return Usage{Bytes: main.Size, Objects: main.NumObjects}, err
}

// Enforceable: RGW limits both size and object count.
func (c *rgw) Enforceable(l Limits) (Limits, string) { return l, "" }

// do sends one request to /admin/bucket, with no body: RGW refuses a SigV4-signed
// admin request whose body it would have to hash (501 NotImplemented).
func (c *rgw) do(ctx context.Context, op, method, bucket string, query url.Values, out any) error {
	return c.api.do(ctx, op, method, bucket, "/admin/bucket", query, nil, out)
}
