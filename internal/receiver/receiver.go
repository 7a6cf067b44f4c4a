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
// Requests are signed with a shared secret (HMAC-SHA256 over "timestamp.body") rather
// than carrying a bearer token, so a captured request cannot be altered, and the
// timestamp bounds how long a captured one could be replayed. Inside that window the
// receiver remembers the signature of every request it acted on and refuses the same
// request again (409), so a replay triggers nothing. With a certificate configured it
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
	// BucketsNamed returns the StorageBuckets whose status.bucketName is bucket (a field-index lookup); empty = none.
	BucketsNamed(ctx context.Context, bucket string) ([]types.NamespacedName, error)
	// Exists reports whether the StorageBucket exists.
	Exists(ctx context.Context, key types.NamespacedName) (bool, error)
	// RequestProbe asks for an immediate probe of key.
	RequestProbe(ctx context.Context, key types.NamespacedName) error
}

// Options configure a Receiver. Zero values mean the documented defaults.
type Options struct {
	// BindAddress is where Start listens, e.g. "127.0.0.1:9443" or ":9443".
	BindAddress string
	// Secret is the HMAC key shared with callers (see LoadSecret).
	Secret []byte
	// Requester turns verified requests into probe requests.
	Requester Requester
	// Clock judges timestamp freshness and refills the rate limiter (default: real).
	Clock clock.PassiveClock
	// MaxAge is how far a request's timestamp may lie in the past or the future
	// (default 5m). It bounds replays and tolerates modest clock skew.
	MaxAge time.Duration
	// RequestsPerSecond and Burst bound the authenticated requests this receiver hands
	// on (defaults 20 and 40), so a chatty webhook cannot flood the API server with
	// annotation writes.
	RequestsPerSecond float64
	Burst             int
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
	defaultRPS    = 20
	defaultBurst  = 40

	// shutdownTimeout bounds how long Start waits for in-flight requests after ctx ends.
	shutdownTimeout = 5 * time.Second
)

// Receiver serves the probe endpoint. Create it with New; it is a controller-runtime
// manager.Runnable that needs no leader (the operator package asserts both), without
// importing controller-runtime: the fuzz target builds this package and everything it
// imports with coverage instrumentation, and controller-runtime is most of the operator.
type Receiver struct {
	bindAddress string
	secret      []byte
	requester   Requester
	clock       clock.PassiveClock
	maxAge      time.Duration
	limiter     *rate.Limiter
	replays     replayGuard
	log         logr.Logger
	handler     http.Handler
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
	if err := checkSecret(opts.Secret); err != nil {
		return nil, fmt.Errorf("receiver: %w", err)
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
		opts.RequestsPerSecond = defaultRPS
	}
	if opts.Burst <= 0 {
		opts.Burst = defaultBurst
	}
	if opts.MaxConnections <= 0 {
		opts.MaxConnections = defaults.ReceiverMaxConnections
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	r := &Receiver{
		bindAddress: opts.BindAddress,
		// A private copy: the caller may wipe or reuse its slice.
		secret:    bytes.Clone(opts.Secret),
		requester: opts.Requester,
		clock:     opts.Clock,
		maxAge:    opts.MaxAge,
		limiter:   rate.NewLimiter(rate.Limit(opts.RequestsPerSecond), opts.Burst),
		log:       opts.Log,
		tlsConfig: tlsConfig,
		maxConns:  opts.MaxConnections,
		bodies:    make(bodySlots, opts.MaxConnections),
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

// LoadSecret reads the HMAC key from path (the --receiver-secret-file). Trailing
// newlines are trimmed because editors and `echo` add them and the sender would not
// sign with them. The key itself never appears in an error.
func LoadSecret(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading receiver secret: %w", err)
	}
	data = bytes.TrimRight(data, "\r\n")
	if err := checkSecret(data); err != nil {
		return nil, fmt.Errorf("receiver secret file %q: %w", path, err)
	}
	return data, nil
}

func checkSecret(secret []byte) error {
	switch {
	case len(secret) == 0:
		return errors.New("secret is empty")
	case len(secret) < MinSecretLen:
		return fmt.Errorf("secret is %d bytes, need at least %d", len(secret), MinSecretLen)
	}
	return nil
}

// Sign computes the header value for a body, for clients and tests: "sha256=" + hex(HMAC-SHA256(secret, timestamp + "." + body)).
// The timestamp is inside the MAC so that it cannot be refreshed on a captured request.
func Sign(secret []byte, timestamp string, body []byte) string {
	return signaturePrefix + hex.EncodeToString(mac(secret, timestamp, body))
}

func mac(secret []byte, timestamp string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
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
