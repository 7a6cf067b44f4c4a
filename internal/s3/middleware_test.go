package s3

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// strayStore answers like Ceph RGW 20.2 does GetPublicAccessBlock of a bucket without
// one: a 404 NoSuchPublicAccessBlockConfiguration error, then, past its
// Content-Length, a default configuration. It sends those bytes at the worst moment,
// once the next request on the same connection has arrived, so a client that reuses
// the connection reads them as that request's answer. Every other request gets 200.
func strayStore(t *testing.T) (endpoint string, conns *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	conns = &atomic.Int32{}
	const errBody = `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchPublicAccessBlockConfiguration</Code><Message>The public access block configuration was not found</Message></Error>`
	const stray = `<PublicAccessBlockConfiguration><BlockPublicAcls>false</BlockPublicAcls></PublicAccessBlockConfiguration>`
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				pending := ""
				for {
					req, err := http.ReadRequest(r)
					if err != nil {
						return
					}
					_ = req.Body.Close()
					out := pending
					pending = ""
					if _, ok := req.URL.Query()["publicAccessBlock"]; ok && req.Method == http.MethodGet {
						out += fmt.Sprintf("HTTP/1.1 404 Not Found\r\nContent-Type: application/xml\r\nContent-Length: %d\r\n\r\n%s", len(errBody), errBody)
						pending = stray // written before the next answer on this connection
					} else {
						out += "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
					}
					if _, err := c.Write([]byte(out)); err != nil || req.Close {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String(), conns
}

// TestStrayBytesAfterAnAnswerReachNoOtherRequest: the bytes a store sends past its
// answer to GetPublicAccessBlock never become another request's answer, because
// that connection is closed after it (closeAfterMiddleware).
func TestStrayBytesAfterAnAnswerReachNoOtherRequest(t *testing.T) {
	endpoint, conns := strayStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Every attempt counts: the SDK would retry a mangled answer on a new
	// connection, and hide it.
	var failed atomic.Int32
	var firstFailure atomic.Value
	c, err := New(ctx, Config{Endpoint: endpoint, Region: "us-east-1", ForcePathStyle: true,
		AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "secret", RequestTimeout: 5 * time.Second,
		Observer: func(op string, status int, err error) {
			if err != nil && !(op == "GetPublicAccessBlock" && status == http.StatusNotFound) {
				failed.Add(1)
				firstFailure.CompareAndSwap(nil, fmt.Sprintf("%s: %v", op, err))
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		pab, err := c.GetPublicAccessBlock(ctx, "b")
		if err != nil || pab != nil {
			t.Fatalf("round %d: GetPublicAccessBlock = %+v, %v; want none", i, pab, err)
		}
		if _, err := c.HeadBucket(ctx, "b"); err != nil {
			if strings.Contains(err.Error(), "malformed HTTP") {
				t.Fatalf("round %d: the stray bytes were read as HeadBucket's answer: %v", i, err)
			}
			t.Fatalf("round %d: HeadBucket: %v", i, err)
		}
	}
	if n := failed.Load(); n > 0 {
		t.Errorf("%d attempts failed, the first %v: the stray bytes were read as another answer", n, firstFailure.Load())
	}
	if n := conns.Load(); n < 3 {
		t.Errorf("%d connections for 3 GetPublicAccessBlock calls, want each closed after its answer", n)
	}
}
