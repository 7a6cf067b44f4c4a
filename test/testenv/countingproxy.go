package testenv

import (
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// CountingProxy stands on loopback in front of an S3 server and counts the object
// bytes one access key writes through it (what a test needs to bound how much a
// resumed copy sent again) and when each request arrived, whoever signed it (what a
// test needs to hold a store's request budget to account). Requests pass unchanged,
// Host header included, so their signatures still hold.
type CountingProxy struct {
	// Endpoint is the proxy's URL, to give the clients instead of the server's.
	Endpoint string

	accessKeyID string
	srv         *http.Server
	written     atomic.Int64
	// bucketWrites and bucketCreates count, whoever signed them, the requests that
	// change a bucket or its objects and the CreateBucket among them.
	bucketWrites, bucketCreates atomic.Int64

	mu      sync.Mutex
	arrived []time.Time
	// writes names each request bucketChange counted: "PUT /bucket?tagging".
	writes []string
}

// StartCountingProxy proxies to endpoint and counts the object writes (PutObject,
// UploadPart) signed by accessKeyID. Close stops it.
func StartCountingProxy(endpoint, accessKeyID string) (*CountingProxy, error) {
	target, err := url.Parse(endpoint)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &CountingProxy{Endpoint: "http://" + ln.Addr().String(), accessKeyID: accessKeyID}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host // signed by the client
		},
		Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 32},
		// A client giving up on a request (a killed operator) is no news.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	p.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if n := p.objectBytes(r); n > 0 {
				p.written.Add(n)
			}
			write, create := bucketChange(r)
			if write {
				p.bucketWrites.Add(1)
				if create {
					p.bucketCreates.Add(1)
				}
			}
			p.mu.Lock()
			p.arrived = append(p.arrived, time.Now())
			if write {
				p.writes = append(p.writes, writeName(r))
			}
			p.mu.Unlock()
			proxy.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		if err := p.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "counting proxy:", err)
		}
	}()
	return p, nil
}

// objectBytes is the size of the object data r writes, when accessKeyID signed it: a
// PUT to a key (path-style: /bucket/key), counted by its decoded length where the body
// is aws-chunked.
func (p *CountingProxy) objectBytes(r *http.Request) int64 {
	if r.Method != http.MethodPut || strings.Count(strings.TrimPrefix(r.URL.Path, "/"), "/") == 0 ||
		!strings.Contains(r.Header.Get("Authorization"), "Credential="+p.accessKeyID+"/") {
		return 0
	}
	q := r.URL.Query()
	q.Del("x-id") // the AWS SDKs name the operation there
	if r.Header.Get("x-amz-copy-source") != "" || (len(q) > 0 && !q.Has("partNumber")) {
		return 0 // a server-side copy, or a subresource (?tagging, ?retention): no object data
	}
	if d := r.Header.Get("x-amz-decoded-content-length"); d != "" {
		n, _ := strconv.ParseInt(d, 10, 64)
		return n
	}
	return r.ContentLength
}

// bucketChange says whether r would change a bucket or its objects (a request other
// than GET or HEAD on a path-style path naming a bucket; IAM and STS requests go to
// "/"), and whether it is a CreateBucket: a PUT of the bucket itself, with no
// subresource.
func bucketChange(r *http.Request) (write, create bool) {
	path := strings.Trim(r.URL.Path, "/")
	if path == "" || r.Method == http.MethodGet || r.Method == http.MethodHead {
		return false, false
	}
	q := r.URL.Query()
	q.Del("x-id")
	return true, r.Method == http.MethodPut && !strings.Contains(path, "/") && len(q) == 0
}

// writeName names a write by its method, path and subresources (the query's keys but
// x-id, sorted): "PUT /bucket?tagging", "DELETE /bucket/key".
func writeName(r *http.Request) string {
	q := r.URL.Query()
	q.Del("x-id")
	keys := slices.Sorted(maps.Keys(q))
	name := r.Method + " " + r.URL.Path
	if len(keys) > 0 {
		name += "?" + strings.Join(keys, "&")
	}
	return name
}

// Writes names, in arrival order, every request that changed a bucket or its objects
// so far (see BucketWrites), whoever signed it: "PUT /bucket?tagging".
func (p *CountingProxy) Writes() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.writes)
}

// BucketWrites is how many requests that change a bucket or its objects arrived so
// far, whoever signed them.
func (p *CountingProxy) BucketWrites() int64 { return p.bucketWrites.Load() }

// BucketCreates is how many CreateBucket requests arrived so far, whoever signed them.
func (p *CountingProxy) BucketCreates() int64 { return p.bucketCreates.Load() }

// Written is how many object bytes the access key wrote through the proxy so far.
func (p *CountingProxy) Written() int64 { return p.written.Load() }

// MaxRequestsIn is the most requests that arrived within any window of length w so
// far, and when that window began.
func (p *CountingProxy) MaxRequestsIn(w time.Duration) (int, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	most, from, first := 0, time.Time{}, 0
	for last, at := range p.arrived { // in arrival order
		for at.Sub(p.arrived[first]) >= w {
			first++
		}
		if n := last - first + 1; n > most {
			most, from = n, p.arrived[first]
		}
	}
	return most, from
}

// Requests is how many requests arrived so far.
func (p *CountingProxy) Requests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.arrived)
}

// Close stops the proxy and its connections.
func (p *CountingProxy) Close() error { return p.srv.Close() }
