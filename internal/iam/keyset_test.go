package iam

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

func rsaJWK(t *testing.T, kid string) map[string]string {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{"kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig",
		"n": base64.RawURLEncoding.EncodeToString(k.N.Bytes()), "e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(k.E)).Bytes())}
}

func keySetJSON(t *testing.T, keys ...map[string]string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestKeySetForeign: a key is known by its material, not by its kid or how it is
// written: the cluster's key under another kid, with other optional members, is the
// cluster's; a second cluster's key (RSA or EC) is foreign, and so is a key of a type
// no thumbprint is defined for unless published byte for byte the same. A set that is
// not JSON, or a key without its required members, is an error.
func TestKeySetForeign(t *testing.T) {
	mine, theirs := rsaJWK(t, "mine"), rsaJWK(t, "theirs")
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecKey := map[string]string{"kty": "EC", "kid": "ec", "crv": "P-256",
		"x": base64.RawURLEncoding.EncodeToString(ec.X.FillBytes(make([]byte, 32))), "y": base64.RawURLEncoding.EncodeToString(ec.Y.FillBytes(make([]byte, 32)))}
	own, err := ParseKeySet(keySetJSON(t, mine))
	if err != nil {
		t.Fatal(err)
	}
	renamed := map[string]string{"kty": "RSA", "kid": "another-name", "n": mine["n"], "e": mine["e"]}
	for name, c := range map[string]struct {
		keys []map[string]string
		want []string
	}{
		"the cluster's own":          {[]map[string]string{mine}, nil},
		"its own under another kid":  {[]map[string]string{renamed}, nil},
		"a second cluster's RSA key": {[]map[string]string{mine, theirs}, []string{"theirs"}},
		"a second cluster's EC key":  {[]map[string]string{ecKey, mine}, []string{"ec"}},
		"an unknown key type":        {[]map[string]string{{"kty": "oct", "kid": "sym", "k": "c2VjcmV0"}}, []string{"sym"}},
		"an empty set":               {nil, nil},
	} {
		set, err := ParseKeySet(keySetJSON(t, c.keys...))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := set.Foreign(own); !slices.Equal(got, c.want) {
			t.Errorf("%s: foreign %v, want %v", name, got, c.want)
		}
	}
	for name, body := range map[string]string{
		"not JSON":             `<html>`,
		"an RSA key without n": `{"keys":[{"kty":"RSA","e":"AQAB"}]}`,
		"an EC key without y":  `{"keys":[{"kty":"EC","crv":"P-256","x":"AA"}]}`,
	} {
		if _, err := ParseKeySet([]byte(body)); err == nil {
			t.Errorf("%s parsed", name)
		}
	}
}

// TestIssuerKeySet: the key set is the one the discovery document names, read over
// verified TLS; an http jwks_uri or a set that is not one gives an error.
func TestIssuerKeySet(t *testing.T) {
	var base string
	mine := rsaJWK(t, "mine")
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/good/.well-known/openid-configuration":
			_, _ = w.Write([]byte(`{"issuer":"x","jwks_uri":"` + base + `/keys"}`))
		case "/bad/.well-known/openid-configuration":
			_, _ = w.Write([]byte(`{"issuer":"x","jwks_uri":"` + base + `/notkeys"}`))
		case "/plain/.well-known/openid-configuration":
			_, _ = w.Write([]byte(`{"jwks_uri":"http://example.com/keys"}`))
		case "/keys":
			_, _ = w.Write(keySetJSON(t, mine))
		case "/notkeys":
			_, _ = w.Write([]byte(`{"keys":[{"kty":"RSA"}]}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	base = srv.URL
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	set, err := IssuerKeySet(context.Background(), hc, srv.URL+"/good")
	if err != nil {
		t.Fatal(err)
	}
	if len(set) != 1 || !slices.Contains(mapValues(set), "mine") {
		t.Errorf("key set %v, want the one key", set)
	}
	for _, issuer := range []string{srv.URL + "/bad", srv.URL + "/plain", srv.URL + "/missing"} {
		if set, err := IssuerKeySet(context.Background(), hc, issuer); err == nil {
			t.Errorf("%s: key set %v", strings.TrimPrefix(issuer, srv.URL), set)
		}
	}
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
