package quota

import (
	"testing"
	"time"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestSeaweedFSQuotaExtension runs the quota client against a real SeaweedFS: the size
// quota is set and read back, the object limit is refused as unsupported, the bucket
// turns read-only once over its quota (SeaweedFS checks about once a minute) and
// writable again when the quota goes.
func TestSeaweedFSQuotaExtension(t *testing.T) {
	srv := testenv.NewS3(t, testenv.SeaweedFS)
	admin := seaweedClient(t, srv, srv.AccessKeyID, srv.SecretAccessKey)
	ctx, data, bucket := newQuotaBucket(t, srv, admin, 5*time.Minute)
	if _, missing := admin.Enforceable(Limits{MaxBytes: 1, MaxObjects: 2}); missing != "quota.maxObjects" {
		t.Errorf("Enforceable names %q as missing, want quota.maxObjects", missing)
	}
	if err := admin.SetBucketQuota(ctx, bucket, Limits{MaxObjects: 2}); s3.KindOf(err) != s3.KindNotImplemented {
		t.Errorf("an object limit: %v, want NotImplemented", err)
	}
	if _, err := admin.BucketUsage(ctx, bucket); s3.KindOf(err) != s3.KindNotImplemented {
		t.Errorf("usage: %v, want NotImplemented", err)
	}

	// A byte: the first object puts the bucket over.
	tiny := Limits{MaxBytes: 1}
	must(t, "SetBucketQuota", admin.SetBucketQuota(ctx, bucket, tiny))
	if got, err := admin.BucketQuota(ctx, bucket); err != nil || got != tiny {
		t.Fatalf("quota read back: %v, %v; want %v", got, err, tiny)
	}
	must(t, "PutObject", data.PutObject(ctx, bucket, "over", make([]byte, 4096)))
	set := time.Now()
	var refused error
	for refused == nil && time.Since(set) < 3*time.Minute {
		if err := data.PutObject(ctx, bucket, "more", []byte("x")); err != nil {
			refused = err
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(2 * time.Second):
		}
	}
	if refused == nil {
		t.Fatal("the bucket still takes writes 3 minutes after it went over its quota")
	}
	t.Logf("read-only %s after going over its quota: %v", time.Since(set).Round(time.Second), refused)

	// Removed: writable again at once.
	must(t, "SetBucketQuota none", admin.SetBucketQuota(ctx, bucket, Limits{}))
	if got, err := admin.BucketQuota(ctx, bucket); err != nil || !got.IsZero() {
		t.Fatalf("quota after removal: %v, %v; want none", got, err)
	}
	must(t, "PutObject after removal", data.PutObject(ctx, bucket, "again", []byte("x")))

	// An identity with the Admin action on its bucket alone may set that bucket's
	// quota: SeaweedFS authorizes the extension as a bucket administration. (The keys
	// the operator issues carry IAM policies of data-plane actions only, which do not
	// reach it: TestIssuedKeysCannotChangeTheirQuota.)
	must(t, "CreateBucket "+srv.ScopedBucket, data.CreateBucket(ctx, srv.ScopedBucket, ""))
	scoped := seaweedClient(t, srv, srv.ScopedAccessKeyID, srv.ScopedSecretAccessKey)
	must(t, "SetBucketQuota by the bucket's own admin", scoped.SetBucketQuota(ctx, srv.ScopedBucket, tiny))
}

func seaweedClient(t *testing.T, srv *testenv.S3Server, access, secret string) Client {
	t.Helper()
	c, err := New(Config{Type: bkv1.AdminAPISeaweedFS, Endpoint: srv.Endpoint, Region: srv.Region,
		AccessKeyID: access, SecretAccessKey: secret, RequestTimeout: 10 * time.Second})
	must(t, "New", err)
	return c
}
