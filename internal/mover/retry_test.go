package mover

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// TestReasonNamesNoStoreText: what a failure says where tenants read it (a key's
// Failure, a stopped run's LastError) names the side and the kind of failure, and for
// an S3 answer its operation, code and status, but never the store's address or its
// TLS chain, whatever carried them: the S3 client's error of a refused connection or
// an untrusted certificate, a bare network error of a body cut short, an HTTP
// client's error, two sides' errors joined. The mover's own words stay.
func TestReasonNamesNoStoreText(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	_ = ln.Close()
	tlsServer := httptest.NewTLSServer(http.NotFoundHandler())
	defer tlsServer.Close()
	client := func(endpoint string) s3.Client {
		c, err := s3.New(ctx, s3.Config{Endpoint: endpoint, Region: "us-east-1", ForcePathStyle: true, AccessKeyID: "key", SecretAccessKey: "secret"})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	_, refused := client("http://"+closed).HeadBucket(ctx, "b")
	_, untrusted := client(tlsServer.URL).HeadBucket(ctx, "b")
	_, dialed := net.Dial("tcp", closed)
	resp, viaHTTP := http.Get("http://" + closed + "/b/k")
	if resp != nil {
		_ = resp.Body.Close()
	}
	tlsAddr := strings.TrimPrefix(tlsServer.URL, "https://")
	for _, tc := range []struct {
		name string
		err  error
		want string // what it must say
	}{
		{"a refused connection", onTarget(refused), "target: s3 HeadBucket bucket \"b\": Unreachable"},
		{"an untrusted certificate", onSource(untrusted), "source: s3 HeadBucket bucket \"b\": TLS"},
		{"a body cut short", onSource(dialed), "source: Unreachable"},
		{"an HTTP client's error", onTarget(viaHTTP), "target: Unreachable"},
		{"both sides", errors.Join(onSource(refused), onTarget(untrusted)), "source: s3 HeadBucket bucket \"b\": Unreachable; target: s3 HeadBucket bucket \"b\": TLS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil || !containsAddress(tc.err.Error(), closed, tlsAddr) {
				t.Fatalf("the error %v carries no address to leave out", tc.err)
			}
			got := reason(tc.err)
			if containsAddress(got, closed, tlsAddr) || strings.Contains(got, "x509") || strings.Contains(got, "certificate") {
				t.Errorf("reason %q names the store's address or TLS chain", got)
			}
			if got != tc.want {
				t.Errorf("reason %q, want %q", got, tc.want)
			}
		})
	}
	own := errors.New("target stored key \"k\" with ETag x, the bytes sent have MD5 y")
	if got := reason(onTarget(own)); got != "target: "+own.Error() {
		t.Errorf("the mover's own words: %q", got)
	}
}

// containsAddress says whether s names either address, or the port of either.
func containsAddress(s string, addrs ...string) bool {
	for _, a := range addrs {
		_, port, _ := net.SplitHostPort(a)
		if strings.Contains(s, a) || strings.Contains(s, ":"+port) {
			return true
		}
	}
	return false
}
