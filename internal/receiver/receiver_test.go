package receiver

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
)

// The vector was computed independently (Python hmac) so Sign is pinned to the
// documented wire format, not just to itself.
func TestSignMatchesWireFormat(t *testing.T) {
	got := Sign(testSecret, "1760000000", []byte(directPhotos))
	want := "sha256=57ee7a88ac78504d29eb7fbb61174c462125cf7e3abb274c5f66fd175e0584e0"
	if got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
}

func TestLoadSecret(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name    string
		path    string
		want    string
		wantErr string
	}{
		{name: "trailing newline trimmed", path: write("nl", "0123456789abcdef\n"), want: "0123456789abcdef"},
		{name: "CRLF trimmed", path: write("crlf", "0123456789abcdef-xyz\r\n"), want: "0123456789abcdef-xyz"},
		{name: "inner whitespace kept", path: write("inner", "0123456789 abcdef"), want: "0123456789 abcdef"},
		{name: "empty", path: write("empty", ""), wantErr: "secret is empty"},
		{name: "only a newline", path: write("onlynl", "\n"), wantErr: "secret is empty"},
		{name: "too short", path: write("short", "short-key\n"), wantErr: "9 bytes, need at least 16"},
		{name: "missing file", path: filepath.Join(dir, "absent"), wantErr: "reading receiver secret"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := LoadSecret(c.path)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want it to mention %q", err, c.wantErr)
				}
				if strings.Contains(err.Error(), "short-key") {
					t.Errorf("error reveals the key: %v", err)
				}
				return
			}
			if err != nil || string(got) != c.want {
				t.Fatalf("LoadSecret = %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	valid := Options{BindAddress: "127.0.0.1:0", ClusterWideSecret: testSecret, Requester: newFakeRequester()}
	cases := map[string]func(*Options){
		"no bind address":  func(o *Options) { o.BindAddress = "" },
		"no requester":     func(o *Options) { o.Requester = nil },
		"no key at all":    func(o *Options) { o.ClusterWideSecret = nil },
		"short secret":     func(o *Options) { o.ClusterWideSecret = []byte("too-short") },
		"empty secret":     func(o *Options) { o.ClusterWideSecret = []byte{} },
		"short, with keys": func(o *Options) { o.ClusterWideSecret, o.NamespacedKeys = []byte("too-short"), true },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			opts := valid
			mutate(&opts)
			if _, err := New(opts); err == nil {
				t.Fatal("New accepted invalid options")
			}
		})
	}
	r, err := New(valid)
	if err != nil {
		t.Fatalf("New(valid): %v", err)
	}
	perKey := r.keys.clusterWide.state.limiter
	if r.maxAge != 5*time.Minute || perKey.Burst() != 40 || float64(perKey.Limit()) != 20 {
		t.Errorf("defaults: maxAge %v burst %d rps %v per key", r.maxAge, perKey.Burst(), perKey.Limit())
	}
	if r.total.Burst() != 80 || float64(r.total.Limit()) != 40 {
		t.Errorf("defaults: burst %d rps %v in total", r.total.Burst(), r.total.Limit())
	}
	if _, err := New(Options{BindAddress: "127.0.0.1:0", Requester: newFakeRequester(), NamespacedKeys: true}); err != nil {
		t.Errorf("New with namespaced keys only: %v", err)
	}
	if r.maxConns != defaults.ReceiverMaxConnections || cap(r.bodies) != defaults.ReceiverMaxConnections {
		t.Errorf("defaults: %d connections, %d body slots; want %d each", r.maxConns, cap(r.bodies), defaults.ReceiverMaxConnections)
	}
	if _, ok := r.clock.(clock.RealClock); !ok {
		t.Errorf("default clock is %T, want clock.RealClock", r.clock)
	}
	if r.NeedLeaderElection() {
		t.Error("NeedLeaderElection = true; every replica must serve")
	}
}

// startReceiver runs Start in the background and waits until it listens.
func startReceiver(t *testing.T, r *Receiver) (cancel context.CancelFunc, done <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.Start(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for r.Addr() == "" {
		select {
		case err := <-errc:
			cancel()
			t.Fatalf("Start returned early: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatal("receiver did not start listening")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return cancel, errc
}

func waitStopped(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Start returned %v, want nil", err)
		}
	case <-time.After(6 * time.Second):
		t.Fatal("Start did not return within 6s of cancel")
	}
}

func post(t *testing.T, addr string, body []byte, secret []byte) (int, string) {
	t.Helper()
	code, resBody, err := doPost(addr, body, secret)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	return code, resBody
}

// doPost sends a request signed now with secret; safe to call off the test goroutine.
func doPost(addr string, body []byte, secret []byte) (int, string, error) {
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+ProbePath, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	ts := unixTS(time.Now())
	req.Header.Set(TimestampHeader, ts)
	req.Header.Set(SignatureHeader, Sign(secret, ts, body))
	res, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, string(b), err
}

// The Runnable end to end: real TCP on 127.0.0.1:0, a real signed request, a clean stop.
func TestStartServesOverTCPAndStops(t *testing.T) {
	fake := newFakeRequester()
	r := newTestReceiver(t, fake, func(o *Options) { o.Clock = nil }) // real clock: real timestamps
	cancel, done := startReceiver(t, r)
	defer cancel()
	addr := r.Addr()
	if host, _, _ := net.SplitHostPort(addr); host != "127.0.0.1" {
		t.Fatalf("Addr = %q, want 127.0.0.1:<port>", addr)
	}

	code, body := post(t, addr, []byte(directPhotos), testSecret)
	if code != http.StatusAccepted || !strings.Contains(body, "team-a/photos") {
		t.Fatalf("signed request: %d %q, want 202 naming team-a/photos", code, body)
	}
	if got := fake.Probes(); len(got) != 1 || got[0] != keyPhotos {
		t.Fatalf("probes = %v", got)
	}
	if code, _ := post(t, addr, []byte(directPhotos), []byte("some-other-secret-value")); code != http.StatusUnauthorized {
		t.Fatalf("forged request: %d, want 401", code)
	}
	res, err := http.Get("http://" + addr + HealthzPath)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %v %v", res, err)
	}
	res.Body.Close()

	cancel()
	waitStopped(t, done)
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		conn.Close()
		t.Fatal("still accepting connections after Start returned")
	}
	if err := r.Start(context.Background()); err == nil {
		t.Fatal("second Start succeeded")
	}
}

// A request in flight when ctx ends still gets its answer: shutdown is graceful.
func TestStartDrainsInFlightRequests(t *testing.T) {
	fake := newFakeRequester()
	fake.block = make(chan struct{})
	r := newTestReceiver(t, fake, func(o *Options) { o.Clock = nil })
	cancel, done := startReceiver(t, r)
	defer cancel()

	type result struct {
		code int
		body string
		err  error
	}
	resc := make(chan result, 1)
	go func() {
		code, body, err := doPost(r.Addr(), []byte(directPhotos), testSecret)
		resc <- result{code, body, err}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(strings.Join(fake.Calls(), ","), "RequestProbe") {
		if time.Now().After(deadline) {
			t.Fatal("request never reached RequestProbe")
		}
		time.Sleep(5 * time.Millisecond)
	}
	addr := r.Addr()
	cancel()
	// Shutdown begins by closing the listener: once a new connection is refused, the
	// handler may be released.
	for deadline := time.Now().Add(5 * time.Second); ; {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			break
		}
		_ = conn.Close()
		if time.Now().After(deadline) {
			t.Fatal("the receiver still accepts connections after its context ended")
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(fake.block)

	if res := <-resc; res.err != nil || res.code != http.StatusAccepted {
		t.Fatalf("in-flight request: %d %q %v, want 202", res.code, res.body, res.err)
	}
	waitStopped(t, done)
}

func TestStartFailsWhenAddressInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	r := newTestReceiver(t, newFakeRequester(), func(o *Options) { o.BindAddress = ln.Addr().String() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = r.Start(ctx)
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Start on a busy port = %v, want a listen error", err)
	}
}

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
