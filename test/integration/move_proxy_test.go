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
	"sync"
	"testing"
)

// targetProxy stands on 127.0.0.1 in front of the store a move goes to, as that
// ObjectStore's endpoint: every request the operator and its mover send there passes
// it (Host header unchanged, so signatures hold), and it keeps what each was, per
// bucket. A test proves with it that nothing of the operator's reached a bucket, and
// makes the store answer as a store may: someone else creating the bucket just before
// the operator's CreateBucket arrives (squat), or refusing a request with a message
// that names the store's internals (refuse).
type targetProxy struct {
	URL string

	mu       sync.Mutex
	requests map[string][]string // bucket → "METHOD /path?query" of each request that passed
	squats   map[string]squat
	refusing func(*http.Request) string
}

// squat is what happens to the first CreateBucket of a bucket: before it, made runs
// (someone else makes the bucket); with lose, that CreateBucket and every one after
// it for the bucket are answered 500 InternalError and never reach the store.
type squat struct {
	made func()
	lose bool
	done bool
}

func newTargetProxy(t *testing.T, target string) *targetProxy {
	t.Helper()
	u, err := url.Parse(target)
	must(t, err)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{Proxy: nil} // loopback only, whatever the environment says
	rp.ErrorLog = log.New(io.Discard, "", 0)   // clients that give up are expected here
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	p := &targetProxy{URL: "http://" + ln.Addr().String(), requests: map[string][]string{}, squats: map[string]squat{}}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bucket := bucketOf(r)
		p.mu.Lock()
		p.requests[bucket] = append(p.requests[bucket], r.Method+" "+r.URL.RequestURI())
		s, squatted := p.squats[bucket]
		squatted = squatted && isCreateBucket(r)
		first := squatted && !s.done
		if first {
			p.squats[bucket] = squat{made: s.made, lose: s.lose, done: true}
		}
		refusal := ""
		if p.refusing != nil {
			refusal = p.refusing(r)
		}
		p.mu.Unlock()
		if first {
			s.made()
		}
		if squatted && s.lose {
			internalError(w, r)
			return
		}
		if refusal != "" {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
				`<Error><Code>AccessDenied</Code><Message>%s</Message><Resource>%s</Resource><RequestId>target-proxy</RequestId></Error>`, refusal, r.URL.Path)
			return
		}
		rp.ServeHTTP(w, r)
	})}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("target proxy: %v", err)
		}
	})
	return p
}

// squatOn arms a squat on bucket's first CreateBucket.
func (p *targetProxy) squatOn(bucket string, made func(), lose bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.squats[bucket] = squat{made: made, lose: lose}
}

// refuse answers every later request for which pred gives a message with 403
// AccessDenied and that message; nil stops refusing.
func (p *targetProxy) refuse(pred func(*http.Request) string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refusing = pred
}

// sent returns the requests that reached the proxy for bucket so far.
func (p *targetProxy) sent(bucket string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.requests[bucket]...)
}
