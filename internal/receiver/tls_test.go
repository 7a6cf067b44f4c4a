package receiver

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// selfSigned writes a fresh self-signed certificate for 127.0.0.1 and its key as PEM
// files, and returns their paths and a pool trusting the certificate.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "bucketkeeper-receiver-test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func signedPost(t *testing.T, url string, body []byte) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	ts := unixTS(time.Now())
	req.Header.Set(TimestampHeader, ts)
	req.Header.Set(SignatureHeader, Sign(testSecret, ts, body))
	return req
}

// With a certificate the receiver serves HTTPS: a client verifying it against the
// certificate gets its request served; one that does not trust it, or speaks plain
// HTTP, gets nothing done.
func TestStartServesTLS(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t)
	fake := newFakeRequester()
	r := newTestReceiver(t, fake, func(o *Options) { o.Clock = nil; o.TLSCertFile, o.TLSKeyFile = certFile, keyFile })
	cancel, done := startReceiver(t, r)
	defer cancel()
	url := "https://" + r.Addr() + ProbePath

	verifying := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	res, err := verifying.Do(signedPost(t, url, []byte(directPhotos)))
	if err != nil {
		t.Fatalf("HTTPS request with the certificate trusted: %v", err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusAccepted || res.TLS == nil || res.TLS.Version < tls.VersionTLS12 {
		t.Fatalf("HTTPS request: %d %s (TLS %v), want 202 over TLS 1.2+", res.StatusCode, body, res.TLS)
	}

	// The system roots do not include a self-signed certificate: verification fails.
	untrusting := &http.Client{Timeout: 10 * time.Second}
	if _, err := untrusting.Do(signedPost(t, url, []byte(`{"namespace":"team-a","name":"logs"}`))); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("request not trusting the certificate: err = %v, want a certificate error", err)
	}
	res, err = untrusting.Do(signedPost(t, "http://"+r.Addr()+ProbePath, []byte(`{"namespace":"team-a","name":"logs"}`)))
	if err == nil {
		res.Body.Close()
		if res.StatusCode == http.StatusAccepted {
			t.Fatal("plain HTTP to the TLS port was served")
		}
	}
	if got := fake.Probes(); len(got) != 1 || got[0] != keyPhotos {
		t.Fatalf("probes = %v, want only the verified HTTPS request's", got)
	}
	cancel()
	waitStopped(t, done)
}

func TestNewRejectsBadTLSFiles(t *testing.T) {
	certFile, keyFile, _ := selfSigned(t)
	otherCert, _, _ := selfSigned(t)
	cases := map[string]struct{ cert, key, want string }{
		"certificate without key": {cert: certFile, want: "both"},
		"key without certificate": {key: keyFile, want: "both"},
		"missing file":            {cert: certFile, key: filepath.Join(t.TempDir(), "absent"), want: "absent"},
		"key of another cert":     {cert: otherCert, key: keyFile, want: "private key does not match"},
		"key file is a cert":      {cert: certFile, key: certFile, want: certFile},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := New(Options{BindAddress: "127.0.0.1:0", ClusterWideSecret: testSecret, Requester: newFakeRequester(), TLSCertFile: c.cert, TLSKeyFile: c.key})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New = %v, want an error mentioning %q", err, c.want)
			}
			if strings.Contains(err.Error(), "PRIVATE KEY") {
				t.Fatalf("error quotes key material: %v", err)
			}
		})
	}
}
