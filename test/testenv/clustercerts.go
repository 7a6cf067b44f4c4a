package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// clusterCerts are the test cluster's credentials, written as PEM files into one
// directory: a CA, the API server's serving certificate (valid for every name a Pod
// or the test uses for it), one client certificate in system:masters for the test and
// the cluster's own components, and the ServiceAccount token signing key.
type clusterCerts struct {
	dir string
}

func (c clusterCerts) path(name string) string { return filepath.Join(c.dir, name) }

// CA, serving and client certificate and key files, and the ServiceAccount key.
func (c clusterCerts) caFile() string      { return c.path("ca.crt") }
func (c clusterCerts) servingCert() string { return c.path("apiserver.crt") }
func (c clusterCerts) servingKey() string  { return c.path("apiserver.key") }
func (c clusterCerts) adminCert() string   { return c.path("admin.crt") }
func (c clusterCerts) adminKey() string    { return c.path("admin.key") }
func (c clusterCerts) saKey() string       { return c.path("sa.key") }
func (c clusterCerts) saPublicKey() string { return c.path("sa.pub") }

// writeClusterCerts mints every credential into dir. serviceIP and nodeIP are the
// addresses Pods reach the API server by (the kubernetes Service, the node's bridge).
func writeClusterCerts(dir string, serviceIP, nodeIP net.IP) (clusterCerts, error) {
	c := clusterCerts{dir: dir}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return c, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bucketkeeper-test-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return c, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return c, err
	}
	if err := writePEM(c.caFile(), "CERTIFICATE", caDER); err != nil {
		return c, err
	}
	issue := func(serial int64, tmpl *x509.Certificate, certFile, keyFile string) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(24*time.Hour)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return err
		}
		if err := writePEM(certFile, "CERTIFICATE", der); err != nil {
			return err
		}
		return writePEM(keyFile, "EC PRIVATE KEY", keyDER)
	}
	if err := issue(2, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), serviceIP, nodeIP},
	}, c.servingCert(), c.servingKey()); err != nil {
		return c, err
	}
	if err := issue(3, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "bucketkeeper-test-admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, c.adminCert(), c.adminKey()); err != nil {
		return c, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return c, err
	}
	saDER, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return c, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return c, err
	}
	if err := writePEM(c.saKey(), "EC PRIVATE KEY", saDER); err != nil {
		return c, err
	}
	return c, writePEM(c.saPublicKey(), "PUBLIC KEY", pubDER)
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
