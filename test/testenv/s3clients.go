package testenv

import (
	"crypto/rand"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/bucketkeeper/bucketkeeper/internal/localpeers"
)

// What a test reads of a running S3Server: its process, directory, ports and log, and
// clients for its identities.

// PID returns the server's process ID, or 0 while it is stopped.
func (s *S3Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || s.proc.Exited() {
		return 0
	}
	return s.proc.PID()
}

// Dir returns the server's temporary directory (data, config, log); Close removes it.
func (s *S3Server) Dir() string { return s.dir }

// Ports returns the named loopback ports the server was told to listen on.
func (s *S3Server) Ports() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string]int, len(s.ports))
	for k, v := range s.ports {
		m[k] = v
	}
	return m
}

// LogTail returns the last lines of the server's log, for test failure messages.
func (s *S3Server) LogTail() string { return localpeers.LogTail(s.logPath) }

// Client returns an S3 client for the admin account: path-style, static
// credentials, no shared config or environment lookups.
func (s *S3Server) Client() *s3.Client {
	return s.newClient(s.AccessKeyID, s.SecretAccessKey)
}

// OtherClient returns an S3 client for the second account, or nil if this kind
// has none.
func (s *S3Server) OtherClient() *s3.Client {
	if s.OtherAccessKeyID == "" {
		return nil
	}
	return s.newSessionClient(s.OtherAccessKeyID, s.OtherSecretAccessKey, s.OtherSessionToken)
}

// ScopedClient returns an S3 client for the bucket-scoped identity, or nil if
// this kind has none.
func (s *S3Server) ScopedClient() *s3.Client {
	if s.ScopedAccessKeyID == "" {
		return nil
	}
	return s.newClient(s.ScopedAccessKeyID, s.ScopedSecretAccessKey)
}

// loopbackHTTP ignores proxy settings: test traffic must stay on 127.0.0.1.
var loopbackHTTP = &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16}}

func (s *S3Server) newClient(access, secret string) *s3.Client {
	return s.newSessionClient(access, secret, "")
}

// newSessionClient is newClient for a session's credentials (token "": a key's).
func (s *S3Server) newSessionClient(access, secret, token string) *s3.Client {
	return s3.New(s3.Options{
		Region:       s.Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(access, secret, token),
		HTTPClient:   loopbackHTTP,
	})
}

const (
	upperAlnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	anyAlnum   = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	lowerAlnum = "abcdefghijklmnopqrstuvwxyz0123456789"
)

// randomString returns n characters from alphabet, read from crypto/rand.
func randomString(n int, alphabet string) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
