package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/versity/versitygw/backend/meta"
	"github.com/versity/versitygw/backend/posix"
	"github.com/versity/versitygw/embedgw"
)

// storeState is what a --data-dir must remember about the embedded store besides
// the bucket contents and the IAM users: the credentials (the ObjectStore's Secret
// and every bucket's owner are tied to them) and the ports, so the ObjectStore's
// endpoints stay the same and a warm start does not re-reconcile every bucket for a
// new endpoint.
type storeState struct {
	AccessKeyID     string `json:"accessKeyID"`
	SecretAccessKey string `json:"secretAccessKey"`
	Port            int    `json:"port"`
	IAMPort         int    `json:"iamPort"`
}

// embeddedStore is Versity S3 Gateway and its standalone IAM service, both running
// in this process: the IAM service serves the AWS IAM API on IAMEndpoint (the
// operator creates a user and key per BucketAccess there) and answers the
// gateway's identity and policy questions on a unix socket.
type embeddedStore struct {
	storeState
	Endpoint    string
	IAMEndpoint string
	Region      string

	gateway, iam *service
	done         chan struct{} // closed when either service has stopped
	socketDir    string        // a temporary directory for the socket, removed on Stop; "" when it lives in the store's directory
}

// service is one embedgw server running in a goroutine.
type service struct {
	name   string
	cancel context.CancelFunc
	done   chan struct{}
	err    error // the Run function's result, valid after done
}

func startService(name string, run func(context.Context) error) *service {
	ctx, cancel := context.WithCancel(context.Background())
	s := &service{name: name, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		s.err = run(ctx)
	}()
	return s
}

// stop cancels the service and waits for it, at most until deadline: a stuck
// shutdown must not hold up the control plane's.
func (s *service) stop(deadline <-chan time.Time) {
	if s == nil {
		return
	}
	s.cancel()
	select {
	case <-s.done:
	case <-deadline:
	}
}

// healthPath answers unauthenticated GETs on both servers, so startup can wait for
// the listeners without signing a request. On the gateway it masks a bucket of the
// same name, which the operator's "<prefix>-<namespace>-<name>-<hash>" names never
// are.
const healthPath = "/healthz"

// maxSocketPath is the longest unix socket path Linux accepts (sun_path is 108
// bytes with the terminating NUL), with a margin.
const maxSocketPath = 100

// startStore runs Versity's posix backend on dir/objects, with object metadata in
// the dir/meta sidecar (no xattrs, so tmpfs and overlayfs work) and versions in
// dir/versions (without it Versity answers PutBucketVersioning with 501, and the
// samples enable versioning), and its IAM service with users in dir/iam. port 0
// reuses the ports remembered in dir, else any free ones.
//
// posix.New chdirs the whole process into dir/objects, so dir must be absolute and
// every path used later must already be absolute; embedgw allows one gateway and
// one IAM service per process.
func startStore(dir string, port int) (*embeddedStore, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("store directory %q is not absolute", dir)
	}
	objects, metaDir, versions, iamDir := filepath.Join(dir, "objects"), filepath.Join(dir, "meta"), filepath.Join(dir, "versions"), filepath.Join(dir, "iam")
	for _, d := range []string{objects, metaDir, versions, iamDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	st, err := loadOrCreateState(filepath.Join(dir, "state.json"))
	if err != nil {
		return nil, err
	}
	socket, socketDir, err := iamSocketPath(dir)
	if err != nil {
		return nil, err
	}
	fixed := port != 0
	if fixed {
		st.Port = port
	}
	var lastErr error
	for range 3 {
		if !fixed && (st.Port == 0 || !portFree(st.Port)) {
			if st.Port, err = freePort(); err != nil {
				break
			}
		}
		if st.IAMPort == 0 || st.IAMPort == st.Port || !portFree(st.IAMPort) {
			if st.IAMPort, err = freePort(); err != nil {
				break
			}
		}
		s, err := runStore(st, objects, metaDir, versions, iamDir, socket)
		if err == nil {
			s.socketDir = socketDir
			return s, saveState(filepath.Join(dir, "state.json"), st)
		}
		lastErr = err
		if !fixed {
			st.Port = 0 // taken between the check and the bind: pick another
		}
		st.IAMPort = 0
	}
	if socketDir != "" {
		_ = os.RemoveAll(socketDir)
	}
	if lastErr == nil {
		lastErr = err
	}
	return nil, lastErr
}

// iamSocketPath is where the IAM service's private API listens: in the store's
// directory (mode 0600, so only this user's processes may even ask), or, when that
// path is too long for a unix socket, in a fresh temporary directory of mode 0700.
func iamSocketPath(dir string) (socket, tempDir string, err error) {
	socket = filepath.Join(dir, "iam.sock")
	if len(socket) <= maxSocketPath {
		return socket, "", nil
	}
	tempDir, err = os.MkdirTemp("", "bucketkeeper-dev-")
	if err != nil {
		return "", "", err
	}
	return filepath.Join(tempDir, "iam.sock"), tempDir, nil
}

func runStore(st storeState, objects, metaDir, versions, iamDir, socket string) (*embeddedStore, error) {
	sidecar, err := meta.NewSideCar(metaDir)
	if err != nil {
		return nil, err
	}
	be, err := posix.New(objects, sidecarFix{sidecar}, posix.PosixOpts{SideCarDir: metaDir, VersioningDir: versions})
	if err != nil {
		return nil, fmt.Errorf("versity posix backend: %w", err)
	}
	addr, iamAddr := fmt.Sprintf("127.0.0.1:%d", st.Port), fmt.Sprintf("127.0.0.1:%d", st.IAMPort)
	s := &embeddedStore{storeState: st, Endpoint: "http://" + addr, IAMEndpoint: "http://" + iamAddr, Region: "us-east-1", done: make(chan struct{})}

	// The IAM service first: the gateway asks its socket for the protocol version
	// as it starts.
	s.iam = startService("versity IAM service", func(ctx context.Context) error {
		return embedgw.RunIAMAPI(ctx, &embedgw.IAMConfig{
			RootUserAccess:    st.AccessKeyID,
			RootUserSecret:    st.SecretAccessKey,
			Ports:             []string{iamAddr},
			MaxConnections:    100,
			MaxRequests:       100,
			HealthPath:        healthPath,
			PrivatePorts:      []string{socket},
			PrivateSocketPerm: "0600",
			IAMDir:            iamDir,
			Quiet:             true,
			// Nothing in the dev setup federates an OIDC provider; never dial out.
			DisableOIDCThumbprintAutoFetch: true,
		})
	})
	if err := waitServing(s.iam, s.IAMEndpoint, 10*time.Second); err != nil {
		s.iam.stop(time.After(3 * time.Second))
		return nil, err
	}
	s.gateway = startService("versity gateway", func(ctx context.Context) error {
		return embedgw.RunVersityGW(ctx, be, &embedgw.Config{
			RootUserAccess:        st.AccessKeyID,
			RootUserSecret:        st.SecretAccessKey,
			Region:                s.Region,
			Ports:                 []string{addr},
			MaxConnections:        1000,
			MaxRequests:           1000,
			MultipartMaxParts:     10000,
			HealthPath:            healthPath,
			StandaloneIAMEndpoint: socket,
			Quiet:                 true, // no banner, no per-request lines
		})
	})
	if err := waitServing(s.gateway, s.Endpoint, 10*time.Second); err != nil {
		s.Stop()
		return nil, err
	}
	go func() {
		select {
		case <-s.gateway.done:
		case <-s.iam.done:
		}
		close(s.done)
	}()
	return s, nil
}

// sidecarFix works around a Versity v1.8.0 bug with sidecar metadata in a
// versioned bucket: after DELETE leaves a delete marker on a key, a new PUT of that
// key succeeds but GET answers NoSuchKey, because the posix backend relies on a new
// file carrying none of the old file's attributes. That holds for xattrs, not for
// the sidecar, whose per-key directory outlives the file and keeps the
// "delete-marker" attribute. The operator's ReadWrite probe does exactly this
// (write, read, delete the same canary key), so without the fix every probe after
// the first fails. AWS, and Versity with xattrs, show the new object.
//
// The posix backend writes the "etag" attribute with a file handle, on a non-empty
// key, only when it publishes a new object (PutObject, CompleteMultipartUpload) or
// part; that is when a stale marker at the key's live path is cleared. Version
// snapshots pass an empty key and keep their markers.
type sidecarFix struct{ meta.SideCar }

func (s sidecarFix) StoreAttribute(f *os.File, bucket, object, attribute string, value []byte) error {
	if f != nil && object != "" && attribute == "etag" {
		if err := s.SideCar.DeleteAttribute(bucket, object, "delete-marker"); err != nil && !errors.Is(err, meta.ErrNoSuchKey) {
			return err
		}
	}
	return s.SideCar.StoreAttribute(f, bucket, object, attribute, value)
}

// waitServing polls the health path until the listener answers, the service
// returns (a port taken after all) or the deadline passes.
func waitServing(svc *service, endpoint string, timeout time.Duration) error {
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-svc.done:
			return fmt.Errorf("%s on %s exited at start: %v", svc.name, endpoint, svc.err)
		default:
		}
		if resp, err := hc.Get(endpoint + healthPath); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s on %s not serving after %s", svc.name, endpoint, timeout)
}

// Done is closed when the gateway or the IAM service has stopped, for whatever
// reason.
func (s *embeddedStore) Done() <-chan struct{} { return s.done }

// Err is why the store stopped; valid after Done.
func (s *embeddedStore) Err() error {
	for _, svc := range []*service{s.gateway, s.iam} {
		select {
		case <-svc.done:
			return fmt.Errorf("%s: %v", svc.name, svc.err)
		default:
		}
	}
	return nil
}

// Stop shuts down the gateway, then the IAM service it asks, and waits for both
// (bounded: a stuck shutdown must not hold up the control plane's).
func (s *embeddedStore) Stop() {
	deadline := time.After(3 * time.Second)
	s.gateway.stop(deadline)
	s.iam.stop(deadline)
	if s.socketDir != "" {
		_ = os.RemoveAll(s.socketDir)
	}
}

func loadOrCreateState(path string) (storeState, error) {
	var st storeState
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &st); err != nil {
			return st, fmt.Errorf("%s: %w", path, err)
		}
		if st.AccessKeyID != "" && st.SecretAccessKey != "" {
			return st, nil
		}
	case !errors.Is(err, os.ErrNotExist):
		return st, err
	}
	// Fresh random credentials: the store listens on loopback only, but nothing
	// on this machine should find it open under a well-known key.
	st.AccessKeyID = randomString(20, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
	st.SecretAccessKey = randomString(40, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
	return st, saveState(path, st)
}

func saveState(path string, st storeState) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o600)
}

func randomString(n int, alphabet string) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
