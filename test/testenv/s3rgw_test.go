package testenv_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// testAdminOps proves the admin-ops user reads a bucket's stats through RGW's
// admin API (/admin/bucket), which later sets quotas, and that the S3 admin
// identity (an account's root) may not.
func testAdminOps(ctx context.Context, t *testing.T, s *testenv.S3Server, bucket string) {
	t.Helper()
	query := url.Values{"bucket": {bucket}, "stats": {"true"}}
	status, body := adminOpsGet(ctx, t, s, s.AdminOpsAccessKeyID, s.AdminOpsSecretAccessKey, "/admin/bucket", query)
	if status != http.StatusOK {
		t.Fatalf("admin-ops bucket stats: HTTP %d: %s", status, body)
	}
	var stats struct {
		Bucket string `json:"bucket"`
		Owner  string `json:"owner"`
		Usage  map[string]struct {
			NumObjects int `json:"num_objects"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &stats); err != nil || stats.Bucket != bucket {
		t.Fatalf("admin-ops bucket stats: %v in %s", err, body)
	}
	t.Logf("admin-ops: bucket %s owned by %s, usage %+v", stats.Bucket, stats.Owner, stats.Usage)
	status, body = adminOpsGet(ctx, t, s, s.AccessKeyID, s.SecretAccessKey, "/admin/bucket", query)
	if status != http.StatusForbidden {
		t.Errorf("admin API signed by the account root: HTTP %d, want 403: %s", status, body)
	}
}

// adminOpsGet sends one GET to RGW's admin API, signed (SigV4, service s3) with
// the given key, and returns the status and body.
func adminOpsGet(ctx context.Context, t *testing.T, s *testenv.S3Server, access, secret, path string, query url.Values) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Endpoint+path+"?"+query.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	empty := sha256.Sum256(nil)
	payload := hex.EncodeToString(empty[:])
	req.Header.Set("X-Amz-Content-Sha256", payload)
	creds := aws.Credentials{AccessKeyID: access, SecretAccessKey: secret}
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, payload, "s3", s.Region, time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(req)
	if err != nil {
		t.Fatalf("admin API %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}
