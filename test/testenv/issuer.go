package testenv

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1" //nolint:gosec // the thumbprint AWS and RGW compare is SHA-1 by definition
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// Issuer serves a control plane's OpenID Connect discovery document and key set (the
// kube-apiserver's /.well-known/openid-configuration and /openid/v1/jwks) over HTTPS,
// on port 443 of a loopback address of its own, under a name of its own: the cluster's
// ServiceAccount token issuer as a store outside the cluster sees it. A store checking a
// web-identity token fetches <issuer>/.well-known/openid-configuration, then its
// jwks_uri; Ceph RGW (with rgw_enable_jwks_url_verification) also connects to the
// jwks_uri's host on port 443, whatever the URL says, and compares the SHA-1 thumbprint
// of the last certificate presented with those registered for the provider: hence 443,
// which takes root or CAP_NET_BIND_SERVICE to bind.
//
// The name (under .test, which never resolves on the internet) is known only where the
// harness says so: to a gateway in its own /etc (S3Server.TrustIssuer) and to Go clients
// through DialContext. Nothing of the machine's (its /etc/hosts, its resolver) changes.
//
// It runs in the test process: it goes with the test binary, and Close stops it.
type Issuer struct {
	// Host is the issuer's name, issuer-<random>.bucketkeeper.test.
	Host string
	// Addr is where it listens: a random 127.x.y.z, port 443.
	Addr string
	// URL is https://Host: the kube-apiserver's --service-account-issuer, and every
	// token's iss.
	URL string
	// CAPEM is the certificate authority that signed its serving certificate.
	CAPEM []byte
	// Thumbprint is the SHA-1 (40 lowercase hex) of the last certificate the server
	// presents, its CA: what an ObjectStore's webIdentity.thumbprints lists, and what
	// the operator computes for it.
	Thumbprint string

	// signingKey signs the control plane's tokens: RSA, because RGW checks a key set
	// entry without a certificate chain (x5c), as the kube-apiserver publishes them,
	// only for RS256, RS384 and RS512.
	signingKey *rsa.PrivateKey

	ln       net.Listener
	srv      *http.Server
	served   atomic.Int64
	mu       sync.Mutex
	upstream *http.Client // the API server, as its admin
	apiURL   string
	// extraKeys are the keys of the clusters sharing the issuer (ShareWith), by kid.
	extraKeys map[string]map[string]string
}

// issuerDomain is the domain of every issuer's name: .test is reserved (RFC 2606).
const issuerDomain = ".bucketkeeper.test"

// IssuerJWKSPath is where the kube-apiserver serves its key set, and so the path of
// the jwks_uri it advertises for the issuer.
const IssuerJWKSPath = "/openid/v1/jwks"

// NewIssuer binds port 443 on a fresh loopback address and mints the serving
// certificate. Until a control plane started with it (ControlPlaneOptions.Issuer,
// ClusterOptions.Issuer) is up, it answers 503.
func NewIssuer() (*Issuer, error) {
	i := &Issuer{Host: "issuer-" + randomString(10, lowerAlnum) + issuerDomain}
	i.URL = "https://" + i.Host
	var err error
	for attempt := 0; ; attempt++ {
		b := make([]byte, 3)
		_, _ = rand.Read(b)
		ip := net.IPv4(127, 1+b[0]%254, b[1], 1+b[2]%254)
		i.Addr = net.JoinHostPort(ip.String(), "443")
		if i.ln, err = net.Listen("tcp4", i.Addr); err == nil {
			break
		}
		if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) {
			return nil, fmt.Errorf("testenv: the issuer needs port 443, which takes root or CAP_NET_BIND_SERVICE: %w", err)
		}
		if attempt == 10 {
			return nil, fmt.Errorf("testenv: no free loopback address for the issuer: %w", err)
		}
	}
	cert, err := i.mintCertificate()
	if err == nil {
		i.signingKey, err = rsa.GenerateKey(rand.Reader, 2048)
	}
	if err != nil {
		_ = i.ln.Close()
		return nil, err
	}
	i.srv = &http.Server{
		Handler:           http.HandlerFunc(i.serve),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          nil,
	}
	go func() { _ = i.srv.ServeTLS(i.ln, "", "") }()
	return i, nil
}

// NewIssuerFor is NewIssuer for a test: it fails the test on error and closes the
// issuer when the test ends.
func NewIssuerFor(tb testing.TB) *Issuer {
	tb.Helper()
	i, err := NewIssuer()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = i.Close() })
	return i
}

// mintCertificate makes a CA and a serving certificate for Host signed by it; the
// server presents both, so the CA is the last certificate of its chain.
func (i *Issuer) mintCertificate() (tls.Certificate, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bucketkeeper-test-issuer-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return tls.Certificate{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: i.Host},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{i.Host},
	}, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	sum := sha1.Sum(caDER) //nolint:gosec // see the import
	i.Thumbprint = hex.EncodeToString(sum[:])
	i.CAPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	return tls.Certificate{Certificate: [][]byte{leafDER, caDER}, PrivateKey: key}, nil
}

// ServeFrom makes the issuer answer with what the API server at cfg serves.
func (i *Issuer) ServeFrom(cfg *rest.Config) error {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	hc.Timeout = 10 * time.Second
	i.mu.Lock()
	defer i.mu.Unlock()
	i.upstream, i.apiURL = hc, strings.TrimSuffix(cfg.Host, "/")
	return nil
}

// writeSigningKey writes the token signing key into dir, as a private key and a
// public key PEM file.
func (i *Issuer) writeSigningKey(dir string) (keyFile, pubFile string, err error) {
	keyFile, pubFile = filepath.Join(dir, "issuer-sa.key"), filepath.Join(dir, "issuer-sa.pub")
	pub, err := x509.MarshalPKIXPublicKey(&i.signingKey.PublicKey)
	if err != nil {
		return "", "", err
	}
	if err := writePEM(keyFile, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(i.signingKey)); err != nil {
		return "", "", err
	}
	return keyFile, pubFile, writePEM(pubFile, "PUBLIC KEY", pub)
}

// APIServerFlags are the kube-apiserver flags that make it sign tokens with the
// issuer's key under its URL and advertise the key set where the issuer serves it;
// the key files are written into dir.
func (i *Issuer) APIServerFlags(dir string) (map[string]string, error) {
	keyFile, pubFile, err := i.writeSigningKey(dir)
	if err != nil {
		return nil, err
	}
	return map[string]string{
		"service-account-issuer":           i.URL,
		"service-account-jwks-uri":         i.URL + IssuerJWKSPath,
		"service-account-key-file":         pubFile,
		"service-account-signing-key-file": keyFile,
	}, nil
}

// serve answers the two documents a relying party reads, from the API server, and
// nothing else.
func (i *Issuer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet || (r.URL.Path != "/.well-known/openid-configuration" && r.URL.Path != IssuerJWKSPath) {
		http.NotFound(w, r)
		return
	}
	i.mu.Lock()
	upstream, apiURL := i.upstream, i.apiURL
	i.mu.Unlock()
	if upstream == nil {
		http.Error(w, "no control plane yet", http.StatusServiceUnavailable)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, apiURL+r.URL.Path, nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	resp, err := upstream.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if r.URL.Path == IssuerJWKSPath && resp.StatusCode == http.StatusOK {
		body = i.withExtraKeys(body)
	}
	i.served.Add(1)
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
}

// Served counts the documents the issuer served from its control plane: a store that
// checked a token fetched at least two.
func (i *Issuer) Served() int64 { return i.served.Load() }

// DialContext dials addr, resolving the issuer's name to its address: for Go clients
// (the operator's thumbprint lookup in a test) that must reach it by name.
func (i *Issuer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if host, port, err := net.SplitHostPort(addr); err == nil && strings.EqualFold(host, i.Host) {
		ip, _, _ := net.SplitHostPort(i.Addr)
		addr = net.JoinHostPort(ip, port)
	}
	return (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, network, addr)
}

// HTTPClient reaches the issuer by its name and trusts its CA: what the operator
// computes a thumbprint with in a test (operator.Options.IssuerHTTPClient).
func (i *Issuer) HTTPClient() *http.Client {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(i.CAPEM)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext:     i.DialContext,
		TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
	}}
}

// Close stops serving. It is idempotent.
func (i *Issuer) Close() error {
	err := i.srv.Close()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
