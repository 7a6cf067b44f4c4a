// Package receiver is bucketkeeper's inbound door: an authenticated HTTP endpoint that
// lets a caller (a CI job, an S3 store's event notification webhook) ask for an
// immediate probe of a StorageBucket instead of waiting for the next sync interval.
//
// The receiver never probes anything itself. It verifies the request, works out which
// StorageBuckets are meant, and hands each one to a [Requester], which the operator
// implements by annotating the object. Going through the API server is what lets every
// replica serve the endpoint (a load balancer may pick any of them) while only the
// elected leader's controller acts.
//
// Requests are signed with a shared secret (HMAC-SHA256 over "keyid:timestamp.body",
// or "timestamp.body" with the cluster-wide key) rather than carrying a bearer token,
// so a captured request cannot be altered, nor moved to another key, and the timestamp
// bounds how long a captured one could be replayed. Inside that window the receiver
// remembers the signature of every request it acted on and refuses the same request
// again (409), so a replay triggers nothing. Keys are namespaced (keys.go): a key
// reaches the StorageBuckets of the namespaces it names and learns nothing about any
// other; each has its own rate limit and replay guard. With a certificate configured it
// serves HTTPS, so requests cannot be read on the way either. Connections, bodies in
// memory and HTTP/2 streams are capped (limits.go), so what anyone who can reach the
// port can make the receiver hold does not grow with the number of callers.
package receiver

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
)

// Requester is how a request turns into a probe: the operator implements it by
// annotating the StorageBucket (bucketkeeper.io/probe-requested-at), which the leader's
// controller acts on. Keys are "namespace/name" pairs.
type Requester interface {
	// BucketsNamed returns the StorageBuckets of namespace (all namespaces for "")
	// whose status.bucketName is bucket (a field-index lookup); empty = none.
	BucketsNamed(ctx context.Context, bucket, namespace string) ([]types.NamespacedName, error)
	// Exists reports whether the StorageBucket exists.
	Exists(ctx context.Context, key types.NamespacedName) (bool, error)
	// RequestProbe asks for an immediate probe of key.
	RequestProbe(ctx context.Context, key types.NamespacedName) error
}

// Options configure a Receiver. Zero values mean the documented defaults.
type Options struct {
	// BindAddress is where Start listens, e.g. "127.0.0.1:9443" or ":9443".
	BindAddress string
	// ClusterWideSecret, if set, is the HMAC key of requests that name no key
	// (KeyIDHeader): its holder may probe the StorageBuckets of every namespace, and
	// learn which claims use a bucket name, so it is for a platform team that chose
	// that explicitly (see LoadSecret).
	ClusterWideSecret []byte
	// NamespacedKeys says that keys will be set with SetKey (the operator loads them
	// from Secrets); a receiver needs it, ClusterWideSecret or both.
	NamespacedKeys bool
	// WaitForKeys, if set, is waited on by Start before it listens, so a key that
	// exists is not refused because it was not loaded yet; it returns false if ctx
	// ended first.
	WaitForKeys func(ctx context.Context) bool
	// Requester turns verified requests into probe requests.
	Requester Requester
	// Clock judges timestamp freshness and refills the rate limiter (default: real).
	Clock clock.PassiveClock
	// MaxAge is how far a request's timestamp may lie in the past or the future
	// (default 5m). It bounds replays and tolerates modest clock skew.
	MaxAge time.Duration
	// RequestsPerSecond and Burst bound the authenticated requests this receiver hands
	// on per key (defaults 20 and 40), so one key's holder cannot spend another's
	// budget; TotalRequestsPerSecond and TotalBurst bound them for all keys together
	// (defaults 40 and 80), so a chatty webhook cannot flood the API server with
	// annotation writes.
	RequestsPerSecond      float64
	Burst                  int
	TotalRequestsPerSecond float64
	TotalBurst             int
	// Observe, if set, sees every answer on the probe path: the key it was for (its
	// id, ObserveClusterWideKey, or ObserveNoKey when none was established) and the
	// status code. The operator counts them in a metric.
	Observe func(key string, code int)
	// Log receives one line per answered request; request data is never logged raw.
	Log logr.Logger
	// MaxConnections caps the connections open at once (default
	// defaults.ReceiverMaxConnections, 64); a connection past it waits, unread, until
	// one closes. It also caps the request bodies held at once, so bodies in memory
	// never exceed MaxConnections × MaxBodyBytes (see limits.go).
	MaxConnections int
	// TLSCertFile and TLSKeyFile, both or neither, are a PEM certificate (chain) and
	// its private key: with them Start serves HTTPS (TLS 1.2 or later), without them
	// plain HTTP. They are read once, by New.
	TLSCertFile, TLSKeyFile string
}

const (
	// MinSecretLen is the shortest HMAC key accepted: shorter keys are guessable.
	MinSecretLen = 16

	defaultMaxAge = 5 * time.Minute

	// shutdownTimeout bounds how long Start waits for in-flight requests after ctx ends.
	shutdownTimeout = 5 * time.Second
)

// Receiver serves the probe endpoint. Create it with New; it is a controller-runtime
// manager.Runnable that needs no leader (the operator package asserts both), without
// importing controller-runtime: the fuzz target builds this package and everything it
// imports with coverage instrumentation, and controller-runtime is most of the operator.
type Receiver struct {
	bindAddress string
	keys        keyring
	waitForKeys func(ctx context.Context) bool
	requester   Requester
	clock       clock.PassiveClock
	maxAge      time.Duration
	// total bounds the requests of all keys together; each key has its own too.
	total   *rate.Limiter
	observe func(key string, code int)
	log     logr.Logger
	handler http.Handler
	// tlsConfig is nil for plain HTTP.
	tlsConfig *tls.Config
	maxConns  int
	bodies    bodySlots

	mu      sync.Mutex
	addr    string
	started bool
	// conns is the listener Start serves, which counts the open connections.
	conns *limitedListener
}

// New checks opts, fills in defaults and builds a Receiver; it does not listen yet, so
// a misconfiguration fails at startup rather than at the first request.
func New(opts Options) (*Receiver, error) {
	if opts.BindAddress == "" {
		return nil, errors.New("receiver: BindAddress is required")
	}
	if opts.Requester == nil {
		return nil, errors.New("receiver: Requester is required")
	}
	if len(opts.ClusterWideSecret) == 0 && !opts.NamespacedKeys {
		return nil, errors.New("receiver: no keys: set ClusterWideSecret, NamespacedKeys or both")
	}
	if opts.ClusterWideSecret != nil {
		if err := checkSecret(opts.ClusterWideSecret); err != nil {
			return nil, fmt.Errorf("receiver: cluster-wide key: %w", err)
		}
	}
	tlsConfig, err := loadTLS(opts.TLSCertFile, opts.TLSKeyFile)
	if err != nil {
		return nil, fmt.Errorf("receiver: %w", err)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.MaxAge <= 0 {
		opts.MaxAge = defaultMaxAge
	}
	if opts.RequestsPerSecond <= 0 {
		opts.RequestsPerSecond = defaults.ReceiverKeyRequestsPerSecond
	}
	if opts.Burst <= 0 {
		opts.Burst = defaults.ReceiverKeyBurst
	}
	if opts.TotalRequestsPerSecond <= 0 {
		opts.TotalRequestsPerSecond = defaults.ReceiverRequestsPerSecond
	}
	if opts.TotalBurst <= 0 {
		opts.TotalBurst = defaults.ReceiverBurst
	}
	if opts.Observe == nil {
		opts.Observe = func(string, int) {}
	}
	if opts.MaxConnections <= 0 {
		opts.MaxConnections = defaults.ReceiverMaxConnections
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	perKey, burst := rate.Limit(opts.RequestsPerSecond), opts.Burst
	r := &Receiver{
		bindAddress: opts.BindAddress,
		keys: keyring{
			newState: func() *keyState { return &keyState{limiter: rate.NewLimiter(perKey, burst)} },
			byID:     map[string]*keyEntry{},
			states:   map[string]*keyState{},
		},
		waitForKeys: opts.WaitForKeys,
		requester:   opts.Requester,
		clock:       opts.Clock,
		maxAge:      opts.MaxAge,
		total:       rate.NewLimiter(rate.Limit(opts.TotalRequestsPerSecond), opts.TotalBurst),
		observe:     opts.Observe,
		log:         opts.Log,
		tlsConfig:   tlsConfig,
		maxConns:    opts.MaxConnections,
		bodies:      make(bodySlots, opts.MaxConnections),
	}
	if opts.ClusterWideSecret != nil {
		// A private copy: the caller may wipe or reuse its slice.
		r.keys.clusterWide = &keyEntry{secret: bytes.Clone(opts.ClusterWideSecret), state: r.keys.newState()}
	}
	r.handler = r.routes()
	return r, nil
}

// loadTLS reads the serving certificate and key (both or neither; neither is plain
// HTTP). Errors name the files, never their contents.
func loadTLS(certFile, keyFile string) (*tls.Config, error) {
	switch {
	case certFile == "" && keyFile == "":
		return nil, nil
	case certFile == "" || keyFile == "":
		return nil, errors.New("TLS needs both a certificate file and a key file")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("loading TLS certificate %q and key %q: %w", certFile, keyFile, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// LoadSecret reads the cluster-wide HMAC key from path (the --receiver-secret-file).
// Trailing newlines are trimmed (see TrimSecret). The key itself never appears in an
// error.
func LoadSecret(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading receiver secret: %w", err)
	}
	data = TrimSecret(data)
	if err := checkSecret(data); err != nil {
		return nil, fmt.Errorf("receiver secret file %q: %w", path, err)
	}
	return data, nil
}

// TrimSecret drops the trailing newlines of a key read from a file or a Secret:
// editors and `echo` add them, and the sender would not sign with them.
func TrimSecret(secret []byte) []byte { return bytes.TrimRight(secret, "\r\n") }

func checkSecret(secret []byte) error {
	switch {
	case len(secret) == 0:
		return errors.New("secret is empty")
	case len(secret) < MinSecretLen:
		return fmt.Errorf("secret is %d bytes, need at least %d", len(secret), MinSecretLen)
	}
	return nil
}

// Sign computes the header value of a request signed with the cluster-wide key, for
// clients and tests: "sha256=" + hex(HMAC-SHA256(secret, timestamp + "." + body)).
// The timestamp is inside the MAC so that it cannot be refreshed on a captured request.
func Sign(secret []byte, timestamp string, body []byte) string {
	return SignWithKey("", secret, timestamp, body)
}

// SignWithKey computes the header value of a request signed with the namespaced key
// keyID: "sha256=" + hex(HMAC-SHA256(secret, keyID + ":" + timestamp + "." + body)).
// The key id is inside the MAC so that a captured request cannot be sent again under
// another key id (whose secret might be the same); ':' occurs in no key id and '.' in
// no timestamp, so the signed string splits one way only. An empty keyID is Sign.
func SignWithKey(keyID string, secret []byte, timestamp string, body []byte) string {
	return signaturePrefix + hex.EncodeToString(mac(secret, keyID, timestamp, body))
}

func mac(secret []byte, keyID, timestamp string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	if keyID != "" {
		m.Write([]byte(keyID))
		m.Write([]byte{':'})
	}
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Handler returns the receiver's HTTP handler (POST /v1/probe, GET /healthz), for
// mounting elsewhere or testing without a listener.
func (r *Receiver) Handler() http.Handler { return r.handler }

// NeedLeaderElection is false: every replica accepts requests, because the hand-off
// goes through the API server and only the leader's controller acts on it.
func (r *Receiver) NeedLeaderElection() bool { return false }

// Addr returns the address Start is listening on ("" before that), which tells tests
// the port picked for ":0".
func (r *Receiver) Addr() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.addr
}

// Start listens on BindAddress and serves until ctx ends, then stops accepting and gives
// in-flight requests up to 5s to finish. It returns nil after a clean shutdown.
func (r *Receiver) Start(ctx context.Context) error {
	r.mu.Lock()
	if r.started {
		r.mu.Unlock()
		return errors.New("receiver: already started")
	}
	r.started = true
	r.mu.Unlock()

	if r.waitForKeys != nil && !r.waitForKeys(ctx) {
		// Stopped before the keys were loaded: nothing was served.
		return nil
	}

	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", r.bindAddress)
	if err != nil {
		return fmt.Errorf("receiver: listening on %q: %w", r.bindAddress, err)
	}
	conns := newLimitedListener(ln, r.maxConns)
	r.mu.Lock()
	r.addr = ln.Addr().String()
	r.conns = conns
	r.mu.Unlock()

	srv := r.newServer()
	serveErr := make(chan error, 1)
	if r.tlsConfig != nil {
		// A clone: the server adds its ALPN protocols to the config it is given.
		srv.TLSConfig = r.tlsConfig.Clone()
		go func() { serveErr <- srv.ServeTLS(conns, "", "") }()
	} else {
		go func() { serveErr <- srv.Serve(conns) }()
	}
	r.log.Info("receiver listening", "address", r.Addr(), "tls", r.tlsConfig != nil, "maxConnections", r.maxConns)

	select {
	case err := <-serveErr:
		return fmt.Errorf("receiver: serving: %w", err)
	case <-ctx.Done():
	}

	// Not derived from ctx, which is already done: in-flight requests get their grace.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close()
		<-serveErr
		return fmt.Errorf("receiver: graceful shutdown: %w", err)
	}
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("receiver: serving: %w", err)
	}
	r.log.Info("receiver stopped")
	return nil
}
