package quota

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"golang.org/x/time/rate"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// signedAPI sends requests signed as S3's are (SigV4, service s3) to a store's own API
// on its S3 endpoint, with the store's TLS settings and a deadline on every call.
type signedAPI struct {
	base   *url.URL
	region string
	creds  aws.Credentials
	http   aws.HTTPClient
	signer *v4.Signer
	secret string
	// timeout bounds each call as a whole, on top of the caller's deadline.
	timeout time.Duration
	limiter *rate.Limiter
	observe func(operation string, httpStatus int, err error)
}

func newSignedAPI(cfg Config) (*signedAPI, error) {
	if cfg.Endpoint == "" {
		return nil, fmt.Errorf("quota: the %s admin API needs the store's endpoint", cfg.Type)
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
	return &signedAPI{
		base: u, region: region, http: hc, signer: v4.NewSigner(), secret: cfg.SecretAccessKey, timeout: cfg.RequestTimeout, limiter: cfg.Limiter, observe: cfg.Observer,
		creds: aws.Credentials{AccessKeyID: cfg.AccessKeyID, SecretAccessKey: cfg.SecretAccessKey},
	}, nil
}

// maxAnswer bounds what is read of an answer: a bucket's record is a few KiB.
const maxAnswer = 1 << 20

// do sends one signed request to path under the endpoint and decodes a JSON answer
// into out. A refusal's code is read from a JSON ({"Code": ...}) or an S3 XML body.
func (c *signedAPI) do(ctx context.Context, op, method, bucket, path string, query url.Values, body []byte, out any) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if c.limiter != nil {
		if err := c.limiter.Wait(ctx); err != nil {
			return s3.APIError(op, bucket, 0, "", "waiting for the store's request budget", context.DeadlineExceeded)
		}
	}
	u := *c.base
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	u.RawQuery = query.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return s3.APIError(op, bucket, 0, "", "", err)
	}
	sum := sha256.Sum256(body)
	payload := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Content-Sha256", payload)
	if len(body) > 0 {
		req.Header.Set("Content-Type", "application/json")
	}
	if err := c.signer.SignHTTP(ctx, c.creds, req, payload, "s3", c.region, time.Now()); err != nil {
		return s3.APIError(op, bucket, 0, "", "", err)
	}
	resp, err := c.http.Do(req)
	if c.observe != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		c.observe(op, status, err)
	}
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
		return s3.APIError(op, bucket, resp.StatusCode, errorCode(answer), "", nil)
	case out == nil:
		return nil
	}
	if err := json.Unmarshal(answer, out); err != nil {
		return s3.APIError(op, bucket, resp.StatusCode, "", fmt.Sprintf("unreadable answer: %v", err), nil)
	}
	return nil
}

// errorCode is the code of a refusal: RGW's admin API answers JSON, S3 handlers XML.
func errorCode(body []byte) string {
	var j struct {
		Code string `json:"Code"`
	}
	if json.Unmarshal(body, &j) == nil && j.Code != "" {
		return j.Code
	}
	var x struct {
		Code string `xml:"Code"`
	}
	if xml.Unmarshal(body, &x) == nil {
		return x.Code
	}
	return ""
}
