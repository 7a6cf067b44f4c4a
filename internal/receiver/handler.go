package receiver

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// Wire constants. They are part of the protocol clients code against.
const (
	ProbePath       = "/v1/probe"
	HealthzPath     = "/healthz"
	TimestampHeader = "X-Bucketkeeper-Timestamp"
	SignatureHeader = "X-Bucketkeeper-Signature"
	// KeyIDHeader names the namespaced key a request is signed with (the key Secret's
	// name); without it the request is signed with the cluster-wide key, if any.
	KeyIDHeader = "X-Bucketkeeper-Key-Id"

	// MaxBodyBytes is the largest body accepted. S3 event documents are a few KiB per
	// record; anything bigger is not a probe request and is refused before it is read.
	MaxBodyBytes = 64 << 10

	signaturePrefix = "sha256="
	// maxTimestampDigits keeps the freshness arithmetic far from int64 overflow.
	maxTimestampDigits = 18
	// requesterTimeout bounds the API-server round trips one request may cause, so a
	// slow API server cannot pile up handler goroutines until the write timeout.
	requesterTimeout = 10 * time.Second
)

// Answers sent to clients. They are fixed strings: nothing a client sent is echoed
// back, and every authentication failure reads the same so none hints at the cause.
const (
	msgUnauthorized = "request signature or timestamp missing, invalid or expired"
	msgInternal     = "internal error, retry later"
	msgTooLarge     = "request body too large"
	msgRateLimited  = "too many requests"
	// msgNotFound and msgNoMatch answer for a StorageBucket that does not exist and for
	// one outside the key's namespaces alike: a key learns nothing of other namespaces.
	msgNotFound   = "no such StorageBucket"
	msgNoMatch    = "no StorageBucket uses the named bucket(s)"
	msgReplayed   = "this signed request was already accepted; sign a new one (new timestamp or body) to ask again"
	msgCanaryOnly = "every record is about a probe canary object (" + bkv1.CanaryPrefix + "); no probe requested"
)

// msgTooManyKeys refuses a request whose bucket names reach too many StorageBuckets.
var msgTooManyKeys = fmt.Sprintf("the named buckets are used by more than %d StorageBuckets; name fewer buckets per request", MaxBucketsPerRequest)

// routes is a fixed two-path switch rather than an http.ServeMux: the mux would answer
// some paths with redirects, and the receiver promises a short, fixed set of codes.
func (r *Receiver) routes() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch req.URL.Path {
		case ProbePath:
			r.serveProbe(w, req)
		case HealthzPath:
			serveHealthz(w, req)
		default:
			writeError(w, http.StatusNotFound, "not found")
		}
	})
}

func serveHealthz(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, "ok\n")
}

// serveProbe enforces the order headers (key id included) → size limit → read body →
// verify signature → replay check → parse → rate limit → scope → Requester.
//
// Everything that can be judged without the body (both headers present once, a
// well-formed signature, a fresh timestamp) is judged before a byte of it is read, so a
// caller without the key cannot make the receiver read, hold or hash its body by simply
// sending it: only a request that passes those checks has its body read (up to
// MaxBodyBytes, inside one of the body slots that bound the bodies in memory, see
// limits.go) to verify the MAC. S3 event notifications come through the same door,
// signed the same way, and are held to the same order: the receiver tells them from
// direct requests only by their verified body.
//
// Authentication comes before parsing so that unauthenticated input never reaches the
// JSON decoder's error messages or the Requester, and it, the replay check and parsing
// come before the rate limiter so that neither unauthenticated, replayed nor malformed
// traffic, nor the events of the probes' own canary objects, can use up the signed
// senders' budget. The rate limiter comes before the scope check, so a request about a
// StorageBucket outside the key's namespaces spends the same budget, and gets the same
// answer, as one about a StorageBucket that does not exist.
func (r *Receiver) serveProbe(rw http.ResponseWriter, req *http.Request) {
	w := &statusWriter{ResponseWriter: rw}
	keyLabel := ObserveNoKey
	defer func() { r.observe(keyLabel, w.status) }()
	log := r.log.WithValues("remote", req.RemoteAddr)
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}

	claimed, ok := r.checkHeaders(req.Header)
	if !ok {
		log.V(1).Info("probe request rejected", "reason", "authentication failed", "bodyRead", false)
		refuse(w, http.StatusUnauthorized, msgUnauthorized)
		return
	}
	key := claimed.key
	keyLabel = key.observeLabel()
	log = log.WithValues("key", keyLabel)
	if req.ContentLength > MaxBodyBytes {
		log.V(1).Info("probe request rejected", "reason", "body too large", "contentLength", req.ContentLength)
		refuse(w, http.StatusRequestEntityTooLarge, msgTooLarge)
		return
	}

	// The slot is held until the answer is written: the body stays in memory that long.
	release, err := r.bodies.acquire(req.Context())
	if err != nil {
		// The caller went away, or the server stopped, while every slot was taken.
		log.V(1).Info("probe request abandoned", "reason", "gone while waiting for a body slot")
		writeError(w, http.StatusServiceUnavailable, msgInternal)
		return
	}
	defer release()
	// The server's own writer, not the wrapper: MaxBytesReader tells it to close the
	// connection after an oversized body.
	body, err := io.ReadAll(http.MaxBytesReader(rw, req.Body, MaxBodyBytes))
	if err != nil {
		if maxErr := (*http.MaxBytesError)(nil); errors.As(err, &maxErr) {
			log.V(1).Info("probe request rejected", "reason", "body too large")
			refuse(w, http.StatusRequestEntityTooLarge, msgTooLarge)
			return
		}
		log.V(1).Info("probe request rejected", "reason", "reading body failed")
		writeError(w, http.StatusBadRequest, "could not read request body")
		return
	}

	sum, ok := r.verify(claimed, body)
	if !ok {
		log.V(1).Info("probe request rejected", "reason", "authentication failed", "bodyRead", true)
		refuse(w, http.StatusUnauthorized, msgUnauthorized)
		return
	}

	// One signed request is accepted at most once: its MAC is held until its timestamp
	// is stale, and given back if the request is not accepted (202), so that a client
	// may retry a refused or failed request unchanged.
	replays := &key.state.replays
	switch replays.claim(sum, claimed.expires, r.clock.Now()) {
	case replayed:
		log.V(1).Info("probe request rejected", "reason", "replayed")
		writeError(w, http.StatusConflict, msgReplayed)
		return
	case guardFull:
		w.Header().Set("Retry-After", strconv.Itoa(int(replaySweepEvery/time.Second)))
		log.Info("probe request rejected", "reason", "replay guard full")
		writeError(w, http.StatusTooManyRequests, msgRateLimited)
		return
	}
	accepted := false
	defer func() {
		if !accepted {
			replays.release(sum)
		}
	}()

	target, err := parse(body)
	if err != nil {
		// Parse errors are our own fixed texts (see parse.go), never decoder output.
		log.V(1).Info("probe request rejected", "reason", "bad request", "error", err.Error())
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if target.canaryOnly {
		// The probe's own writes: answered with success so the store does not retry,
		// and before the rate limiter so they never spend the senders' budget.
		log.V(1).Info("probe request ignored", "reason", "only canary objects")
		writeJSON(w, http.StatusOK, ignoredResponse{Requested: []string{}, Ignored: msgCanaryOnly})
		return
	}

	if wait, ok := r.allow(key); !ok {
		w.Header().Set("Retry-After", strconv.Itoa(wait))
		log.V(1).Info("probe request rejected", "reason", "rate limited")
		writeError(w, http.StatusTooManyRequests, msgRateLimited)
		return
	}

	ctx, cancel := context.WithTimeout(req.Context(), requesterTimeout)
	defer cancel()
	keys, status, err := r.resolve(ctx, target, key)
	if err != nil {
		log.Error(err, "looking up StorageBuckets failed")
		writeError(w, http.StatusInternalServerError, msgInternal)
		return
	}
	switch {
	case status == http.StatusBadRequest:
		log.V(1).Info("probe request rejected", "reason", "too many StorageBuckets", "buckets", target.buckets)
		writeError(w, status, msgTooManyKeys)
		return
	case status != 0:
		// The log, for the platform team, may say what the answer does not.
		log.V(1).Info("probe request rejected", "reason", "no matching StorageBucket in the key's namespaces",
			"buckets", target.buckets, "outsideKey", target.key != nil && !key.allows(target.key.Namespace))
		msg := msgNotFound
		if target.key == nil {
			msg = msgNoMatch
		}
		writeError(w, status, msg)
		return
	}

	requested := make([]string, 0, len(keys))
	for _, key := range keys {
		if err := r.requester.RequestProbe(ctx, key); err != nil {
			log.Error(err, "requesting probe failed", "storageBucket", key.String())
			writeError(w, http.StatusInternalServerError, msgInternal)
			return
		}
		requested = append(requested, key.String())
	}
	accepted = true
	log.Info("probe requested", "storageBuckets", requested)
	writeJSON(w, http.StatusAccepted, acceptedResponse{Requested: requested})
}

// claimedSignature is what a request's headers claim before its body is read: exactly
// one fresh timestamp and one well-formed signature.
type claimedSignature struct {
	// key is the key the request names (the cluster-wide one when it names none).
	key       *keyEntry
	timestamp string
	signature []byte
	// expires is the instant the timestamp stops being fresh, how long a replay of the
	// request must be remembered.
	expires time.Time
}

// checkHeaders judges everything about a request's authentication that needs no body:
// at most one key id, naming a key the receiver has (none: the cluster-wide key, if
// there is one), exactly one timestamp and one signature header, the timestamp fresh,
// the signature "sha256=" and the hex of a SHA-256 MAC. Freshness is checked before
// the signature only because it is cheaper; every failure looks the same to the
// caller. A request that passes has not been authenticated yet: anyone can write such
// headers, so verify must still check the MAC over the body. An unknown key id costs
// a map lookup and creates nothing.
func (r *Receiver) checkHeaders(h http.Header) (claimedSignature, bool) {
	tsValues, sigValues, idValues := h.Values(TimestampHeader), h.Values(SignatureHeader), h.Values(KeyIDHeader)
	if len(tsValues) != 1 || len(sigValues) != 1 || len(idValues) > 1 {
		return claimedSignature{}, false
	}
	var id string
	if len(idValues) == 1 {
		id = idValues[0]
	}
	key, ok := r.keys.lookup(id, len(idValues) == 1)
	if !ok {
		return claimedSignature{}, false
	}
	ts, sig := tsValues[0], sigValues[0]
	expires, fresh := r.fresh(ts)
	if !fresh {
		return claimedSignature{}, false
	}
	hexSig, ok := strings.CutPrefix(sig, signaturePrefix)
	if !ok || len(hexSig) != 2*sha256.Size {
		return claimedSignature{}, false
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return claimedSignature{}, false
	}
	return claimedSignature{key: key, timestamp: ts, signature: got, expires: expires}, true
}

// verify reports whether the claimed signature is the MAC, with the claimed key, of
// the key id, timestamp and body, and if so returns that MAC (the key's replay guard's
// key).
func (r *Receiver) verify(c claimedSignature, body []byte) (sum []byte, ok bool) {
	// hmac.Equal is constant-time, so response timing reveals nothing about how much
	// of a forged signature was right.
	want := mac(c.key.secret, c.key.id, c.timestamp, body)
	if !hmac.Equal(c.signature, want) {
		return nil, false
	}
	return want, true
}

// fresh reports whether ts is plain decimal Unix seconds within MaxAge of now, in
// either direction (a future timestamp would otherwise extend a replay window), and
// the first instant at which it no longer is.
func (r *Receiver) fresh(ts string) (expires time.Time, ok bool) {
	if len(ts) == 0 || len(ts) > maxTimestampDigits {
		return time.Time{}, false
	}
	for i := 0; i < len(ts); i++ {
		if ts[i] < '0' || ts[i] > '9' {
			return time.Time{}, false
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	maxAge := int64(r.maxAge / time.Second)
	skew := r.clock.Now().Unix() - sec
	if skew < 0 {
		skew = -skew
	}
	if skew > maxAge {
		return time.Time{}, false
	}
	// Fresh while now.Unix() <= sec+maxAge, i.e. until the next whole second.
	return time.Unix(sec+maxAge+1, 0), true
}

// allow takes a token from the key's limiter and from the total one, or from neither:
// a key refused by the total limit gets its own token back, so a key is never charged
// for a request that was not served. When refused, wait is the whole number of
// seconds (at least 1) until the limiter that refused has a token.
func (r *Receiver) allow(key *keyEntry) (wait int, ok bool) {
	now := r.clock.Now()
	own := key.state.limiter.ReserveN(now, 1)
	if !own.OK() || own.DelayFrom(now) > 0 {
		own.CancelAt(now)
		return retryAfter(key.state.limiter, now), false
	}
	if !r.total.AllowN(now, 1) {
		own.CancelAt(now)
		return retryAfter(r.total, now), false
	}
	return 0, true
}

// retryAfter is the whole number of seconds (at least 1) until l has a token.
func retryAfter(l *rate.Limiter, now time.Time) int {
	missing := 1 - l.TokensAt(now)
	limit := float64(l.Limit())
	if missing <= 0 || limit <= 0 {
		return 1
	}
	secs := math.Ceil(missing / limit)
	if secs < 1 || math.IsNaN(secs) {
		return 1
	}
	if secs > 3600 {
		return 3600
	}
	return int(secs)
}

type acceptedResponse struct {
	Requested []string `json:"requested"`
}

type ignoredResponse struct {
	Requested []string `json:"requested"`
	Ignored   string   `json:"ignored"`
}

type errorResponse struct {
	Error string `json:"error"`
}

// refuse answers a request that is not going to be served (401, 413) and closes its
// connection afterwards: a caller that failed authentication, or whose body is not
// going to be read, keeps no idle connection, and so no connection slot, after its
// answer. Over HTTP/2 the header ends the connection gracefully (GOAWAY), letting its
// other streams finish.
func refuse(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Connection", "close")
	writeError(w, status, msg)
}

// statusWriter remembers the status code of the answer, for Options.Observe.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorResponse{Error: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
