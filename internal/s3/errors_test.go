package s3

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestClassifyCannedResponses drives each Client call against a canned S3
// error and checks the kind, the attempt count and that the error names the
// operation and the bucket. What each kind means for a condition is the
// controller's verdict table (internal/reconcile/verdicts.go).
func TestClassifyCannedResponses(t *testing.T) {
	listBuckets := func(ctx context.Context, c Client) error { _, err := c.ListBuckets(ctx); return err }
	create := func(ctx context.Context, c Client) error { return c.CreateBucket(ctx, "b1", "") }
	head := func(ctx context.Context, c Client) error { _, err := c.HeadBucket(ctx, "b1"); return err }
	del := func(ctx context.Context, c Client) error { return c.DeleteBucket(ctx, "b1") }
	putLC := func(ctx context.Context, c Client) error {
		return c.PutBucketLifecycle(ctx, "b1", []LifecycleRule{{ID: "r", ExpirationDays: i32(1)}})
	}
	putVer := func(ctx context.Context, c Client) error { return c.PutBucketVersioning(ctx, "b1", VersioningEnabled) }
	getTags := func(ctx context.Context, c Client) error { _, err := c.GetBucketTagging(ctx, "b1"); return err }

	cases := []struct {
		name     string
		call     func(context.Context, Client) error
		status   int
		code     string
		want     Kind
		attempts int // HTTP requests the call makes (retries included)
	}{
		{"own bucket exists", create, 409, "BucketAlreadyOwnedByYou", KindAlreadyOwnedByYou, 1},
		{"name taken", create, 409, "BucketAlreadyExists", KindBucketNameTaken, 1},
		{"head missing", head, 404, "", KindNotFound, 2},       // + confirming GET
		{"head forbidden", head, 403, "", KindAccessDenied, 2}, // + confirming GET
		{"head bad name", head, 400, "", KindInvalid, 1},
		{"delete missing", del, 404, "NoSuchBucket", KindNotFound, 1},
		{"delete not empty", del, 409, "BucketNotEmpty", KindNotEmpty, 1},
		{"tagging on missing bucket stays an error", getTags, 404, "NoSuchBucket", KindNotFound, 1},
		{"access denied", listBuckets, 403, "AccessDenied", KindAccessDenied, 1},
		{"unknown key", listBuckets, 403, "InvalidAccessKeyId", KindInvalidCredentials, 1},
		{"wrong secret", listBuckets, 403, "SignatureDoesNotMatch", KindInvalidCredentials, 1},
		{"versity unknown key", listBuckets, 404, "XAdminUserNotFound", KindInvalidCredentials, 1},
		{"expired token", listBuckets, 400, "ExpiredToken", KindInvalidCredentials, 1},
		{"lifecycle not implemented", putLC, 501, "NotImplemented", KindNotImplemented, 1},
		{"versity versioning off", putVer, 501, "VersioningNotConfigured", KindNotImplemented, 1},
		{"slow down", listBuckets, 503, "SlowDown", KindThrottled, MaxAttempts},
		{"503 without body", listBuckets, 503, "", KindThrottled, MaxAttempts},
		{"429", listBuckets, 429, "TooManyRequests", KindThrottled, MaxAttempts},
		{"internal error", listBuckets, 500, "InternalError", KindServerError, MaxAttempts},
		{"bad gateway", listBuckets, 502, "", KindServerError, MaxAttempts},
		{"invalid name", create, 400, "InvalidBucketName", KindInvalid, 1},
		// CreateBucket is never retried: the next attempt would meet the bucket this one
		// may have made, and its 409 would say someone else made it.
		{"create server error", create, 500, "InternalError", KindServerError, 1},
		{"create slow down", create, 503, "SlowDown", KindThrottled, 1},
		{"wrong region", create, 400, "AuthorizationHeaderMalformed", KindInvalid, 1},
		{"teapot", listBuckets, 418, "Teapot", KindUnknown, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var hits atomic.Int32
			c, obs := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				writeS3Error(w, r, tc.status, tc.code, "canned "+tc.code)
			})
			err := tc.call(testCtx(t), c)
			if err == nil {
				t.Fatal("want an error")
			}
			if got := KindOf(err); got != tc.want {
				t.Errorf("KindOf = %v, want %v (err: %v)", got, tc.want, err)
			}
			if got := int(hits.Load()); got != tc.attempts {
				t.Errorf("server saw %d requests, want %d", got, tc.attempts)
			}
			if got := len(obs.all()); got != tc.attempts {
				t.Errorf("observer saw %d attempts, want %d", got, tc.attempts)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error is %T, want *Error", err)
			}
			if e.StatusCode != tc.status || (tc.code != "" && e.Code != tc.code) {
				t.Errorf("Error code/status = %q/%d, want %q/%d", e.Code, e.StatusCode, tc.code, tc.status)
			}
			if !strings.Contains(err.Error(), e.Op) || (e.Op != "ListBuckets" && !strings.Contains(err.Error(), `"b1"`)) {
				t.Errorf("error %q lacks operation or bucket", err)
			}
		})
	}
}

// TestUnanswered: a failure leaves open whether the request was carried out when no
// answer came or the store answered with a server error; a refusal, or a failure before
// anything was sent, says it was not.
func TestUnanswered(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"no error", nil, false},
		{"timeout", &Error{Op: "CreateBucket", Kind: KindTimeout}, true},
		{"dropped connection", &Error{Op: "CreateBucket", Kind: KindUnreachable}, true},
		{"canceled", &Error{Op: "CreateBucket", Kind: KindCanceled}, true},
		{"raw deadline", context.DeadlineExceeded, true},
		{"internal error", &Error{Op: "CreateBucket", Kind: KindServerError, StatusCode: 500}, true},
		{"slow down", &Error{Op: "CreateBucket", Kind: KindThrottled, StatusCode: 503}, true},
		{"too many requests", &Error{Op: "CreateBucket", Kind: KindThrottled, StatusCode: 429}, false},
		{"already owned", &Error{Op: "CreateBucket", Kind: KindAlreadyOwnedByYou, StatusCode: 409}, false},
		{"access denied", &Error{Op: "CreateBucket", Kind: KindAccessDenied, StatusCode: 403}, false},
		{"TLS handshake", &Error{Op: "CreateBucket", Kind: KindTLS}, false},
		{"refused before sending", invalid("CreateBucket", "b1", "bad name"), false},
	}
	for _, tc := range cases {
		if got := Unanswered(tc.err); got != tc.want {
			t.Errorf("%s: Unanswered = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestHeadBucketCredentials: a bare 403/404 to HEAD is re-checked with a
// GET so a wrong secret is not read as "access denied" and Versity's
// XAdminUserNotFound is not read as "bucket missing".
func TestHeadBucketCredentials(t *testing.T) {
	for status, code := range map[int]string{404: "XAdminUserNotFound", 403: "SignatureDoesNotMatch"} {
		c, obs := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
			writeS3Error(w, r, status, code, "refused")
		})
		_, err := c.HeadBucket(testCtx(t), "b1")
		if KindOf(err) != KindInvalidCredentials {
			t.Errorf("%s: KindOf = %v, want InvalidCredentials (err: %v)", code, KindOf(err), err)
		}
		if ops := obs.all(); len(ops) != 2 || ops[0].op != "HeadBucket" || ops[1].op != "ListObjectsV2" {
			t.Errorf("%s: observed %+v", code, ops)
		}
	}
}

func TestClassifyTransport(t *testing.T) {
	t.Run("closed port is unreachable", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		_ = l.Close()
		c, obs := newTestClient(t, "http://"+addr)
		_, err = c.ListBuckets(testCtx(t))
		if KindOf(err) != KindUnreachable {
			t.Fatalf("KindOf = %v, want Unreachable (err: %v)", KindOf(err), err)
		}
		if n := len(obs.all()); n != MaxAttempts {
			t.Errorf("observer saw %d attempts, want %d", n, MaxAttempts)
		}
		if s := obs.all()[0].status; s != 0 {
			t.Errorf("status of a refused attempt = %d, want 0", s)
		}
	})
	t.Run("unknown CA is TLS", func(t *testing.T) {
		srv := quietTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeXML(w, `<ListAllMyBucketsResult><Buckets></Buckets></ListAllMyBucketsResult>`)
		}), nil)
		c, obs := newTestClient(t, srv.URL)
		_, err := c.ListBuckets(testCtx(t))
		if KindOf(err) != KindTLS {
			t.Fatalf("KindOf = %v, want TLS (err: %v)", KindOf(err), err)
		}
		if n := len(obs.all()); n != 1 {
			t.Errorf("a TLS failure was tried %d times, want 1", n)
		}
	})
	t.Run("plain HTTP on an https endpoint is TLS", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		t.Cleanup(srv.Close)
		c, _ := newTestClient(t, strings.Replace(srv.URL, "http://", "https://", 1))
		_, err := c.ListBuckets(testCtx(t))
		if KindOf(err) != KindTLS {
			t.Fatalf("KindOf = %v, want TLS (err: %v)", KindOf(err), err)
		}
	})
	t.Run("RequestTimeout is Timeout", func(t *testing.T) {
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		c, _ := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}, func(cfg *Config) { cfg.RequestTimeout = 50 * time.Millisecond })
		start := time.Now()
		_, err := c.ListBuckets(context.Background())
		if KindOf(err) != KindTimeout {
			t.Fatalf("KindOf = %v, want Timeout (err: %v)", KindOf(err), err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("timeout took %v", d)
		}
	})
	t.Run("caller deadline is Timeout, cancel is Canceled", func(t *testing.T) {
		c, _ := fakeServer(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		if _, err := c.HeadBucket(ctx, "b1"); KindOf(err) != KindTimeout {
			t.Errorf("KindOf = %v, want Timeout (err: %v)", KindOf(err), err)
		}
		ctx, cancel = context.WithCancel(context.Background())
		cancel()
		if err := c.DeleteBucket(ctx, "b1"); KindOf(err) != KindCanceled {
			t.Errorf("KindOf = %v, want Canceled (err: %v)", KindOf(err), err)
		}
	})
}

// TestErrorsNeverCarrySecrets: even a server that echoes the secret in its
// message (a misconfigured proxy) must not get it into an error string.
func TestErrorsNeverCarrySecrets(t *testing.T) {
	c, _ := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		writeS3Error(w, r, 403, "SignatureDoesNotMatch", "expected key "+testSecret)
	}, func(cfg *Config) { cfg.SessionToken = "session-token-0123456789" })
	_, err := c.ListBuckets(testCtx(t))
	if err == nil || strings.Contains(err.Error(), testSecret) {
		t.Fatalf("error leaks the secret: %v", err)
	}
	if !strings.Contains(err.Error(), "[REDACTED]") {
		t.Errorf("want the redaction marker in %q", err)
	}

	_, err = New(context.Background(), Config{AccessKeyID: testAccessKey, SessionToken: "tok-abcdef"})
	if err == nil || strings.Contains(err.Error(), "tok-abcdef") || strings.Contains(err.Error(), testAccessKey) {
		t.Fatalf("partial credentials: want a value-free error, got %v", err)
	}
}

func TestKindString(t *testing.T) {
	seen := map[string]bool{}
	for k := KindUnknown; k <= KindServerError; k++ {
		s := k.String()
		if s == "" || strings.HasPrefix(s, "Kind(") || seen[s] {
			t.Errorf("Kind %d has bad or duplicate name %q", int(k), s)
		}
		seen[s] = true
	}
	if got := Kind(99).String(); got != "Kind(99)" {
		t.Errorf("Kind(99).String() = %q", got)
	}
	if KindOf(nil) != KindUnknown {
		t.Error("nil error must be Unknown")
	}
}

// quietTLSServer is httptest's TLS server without handshake-error logging
// (the failed handshakes are the point of these tests).
func quietTLSServer(t *testing.T, h http.Handler, cfg *tls.Config) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.TLS = cfg
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func TestTLSOptions(t *testing.T) {
	srv := quietTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeXML(w, `<ListAllMyBucketsResult><Buckets><Bucket><Name>a</Name></Bucket></Buckets></ListAllMyBucketsResult>`)
	}), nil)
	pemCert := certPEM(srv.Certificate().Raw)

	for name, mod := range map[string]func(*Config){
		"CABundle": func(c *Config) { c.CABundle = pemCert },
		"Insecure": func(c *Config) { c.InsecureSkipTLSVerify = true },
	} {
		t.Run(name, func(t *testing.T) {
			c, _ := newTestClient(t, srv.URL, mod)
			names, err := c.ListBuckets(testCtx(t))
			if err != nil || len(names) != 1 || names[0] != "a" {
				t.Fatalf("ListBuckets = %v, %v", names, err)
			}
		})
	}
	t.Run("TLS 1.1 server refused", func(t *testing.T) {
		old := quietTLSServer(t, srv.Config.Handler, &tls.Config{MaxVersion: tls.VersionTLS11})
		c, _ := newTestClient(t, old.URL, func(c *Config) { c.InsecureSkipTLSVerify = true })
		if _, err := c.ListBuckets(testCtx(t)); KindOf(err) != KindTLS {
			t.Fatalf("KindOf = %v, want TLS (err: %v)", KindOf(err), err)
		}
	})
	t.Run("bad bundle", func(t *testing.T) {
		_, err := New(context.Background(), Config{Endpoint: srv.URL, CABundle: []byte("nope"),
			AccessKeyID: testAccessKey, SecretAccessKey: testSecret})
		if err == nil {
			t.Fatal("want an error for a bundle without certificates")
		}
	})
}
