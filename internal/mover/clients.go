package mover

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// Credentials are one store's keys. They never appear in a Spec, a flag, a log line
// or a checkpoint: the Job mounts them from a Secret in the operator's namespace
// (ReadCredentialsDir), the in-process runner is handed them.
type Credentials struct {
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
}

// Keys of the credentials a mover reads, the files of its credentials directory (the
// Secret the Job mounts): one triple per side.
const (
	CredentialsSourceAccessKeyID     = "source-access-key-id"
	CredentialsSourceSecretAccessKey = "source-secret-access-key"
	CredentialsSourceSessionToken    = "source-session-token"
	CredentialsTargetAccessKeyID     = "target-access-key-id"
	CredentialsTargetSecretAccessKey = "target-secret-access-key"
	CredentialsTargetSessionToken    = "target-session-token"
)

// CredentialsData is the data of the Secret a mover Job mounts.
func CredentialsData(source, target Credentials) map[string][]byte {
	data := map[string][]byte{
		CredentialsSourceAccessKeyID: []byte(source.AccessKeyID), CredentialsSourceSecretAccessKey: []byte(source.SecretAccessKey),
		CredentialsTargetAccessKeyID: []byte(target.AccessKeyID), CredentialsTargetSecretAccessKey: []byte(target.SecretAccessKey),
	}
	if source.SessionToken != "" {
		data[CredentialsSourceSessionToken] = []byte(source.SessionToken)
	}
	if target.SessionToken != "" {
		data[CredentialsTargetSessionToken] = []byte(target.SessionToken)
	}
	return data
}

// ReadCredentialsDir reads both sides' credentials from the files of dir (a mounted
// Secret with the keys of CredentialsData). A side without any file uses the SDK's
// default chain (a pod identity); a side with half a key pair is an error naming the
// missing file, never a value.
func ReadCredentialsDir(dir string) (source, target Credentials, err error) {
	read := func(name string) (string, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			return "", nil
		}
		return strings.TrimSpace(string(b)), err
	}
	side := func(id, secret, token string) (Credentials, error) {
		var c Credentials
		var errs [3]error
		c.AccessKeyID, errs[0] = read(id)
		c.SecretAccessKey, errs[1] = read(secret)
		c.SessionToken, errs[2] = read(token)
		if err := errors.Join(errs[:]...); err != nil {
			return c, err
		}
		if (c.AccessKeyID == "") != (c.SecretAccessKey == "") {
			return c, fmt.Errorf("credentials directory %s has only one of %s and %s", dir, id, secret)
		}
		return c, nil
	}
	if source, err = side(CredentialsSourceAccessKeyID, CredentialsSourceSecretAccessKey, CredentialsSourceSessionToken); err != nil {
		return source, target, err
	}
	target, err = side(CredentialsTargetAccessKeyID, CredentialsTargetSecretAccessKey, CredentialsTargetSessionToken)
	return source, target, err
}

// Stores are the two clients of a move. Each carries the move's share of its store's
// request budget and keeps a connection per transfer.
type Stores struct {
	Source, Target s3.Client
}

// NewStores builds the clients of spec's two buckets with factory (nil: s3.New).
// observe, if set, sees every request ("source" or "target", then as s3.Config's
// Observer).
func NewStores(ctx context.Context, spec *Spec, source, target Credentials, factory s3.Factory, observe func(side, op string, status int, err error)) (Stores, error) {
	if factory == nil {
		factory = s3.New
	}
	limits := spec.Limits.WithDefaults()
	build := func(side string, b Bucket, c Credentials) (s3.Client, error) {
		cfg := s3.Config{
			Endpoint: b.Endpoint, Region: b.Region, ForcePathStyle: b.ForcePathStyle,
			AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, SessionToken: c.SessionToken,
			CABundle: []byte(b.CABundle), InsecureSkipTLSVerify: b.InsecureSkipTLSVerify,
			RequestTimeout:    limits.RequestTimeout.Duration,
			RequestsPerSecond: b.RequestsPerSecond, Burst: b.Burst,
			// A GET and a write per transfer, and a listing besides.
			MaxIdleConnsPerHost: 2*limits.Concurrency + 2,
		}
		if observe != nil {
			cfg.Observer = func(op string, status int, err error) { observe(side, op, status, err) }
		}
		cl, err := factory(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("%s store: %w", side, err)
		}
		return cl, nil
	}
	src, err := build(SideSource, spec.Source, source)
	if err != nil {
		return Stores{}, err
	}
	tgt, err := build(SideTarget, spec.Target, target)
	if err != nil {
		return Stores{}, err
	}
	return Stores{Source: src, Target: tgt}, nil
}

// The two sides of a move, as observers and messages name them.
const (
	SideSource = "source"
	SideTarget = "target"
)
