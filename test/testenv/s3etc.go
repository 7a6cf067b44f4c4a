package testenv

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// A store checking a web-identity token fetches the issuer's discovery document and
// key set over HTTPS, verifying the certificate against the CA bundle at
// /etc/ssl/certs, and RGW also connects to the key set's host on port 443 to compare
// the thumbprint of the certificate presented with the OIDC provider's; the name
// resolves through /etc/hosts. The harness's peers run with no chroot, so those are
// the machine's files; but the harness's issuer has a name of its own, which only the
// processes that check tokens should know: RGW's gateway and Versity's IAM service
// (which serves STS). So they run in a mount namespace of their own (one `unshare
// --mount` that execs them: their PID stays theirs, and the namespace and its one bind
// mount go with them) where /etc is a directory of the server's: hosts, nsswitch.conf
// and a CA bundle, which TrustIssuer extends. The other processes run as before.
//
// A mount namespace takes root (CAP_SYS_ADMIN): without it these processes run with
// the machine's /etc, and TrustIssuer says why it cannot. make test runs as root (so
// does CI, which runs it on a fresh machine through .ci/run); the install test's node
// needs root as well.

// rgwSTSConf enables STS on the RGW gateway: its key seals session tokens (16
// characters, AES-128), and rgw_enable_jwks_url_verification (off by default since
// 20.2) makes it check the key set's host against the provider's thumbprints, as
// AWS did for every provider until 2024 and a store admin should.
func rgwSTSConf() string {
	return fmt.Sprintf(`# STS: AssumeRoleWithWebIdentity on the S3 port; the key set's host is checked
# against the OIDC provider's thumbprints (s3etc.go).
rgw s3 auth use sts = true
rgw sts key = %s
rgw enable jwks url verification = true
`, randomString(16, anyAlnum))
}

// makePrivateEtc writes the server's own /etc, where this process may make a mount
// namespace (root).
func (s *S3Server) makePrivateEtc() error {
	if os.Geteuid() != 0 {
		return nil
	}
	etc := filepath.Join(s.dir, "etc")
	if err := os.MkdirAll(filepath.Join(etc, "ssl", "certs"), 0o755); err != nil {
		return err
	}
	for name, content := range map[string]string{
		"hosts":                         "127.0.0.1 localhost\n",
		"nsswitch.conf":                 "hosts: files\n",
		"ssl/certs/ca-certificates.crt": "",
	} {
		if err := os.WriteFile(filepath.Join(etc, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	s.etc = etc
	return nil
}

// inPrivateEtc is the command that runs bin with args in the server's own /etc, or
// bin and args themselves where there is none.
func (s *S3Server) inPrivateEtc(bin string, args []string) (string, []string) {
	if s.etc == "" {
		return bin, args
	}
	// $1 is the directory, then the command.
	return "/usr/bin/unshare", append([]string{"--mount", "--propagation", "private", "/bin/sh", "-c",
		`mount --bind "$1" /etc && shift && exec "$@"`, "private-etc", s.etc, bin}, args...)
}

// TrustIssuer lets the server check tokens of iss (RGW's gateway, Versity's IAM
// service): its name resolves to its address and its CA is trusted, in their own
// /etc, from their next lookup on. It fails where they run with the machine's /etc
// (not root), and for the other kinds.
func (s *S3Server) TrustIssuer(iss *Issuer) error {
	if s.Kind != RGW && s.Kind != Versity {
		return fmt.Errorf("testenv: %s checks no web-identity token against an issuer here", s.Kind)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.etc == "" {
		return errors.New("testenv: the store runs with the machine's /etc (a mount namespace of its own takes root): it cannot resolve a test issuer")
	}
	ip, _, err := net.SplitHostPort(iss.Addr)
	if err != nil {
		return err
	}
	if err := appendFile(filepath.Join(s.etc, "hosts"), ip+" "+iss.Host+"\n"); err != nil {
		return err
	}
	return appendFile(filepath.Join(s.etc, "ssl", "certs", "ca-certificates.crt"), string(iss.CAPEM))
}

// appendFile appends text to the file at path.
func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	return errors.Join(err, f.Close())
}
