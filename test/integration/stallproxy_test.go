package integration_test

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// stallProxy is an HTTP proxy on 127.0.0.1 in front of a real S3 server. Requests pass
// through unchanged (the Host header too, so SigV4 signatures still verify) unless a
// predicate picks them: then the proxy either holds the request without ever answering,
// as a store does that accepts connections and then hangs, or answers it itself with an
// S3 error. It counts what it held and refused, per bucket.
type stallProxy struct {
	URL string

	mu        sync.Mutex
	stall     func(*http.Request) bool
	deny      func(*http.Request) bool
	release   chan struct{}
	heldNow   map[string]int // bucket → requests being held right now
	heldMax   int            // most requests held at once
	heldTotal int
	denied    int
}

// newStallProxy starts a proxy to target (an http:// endpoint) that is stopped, every
// held request let go, when the test ends.
func newStallProxy(t *testing.T, target string) *stallProxy {
	t.Helper()
	u, err := url.Parse(target)
	must(t, err)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{Proxy: nil} // loopback only, whatever the environment says
	rp.ErrorLog = log.New(io.Discard, "", 0)   // clients that give up are expected here
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	p := &stallProxy{URL: "http://" + ln.Addr().String(), release: make(chan struct{}), heldNow: map[string]int{}}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.hold(w, r) || p.refuse(w, r) {
			return
		}
		rp.ServeHTTP(w, r)
	})}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		p.letGo()
		_ = srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("stall proxy: %v", err)
		}
	})
	return p
}

// stallWhen holds every later request that pred matches.
func (p *stallProxy) stallWhen(pred func(*http.Request) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stall = pred
}

// denyWhen answers every later request that pred matches with 403 AccessDenied, as AWS
// answers an identity without the permission.
func (p *stallProxy) denyWhen(pred func(*http.Request) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.deny = pred
}

// letGo stops stalling and drops the connections of the requests held so far, without an
// answer: their clients see a broken connection and may retry, which now passes.
func (p *stallProxy) letGo() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stall = nil
	close(p.release)
	p.release = make(chan struct{})
}

// held returns how many requests are held now (in all, and the buckets they are for),
// the most ever held at once, and how many were held in all.
func (p *stallProxy) held() (now int, buckets []string, most, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for b, n := range p.heldNow {
		now += n
		buckets = append(buckets, b)
	}
	return now, buckets, p.heldMax, p.heldTotal
}

func (p *stallProxy) deniedCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.denied
}

func (p *stallProxy) hold(w http.ResponseWriter, r *http.Request) bool {
	bucket := bucketOf(r)
	p.mu.Lock()
	if p.stall == nil || !p.stall(r) {
		p.mu.Unlock()
		return false
	}
	release := p.release
	p.heldNow[bucket]++
	p.heldTotal++
	now := 0
	for _, n := range p.heldNow {
		now += n
	}
	p.heldMax = max(p.heldMax, now)
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.heldNow[bucket]--; p.heldNow[bucket] == 0 {
			delete(p.heldNow, bucket)
		}
	}()

	select {
	case <-release:
	case <-r.Context().Done(): // the client gave up and closed the connection
	}
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
		}
	}
	return true
}

func (p *stallProxy) refuse(w http.ResponseWriter, r *http.Request) bool {
	p.mu.Lock()
	deny := p.deny != nil && p.deny(r)
	if deny {
		p.denied++
	}
	p.mu.Unlock()
	if !deny {
		return false
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusForbidden)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
		`<Error><Code>AccessDenied</Code><Message>Access Denied</Message><Resource>%s</Resource><RequestId>stall-proxy</RequestId></Error>`, r.URL.Path)
	return true
}

// bucketOf is the bucket of a path-style request ("" for the service, ListBuckets).
func bucketOf(r *http.Request) string {
	bucket, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	return bucket
}

// isCreateBucket: PUT on a bucket with no subresource (the SDK adds only x-id).
func isCreateBucket(r *http.Request) bool {
	if r.Method != http.MethodPut || bucketOf(r) == "" || strings.Trim(r.URL.Path, "/") != bucketOf(r) {
		return false
	}
	for k := range r.URL.Query() {
		if k != "x-id" {
			return false
		}
	}
	return true
}

// isListBuckets: GET on the service root.
func isListBuckets(r *http.Request) bool {
	return r.Method == http.MethodGet && strings.Trim(r.URL.Path, "/") == ""
}
