package receiver

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// Shared fixtures: one secret, one fixed instant, and a small world of StorageBuckets.
var (
	testSecret = []byte("0123456789abcdef-secret")
	testNow    = time.Unix(1_760_000_000, 0)

	keyPhotos  = types.NamespacedName{Namespace: "team-a", Name: "photos"}
	keyMirror  = types.NamespacedName{Namespace: "team-b", Name: "photos-mirror"}
	keyLogs    = types.NamespacedName{Namespace: "team-a", Name: "logs"}
	keyBroken  = types.NamespacedName{Namespace: "team-a", Name: "broken"}
	errBackend = errors.New("backend exploded: secret-internal-detail")
)

// fakeRequester is an in-memory Requester that records every call, so tests can
// assert both what was requested and that nothing was looked up for rejected requests.
type fakeRequester struct {
	mu       sync.Mutex
	existing map[types.NamespacedName]bool
	byBucket map[string][]types.NamespacedName
	// failExists, failBuckets and failProbe make the matching call return errBackend.
	failExists  map[types.NamespacedName]bool
	failBuckets map[string]bool
	failProbe   map[types.NamespacedName]bool
	// block, if set, is waited on inside RequestProbe (shutdown tests).
	block chan struct{}

	calls  []string
	probes []types.NamespacedName
}

func newFakeRequester() *fakeRequester {
	return &fakeRequester{
		existing: map[types.NamespacedName]bool{keyPhotos: true, keyMirror: true, keyLogs: true, keyBroken: true},
		byBucket: map[string][]types.NamespacedName{
			"photos-bucket": {keyPhotos, keyMirror},
			"logs-bucket":   {keyLogs},
			"shared-bucket": {keyPhotos},
			"broken-bucket": {keyBroken},
		},
		failExists:  map[types.NamespacedName]bool{{Namespace: "team-a", Name: "exists-fails"}: true},
		failBuckets: map[string]bool{"lookup-fails": true},
		failProbe:   map[types.NamespacedName]bool{keyBroken: true},
	}
}

func (f *fakeRequester) record(call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
}

// BucketsNamed records "BucketsNamed <bucket>" for a lookup in every namespace and
// "BucketsNamed <bucket> in <namespace>" for one in a namespace.
func (f *fakeRequester) BucketsNamed(_ context.Context, bucket, namespace string) ([]types.NamespacedName, error) {
	if namespace == "" {
		f.record("BucketsNamed " + bucket)
	} else {
		f.record("BucketsNamed " + bucket + " in " + namespace)
	}
	if f.failBuckets[bucket] {
		return nil, errBackend
	}
	var out []types.NamespacedName
	for _, k := range f.byBucket[bucket] {
		if namespace == "" || k.Namespace == namespace {
			out = append(out, k)
		}
	}
	return out, nil
}

func (f *fakeRequester) Exists(_ context.Context, key types.NamespacedName) (bool, error) {
	f.record("Exists " + key.String())
	if f.failExists[key] {
		return false, errBackend
	}
	return f.existing[key], nil
}

func (f *fakeRequester) RequestProbe(ctx context.Context, key types.NamespacedName) error {
	f.record("RequestProbe " + key.String())
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if f.failProbe[key] {
		return errBackend
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.probes = append(f.probes, key)
	return nil
}

func (f *fakeRequester) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeRequester) Probes() []types.NamespacedName {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]types.NamespacedName(nil), f.probes...)
}

// newTestReceiver builds a Receiver on a fake clock frozen at testNow; mutate adjusts
// the options first.
func newTestReceiver(t testing.TB, fake *fakeRequester, mutate func(*Options)) *Receiver {
	t.Helper()
	opts := Options{
		BindAddress:       "127.0.0.1:0",
		ClusterWideSecret: testSecret,
		Requester:         fake,
		Clock:             clocktesting.NewFakePassiveClock(testNow),
	}
	if mutate != nil {
		mutate(&opts)
	}
	r, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r
}

// unixTS renders t the way clients send it.
func unixTS(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

// signedRequest builds a POST to the probe path carrying a valid signature.
func signedRequest(body []byte, ts string, secret []byte) *http.Request {
	req := httptest.NewRequest(http.MethodPost, ProbePath, bytes.NewReader(body))
	req.Header.Set(TimestampHeader, ts)
	req.Header.Set(SignatureHeader, Sign(secret, ts, body))
	return req
}
