package quota

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// seaweedFS speaks SeaweedFS's bucket quota extension: GET and PUT
// /<bucket>?seaweedfs-quota on the S3 endpoint, JSON, signed like S3. It limits a
// bucket's size only; SeaweedFS compares the bucket's logical size with it about once
// a minute and makes the bucket read-only while over (writable again once under, or
// when the quota is removed). It reports no usage through S3.
type seaweedFS struct{ api *signedAPI }

func newSeaweedFS(cfg Config) (*seaweedFS, error) {
	api, err := newSignedAPI(cfg)
	if err != nil {
		return nil, err
	}
	return &seaweedFS{api: api}, nil
}

// seaweedQuota is the extension's body: a size in a unit, and whether it is enforced.
type seaweedQuota struct {
	Size    int64  `json:"quota_size"`
	Unit    string `json:"quota_unit"`
	Enabled bool   `json:"quota_enabled"`
}

// seaweedCheckBucket is looked up by Check: SeaweedFS authorizes before it looks, so
// NoSuchBucket (or the quota, should someone have made such a bucket) proves the
// identity may use the extension, and AccessDenied that it may not. Unlike RGW's admin
// API, the extension needs a valid bucket name, so this one could exist; it is only read.
const seaweedCheckBucket = "bucketkeeper-admin-check-0"

func (c *seaweedFS) Check(ctx context.Context) error {
	var q seaweedQuota
	err := c.do(ctx, "AdminCheck", http.MethodGet, seaweedCheckBucket, nil, &q)
	if s3.KindOf(err) == s3.KindNotFound {
		return nil
	}
	return err
}

func (c *seaweedFS) BucketQuota(ctx context.Context, bucket string) (Limits, error) {
	var q seaweedQuota
	if err := c.do(ctx, "GetBucketQuota", http.MethodGet, bucket, nil, &q); err != nil || !q.Enabled || q.Size <= 0 {
		return Limits{}, err
	}
	if q.Unit != "B" {
		return Limits{}, s3.APIError("GetBucketQuota", bucket, http.StatusOK, "", "quota in unit "+q.Unit+", not bytes", nil)
	}
	return Limits{MaxBytes: q.Size}, nil
}

func (c *seaweedFS) SetBucketQuota(ctx context.Context, bucket string, limits Limits) error {
	if limits.MaxObjects > 0 {
		return &s3.Error{Op: "SetBucketQuota", Bucket: bucket, Kind: s3.KindNotImplemented}
	}
	// Size 0, not enabled: no quota, and SeaweedFS clears the bucket's read-only flag.
	body, err := json.Marshal(seaweedQuota{Size: limits.MaxBytes, Unit: "B", Enabled: limits.MaxBytes > 0})
	if err != nil {
		return err
	}
	return c.do(ctx, "SetBucketQuota", http.MethodPut, bucket, body, nil)
}

func (c *seaweedFS) BucketUsage(_ context.Context, bucket string) (Usage, error) {
	return Usage{}, &s3.Error{Op: "GetBucketUsage", Bucket: bucket, Kind: s3.KindNotImplemented}
}

// Enforceable: SeaweedFS limits size only.
func (c *seaweedFS) Enforceable(l Limits) (Limits, string) {
	if l.MaxObjects > 0 {
		return Limits{MaxBytes: l.MaxBytes}, "quota.maxObjects"
	}
	return l, ""
}

func (c *seaweedFS) do(ctx context.Context, op, method, bucket string, body []byte, out any) error {
	return c.api.do(ctx, op, method, bucket, "/"+url.PathEscape(bucket), url.Values{"seaweedfs-quota": {""}}, body, out)
}
