package s3

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"
)

// silentServer accepts connections on 127.0.0.1 and never answers: a store
// that is "up" as far as TCP goes and hung otherwise. It counts accepted
// connections and closes everything when the test ends.
type silentServer struct {
	ln       net.Listener
	mu       sync.Mutex
	conns    []net.Conn
	accepted chan struct{}
}

func newSilentServer(t *testing.T) *silentServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &silentServer{ln: ln, accepted: make(chan struct{}, 64)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			select {
			case s.accepted <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, c := range s.conns {
			_ = c.Close()
		}
	})
	return s
}

func (s *silentServer) url() string { return "http://" + s.ln.Addr().String() }

// TestResponseHeaderTimeoutFires: the transport itself gives up on a store
// that never answers, even when the caller's context has no deadline, and the
// error reads as a timeout (transient), not as something to stall on.
func TestResponseHeaderTimeoutFires(t *testing.T) {
	const timeout = 300 * time.Millisecond
	srv := newSilentServer(t)

	hc, err := newHTTPClient(Config{RequestTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	// The context's deadline is far later: only so that a transport without
	// the timeout fails the test below instead of hanging it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.url()+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	resp, err := hc.Do(req)
	elapsed := time.Since(start)
	if err == nil {
		_ = resp.Body.Close()
		t.Fatal("a server that never answers produced a response")
	}
	var netErr net.Error
	if !errors.As(err, &netErr) || !netErr.Timeout() {
		t.Fatalf("want a transport timeout, got %T: %v", err, err)
	}
	if k := KindOf(err); k != KindTimeout {
		t.Errorf("KindOf = %v, want Timeout", k)
	}
	if elapsed < timeout {
		t.Errorf("gave up after %v, before the %v timeout", elapsed, timeout)
	}
	// Generous upper bound: it must not hang, however loaded the machine is.
	if elapsed > 20*timeout {
		t.Errorf("took %v for a %v timeout", elapsed, timeout)
	}
}

// TestRequestTimeoutBoundsEveryCall: a Client call without any deadline of the
// caller's fails within RequestTimeout (SDK retries included) as a timeout.
func TestRequestTimeoutBoundsEveryCall(t *testing.T) {
	const timeout = 400 * time.Millisecond
	srv := newSilentServer(t)
	c, obs := newTestClient(t, srv.url(), func(cfg *Config) { cfg.RequestTimeout = timeout })

	for name, call := range map[string]func(context.Context) error{
		"Ping":         c.Ping,
		"CreateBucket": func(ctx context.Context) error { return c.CreateBucket(ctx, "b1", "") },
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			err := call(context.Background())
			elapsed := time.Since(start)
			if err == nil {
				t.Fatal("no error from a server that never answers")
			}
			if k := KindOf(err); k != KindTimeout {
				t.Errorf("KindOf = %v, want Timeout: %v", k, err)
			}
			if elapsed < timeout || elapsed > 20*timeout {
				t.Errorf("failed after %v, want about %v", elapsed, timeout)
			}
		})
	}
	select {
	case <-srv.accepted:
	default:
		t.Error("the server never saw a connection: the timeout was not the transport's")
	}
	if n := len(obs.all()); n == 0 {
		t.Error("no attempt was observed")
	}
}

// queryLog records the raw query of every request a fake server gets.
type queryLog struct {
	mu      sync.Mutex
	queries []string
}

func (l *queryLog) add(r *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.queries = append(l.queries, r.URL.RawQuery)
}

func (l *queryLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.queries...)
}

// TestPingAsksForOneBucket: the health check is one request for one bucket,
// never a walk over every page, and its refusals keep their meaning.
func TestPingAsksForOneBucket(t *testing.T) {
	log := &queryLog{}
	c, _ := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		log.add(r)
		if r.Method != http.MethodGet || r.URL.Path != "/" {
			t.Errorf("got %s %s", r.Method, r.URL.Path)
		}
		// A continuation token: a paginator would ask for the next page.
		writeXML(w, `<ListAllMyBucketsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
<Owner><ID>o</ID></Owner><Buckets><Bucket><Name>a</Name></Bucket></Buckets>
<ContinuationToken>next</ContinuationToken></ListAllMyBucketsResult>`)
	})
	if err := c.Ping(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	queries := log.all()
	if len(queries) != 1 {
		t.Fatalf("Ping sent %d requests (%v), want 1", len(queries), queries)
	}
	if q, err := url.ParseQuery(queries[0]); err != nil || q.Get("max-buckets") != "1" || q.Has("continuation-token") {
		t.Errorf("query %q, want max-buckets=1 and no continuation", queries[0])
	}

	// A store that refuses the parameter is asked once more without it.
	log = &queryLog{}
	c, _ = fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		log.add(r)
		if r.URL.Query().Has("max-buckets") {
			writeS3Error(w, r, http.StatusBadRequest, "InvalidArgument", "unknown parameter")
			return
		}
		writeXML(w, `<ListAllMyBucketsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Buckets/></ListAllMyBucketsResult>`)
	})
	if err := c.Ping(testCtx(t)); err != nil || len(log.all()) != 2 {
		t.Errorf("store without max-buckets: Ping = %v after requests %v, want success after 2", err, log.all())
	}

	for code, want := range map[string]Kind{
		"AccessDenied":          KindAccessDenied,
		"SignatureDoesNotMatch": KindInvalidCredentials,
		"InvalidAccessKeyId":    KindInvalidCredentials,
	} {
		c, _ := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
			writeS3Error(w, r, http.StatusForbidden, code, "refused")
		})
		if err := c.Ping(testCtx(t)); KindOf(err) != want {
			t.Errorf("403 %s: Ping = %v, want kind %v", code, err, want)
		}
	}
}
