package testenv_test

import (
	"context"
	"crypto/sha1" //nolint:gosec // the thumbprint is SHA-1 by definition
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestIssuer: a control plane started with an issuer signs ServiceAccount tokens
// for the issuer's URL, and the issuer serves its discovery document and key set
// over HTTPS on port 443 of its own loopback address, under a name the machine's
// resolver does not know, presenting its CA last (the certificate a thumbprint is
// of).
func TestIssuer(t *testing.T) {
	iss := testenv.NewIssuerFor(t)
	cp, err := testenv.StartControlPlaneWith(testenv.ControlPlaneOptions{Issuer: iss})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	if addrs, err := net.DefaultResolver.LookupHost(ctx, iss.Host); err == nil {
		t.Errorf("the machine resolves the issuer's name %s: %v", iss.Host, addrs)
	}
	if hosts, _ := os.ReadFile("/etc/hosts"); strings.Contains(string(hosts), iss.Host) {
		t.Errorf("the machine's /etc/hosts names the issuer")
	}

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(iss.CAPEM)
	tlsConfig := &tls.Config{RootCAs: roots, ServerName: iss.Host, MinVersion: tls.VersionTLS12}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", iss.Addr, tlsConfig)
	if err != nil {
		t.Fatalf("TLS to the issuer, trusting its CA: %v", err)
	}
	presented := conn.ConnectionState().PeerCertificates
	conn.Close()
	last := sha1.Sum(presented[len(presented)-1].Raw) //nolint:gosec // see the import
	if got := hex.EncodeToString(last[:]); len(presented) != 2 || got != iss.Thumbprint {
		t.Errorf("the issuer presents %d certificates, the last of thumbprint %s; want 2, the CA's %s", len(presented), got, iss.Thumbprint)
	}

	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: iss.DialContext, TLSClientConfig: tlsConfig}}
	var discovery struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	getJSON(t, hc, iss.URL+"/.well-known/openid-configuration", &discovery)
	if discovery.Issuer != iss.URL || discovery.JWKSURI != iss.URL+testenv.IssuerJWKSPath {
		t.Errorf("discovery document: issuer %q, jwks_uri %q; want %s and its %s", discovery.Issuer, discovery.JWKSURI, iss.URL, testenv.IssuerJWKSPath)
	}
	var jwks struct {
		Keys []struct {
			Kty, Alg, N, E string
		} `json:"keys"`
	}
	getJSON(t, hc, discovery.JWKSURI, &jwks)
	if len(jwks.Keys) != 1 || jwks.Keys[0].Kty != "RSA" || jwks.Keys[0].Alg != "RS256" || jwks.Keys[0].N == "" {
		t.Errorf("key set %+v, want one RS256 key with its modulus (RGW checks no other kind without x5c)", jwks.Keys)
	}
	if resp, err := hc.Get(iss.URL + "/api/v1/namespaces"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("the issuer passes on another path of the API server: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	cs := kubernetes.NewForConfigOrDie(cp.Config)
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, "app", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"test"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(tr.Status.Token, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims struct{ Iss, Sub string }
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Iss != iss.URL || claims.Sub != "system:serviceaccount:default:app" {
		t.Errorf("token claims iss %q sub %q (%v), want %s and the ServiceAccount", claims.Iss, claims.Sub, err, iss.URL)
	}
	if iss.Served() != 2 {
		t.Errorf("the issuer counted %d documents, want 2", iss.Served())
	}
}

func getJSON(t *testing.T, hc *http.Client, url string, into any) {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, body)
	}
	if err := json.Unmarshal(body, into); err != nil {
		t.Fatalf("GET %s: %v: %s", url, err, body)
	}
}

// testResolvesIssuer: the store's process that checks tokens (pid: RGW's gateway,
// Versity's IAM service) runs in a mount namespace of its own, whose /etc (and
// nothing of the machine's) learns an issuer's name and CA.
func testResolvesIssuer(t *testing.T, s *testenv.S3Server, pid int) {
	t.Helper()
	own, _ := os.Readlink("/proc/self/ns/mnt")
	theirs, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/mnt")
	if err != nil || theirs == own {
		t.Fatalf("the mount namespace of PID %d, %q (%v), is this process's %q", pid, theirs, err, own)
	}
	iss := testenv.NewIssuerFor(t)
	if err := s.TrustIssuer(iss); err != nil {
		t.Fatal(err)
	}
	hosts, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/root/etc/hosts")
	if err != nil || !strings.Contains(string(hosts), iss.Host) {
		t.Errorf("the /etc/hosts of PID %d does not name the issuer: %q, %v", pid, hosts, err)
	}
	if machine, _ := os.ReadFile("/etc/hosts"); strings.Contains(string(machine), iss.Host) {
		t.Errorf("the machine's /etc/hosts names the issuer")
	}
}
