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
// the bucket contents: the credentials (the ObjectStore's Secret and every bucket's
// owner are tied to them) and the port, so the ObjectStore's endpoint stays the
// same and a warm start does not re-reconcile every bucket for a new endpoint.
type storeState struct {
	AccessKeyID     string `json:"accessKeyID"`
	SecretAccessKey string `json:"secretAccessKey"`
	Port            int    `json:"port"`
}

// embeddedStore is Versity S3 Gateway running in this process.
type embeddedStore struct {
	storeState
	Endpoint string
	Region   string

	cancel context.CancelFunc
	done   chan struct{}
	err    error // RunVersityGW's result, valid after done
}

// healthPath answers unauthenticated GETs, so startup can wait for the listener
// without signing a request. It masks a bucket of the same name, which the
// operator's "<prefix>-<namespace>-<name>-<hash>" names never are.
const healthPath = "/healthz"

// startStore runs Versity's posix backend on dir/objects, with object metadata in
// the dir/meta sidecar (no xattrs, so tmpfs and overlayfs work) and versions in
// dir/versions (without it Versity answers PutBucketVersioning with 501, and the
// samples enable versioning). port 0 reuses the port remembered in dir, else any
// free one.
//
// posix.New chdirs the whole process into dir/objects, so dir must be absolute and
// every path used later must already be absolute; embedgw allows one gateway per
// process.
func startStore(dir string, port int) (*embeddedStore, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("store directory %q is not absolute", dir)
	}
	objects, metaDir, versions := filepath.Join(dir, "objects"), filepath.Join(dir, "meta"), filepath.Join(dir, "versions")
	for _, d := range []string{objects, metaDir, versions} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	st, err := loadOrCreateState(filepath.Join(dir, "state.json"))
	if err != nil {
		return nil, err
	}
	fixed := port != 0
	if !fixed {
		port = st.Port
	}
	var lastErr error
	for range 3 {
		if !fixed && (port == 0 || !portFree(port)) {
			if port, err = freePort(); err != nil {
				return nil, err
			}
		}
		st.Port = port
		s, err := runStore(st, objects, metaDir, versions)
		if err == nil {
			return s, saveState(filepath.Join(dir, "state.json"), st)
		}
		lastErr = err
		if fixed {
			break
		}
		port = 0 // taken between the check and the bind: pick another
	}
	return nil, lastErr
}

func runStore(st storeState, objects, metaDir, versions string) (*embeddedStore, error) {
	sidecar, err := meta.NewSideCar(metaDir)
	if err != nil {
		return nil, err
	}
	be, err := posix.New(objects, sidecarFix{sidecar}, posix.PosixOpts{SideCarDir: metaDir, VersioningDir: versions})
	if err != nil {
		return nil, fmt.Errorf("versity posix backend: %w", err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", st.Port)
	ctx, cancel := context.WithCancel(context.Background())
	s := &embeddedStore{storeState: st, Endpoint: "http://" + addr, Region: "us-east-1", cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		s.err = embedgw.RunVersityGW(ctx, be, &embedgw.Config{
			RootUserAccess:    st.AccessKeyID,
			RootUserSecret:    st.SecretAccessKey,
			Region:            s.Region,
			Ports:             []string{addr},
			MaxConnections:    1000,
			MaxRequests:       1000,
			MultipartMaxParts: 10000,
			HealthPath:        healthPath,
			Quiet:             true, // no banner, no per-request lines
		})
	}()
	if err := s.waitServing(10 * time.Second); err != nil {
		s.Stop()
		return nil, err
	}
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

// waitServing polls the health path until the listener answers, the gateway
// returns (a port taken after all) or the deadline passes.
func (s *embeddedStore) waitServing(timeout time.Duration) error {
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return fmt.Errorf("versity gateway on %s exited at start: %v", s.Endpoint, s.err)
		default:
		}
		if resp, err := hc.Get(s.Endpoint + healthPath); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("versity gateway on %s not serving after %s", s.Endpoint, timeout)
}

// Done is closed when the gateway has stopped, for whatever reason.
func (s *embeddedStore) Done() <-chan struct{} { return s.done }

// Err is why the gateway stopped; valid after Done.
func (s *embeddedStore) Err() error { return s.err }

// Stop shuts the gateway down and waits for it (bounded: a stuck shutdown must not
// hold up the control plane's).
func (s *embeddedStore) Stop() {
	s.cancel()
	select {
	case <-s.done:
	case <-time.After(3 * time.Second):
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
