package main

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"testing"
)

// rootsChild marks the re-executed test binary of TestPublicRootsWithoutSystemBundle.
const rootsChild = "BUCKETKEEPER_TEST_ROOTS_CHILD"

// TestPublicRootsWithoutSystemBundle: the release image holds the binary alone, no CA
// bundle, so the binary must trust the public roots by itself (roots.go). The test
// binary runs again with the system's bundle out of reach (SSL_CERT_FILE and
// SSL_CERT_DIR naming nothing), as in the image, and verifies a public root (ISRG Root
// X1, Let's Encrypt's) against the default roots: it verifies only if they hold it.
func TestPublicRootsWithoutSystemBundle(t *testing.T) {
	if os.Getenv(rootsChild) != "" {
		data, err := os.ReadFile("testdata/isrg-root-x1.pem")
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(data)
		if block == nil {
			t.Fatal("testdata/isrg-root-x1.pem holds no PEM block")
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cert.Verify(x509.VerifyOptions{}); err != nil {
			t.Fatalf("a public root does not verify without the system's CA bundle: %v", err)
		}
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestPublicRootsWithoutSystemBundle$", "-test.count=1")
	cmd.Env = append(os.Environ(), rootsChild+"=1", "SSL_CERT_FILE=/nonexistent/ca.pem", "SSL_CERT_DIR=/nonexistent")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("without a CA bundle: %v\n%s", err, out)
	}
}
