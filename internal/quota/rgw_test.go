package quota

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestRGWAdminOps runs the quota client against a real Ceph RGW: the quota is set, read
// back as set, enforced on write, removed; usage follows writes and deletes; the wrong
// identity is refused with the kind the controllers report.
func TestRGWAdminOps(t *testing.T) {
	srv := testenv.NewS3(t, testenv.RGW)
	admin := rgwClient(t, srv, srv.AdminOpsAccessKeyID, srv.AdminOpsSecretAccessKey)
	ctx, data, bucket := newQuotaBucket(t, srv, admin, 2*time.Minute)

	// Object count: a third object is refused on write.
	two := Limits{MaxObjects: 2}
	must(t, "SetBucketQuota", admin.SetBucketQuota(ctx, bucket, two))
	if got, err := admin.BucketQuota(ctx, bucket); err != nil || got != two {
		t.Fatalf("quota read back: %v, %v; want %v", got, err, two)
	}
	must(t, "PutObject a", data.PutObject(ctx, bucket, "a", []byte("12345")))
	must(t, "PutObject b", data.PutObject(ctx, bucket, "b", []byte("1234567")))
	err := data.PutObject(ctx, bucket, "c", []byte("x"))
	var s3err *s3.Error
	if err == nil {
		t.Fatal("a third object was written into a bucket with a quota of two")
	} else if !asS3(err, &s3err) || s3err.Code != "QuotaExceeded" {
		t.Fatalf("third object: %v, want QuotaExceeded", err)
	}
	t.Logf("over quota: %v", err)
	if u, err := admin.BucketUsage(ctx, bucket); err != nil || u != (Usage{Bytes: 12, Objects: 2}) {
		t.Fatalf("usage: %+v, %v; want 12 bytes in 2 objects", u, err)
	}
	must(t, "DeleteObject a", data.DeleteObject(ctx, bucket, "a"))
	if u, err := admin.BucketUsage(ctx, bucket); err != nil || u != (Usage{Bytes: 7, Objects: 1}) {
		t.Fatalf("usage after a delete: %+v, %v; want 7 bytes in 1 object", u, err)
	}

	// Size: kept to the byte (not rounded to KiB), and both limits together.
	both := Limits{MaxBytes: 1_000_001, MaxObjects: 10}
	must(t, "SetBucketQuota", admin.SetBucketQuota(ctx, bucket, both))
	if got, err := admin.BucketQuota(ctx, bucket); err != nil || got != both {
		t.Fatalf("quota read back: %v, %v; want %v", got, err, both)
	}

	// Removed: none read back, and writes pass again.
	must(t, "SetBucketQuota none", admin.SetBucketQuota(ctx, bucket, Limits{}))
	if got, err := admin.BucketQuota(ctx, bucket); err != nil || !got.IsZero() {
		t.Fatalf("quota after removal: %v, %v; want none", got, err)
	}
	must(t, "PutObject after removal", data.PutObject(ctx, bucket, "c", []byte("x")))

	// A bucket that does not exist.
	if _, err := admin.BucketQuota(ctx, bucket+"-missing"); s3.KindOf(err) != s3.KindNotFound {
		t.Errorf("quota of a missing bucket: %v, want NotFound", err)
	}

	// Identities: the account root (an S3 identity without admin caps) is denied; an
	// unknown key is not accepted at all. Neither changed the quota.
	root := rgwClient(t, srv, srv.AccessKeyID, srv.SecretAccessKey)
	if err := root.Check(ctx); s3.KindOf(err) != s3.KindAccessDenied {
		t.Errorf("admin API with the account root's key: %v, want AccessDenied", err)
	}
	if err := root.SetBucketQuota(ctx, bucket, two); s3.KindOf(err) != s3.KindAccessDenied {
		t.Errorf("quota set with the account root's key: %v, want AccessDenied", err)
	}
	unknown := rgwClient(t, srv, "AKIAUNKNOWNUNKNOWN00", srv.AdminOpsSecretAccessKey)
	if err := unknown.Check(ctx); s3.KindOf(err) != s3.KindInvalidCredentials {
		t.Errorf("admin API with an unknown key: %v, want InvalidCredentials", err)
	}
	if got, err := admin.BucketQuota(ctx, bucket); err != nil || !got.IsZero() {
		t.Fatalf("quota after refused writes: %v, %v; want none", got, err)
	}
}

// newQuotaBucket checks admin's identity and creates a bucket without a quota, with
// the data client it returns; ctx ends with the test or after timeout.
func newQuotaBucket(t *testing.T, srv *testenv.S3Server, admin Client, timeout time.Duration) (context.Context, s3.Client, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	data := s3Client(t, srv)
	must(t, "Check", admin.Check(ctx))
	bucket := "bk-quota-" + randomHex(6)
	must(t, "CreateBucket", data.CreateBucket(ctx, bucket, ""))
	if got, err := admin.BucketQuota(ctx, bucket); err != nil || !got.IsZero() {
		t.Fatalf("quota of a new bucket: %v, %v; want none", got, err)
	}
	return ctx, data, bucket
}

func rgwClient(t *testing.T, srv *testenv.S3Server, access, secret string) Client {
	t.Helper()
	c, err := New(Config{Type: bkv1.AdminAPIRGWAdminOps, Endpoint: srv.Endpoint, Region: srv.Region,
		AccessKeyID: access, SecretAccessKey: secret, RequestTimeout: 10 * time.Second})
	must(t, "New", err)
	return c
}

func s3Client(t *testing.T, srv *testenv.S3Server) s3.Client {
	t.Helper()
	c, err := s3.New(context.Background(), s3.Config{
		Endpoint: srv.Endpoint, Region: srv.Region, ForcePathStyle: true,
		AccessKeyID: srv.AccessKeyID, SecretAccessKey: srv.SecretAccessKey, RequestTimeout: 10 * time.Second,
	})
	must(t, "s3.New", err)
	return c
}

func asS3(err error, target **s3.Error) bool {
	return errors.As(err, target)
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
