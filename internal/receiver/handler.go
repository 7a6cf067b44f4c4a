package receiver

import (
	"context"
	"crypto/hmac"
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

	"k8s.io/apimachinery/pkg/types"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// Wire constants. They are part of the protocol clients code against.
const (
	ProbePath       = "/v1/probe"
	HealthzPath     = "/healthz"
	TimestampHeader = "X-Bucketkeeper-Timestamp"
	SignatureHeader = "X-Bucketkeeper-Signature"

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
	msgNotFound     = "no such StorageBucket"
	msgNoMatch      = "no StorageBucket uses the named bucket(s)"
	msgReplayed     = "this signed request was already accepted; sign a new one (new timestamp or body) to ask again"
	msgCanaryOnly   = "every record is about a probe canary object (" + bkv1.CanaryPrefix + "); no probe requested"
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

// serveProbe enforces the order size limit → read body → verify signature → replay
// check → parse → rate limit → Requester. Authentication comes before parsing so that
// unauthenticated input never reaches the JSON decoder's error messages or the
// Requester, and it, the replay check and parsing come before the rate limiter so that
// neither unauthenticated, replayed nor malformed traffic, nor the events of the
// probes' own canary objects, can use up the signed senders' budget.
func (r *Receiver) serveProbe(w http.ResponseWriter, req *http.Request) {
	log := r.log.WithValues("remote", req.RemoteAddr)
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}

	if req.ContentLength > MaxBodyBytes {
		log.V(1).Info("probe request rejected", "reason", "body too large", "contentLength", req.ContentLength)
		writeError(w, http.StatusRequestEntityTooLarge, msgTooLarge)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, MaxBodyBytes))
	if err != nil {
		if maxErr := (*http.MaxBytesError)(nil); errors.As(err, &maxErr) {
			log.V(1).Info("probe request rejected", "reason", "body too large")
			writeError(w, http.StatusRequestEntityTooLarge, msgTooLarge)
			return
		}
		log.V(1).Info("probe request rejected", "reason", "reading body failed")
		writeError(w, http.StatusBadRequest, "could not read request body")
		return
	}

	sum, expires, ok := r.authenticate(req.Header, body)
	if !ok {
		log.V(1).Info("probe request rejected", "reason", "authentication failed")
		writeError(w, http.StatusUnauthorized, msgUnauthorized)
		return
	}

	// One signed request is accepted at most once: its MAC is held until its timestamp
	// is stale, and given back if the request is not accepted (202), so that a client
	// may retry a refused or failed request unchanged.
	switch r.replays.claim(sum, expires, r.clock.Now()) {
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
			r.replays.release(sum)
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

	if now := r.clock.Now(); !r.limiter.AllowN(now, 1) {
		w.Header().Set("Retry-After", strconv.Itoa(r.retryAfter(now)))
		log.V(1).Info("probe request rejected", "reason", "rate limited")
		writeError(w, http.StatusTooManyRequests, msgRateLimited)
		return
	}

	ctx, cancel := context.WithTimeout(req.Context(), requesterTimeout)
	defer cancel()
	keys, status, err := r.resolve(ctx, target)
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
		log.V(1).Info("probe request rejected", "reason", "no matching StorageBucket", "buckets", target.buckets)
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

// resolve maps a parsed target to StorageBucket keys. A non-zero status means nothing
// matched (404) or more than MaxBucketsPerRequest StorageBuckets did (400: each costs
// an API write); err is a Requester failure.
func (r *Receiver) resolve(ctx context.Context, t target) ([]types.NamespacedName, int, error) {
	if t.key != nil {
		ok, err := r.requester.Exists(ctx, *t.key)
		if err != nil {
			return nil, 0, err
		}
		if !ok {
			return nil, http.StatusNotFound, nil
		}
		return []types.NamespacedName{*t.key}, 0, nil
	}
	var keys []types.NamespacedName
	seen := map[types.NamespacedName]bool{}
	for _, bucket := range t.buckets {
		found, err := r.requester.BucketsNamed(ctx, bucket)
		if err != nil {
			return nil, 0, err
		}
		for _, k := range found {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
		if len(keys) > MaxBucketsPerRequest {
			return nil, http.StatusBadRequest, nil
		}
	}
	if len(keys) == 0 {
		return nil, http.StatusNotFound, nil
	}
	return keys, 0, nil
}

// authenticate reports whether the request carries exactly one fresh timestamp and a
// matching signature over it and body, and if so returns the verified MAC and the
// instant the timestamp stops being fresh (how long a replay must be remembered).
// Freshness is checked first only because it is cheaper; every failure looks the same
// to the caller.
func (r *Receiver) authenticate(h http.Header, body []byte) (sum []byte, expires time.Time, ok bool) {
	tsValues, sigValues := h.Values(TimestampHeader), h.Values(SignatureHeader)
	if len(tsValues) != 1 || len(sigValues) != 1 {
		return nil, time.Time{}, false
	}
	ts, sig := tsValues[0], sigValues[0]
	expires, fresh := r.fresh(ts)
	if !fresh {
		return nil, time.Time{}, false
	}
	hexSig, ok := strings.CutPrefix(sig, signaturePrefix)
	if !ok {
		return nil, time.Time{}, false
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return nil, time.Time{}, false
	}
	// hmac.Equal is constant-time, so response timing reveals nothing about how much
	// of a forged signature was right.
	want := mac(r.secret, ts, body)
	if !hmac.Equal(got, want) {
		return nil, time.Time{}, false
	}
	return want, expires, true
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

// retryAfter is the whole number of seconds (at least 1) until a token is available.
func (r *Receiver) retryAfter(now time.Time) int {
	missing := 1 - r.limiter.TokensAt(now)
	limit := float64(r.limiter.Limit())
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
