package reconcile

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// TestKindVerdictsComplete: every kind the s3 package can return has a verdict of its
// own, so a new kind cannot fall through to a default unnoticed.
func TestKindVerdictsComplete(t *testing.T) {
	n := 0
	for k := s3.KindUnknown; !strings.HasPrefix(k.String(), "Kind("); k++ {
		n++
		if int(k) >= len(KindVerdicts) {
			t.Errorf("kind %s has no verdict", k)
			continue
		}
		v := KindVerdicts[k]
		if v.Reason == "" || v.Health == "" || v.HealthMessage == "" {
			t.Errorf("kind %s has an incomplete verdict %+v", k, v)
		}
	}
	if n != len(KindVerdicts) {
		t.Errorf("the table has %d verdicts for %d kinds", len(KindVerdicts), n)
	}
	if v := VerdictOf(s3.Kind(1000)); v != KindVerdicts[s3.KindUnknown] {
		t.Errorf("verdictOf(unknown kind) = %+v, want the verdict of KindUnknown", v)
	}
}

// TestKindVerdictsOfRealAnswers runs the real S3 client against the answers the s3
// package's contract and classification tests pin (canned S3 errors, a closed port, an
// untrusted certificate, a store that never answers) and checks the verdict a
// reconcile step and the ObjectStore health check reach for each.
func TestKindVerdictsOfRealAnswers(t *testing.T) {
	type want struct {
		kind     s3.Kind
		reason   string
		terminal bool
		health   string
		// probe is the Available reason of a probe that failed this way.
		probe string
	}
	canned := []struct {
		name   string
		status int
		code   string
		want   want
	}{
		{"access denied", 403, "AccessDenied", want{s3.KindAccessDenied, bkv1.ReasonAccessDenied, true, bkv1.ReasonReady, bkv1.ReasonAccessDenied}},
		{"unknown key", 403, "InvalidAccessKeyId", want{s3.KindInvalidCredentials, bkv1.ReasonCredentialsInvalid, true, bkv1.ReasonCredentialsInvalid, bkv1.ReasonAccessDenied}},
		{"wrong secret", 403, "SignatureDoesNotMatch", want{s3.KindInvalidCredentials, bkv1.ReasonCredentialsInvalid, true, bkv1.ReasonCredentialsInvalid, bkv1.ReasonAccessDenied}},
		{"versity unknown key", 404, "XAdminUserNotFound", want{s3.KindInvalidCredentials, bkv1.ReasonCredentialsInvalid, true, bkv1.ReasonCredentialsInvalid, bkv1.ReasonAccessDenied}},
		{"expired token", 400, "ExpiredToken", want{s3.KindInvalidCredentials, bkv1.ReasonCredentialsInvalid, true, bkv1.ReasonCredentialsInvalid, bkv1.ReasonAccessDenied}},
		{"missing bucket", 404, "NoSuchBucket", want{s3.KindNotFound, bkv1.ReasonProgressing, false, bkv1.ReasonStoreUnreachable, bkv1.ReasonBucketNotFound}},
		{"not empty", 409, "BucketNotEmpty", want{s3.KindNotEmpty, bkv1.ReasonProgressing, false, bkv1.ReasonStoreUnreachable, bkv1.ReasonProbeFailed}},
		{"own bucket exists", 409, "BucketAlreadyOwnedByYou", want{s3.KindAlreadyOwnedByYou, bkv1.ReasonProgressing, false, bkv1.ReasonStoreUnreachable, bkv1.ReasonProbeFailed}},
		{"name taken", 409, "BucketAlreadyExists", want{s3.KindBucketNameTaken, bkv1.ReasonProgressing, false, bkv1.ReasonStoreUnreachable, bkv1.ReasonProbeFailed}},
		{"not implemented", 501, "NotImplemented", want{s3.KindNotImplemented, bkv1.ReasonProgressing, false, bkv1.ReasonStoreUnreachable, bkv1.ReasonProbeFailed}},
		{"slow down", 503, "SlowDown", want{s3.KindThrottled, bkv1.ReasonThrottled, false, bkv1.ReasonStoreUnreachable, bkv1.ReasonProbeFailed}},
		{"internal error", 500, "InternalError", want{s3.KindServerError, bkv1.ReasonProgressing, false, bkv1.ReasonStoreUnreachable, bkv1.ReasonProbeFailed}},
		{"wrong region", 400, "AuthorizationHeaderMalformed", want{s3.KindInvalid, bkv1.ReasonConfigFailed, true, bkv1.ReasonStoreUnreachable, bkv1.ReasonProbeFailed}},
		{"RGW: a policy it cannot parse", 400, "InvalidArgument", want{s3.KindInvalid, bkv1.ReasonConfigFailed, true, bkv1.ReasonStoreUnreachable, bkv1.ReasonProbeFailed}},
		{"AWS: a conflicting operation in progress", 409, "OperationAborted", want{s3.KindThrottled, bkv1.ReasonThrottled, false, bkv1.ReasonStoreUnreachable, bkv1.ReasonProbeFailed}},
		{"AWS: the account's bucket limit", 400, "TooManyBuckets", want{s3.KindInvalid, bkv1.ReasonConfigFailed, true, bkv1.ReasonStoreUnreachable, bkv1.ReasonProbeFailed}},
		{"teapot", 418, "Teapot", want{s3.KindUnknown, bkv1.ReasonProgressing, false, bkv1.ReasonStoreUnreachable, bkv1.ReasonProbeFailed}},
	}
	check := func(t *testing.T, err error, w want) {
		t.Helper()
		if err == nil {
			t.Fatal("the call succeeded; want an error")
		}
		if got := s3.KindOf(err); got != w.kind {
			t.Fatalf("KindOf = %v, want %v (err: %v)", got, w.kind, err)
		}
		se := AsStepError(err, "checking")
		if se.Reason != w.reason || se.Terminal != w.terminal || se.Waiting {
			t.Errorf("step verdict = reason %q terminal %v waiting %v, want %q %v false", se.Reason, se.Terminal, se.Waiting, w.reason, w.terminal)
		}
		if reason, msg := HealthVerdict(err); reason != w.health || msg == "" {
			t.Errorf("health verdict = %q (%q), want %q", reason, msg, w.health)
		}
		if _, reason := ProbeVerdictOf(context.Background(), err); reason != w.probe {
			t.Errorf("probe verdict = %q, want %q", reason, w.probe)
		}
	}

	for _, tc := range canned {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/xml")
				w.WriteHeader(tc.status)
				fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>canned</Message></Error>`, tc.code)
			}))
			t.Cleanup(srv.Close)
			c := verdictTestClient(t, srv.URL, 0)
			_, err := c.ListBuckets(verdictTestContext(t))
			check(t, err, tc.want)
		})
	}

	t.Run("closed port", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		_ = l.Close()
		c := verdictTestClient(t, "http://"+addr, 0)
		_, err = c.ListBuckets(verdictTestContext(t))
		check(t, err, want{s3.KindUnreachable, bkv1.ReasonStoreUnreachable, false, bkv1.ReasonStoreUnreachable, bkv1.ReasonStoreUnreachable})
	})
	t.Run("untrusted certificate", func(t *testing.T) {
		srv := httptest.NewUnstartedServer(http.NotFoundHandler())
		srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the failed handshake is the point
		srv.StartTLS()
		t.Cleanup(srv.Close)
		c := verdictTestClient(t, srv.URL, 0)
		_, err := c.ListBuckets(verdictTestContext(t))
		check(t, err, want{s3.KindTLS, bkv1.ReasonTLSError, true, bkv1.ReasonTLSError, bkv1.ReasonProbeFailed})
	})
	t.Run("no answer", func(t *testing.T) {
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		t.Cleanup(srv.Close)
		t.Cleanup(func() { close(release) })
		c := verdictTestClient(t, srv.URL, 100*time.Millisecond)
		_, err := c.ListBuckets(verdictTestContext(t))
		check(t, err, want{s3.KindTimeout, bkv1.ReasonStoreUnreachable, false, bkv1.ReasonStoreUnreachable, bkv1.ReasonProbeTimeout})
	})
}

func verdictTestClient(t *testing.T, endpoint string, timeout time.Duration) s3.Client {
	t.Helper()
	c, err := s3.New(context.Background(), s3.Config{
		Endpoint: endpoint, Region: "us-east-1", ForcePathStyle: true,
		AccessKeyID: "AKIAVERDICTTEST", SecretAccessKey: "verdict-test-secret",
		RequestTimeout: timeout,
	})
	if err != nil {
		t.Fatalf("s3.New: %v", err)
	}
	return c
}

func verdictTestContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
