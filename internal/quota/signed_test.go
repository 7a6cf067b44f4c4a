package quota

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// TestObserverSeesEveryAdminRequest: each admin request reaches the observer once, with
// its operation and the store's answer, and a request no answer came to is seen with
// status 0 and its error; so admin calls count in the request metrics as S3's do.
func TestObserverSeesEveryAdminRequest(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"Code":"AccessDenied"}`))
			return
		}
		_, _ = w.Write([]byte(`{"bucket":"b","usage":{"rgw.main":{"size":12,"num_objects":2}}}`))
	}))
	defer srv.Close()
	type seen struct {
		op     string
		status int
		failed bool
	}
	var got []seen
	c, err := New(Config{Type: bkv1.AdminAPIRGWAdminOps, Endpoint: srv.URL, AccessKeyID: "AK", SecretAccessKey: "SK",
		RequestTimeout: 5 * time.Second, Observer: func(op string, status int, err error) { got = append(got, seen{op, status, err != nil}) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if u, err := c.BucketUsage(ctx, "b"); err != nil || u != (Usage{Bytes: 12, Objects: 2}) {
		t.Fatalf("usage: %+v, %v", u, err)
	}
	if err := c.SetBucketQuota(ctx, "b", Limits{MaxObjects: 2}); err == nil || !strings.Contains(err.Error(), "AccessDenied") {
		t.Fatalf("a refused quota: %v, want AccessDenied", err)
	}
	srv.Close()
	if _, err := c.BucketUsage(ctx, "b"); err == nil {
		t.Fatal("usage from a closed server: no error")
	}
	want := []seen{
		{"GetBucketUsage", http.StatusOK, false},
		{"SetBucketQuota", http.StatusOK, false}, // the bucket is looked up first (a GET)
		{"SetBucketQuota", http.StatusForbidden, false},
		{"GetBucketUsage", 0, true},
	}
	if len(got) != len(want) {
		t.Fatalf("observed %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d observed as %+v, want %+v", i, got[i], want[i])
		}
	}
}
