package testenv_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestS3Lifecycle runs each S3 kind through a full outage: create data, stop the
// server, see requests fail, start it again, find the data, close it and find
// nothing left behind (process, temp dir, sockets). On RGW the outage stops the
// gateway alone; its monitor and OSD run on until Close.
func TestS3Lifecycle(t *testing.T) {
	for _, kind := range []testenv.S3Kind{testenv.SeaweedFS, testenv.Versity, testenv.RGW, testenv.MinIO} {
		t.Run(string(kind), func(t *testing.T) { testS3Lifecycle(t, kind) })
	}
}

func testS3Lifecycle(t *testing.T, kind testenv.S3Kind) {
	begin := time.Now()
	s, err := testenv.StartS3(kind)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s ready in %s at %s, ports %v", kind, time.Since(begin).Round(time.Millisecond), s.Endpoint, s.Ports())
	defer s.Close()
	dir, pid := s.Dir(), s.PID()
	if pid == 0 || !alive(pid) {
		t.Fatalf("PID %d is not a running process", pid)
	}
	assertLoopbackOnly(t, pid)
	iamPID := s.IAMPID()
	if kind == testenv.Versity {
		if iamPID == 0 || !alive(iamPID) {
			t.Fatalf("IAM PID %d is not a running process", iamPID)
		}
		assertLoopbackOnly(t, iamPID)
	}
	clusterPIDs := s.ClusterPIDs()
	if kind == testenv.RGW && len(clusterPIDs) != 2 {
		t.Fatalf("RGW cluster PIDs %v, want monitor and OSD", clusterPIDs)
	}
	for _, p := range clusterPIDs {
		assertLoopbackOnly(t, p)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := s.Client()
	bucket := fmt.Sprintf("bk-%d", time.Now().UnixNano())
	mustCreate(ctx, t, admin, bucket)
	if _, err := admin.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &bucket, Key: aws.String("hello.txt"), Body: strings.NewReader("hello"),
	}); err != nil {
		t.Fatalf("put object: %v", err)
	}
	t.Logf("recreate own bucket: %s", errorCode(createBucket(ctx, admin, bucket)))

	// A bucket owned by the second account is taken for the admin account.
	if other := s.OtherClient(); other != nil {
		taken := bucket + "-other"
		mustCreate(ctx, t, other, taken)
		// Versity's second account is an IAM user of root's account, MinIO's a session of
		// its root user.
		want := map[testenv.S3Kind]string{testenv.SeaweedFS: "BucketAlreadyExists", testenv.Versity: "BucketAlreadyOwnedByYou",
			testenv.RGW: "BucketAlreadyExists", testenv.MinIO: "BucketAlreadyOwnedByYou"}[kind]
		if code := errorCode(createBucket(ctx, admin, taken)); code != want {
			t.Errorf("create of another account's bucket: got %q, want %s", code, want)
		}
		out, err := other.ListBuckets(ctx, &s3.ListBucketsInput{})
		if err != nil {
			t.Fatalf("other account list: %v", err)
		}
		t.Logf("other account sees buckets %v", bucketNames(out))
	}

	// The bucket-scoped identity sees and may touch its bucket only.
	if scoped := s.ScopedClient(); scoped != nil {
		testScopedIdentity(ctx, t, s, scoped, bucket)
	}

	if s.AdminOpsAccessKeyID != "" {
		testAdminOps(ctx, t, s, bucket)
	}

	// Outage: the process is gone and requests fail fast.
	if err := s.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if alive(pid) {
		t.Fatalf("PID %d still alive after Stop", pid)
	}
	for _, p := range clusterPIDs {
		if !alive(p) {
			t.Fatalf("cluster PID %d died with the gateway's Stop", p)
		}
	}
	if s.PID() != 0 {
		t.Errorf("PID() = %d after Stop, want 0", s.PID())
	}
	short, cancelShort := context.WithTimeout(ctx, 5*time.Second)
	_, err = admin.ListBuckets(short, &s3.ListBucketsInput{}, func(o *s3.Options) { o.Retryer = aws.NopRetryer{} })
	cancelShort()
	if err == nil {
		t.Fatal("ListBuckets succeeded while the server was stopped")
	}
	t.Logf("request during outage: %v", err)

	// Recovery: same endpoint, same credentials, same data.
	begin = time.Now()
	if err := s.Start(); err != nil {
		t.Fatalf("start again: %v", err)
	}
	t.Logf("%s restarted in %s", kind, time.Since(begin).Round(time.Millisecond))
	out, err := admin.ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil {
		t.Fatalf("list after restart: %v", err)
	}
	if names := bucketNames(out); !contains(names, bucket) {
		t.Fatalf("bucket %s missing after restart; have %v", bucket, names)
	}
	obj, err := admin.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: aws.String("hello.txt")})
	if err != nil {
		t.Fatalf("get object after restart: %v", err)
	}
	body, _ := io.ReadAll(obj.Body)
	obj.Body.Close()
	if string(body) != "hello" {
		t.Fatalf("object body after restart = %q", body)
	}
	switch kind {
	case testenv.RGW:
		testResolvesIssuer(t, s, s.PID())
	case testenv.Versity:
		testResolvesIssuer(t, s, s.IAMPID())
	}

	// A port taken during the outage makes Start fail with a clear error and
	// keeps the data; once the port is free again, Start succeeds.
	if err := s.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	l, err := net.Listen("tcp", strings.TrimPrefix(s.Endpoint, "http://"))
	if err != nil {
		t.Fatalf("occupy port: %v", err)
	}
	begin = time.Now()
	err = s.Start()
	l.Close()
	if err == nil || !strings.Contains(err.Error(), "port already in use") {
		t.Fatalf("Start on a taken port: got %v, want a port-in-use error", err)
	}
	first, _, _ := strings.Cut(err.Error(), "\n")
	t.Logf("start on a taken port failed after %s: %s", time.Since(begin).Round(time.Millisecond), first)
	if err := s.Start(); err != nil {
		t.Fatalf("start after the port was freed: %v", err)
	}
	if _, err := admin.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &bucket}); err != nil {
		t.Fatalf("bucket gone after failed start: %v", err)
	}
	if kind == testenv.SeaweedFS {
		testWeedAdminPortTaken(t, s)
	}
	// The IAM API answers after the restarts, and its users survived them.
	if s.IAMEndpoint != "" {
		users, err := s.IAMClient().ListUsers(ctx, &iam.ListUsersInput{})
		if err != nil {
			t.Fatalf("IAM ListUsers after restart: %v", err)
		}
		t.Logf("IAM users after restart: %d", len(users.Users))
	}
	iamPID = s.IAMPID()

	// Close leaves nothing behind and can be repeated.
	pid = s.PID()
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if alive(pid) {
		t.Errorf("PID %d still alive after Close", pid)
	}
	if iamPID != 0 && alive(iamPID) {
		t.Errorf("IAM PID %d still alive after Close", iamPID)
	}
	for _, p := range clusterPIDs {
		if alive(p) {
			t.Errorf("cluster PID %d still alive after Close", p)
		}
	}
	if len(s.ClusterPIDs()) != 0 {
		t.Errorf("ClusterPIDs() = %v after Close", s.ClusterPIDs())
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temp dir %s still exists after Close (%v)", dir, err)
	}
	for _, port := range s.Ports() {
		if m, _ := filepath.Glob(fmt.Sprintf("/tmp/seaweedfs-*-%d.sock", port)); len(m) > 0 {
			t.Errorf("sockets left behind: %v", m)
		}
	}
}

// testWeedAdminPortTaken: weed mini checks its ports when it starts, but binds
// the admin server's last, once S3 already serves, and exits two minutes later
// when that bind failed. A start whose admin port is taken in between must fail
// as a taken port does, not pass for ready and die mid-suite.
func testWeedAdminPortTaken(t *testing.T, s *testenv.S3Server) {
	t.Helper()
	if err := s.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	adminAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Ports()["admin"])) // Start holds the server's lock
	started := make(chan error, 1)
	go func() { started <- s.Start() }()
	// The progress board's first row comes after the port check; the admin
	// binds after master, volume, filer and S3 answer (a second or more later).
	var l net.Listener
	for l == nil {
		select {
		case err := <-started:
			t.Fatalf("Start returned %v before its port check passed", err)
		case <-time.After(5 * time.Millisecond):
		}
		tail := s.LogTail()
		if i := strings.LastIndex(tail, "\n=== "); i < 0 || !strings.Contains(tail[i:], "Master       starting") {
			continue
		}
		var err error
		if l, err = net.Listen("tcp", adminAddr); err != nil {
			t.Fatalf("occupy the admin port after weed checked it: %v", err)
		}
	}
	err := <-started
	l.Close()
	if err == nil || !strings.Contains(err.Error(), "port already in use") || !strings.Contains(err.Error(), "Admin server error") {
		t.Fatalf("Start on an admin port taken after the check: got %v, want a port-in-use error naming the admin server", err)
	}
	if err := s.Start(); err != nil {
		t.Fatalf("start after the admin port was freed: %v", err)
	}
}

// testScopedIdentity pins what the least-privilege identity may do: list (only its
// bucket, one page), read, write and tag its bucket; nothing on the admin's bucket
// other, and no bucket creation.
func testScopedIdentity(ctx context.Context, t *testing.T, s *testenv.S3Server, scoped *s3.Client, other string) {
	t.Helper()
	mustCreate(ctx, t, s.Client(), s.ScopedBucket)
	out, err := scoped.ListBuckets(ctx, &s3.ListBucketsInput{MaxBuckets: aws.Int32(1)})
	if err != nil {
		t.Fatalf("scoped identity list: %v", err)
	}
	if names := bucketNames(out); len(names) != 1 || names[0] != s.ScopedBucket {
		t.Errorf("scoped identity sees buckets %v, want only %s", names, s.ScopedBucket)
	}
	if _, err := scoped.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &s.ScopedBucket}); err != nil {
		t.Errorf("scoped identity head of its bucket: %v", err)
	}
	if _, err := scoped.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &s.ScopedBucket, Key: aws.String("scoped.txt"), Body: strings.NewReader("mine"),
	}); err != nil {
		t.Errorf("scoped identity write to its bucket: %v", err)
	}
	if _, err := scoped.GetBucketTagging(ctx, &s3.GetBucketTaggingInput{Bucket: &s.ScopedBucket}); err != nil && !strings.HasPrefix(errorCode(err), "NoSuchTagSet") {
		t.Errorf("scoped identity tagging of its bucket: %v", err)
	}
	if _, err := scoped.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &other, Key: aws.String("intruder.txt"), Body: strings.NewReader("no"),
	}); errorCode(err) != "AccessDenied" {
		t.Errorf("scoped identity write to another bucket: got %v, want AccessDenied", err)
	}
	if code := errorCode(createBucket(ctx, scoped, s.ScopedBucket+"-more")); code != "AccessDenied" {
		t.Errorf("scoped identity creating a bucket: got %q, want AccessDenied", code)
	}
}

func createBucket(ctx context.Context, c *s3.Client, name string) error {
	_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &name})
	return err
}

func mustCreate(ctx context.Context, t *testing.T, c *s3.Client, name string) {
	t.Helper()
	if err := createBucket(ctx, c, name); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
}

// errorCode is the S3 error code of err ("" for nil, the text for non-API errors).
func errorCode(err error) string {
	if err == nil {
		return ""
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return err.Error()
}

func bucketNames(out *s3.ListBucketsOutput) []string {
	var names []string
	for _, b := range out.Buckets {
		names = append(names, aws.ToString(b.Name))
	}
	return names
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// assertLoopbackOnly checks every TCP socket pid listens on is bound to a loopback
// address: the harness must never expose a test server on the machine's network. That is
// 127.0.0.1, and ::1 for MinIO, which listens on every loopback address besides the one
// it is given (for its console, which the harness turns off).
func assertLoopbackOnly(t *testing.T, pid int) {
	t.Helper()
	inodes := map[string]bool{}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatalf("read fds: %v", err)
	}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	var listening []string
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != "0A" || !inodes[fields[9]] {
				continue
			}
			addr, port, _ := strings.Cut(fields[1], ":")
			p, _ := strconv.ParseUint(port, 16, 16)
			listening = append(listening, fmt.Sprintf("%s:%d", addr, p))
			// 127.0.0.1 and ::1, as the kernel writes them (32-bit words, little-endian).
			if addr != "0100007F" && addr != "00000000000000000000000001000000" {
				t.Errorf("listening on non-loopback address %s:%d (%s)", addr, p, table)
			}
		}
		f.Close()
	}
	if len(listening) == 0 {
		t.Errorf("found no listening sockets of PID %d", pid)
	}
	t.Logf("PID %d listens on %d loopback ports", pid, len(listening))
}
