package soak_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// lateStore is a store whose creating requests (CreateBucket; the IAM calls CreateUser,
// CreateAccessKey and PutUserPolicy) are never answered and are carried out only once
// their client gave up, while every other request is answered: the operator takes the
// creation for failed, may look and find nothing, and the bucket, user or key appears
// behind its back. It is where a deletion racing a claim's first pass, or an access
// deleted while its key was being made, would leave something behind.
//
// It is an HTTP proxy (the Host header kept, so signatures verify) on a loopback port of
// its own; tcpProxy sends connections there while a store is late.
type lateStore struct {
	addr   string
	target *url.URL
	rp     *httputil.ReverseProxy
	client *http.Client
	srv    *http.Server
	served chan error
	landed atomic.Int64
	wg     sync.WaitGroup
	stop   chan struct{}
}

// landAfter is how long after its client gave up a held request is carried out: long
// enough for the operator's next look at what it tried to create.
const landAfter = 2 * time.Second

// maxHeld bounds how long a request is held when its client does not give up.
const maxHeld = time.Minute

func newLateStore(target string) (*lateStore, error) {
	u, err := url.Parse("http://" + target)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	transport := &http.Transport{Proxy: nil}
	l := &lateStore{addr: ln.Addr().String(), target: u, rp: httputil.NewSingleHostReverseProxy(u), served: make(chan error, 1), stop: make(chan struct{}),
		client: &http.Client{Transport: transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	l.rp.Transport = transport
	l.rp.ErrorLog = log.New(io.Discard, "", 0) // clients that give up are the point here
	l.srv = &http.Server{Handler: l, ReadHeaderTimeout: 10 * time.Second}
	go func() { l.served <- l.srv.Serve(ln) }()
	return l, nil
}

func (l *lateStore) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if !creating(r, body) {
		r.Body = io.NopCloser(bytes.NewReader(body))
		l.rp.ServeHTTP(w, r)
		return
	}
	out := r.Clone(context.Background())
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = l.target.Scheme, l.target.Host
	out.Host = r.Host // what the signature covers
	out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	select {
	case <-r.Context().Done():
	case <-time.After(maxHeld):
	case <-l.stop:
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		select {
		case <-time.After(landAfter):
		case <-l.stop:
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if resp, err := l.client.Do(out.WithContext(ctx)); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			l.landed.Add(1)
		}
	}()
	panic(http.ErrAbortHandler) // no answer: the connection is cut
}

// creating says whether a request creates something: PUT on a bucket (no key, no
// subresource), or an IAM action that makes a user, a key or a policy.
func creating(r *http.Request, body []byte) bool {
	path := strings.Trim(r.URL.Path, "/")
	if r.Method == http.MethodPut && path != "" && !strings.Contains(path, "/") && r.URL.RawQuery == "" {
		return true
	}
	if r.Method != http.MethodPost || path != "" {
		return false
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return false
	}
	switch form.Get("Action") {
	case "CreateUser", "CreateAccessKey", "PutUserPolicy":
		return true
	}
	return false
}

func (l *lateStore) Close() error {
	close(l.stop)
	err := l.srv.Close()
	if served := <-l.served; !errors.Is(served, http.ErrServerClosed) {
		err = errors.Join(err, served)
	}
	l.wg.Wait()
	return err
}
