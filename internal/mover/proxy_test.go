package mover_test

import (
	"io"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// countingProxy is an HTTP proxy on 127.0.0.1 in front of a real store. Requests pass
// through unchanged (the Host header too, so signatures verify); it counts the request
// body bytes it forwards (what a mover really sent the store) and can hold the
// UploadPart requests past the first few, as a store does that stops answering in the
// middle of a large object.
type countingProxy struct {
	URL string

	mu         sync.Mutex
	forwarded  int64 // request body bytes sent on to the store
	partsAdmit int   // UploadParts let through before holding; <0: no holding
	partsSeen  int
	partsDone  int
	held       int
	release    chan struct{}
	// scopes counts the regions requests were signed for (their SigV4 credential
	// scope).
	scopes map[string]int
}

func newCountingProxy(t *testing.T, target string) *countingProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 32}
	rp.ErrorLog = log.New(io.Discard, "", 0) // a killed mover's requests end mid-way
	p := &countingProxy{partsAdmit: -1, release: make(chan struct{}), scopes: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.scopes[signedRegion(r.Header.Get("Authorization"))]++
		p.mu.Unlock()
		part := r.Method == http.MethodPut && r.URL.Query().Has("partNumber") && r.URL.Query().Has("uploadId")
		if part && p.hold() {
			return
		}
		if r.Body != nil {
			r.Body = &countingBody{ReadCloser: r.Body, p: p}
		}
		rp.ServeHTTP(w, r)
		if part {
			p.mu.Lock()
			p.partsDone++
			p.mu.Unlock()
		}
	}))
	p.URL = srv.URL
	t.Cleanup(func() {
		p.letGo()
		srv.Close()
	})
	return p
}

// hold blocks an UploadPart past the admitted ones until letGo, and says whether it
// did (the request then gets no answer worth reading).
func (p *countingProxy) hold() bool {
	p.mu.Lock()
	p.partsSeen++
	if p.partsAdmit < 0 || p.partsSeen <= p.partsAdmit {
		p.mu.Unlock()
		return false
	}
	p.held++
	release := p.release
	p.mu.Unlock()
	<-release
	return true
}

// holdPartsAfter lets n UploadParts through and holds the ones after them.
func (p *countingProxy) holdPartsAfter(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.partsAdmit, p.partsSeen = n, 0
}

// letGo stops holding and ends the held requests.
func (p *countingProxy) letGo() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.partsAdmit = -1
	select {
	case <-p.release:
	default:
		close(p.release)
	}
}

func (p *countingProxy) counts() (forwarded int64, partsDone, held int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.forwarded, p.partsDone, p.held
}

type countingBody struct {
	io.ReadCloser
	p *countingProxy
}

func (b *countingBody) Read(buf []byte) (int, error) {
	n, err := b.ReadCloser.Read(buf)
	b.p.mu.Lock()
	b.p.forwarded += int64(n)
	b.p.mu.Unlock()
	return n, err
}

// signedRegion is the region of a SigV4 Authorization header's credential scope
// ("Credential=<key>/<date>/<region>/s3/aws4_request"), "" without one.
func signedRegion(auth string) string {
	_, cred, ok := strings.Cut(auth, "Credential=")
	if !ok {
		return ""
	}
	parts := strings.Split(strings.SplitN(cred, ",", 2)[0], "/")
	if len(parts) < 3 {
		return ""
	}
	return parts[2]
}

func (p *countingProxy) signedRegions() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.scopes)
}
