package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/smithy-go/middleware"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// TestStoreClientIsReadOnly: the client adopt reads a store with refuses every write
// before anything is sent, and sends reads. The server answers 404 to all.
func TestStoreClientIsReadOnly(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusNotFound)
	}))
	defer srv.Close()
	c, err := s3.New(context.Background(), s3.Config{Endpoint: srv.URL, ForcePathStyle: true, AccessKeyID: "a", SecretAccessKey: "s",
		RequestTimeout: 5 * time.Second, APIOptions: []func(*middleware.Stack) error{readOnlyMiddleware}})
	must(t, err)
	ctx := context.Background()
	writes := map[string]func() error{
		"CreateBucket":     func() error { return c.CreateBucket(ctx, "b", "") },
		"PutBucketTagging": func() error { return c.PutBucketTagging(ctx, "b", map[string]string{"k": "v"}) },
		"DeleteBucketCors": func() error { return c.DeleteBucketCors(ctx, "b") },
		"PutBucketPolicy":  func() error { return c.PutBucketPolicy(ctx, "b", `{"Statement":[]}`) },
		"PutObject":        func() error { return c.PutObject(ctx, "b", "k", []byte("x")) },
		"DeleteBucket":     func() error { return c.DeleteBucket(ctx, "b") },
	}
	for op, write := range writes {
		var refused *storeReadOnly
		if err := write(); !errors.As(err, &refused) {
			t.Errorf("%s: %v, want it refused as a write", op, err)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("%d requests reached the store", n)
	}
	if _, err := c.GetBucketVersioning(ctx, "b"); err == nil || requests.Load() == 0 {
		t.Errorf("a read: %v after %d requests; want it sent (and the 404 back)", err, requests.Load())
	}
}
