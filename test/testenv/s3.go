package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/bucketkeeper/bucketkeeper/internal/localpeers"
)

// S3Kind names an S3 implementation the harness can run.
type S3Kind string

const (
	// SeaweedFS runs `weed mini`: master, volume, filer and S3 gateway in one process.
	SeaweedFS S3Kind = "seaweedfs"
	// Versity runs the Versity S3 Gateway over a plain directory (posix backend).
	Versity S3Kind = "versity"
	// RGW runs Ceph's RADOS Gateway on a one-monitor, one-OSD (in memory) Ceph
	// cluster (s3rgw.go).
	RGW S3Kind = "rgw"
	// MinIO runs one MinIO server over one directory (s3minio.go).
	MinIO S3Kind = "minio"
	// Moto runs moto, the AWS emulator, as the AWS stand-in for what only AWS
	// does (s3moto.go). It is not one of the stores every store test runs on.
	Moto S3Kind = "moto"
)

// readyTimeout bounds how long a start may take before it fails with the
// server's log: a cold weed mini on a busy 2-core machine needs ~10-20s.
const readyTimeout = 60 * time.Second

// S3Server is one S3 server process owned by a test. Stop and Start simulate an
// outage without losing data; Close ends it for good.
//
// Every kind gets a second, independent account (OtherAccessKeyID /
// OtherSecretAccessKey) allowed to create buckets, for tests of "the bucket name
// is taken by someone else": SeaweedFS as a second identity with its own account
// in the static S3 config file, Versity as an IAM user of its standalone IAM
// service with a policy allowing every bucket, RGW as the root user of a second
// Ceph account, MinIO as a session of its root user (OtherSessionToken). The fields
// are empty for a kind that cannot offer one. On SeaweedFS CreateBucket on the other account's bucket
// returns BucketAlreadyExists; on Versity an IAM user belongs to root's account,
// so root's CreateBucket of a bucket the user created answers
// BucketAlreadyOwnedByYou. SeaweedFS only lets identities holding the Admin
// action create buckets, so its second identity is a gateway admin too and sees
// (and may touch) every bucket.
//
// Every kind serves the AWS IAM API (IAMEndpoint, signed for IAMRegion) to the
// admin identity: SeaweedFS and RGW on the S3 port (on RGW the admin identity is
// the root user of a Ceph account, the one that may manage the account's IAM
// users), Versity from a second process, its standalone IAM service, which the
// gateway asks over a unix socket. MinIO serves none (IAMEndpoint is empty).
type S3Server struct {
	Kind            S3Kind
	Endpoint        string // "http://127.0.0.1:PORT"
	Region          string // "us-east-1"
	AccessKeyID     string // admin/root account
	SecretAccessKey string

	OtherAccessKeyID     string // a second account, not the owner of AccessKeyID's buckets
	OtherSecretAccessKey string
	OtherSessionToken    string // MinIO only: the second identity is a session

	IAMEndpoint string // "http://127.0.0.1:PORT", the AWS IAM API
	IAMRegion   string // what IAM requests are signed for: "us-east-1"

	// ScopedBucket, ScopedAccessKeyID and ScopedSecretAccessKey (SeaweedFS only,
	// empty for Versity) are a third, least-privilege identity in the admin's
	// account: every permission it has is scoped to the one bucket ScopedBucket,
	// the way an AWS IAM user with a bucket-scoped policy and no
	// s3:ListAllMyBuckets is. It cannot create buckets, so the bucket does not
	// exist until a test creates it with the admin client. SeaweedFS answers its
	// ListBuckets with only the buckets it may see, not AccessDenied.
	ScopedBucket          string
	ScopedAccessKeyID     string
	ScopedSecretAccessKey string

	// AdminOpsAccessKeyID and AdminOpsSecretAccessKey (RGW only) sign RGW's admin
	// operations API (/admin/bucket, /admin/user, /admin/usage: bucket stats and
	// quotas) on the S3 endpoint: a user outside any account holding the buckets,
	// users and usage capabilities. It owns no bucket and is no S3 admin.
	AdminOpsAccessKeyID     string
	AdminOpsSecretAccessKey string

	// BucketOwnerID is the owner bucket ACLs name for buckets AccessKeyID creates,
	// where ListBuckets names another (the identity, not its account): the value
	// for an ObjectStore's guardrails.adoptionBucketOwner. SeaweedFS: the
	// identity's account; RGW: our account's ID; Versity: "" (not needed).
	BucketOwnerID string

	// OtherAccountID (RGW only) is the second account's ID, for policies that name it
	// as a principal (arn:aws:iam::<id>:root).
	OtherAccountID string

	mu      sync.Mutex
	bin     string
	dir     string // everything this server owns lives here
	logPath string
	// logStart is the log's size when the current process was started: what
	// it wrote since then is read from here (the log keeps every start).
	logStart int64
	ports    map[string]int // named ports the process listens on
	args     []string
	env      []string
	proc     *Process
	closed   bool

	// A helper process started before the main one (Versity's IAM service).
	iamArgs []string
	iamLog  string
	iamProc *Process

	// RGW's monitor and OSD, which run from the first start until Close.
	rgw *rgwCluster
	// etc is the /etc of the processes that check web-identity tokens (s3etc.go);
	// "" where they run with the machine's.
	etc string
	// motoCmd is the loader that runs moto's python3 (bin is moto's root).
	motoCmd string
	opts    S3Options
}

// StartS3 starts a fresh server of the given kind with an empty data directory,
// free loopback ports and random credentials, and returns once a signed
// ListBuckets succeeds.
func StartS3(kind S3Kind) (*S3Server, error) { return StartS3With(kind, S3Options{}) }

// S3Options adjust StartS3With; the zero value is StartS3.
type S3Options struct {
	// RGWMemoryBytes sizes RGW's object store, which is memory (memstore): 1 GiB
	// unless set. The benchmark's move of 1.4 GiB needs more.
	RGWMemoryBytes int64
	// RGWSTS makes RGW serve STS and check web-identity tokens (keyless access), with
	// its key set's host verified against the provider's thumbprints. RGW so
	// configured answers a request signed with an unknown key or a wrong secret
	// AccessDenied, not InvalidAccessKeyId or SignatureDoesNotMatch (it tries the STS
	// engine after its own), which is why it is an option: the contracts that pin
	// those answers run on a plain RGW.
	RGWSTS bool
}

// StartS3With is StartS3 with options.
func StartS3With(kind S3Kind, opts S3Options) (*S3Server, error) {
	var peer string
	switch kind {
	case SeaweedFS:
		peer = "weed"
	case Versity:
		peer = "versitygw"
	case RGW:
		peer = "rgw"
	case MinIO:
		peer = "minio"
	case Moto:
		peer = "moto"
	default:
		return nil, fmt.Errorf("testenv: unknown S3 kind %q", kind)
	}
	bin, err := localpeers.Binary(peer)
	if err != nil {
		return nil, err
	}
	dir, err := localpeers.NewTempDir()
	if err != nil {
		return nil, err
	}
	s := &S3Server{
		Kind:                 kind,
		Region:               "us-east-1",
		IAMRegion:            "us-east-1",
		AccessKeyID:          randomString(20, upperAlnum),
		SecretAccessKey:      randomString(40, anyAlnum),
		OtherAccessKeyID:     randomString(20, upperAlnum),
		OtherSecretAccessKey: randomString(40, anyAlnum),
		bin:                  bin,
		dir:                  dir,
		logPath:              filepath.Join(dir, "server.log"),
		opts:                 opts,
	}
	if kind == Versity || kind == Moto || kind == MinIO { // Versity's second account is an IAM user, MinIO's a session: the server makes their keys
		s.OtherAccessKeyID, s.OtherSecretAccessKey = "", ""
	}
	if kind == RGW { // bin is the Debian root the cluster's programs run from
		s.rgw = &rgwCluster{root: bin}
		s.AdminOpsAccessKeyID = randomString(20, upperAlnum)
		s.AdminOpsSecretAccessKey = randomString(40, anyAlnum)
	}
	if kind == SeaweedFS {
		s.BucketOwnerID = seaweedAccountID
		s.ScopedBucket = "scoped-" + randomString(12, lowerAlnum)
		s.ScopedAccessKeyID = randomString(20, upperAlnum)
		s.ScopedSecretAccessKey = randomString(40, anyAlnum)
	}
	// A port picked free can be taken before the server binds it; such a start
	// is retried with fresh ports and a fresh data directory.
	for attempt := 1; ; attempt++ {
		err = s.configure()
		if err == nil && s.Kind == RGW {
			err = s.bootRGWCluster()
		}
		if err == nil {
			err = s.startLocked()
		}
		if err == nil && s.Kind == Versity {
			err = s.createOtherUser()
		}
		if err == nil && s.Kind == MinIO {
			err = s.createMinIOSession()
		}
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, errBindConflict) || attempt == 3 {
			_ = s.Close()
			return nil, err
		}
		if err := errors.Join(s.stopRGWClusterLocked(), s.resetData()); err != nil {
			_ = s.Close()
			return nil, err
		}
	}
}

// NewS3 is StartS3 for a test: it fails the test on error and closes the server
// when the test ends.
func NewS3(tb testing.TB, kind S3Kind) *S3Server { return NewS3With(tb, kind, S3Options{}) }

// NewS3With is NewS3 with options.
func NewS3With(tb testing.TB, kind S3Kind, opts S3Options) *S3Server {
	tb.Helper()
	s, err := StartS3With(kind, opts)
	if err != nil {
		tb.Fatalf("start %s: %v", kind, err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("close %s: %v", kind, err)
		}
	})
	return s
}

// StartS3Servers is StartS3 for a suite's TestMain: it starts one server of each kind,
// in order, and returns them with a close that stops them all (reporting on stderr what
// did not stop cleanly). On error it closes those it started.
func StartS3Servers(kinds ...S3Kind) ([]*S3Server, func(), error) {
	var servers []*S3Server
	closeAll := func() {
		for _, s := range slices.Backward(servers) {
			if err := s.Close(); err != nil {
				fmt.Fprintf(os.Stderr, "stopping %s: %v\n", s.Kind, err)
			}
		}
	}
	for _, kind := range kinds {
		s, err := StartS3(kind)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		servers = append(servers, s)
	}
	return servers, closeAll, nil
}

// configure picks ports, writes config files and builds the command line.
func (s *S3Server) configure() error {
	switch s.Kind {
	case SeaweedFS:
		return s.configureWeed()
	case RGW:
		return s.configureRGW()
	case Moto:
		return s.configureMoto()
	case MinIO:
		return s.configureMinIO()
	default:
		return s.configureVersity()
	}
}

// resetData empties the data directories before a retry, keeping the log.
func (s *S3Server) resetData() error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() == filepath.Base(s.logPath) || e.Name() == filepath.Base(s.iamLog) || e.Name() == localpeers.CleanupList {
			continue
		}
		if err := os.RemoveAll(filepath.Join(s.dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// Start starts the server again after Stop: same port, data and credentials.
// It returns once the server answers a signed ListBuckets.
func (s *S3Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("testenv: S3 server already closed")
	}
	if s.proc != nil && !s.proc.Exited() {
		return nil
	}
	if s.Kind == Moto {
		return errors.New("testenv: moto keeps its state in memory; a restart is no outage")
	}
	return s.startLocked()
}

// startLocked starts the process and waits until it serves signed requests.
func (s *S3Server) startLocked() error {
	if s.iamArgs != nil {
		if err := s.startIAMLocked(); err != nil {
			return err
		}
	}
	bin := s.bin
	if s.Kind == Moto {
		bin = s.motoCmd // s.bin is the root
	}
	s.logStart = 0
	if st, err := os.Stat(s.logPath); err == nil {
		s.logStart = st.Size()
	}
	p, err := StartProcess(bin, s.args, s.env, s.dir, s.logPath)
	if err != nil {
		return errors.Join(err, s.stopIAMLocked())
	}
	s.proc = p
	if s.Kind == Moto {
		err = s.bootstrapMoto(p)
	}
	if err == nil {
		err = s.waitReady(p)
	}
	if err != nil {
		_ = s.stopProcess(p)
		s.proc = nil
		_ = s.stopIAMLocked()
		tail := localpeers.LogTail(s.logPath)
		if bindConflict(tail) {
			err = fmt.Errorf("%w: %v", errBindConflict, err)
		}
		return fmt.Errorf("testenv: %s at %s: %w\n--- tail of %s ---\n%s", s.Kind, s.Endpoint, err, s.logPath, tail)
	}
	p.Serving()
	return nil
}

// waitReady polls a signed ListBuckets until it succeeds, the process exits, or
// readyTimeout passes. An open port is not enough: weed answers before its IAM
// configuration is loaded. MinIO must first say it is live (/minio/health/live).
func (s *S3Server) waitReady(p *Process) error {
	client := s.Client()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	go func() { // a probe stuck on someone else's listener ends when our process does
		select {
		case <-p.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	var lastErr error
	for {
		probe, cancelProbe := context.WithTimeout(ctx, 3*time.Second)
		var err error
		if s.Kind == MinIO {
			err = s.minioLive(probe)
		}
		if err == nil {
			_, err = client.ListBuckets(probe, &s3.ListBucketsInput{}, func(o *s3.Options) {
				o.Retryer = aws.NopRetryer{}
			})
		}
		cancelProbe()
		switch {
		case err != nil:
			lastErr = err
		case s.serving():
			return nil
		default:
			lastErr = errors.New("S3 answers, but the server has not started everything yet (weed: its admin server)")
		}
		if failed := s.startFailure(); failed != nil {
			return fmt.Errorf("%w; last probe: %v", failed, lastErr)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
			continue
		}
		if p.Exited() {
			return fmt.Errorf("process exited before it was ready (%v); last probe: %v", p.err, lastErr)
		}
		return fmt.Errorf("not ready after %s: %v", readyTimeout, lastErr)
	}
}

// Stop stops the process (SIGTERM, SIGKILL after 5s, by process group; radosgw
// at once with SIGKILL, see stopProcess) and keeps its data, ports and
// credentials, so Start can bring the same server back. On RGW only the gateway
// stops: the monitor and the OSD, which hold the data, run on. The
// ports are not held while stopped; if another process takes one, Start fails
// with a "port already in use" error (the endpoint cannot move under a client).
func (s *S3Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopLocked()
}

func (s *S3Server) stopLocked() error {
	var err error
	if s.proc != nil {
		err = s.stopProcess(s.proc)
		s.proc = nil
	}
	return errors.Join(err, s.stopIAMLocked())
}

// stopProcess stops the server's main process: SIGTERM first, except radosgw,
// which is killed at once. It keeps nothing that a clean shutdown would save
// (the OSD holds the data), and its clean shutdown waits up to 30 s for its
// dedup thread to notice.
func (s *S3Server) stopProcess(p *Process) error {
	if s.Kind == RGW {
		p.Abort()
		return nil
	}
	return p.Stop()
}

// startFailure returns why the main process, though still running, will never
// serve (radosgw that could not bind its port exits only ~30 s later), or nil.
func (s *S3Server) startFailure() error {
	switch s.Kind {
	case RGW:
		return rgwStartFailure(localpeers.LogSince(s.logPath, s.logStart))
	case SeaweedFS:
		return weedStartFailure(localpeers.LogSince(s.logPath, s.logStart))
	}
	return nil
}

// serving reports whether the server, which already answered a signed request,
// has started everything it will wait for: weed mini starts its admin server
// last, and exits two minutes after start if that never answers (it could not
// bind its port, say), long after the S3 port served the first request.
func (s *S3Server) serving() bool {
	if s.Kind == SeaweedFS {
		return weedAdminReady(localpeers.LogSince(s.logPath, s.logStart))
	}
	return true
}

// Close stops the server and removes everything it created. It is idempotent.
func (s *S3Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return errors.Join(s.stopLocked(), s.stopRGWClusterLocked(), localpeers.RemoveTempDir(s.dir))
}

// bindConflict reports whether a server's log tail says a port it was to listen
// on was taken ("address already in use" from Go and Ceph's messenger, "Address
// already in use" from radosgw's beast, "is not available on" from weed, "port is
// already in use" from MinIO).
func bindConflict(tail string) bool {
	tail = strings.ToLower(tail)
	return strings.Contains(tail, "address already in use") || strings.Contains(tail, "is not available on") ||
		strings.Contains(tail, "port is already in use")
}
