package s3

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Fake credentials for the httptest servers. The secret is long and unique
// so the redaction tests can search error strings for it.
const (
	testAccessKey = "AKIAFAKEFAKEFAKE0001"
	testSecret    = "fake-secret-7d1c0d4bd1cb4a8f9d0e2b6a51f3c9e0"
)

func init() {
	// The SDK retries 5xx and throttling; keep those unit tests fast.
	maxRetryBackoff = 5 * time.Millisecond
}

// writeS3Error writes an S3 XML error document, as AWS and the compatible
// stores do (HEAD answers get the status only).
func writeS3Error(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	if r.Method == http.MethodHead || code == "" {
		return
	}
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<Error><Code>%s</Code><Message>%s</Message><Resource>%s</Resource><RequestId>req-1</RequestId></Error>`,
		code, msg, r.URL.Path)
}

func writeXML(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "application/xml")
	_, _ = fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+body)
}

// observed counts Observer callbacks by operation.
type observed struct {
	mu    sync.Mutex
	calls []observation
}

type observation struct {
	op     string
	status int
	err    error
}

func (o *observed) observe(op string, status int, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, observation{op, status, err})
}

func (o *observed) all() []observation {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]observation(nil), o.calls...)
}

func (o *observed) count(mutating bool) int {
	n := 0
	for _, c := range o.all() {
		if IsMutating(c.op) == mutating {
			n++
		}
	}
	return n
}

// fakeServer starts an httptest server on 127.0.0.1 with handler and a
// Client for it with path-style addressing and static fake credentials.
func fakeServer(t *testing.T, handler http.HandlerFunc, mods ...func(*Config)) (Client, *observed) {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return newTestClient(t, srv.URL, mods...)
}

func newTestClient(t *testing.T, endpoint string, mods ...func(*Config)) (Client, *observed) {
	t.Helper()
	obs := &observed{}
	cfg := Config{
		Endpoint:        endpoint,
		Region:          "us-east-1",
		ForcePathStyle:  true,
		AccessKeyID:     testAccessKey,
		SecretAccessKey: testSecret,
		Observer:        obs.observe,
	}
	for _, m := range mods {
		m(&cfg)
	}
	c, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c, obs
}

func certPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func i32(v int32) *int32 { return &v }

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
