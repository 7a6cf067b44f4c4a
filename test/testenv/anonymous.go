package testenv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// AnonymousAccess is what anyone on the network got from a bucket: the HTTP status of
// an unsigned GET of an object, an unsigned PUT of one and an unsigned ListObjectsV2.
type AnonymousAccess struct{ Get, Put, List int }

// Denied says that each of the three was refused (403).
func (a AnonymousAccess) Denied() bool {
	return a.Get == http.StatusForbidden && a.Put == http.StatusForbidden && a.List == http.StatusForbidden
}

// Granted says that each of the three succeeded.
func (a AnonymousAccess) Granted() bool { return ok(a.Get) && ok(a.Put) && ok(a.List) }

func ok(status int) bool { return status >= 200 && status < 300 }

func (a AnonymousAccess) String() string {
	return fmt.Sprintf("GET %d, PUT %d, List %d", a.Get, a.Put, a.List)
}

// Anonymous tries an unsigned GET of the object key, an unsigned PUT of the object
// put (a new key, so nothing of the tenant's is overwritten) and an unsigned list of the
// bucket.
func (s *S3Server) Anonymous(ctx context.Context, bucket, key, put string) (AnonymousAccess, error) {
	var a AnonymousAccess
	var err error
	if a.Get, _, err = s.AnonymousRequest(ctx, http.MethodGet, "/"+bucket+"/"+key, nil); err != nil {
		return a, err
	}
	if a.Put, _, err = s.AnonymousRequest(ctx, http.MethodPut, "/"+bucket+"/"+put, []byte("written by anyone")); err != nil {
		return a, err
	}
	a.List, _, err = s.AnonymousRequest(ctx, http.MethodGet, "/"+bucket+"?list-type=2", nil)
	return a, err
}

// AnonymousRequest sends one unsigned request to the server, path style, as anyone on
// the network would, and returns its status and up to 4 KiB of its body.
func (s *S3Server) AnonymousRequest(ctx context.Context, method, path string, body []byte) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.Endpoint+path, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	if body == nil {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(text), nil
}
