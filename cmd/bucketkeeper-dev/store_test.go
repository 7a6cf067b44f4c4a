package main

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// TestStore: the embedded store serves the operator's ReadWrite canary round trip
// again and again on a versioned bucket (the sidecar delete-marker fix); its IAM
// service, driven by the operator's own IAM driver, issues a key scoped to one
// bucket (it writes there and is denied on another); and a restart on the same
// directory brings back the same credentials, ports, buckets and IAM users.
func TestStore(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chdir(wd) }) // posix.New chdirs the process
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	st, err := startStore(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	c := storeClient(ctx, t, st)
	const bucket, key = "dev-store-test", ".bucketkeeper/probe/some-uid"
	if err := c.CreateBucket(ctx, bucket, st.Region); err != nil {
		t.Fatal(err)
	}
	if err := c.PutBucketVersioning(ctx, bucket, s3.VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		body := fmt.Appendf(nil, "canary %d", i)
		if err := c.PutObject(ctx, bucket, key, body); err != nil {
			t.Fatalf("round %d: put: %v", i, err)
		}
		got, err := c.GetObject(ctx, bucket, key, 1024)
		if err != nil || string(got) != string(body) {
			t.Fatalf("round %d: get after put: %q, %v (a stale delete marker hides the new object)", i, got, err)
		}
		if err := c.DeleteObject(ctx, bucket, key); err != nil {
			t.Fatalf("round %d: delete: %v", i, err)
		}
	}
	const other = "dev-store-other"
	if err := c.CreateBucket(ctx, other, st.Region); err != nil {
		t.Fatal(err)
	}
	drv := iamDriver(ctx, t, st)
	const user = "bk-dev-store-test"
	if err := drv.EnsureUser(ctx, user); err != nil {
		t.Fatal(err)
	}
	if err := drv.PutPolicy(ctx, user, []iam.Grant{{Bucket: bucket, Mode: iam.ReadWrite}}); err != nil {
		t.Fatal(err)
	}
	userKey, err := drv.CreateKey(ctx, user)
	if err != nil {
		t.Fatal(err)
	}
	assertScoped(ctx, t, st, userKey, bucket, other)

	first := st.storeState
	st.Stop()
	select {
	case <-st.Done():
	default:
		t.Fatal("store still running after Stop")
	}

	st, err = startStore(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Stop()
	if st.storeState != first {
		t.Errorf("state after restart = %+v, want %+v", st.storeState, first)
	}
	if _, err := storeClient(ctx, t, st).HeadBucket(ctx, bucket); err != nil {
		t.Errorf("bucket gone after restart: %v", err)
	}
	assertScoped(ctx, t, st, userKey, bucket, other) // the user and its key outlive a restart
}

// assertScoped: key writes to bucket and is denied (403, AccessDenied) on other.
func assertScoped(ctx context.Context, t *testing.T, st *embeddedStore, key iam.AccessKey, bucket, other string) {
	t.Helper()
	c, err := s3.New(ctx, s3.Config{
		Endpoint: st.Endpoint, Region: st.Region, ForcePathStyle: true,
		AccessKeyID: key.ID, SecretAccessKey: key.Secret,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.PutObject(ctx, bucket, "scoped", []byte("mine")); err != nil {
		t.Errorf("scoped key: put to its own bucket %s: %v", bucket, err)
	}
	err = c.PutObject(ctx, other, "scoped", []byte("not mine"))
	if s3.KindOf(err) != s3.KindAccessDenied {
		t.Errorf("scoped key: put to %s = %v (%s), want AccessDenied", other, err, s3.KindOf(err))
	}
}

func iamDriver(ctx context.Context, t *testing.T, st *embeddedStore) iam.Driver {
	t.Helper()
	d, err := iam.New(ctx, iam.Config{
		Endpoint: st.IAMEndpoint, Region: st.Region,
		AccessKeyID: st.AccessKeyID, SecretAccessKey: st.SecretAccessKey,
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func storeClient(ctx context.Context, t *testing.T, st *embeddedStore) s3.Client {
	t.Helper()
	c, err := s3.New(ctx, s3.Config{
		Endpoint: st.Endpoint, Region: st.Region, ForcePathStyle: true,
		AccessKeyID: st.AccessKeyID, SecretAccessKey: st.SecretAccessKey,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
