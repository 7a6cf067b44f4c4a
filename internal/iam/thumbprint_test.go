package iam

import (
	"context"
	"crypto/sha1" //nolint:gosec // see thumbprint.go
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestThumbprint: the thumbprint is of the last certificate the key set's host
// presents, found through the discovery document; a host nobody vouches for, an
// http jwks_uri, an answer other than 200 or an endless document give an error.
func TestThumbprint(t *testing.T) {
	var jwksURI string
	big := strings.Repeat("x", maxIssuerDocument+1)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/good/.well-known/openid-configuration":
			_, _ = w.Write([]byte(`{"issuer":"x","jwks_uri":"` + jwksURI + `"}`))
		case "/plain/.well-known/openid-configuration":
			_, _ = w.Write([]byte(`{"jwks_uri":"http://example.com/keys"}`))
		case "/big/.well-known/openid-configuration":
			_, _ = w.Write([]byte(big))
		case "/keys":
			_, _ = w.Write([]byte(`{"keys":[]}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	jwksURI = srv.URL + "/keys"
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	ctx := context.Background()

	got, err := Thumbprint(ctx, hc, srv.URL+"/good")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha1.Sum(srv.Certificate().Raw) //nolint:gosec // see the import
	if want := hex.EncodeToString(sum[:]); got != want {
		t.Errorf("thumbprint %s, want %s", got, want)
	}
	for issuer, why := range map[string]string{
		srv.URL + "/plain":   "an http jwks_uri",
		srv.URL + "/missing": "a 404",
		srv.URL + "/big":     "a document over the bound",
	} {
		if tp, err := Thumbprint(ctx, hc, issuer); err == nil {
			t.Errorf("%s gave thumbprint %s", why, tp)
		}
	}
	if tp, err := Thumbprint(ctx, http.DefaultClient, srv.URL+"/good"); err == nil {
		t.Errorf("a host no root vouches for gave thumbprint %s", tp)
	}
}
