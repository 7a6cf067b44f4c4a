package quota

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// rgw speaks Ceph RGW's admin-ops API: JSON under /admin/ on the S3 endpoint, signed
// like S3 (SigV4, service s3) by a user with the "buckets" capability. Bucket quotas
// are enforced by RGW on every write (an upload past the limit is refused with
// QuotaExceeded), from its bucket index stats.
type rgw struct {
	base   *url.URL
	region string
	creds  aws.Credentials
	http   aws.HTTPClient
	signer *v4.Signer
	secret string
	// timeout bounds each call as a whole, on top of the caller's deadline.
	timeout time.Duration
}

func newRGW(cfg Config) (*rgw, error) {
	if cfg.Endpoint == "" {
		return nil, fmt.Errorf("quota: the RGW admin API needs the store's endpoint")
	}
	if _, err := s3.EndpointURL(cfg.Endpoint); err != nil {
		return nil, fmt.Errorf("quota: %w", err)
	}
	u, err := url.Parse(cfg.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("quota: %w", err)
	}
	hc, err := s3.NewHTTPClient(cfg.CABundle, cfg.InsecureSkipTLSVerify, cfg.RequestTimeout)
	if err != nil {
		return nil, fmt.Errorf("quota: %w", err)
	}
	region := cfg.Region
	if region == "" {
		region = s3.DefaultRegion
	}
	return &rgw{
		base: u, region: region, http: hc, signer: v4.NewSigner(), secret: cfg.SecretAccessKey, timeout: cfg.RequestTimeout,
		creds: aws.Credentials{AccessKeyID: cfg.AccessKeyID, SecretAccessKey: cfg.SecretAccessKey},
	}, nil
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

// emptyPayload is the SHA-256 of an empty body, which every admin request has.
const emptyPayload = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// maxAnswer bounds what is read of an answer: a bucket's record is a few KiB.
const maxAnswer = 1 << 20

// do sends one signed request to /admin/bucket and decodes a JSON answer into out.
func (c *rgw) do(ctx context.Context, op, method, bucket string, query url.Values, out any) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	u := *c.base
	u.Path = strings.TrimSuffix(u.Path, "/") + "/admin/bucket"
	u.RawQuery = query.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), http.NoBody)
	if err != nil {
		return s3.APIError(op, bucket, 0, "", "", err)
	}
	req.Header.Set("X-Amz-Content-Sha256", emptyPayload)
	if err := c.signer.SignHTTP(ctx, c.creds, req, emptyPayload, "s3", c.region, time.Now()); err != nil {
		return s3.APIError(op, bucket, 0, "", "", err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return s3.APIError(op, bucket, 0, "", "", err, c.secret)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	switch {
	case err != nil:
		return s3.APIError(op, bucket, resp.StatusCode, "", "", err, c.secret)
	case len(answer) > maxAnswer:
		return s3.APIError(op, bucket, resp.StatusCode, "", fmt.Sprintf("answer larger than %d bytes", maxAnswer), nil)
	case resp.StatusCode/100 != 2:
		var e struct {
			Code string `json:"Code"`
		}
		_ = json.Unmarshal(answer, &e)
		return s3.APIError(op, bucket, resp.StatusCode, e.Code, "", nil)
	case out == nil:
		return nil
	}
	if err := json.Unmarshal(answer, out); err != nil {
		return s3.APIError(op, bucket, resp.StatusCode, "", fmt.Sprintf("unreadable answer: %v", err), nil)
	}
	return nil
}
