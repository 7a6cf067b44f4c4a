package integration_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// stallProxy is an HTTP proxy on 127.0.0.1 in front of a real S3 server. Requests pass
// through unchanged (the Host header too, so SigV4 signatures still verify) unless a
// predicate picks them: then the proxy either holds the request without ever answering,
// as a store does that accepts connections and then hangs, or answers it itself with an
// S3 error. It counts what it held and refused, per bucket.
//
// It also injects the faults a deletion racing a bucket's first pass is most fragile
// to (landLate, failOnceSeen, slowFirst): a request that reaches the store only after
// its client gave up, a read that fails once, an answer that comes late.
type stallProxy struct {
	URL    string
	target *url.URL

	mu        sync.Mutex
	stall     func(*http.Request) bool
	deny      func(*http.Request) bool
	release   chan struct{}
	heldNow   map[string]int // bucket → requests being held right now
	heldMax   int            // most requests held at once
	heldTotal int
	denied    int

	// late picks the first request per bucket to hold until its client gives up; it
	// is then parked and sent to the store right after the next request for that
	// bucket has been answered. taken: buckets whose request was picked.
	late   func(*http.Request) bool
	taken  map[string]bool
	parked map[string][]*http.Request
	landed int
	// failSeen picks the first request per bucket after one that found the bucket
	// (200 to HeadBucket) to fail with 500 InternalError, every SDK attempt of it.
	failSeen func(*http.Request) bool
	seen     map[string]bool // a HeadBucket found the bucket; its next picked call fails
	picked   map[string]bool // buckets whose call was picked: only one per bucket
	failing  map[string]int  // attempts still to fail
	failed   int
	// slow picks the first request per bucket to delay by slowBy before it is sent.
	slow   func(*http.Request) bool
	slowBy time.Duration
	slowed map[string]bool
	// after picks the first request per bucket to carry out and then answer with 500
	// InternalError whatever the store answered; afterDone: buckets whose was picked.
	after     func(*http.Request) bool
	afterDone map[string]bool
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
	p := &stallProxy{URL: "http://" + ln.Addr().String(), target: u, release: make(chan struct{}), heldNow: map[string]int{},
		taken: map[string]bool{}, parked: map[string][]*http.Request{}, seen: map[string]bool{}, picked: map[string]bool{}, failing: map[string]int{}, slowed: map[string]bool{},
		afterDone: map[string]bool{}}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.hold(w, r) || p.refuse(w, r) || p.park(w, r) || p.fail(w, r) {
			return
		}
		p.delay(r)
		if p.failsAfter(r) {
			rp.ServeHTTP(httptest.NewRecorder(), r) // carried out; its answer is lost
			internalError(w, r)
			return
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		rp.ServeHTTP(sw, r)
		p.served(r, sw.status)
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

// landLate holds the first request per bucket that pred matches until its client gives
// up, and sends it to the store right after the next request for that bucket has been
// answered: a CreateBucket whose answer was lost and which the store carries out after
// the operator's next look at the bucket.
func (p *stallProxy) landLate(pred func(*http.Request) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.late = pred
}

// failOnceSeen fails the first request per bucket that pred matches after a HeadBucket
// found the bucket, with 500 InternalError to every SDK attempt of that one call.
func (p *stallProxy) failOnceSeen(pred func(*http.Request) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failSeen = pred
}

// slowFirst delays the first request per bucket that pred matches by d before sending
// it on: an answer that comes late, or not before the client gives up.
func (p *stallProxy) slowFirst(pred func(*http.Request) bool, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.slow, p.slowBy = pred, d
}

// faults returns how many parked requests landed and how many requests were failed.
func (p *stallProxy) faults() (landed, failed int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.landed, p.failed
}

func (p *stallProxy) park(w http.ResponseWriter, r *http.Request) bool {
	bucket := bucketOf(r)
	p.mu.Lock()
	pick := p.late != nil && !p.taken[bucket] && p.late(r)
	if pick {
		p.taken[bucket] = true
	}
	p.mu.Unlock()
	if !pick {
		return false
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return false
	}
	<-r.Context().Done() // the client gave up: the request is not answered
	later := r.Clone(context.Background())
	later.Body, later.ContentLength, later.RequestURI = io.NopCloser(bytes.NewReader(body)), int64(len(body)), ""
	later.URL.Scheme, later.URL.Host = p.target.Scheme, p.target.Host
	p.mu.Lock()
	p.parked[bucket] = append(p.parked[bucket], later)
	p.mu.Unlock()
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
		}
	}
	return true
}

// served notes what an answered request showed and lands the requests parked for its
// bucket.
func (p *stallProxy) served(r *http.Request, status int) {
	bucket := bucketOf(r)
	p.mu.Lock()
	if r.Method == http.MethodHead && status == http.StatusOK && p.failSeen != nil {
		p.seen[bucket] = true
	}
	parked := p.parked[bucket]
	delete(p.parked, bucket)
	p.mu.Unlock()
	for _, req := range parked {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		resp, err := (&http.Transport{Proxy: nil}).RoundTrip(req.WithContext(ctx))
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			p.mu.Lock()
			p.landed++
			p.mu.Unlock()
		}
		cancel()
	}
}

func (p *stallProxy) fail(w http.ResponseWriter, r *http.Request) bool {
	bucket := bucketOf(r)
	p.mu.Lock()
	if p.failSeen != nil && p.seen[bucket] && !p.picked[bucket] && p.failSeen(r) {
		p.picked[bucket] = true
		p.failing[bucket] = s3.MaxAttempts
	}
	fail := p.failing[bucket] > 0 && p.failSeen != nil && p.failSeen(r)
	if fail {
		p.failing[bucket]--
		p.failed++
	}
	p.mu.Unlock()
	if !fail {
		return false
	}
	internalError(w, r)
	return true
}

// failAfter carries out the first request per bucket that pred matches and answers it
// with 500 InternalError whatever the store answered: a store that did the work and
// then failed to say so (the SDK would retry such an answer).
func (p *stallProxy) failAfter(pred func(*http.Request) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.after = pred
}

func (p *stallProxy) failsAfter(r *http.Request) bool {
	bucket := bucketOf(r)
	p.mu.Lock()
	defer p.mu.Unlock()
	pick := p.after != nil && !p.afterDone[bucket] && p.after(r)
	if pick {
		p.afterDone[bucket] = true
		p.failed++
	}
	return pick
}

// internalError answers r with 500 InternalError.
func internalError(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusInternalServerError)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
		`<Error><Code>InternalError</Code><Message>injected</Message><Resource>%s</Resource><RequestId>stall-proxy</RequestId></Error>`, r.URL.Path)
}

func (p *stallProxy) delay(r *http.Request) {
	bucket := bucketOf(r)
	p.mu.Lock()
	pick := p.slow != nil && !p.slowed[bucket] && p.slow(r)
	if pick {
		p.slowed[bucket] = true
	}
	by := p.slowBy
	p.mu.Unlock()
	if pick {
		select {
		case <-time.After(by): // the fault itself: the store answers this late
		case <-r.Context().Done():
		}
	}
}

// statusWriter remembers the status of the answer it passes on.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// isGetBucketTagging: GET on a bucket with the tagging subresource.
func isGetBucketTagging(r *http.Request) bool {
	_, ok := r.URL.Query()["tagging"]
	return r.Method == http.MethodGet && ok && strings.Trim(r.URL.Path, "/") == bucketOf(r)
}
