package iam

import (
	"context"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

const listUsersAnswer = `<ListUsersResponse xmlns="https://iam.amazonaws.com/doc/2010-05-08/"><ListUsersResult><Users></Users><IsTruncated>false</IsTruncated></ListUsersResult><ResponseMetadata><RequestId>1</RequestId></ResponseMetadata></ListUsersResponse>`

// TestTransport: the IAM client has the store's transport. A CA bundle makes a
// private certificate trusted (and without it the endpoint is refused), and an endpoint
// that accepts the connection but never answers is given up at the client's timeout.
func TestTransport(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/xml")
		_, _ = w.Write([]byte(listUsersAnswer))
	}))
	defer srv.Close()
	bundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	ctx := context.Background()
	cfg := Config{Endpoint: srv.URL, AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "secret", Timeout: 5 * time.Second}

	untrusting, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := untrusting.Check(ctx); KindOf(err) != KindUnreachable {
		t.Fatalf("a certificate no root vouches for: %v (kind %s), want Unreachable", err, KindOf(err))
	}
	cfg.CABundle = bundle
	trusting, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := trusting.Check(ctx); err != nil {
		t.Fatalf("with the CA bundle: %v", err)
	}
	cfg.CABundle = []byte("not a certificate")
	if _, err := New(ctx, cfg); err == nil {
		t.Fatal("a CA bundle without a certificate was accepted")
	}

	// Accepts, never answers.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	defer func() {
		l.Close()
		for c := range accepted {
			c.Close()
		}
	}()
	silent, err := New(ctx, Config{Endpoint: "http://" + l.Addr().String(), AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "secret", Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := silent.Check(ctx); KindOf(err) != KindTimeout {
		t.Fatalf("a silent endpoint: %v (kind %s), want Timeout", err, KindOf(err))
	}
}

// TestCreateKeyIsSentOnce: a CreateAccessKey whose answer is a server error is not
// retried by the SDK (the first may have made a key: a retry would make a second whose
// secret no one keeps), while an idempotent call is.
func TestCreateKeyIsSentOnce(t *testing.T) {
	var mu sync.Mutex
	calls := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		mu.Lock()
		calls[r.PostForm.Get("Action")]++
		mu.Unlock()
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	ctx := context.Background()
	c, err := New(ctx, Config{Endpoint: srv.URL, AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "secret", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateKey(ctx, "app"); err == nil {
		t.Fatal("CreateKey succeeded against a failing server")
	}
	if _, err := c.ListKeys(ctx, "app"); err == nil {
		t.Fatal("ListKeys succeeded against a failing server")
	}
	mu.Lock()
	defer mu.Unlock()
	if calls["CreateAccessKey"] != 1 {
		t.Errorf("CreateAccessKey sent %d times, want once", calls["CreateAccessKey"])
	}
	if calls["ListAccessKeys"] < 2 {
		t.Errorf("ListAccessKeys sent %d times: the idempotent call should be retried", calls["ListAccessKeys"])
	}
}
