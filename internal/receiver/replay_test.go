package receiver

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// elevenBuckets is an S3 event naming one bucket more than a request may.
var elevenBuckets = eventNaming(11)

func eventNaming(n int) string {
	records := make([]string, n)
	for i := range records {
		records[i] = fmt.Sprintf(`{"s3":{"bucket":{"name":"bucket-%02d"}}}`, i)
	}
	return `{"Records":[` + strings.Join(records, ",") + `]}`
}

func serve(h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// A signed request replayed inside its validity window triggers nothing: not the same
// bytes, not with the signature's hex upper-cased, not after a minute; once its
// timestamp is stale it is refused as such. A newly signed request still works.
func TestReplayedRequestTriggersNothing(t *testing.T) {
	fake := newFakeRequester()
	clk := clocktesting.NewFakePassiveClock(testNow)
	h := newTestReceiver(t, fake, func(o *Options) { o.Clock = clk }).Handler()
	body, ts := []byte(directPhotos), unixTS(testNow)

	if rec := serve(h, signedRequest(body, ts, testSecret)); rec.Code != http.StatusAccepted {
		t.Fatalf("first request: %d %s", rec.Code, rec.Body)
	}
	calls := len(fake.Calls())

	upper := signedRequest(body, ts, testSecret)
	upper.Header.Set(SignatureHeader, signaturePrefix+strings.ToUpper(strings.TrimPrefix(upper.Header.Get(SignatureHeader), signaturePrefix)))
	replays := map[string]*http.Request{"verbatim": signedRequest(body, ts, testSecret), "upper-case hex": upper}
	for name, req := range replays {
		rec := serve(h, req)
		if rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(), "already accepted") {
			t.Errorf("%s replay: %d %s, want 409 naming the replay", name, rec.Code, rec.Body)
		}
	}
	clk.SetTime(testNow.Add(time.Minute))
	if rec := serve(h, signedRequest(body, ts, testSecret)); rec.Code != http.StatusConflict {
		t.Errorf("replay a minute later: %d, want 409", rec.Code)
	}
	if got := fake.Calls(); len(got) != calls {
		t.Fatalf("replays reached the Requester: %q", got[calls:])
	}

	clk.SetTime(testNow.Add(5*time.Minute + time.Second))
	if rec := serve(h, signedRequest(body, ts, testSecret)); rec.Code != http.StatusUnauthorized {
		t.Errorf("replay after the window: %d, want 401 (stale)", rec.Code)
	}
	if rec := serve(h, signedRequest(body, unixTS(clk.Now()), testSecret)); rec.Code != http.StatusAccepted {
		t.Errorf("newly signed request: %d, want 202", rec.Code)
	}
	if got := fake.Probes(); len(got) != 2 {
		t.Errorf("probes = %v, want two (first request, newly signed one)", got)
	}
}

// Copies of one signed request arriving at once: exactly one is acted on.
func TestConcurrentCopiesTriggerOnce(t *testing.T) {
	fake := newFakeRequester()
	h := newTestReceiver(t, fake, nil).Handler()
	body, ts := []byte(directPhotos), unixTS(testNow)
	codes := make([]int, 16)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = serve(h, signedRequest(body, ts, testSecret)).Code
		}()
	}
	wg.Wait()
	accepted, conflicts := 0, 0
	for _, c := range codes {
		switch c {
		case http.StatusAccepted:
			accepted++
		case http.StatusConflict:
			conflicts++
		}
	}
	if accepted != 1 || conflicts != len(codes)-1 || len(fake.Probes()) != 1 {
		t.Fatalf("codes %v, probes %v: want one 202, the rest 409, one probe", codes, fake.Probes())
	}
}

// A request that triggered nothing (rate limited, failed) may be sent again unchanged,
// as clients retry; once it succeeds, it may not.
func TestRefusedRequestMayBeRetried(t *testing.T) {
	fake := newFakeRequester()
	clk := clocktesting.NewFakePassiveClock(testNow)
	h := newTestReceiver(t, fake, func(o *Options) { o.Clock = clk; o.Burst = 1; o.RequestsPerSecond = 1 }).Handler()

	if rec := serve(h, signedRequest([]byte(`{"namespace":"team-a","name":"logs"}`), unixTS(testNow), testSecret)); rec.Code != http.StatusAccepted {
		t.Fatalf("first request: %d", rec.Code)
	}
	body, ts := []byte(directPhotos), unixTS(testNow)
	if rec := serve(h, signedRequest(body, ts, testSecret)); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("over the rate: %d, want 429", rec.Code)
	}
	clk.SetTime(testNow.Add(time.Second))
	if rec := serve(h, signedRequest(body, ts, testSecret)); rec.Code != http.StatusAccepted {
		t.Fatalf("the rate-limited request retried: %d, want 202", rec.Code)
	}

	broken := []byte(`{"namespace":"team-a","name":"broken"}`)
	for i := range 2 {
		clk.SetTime(clk.Now().Add(time.Second))
		if rec := serve(h, signedRequest(broken, ts, testSecret)); rec.Code != http.StatusInternalServerError {
			t.Fatalf("failing request, attempt %d: %d, want 500 both times", i+1, rec.Code)
		}
	}
	want := []types.NamespacedName{keyLogs, keyPhotos}
	if got := fake.Probes(); !slices.Equal(got, want) {
		t.Fatalf("probes = %v, want %v", got, want)
	}
}

// The guard's memory is bounded: entries leave once their timestamps are stale, and a
// full guard refuses (429) rather than accepting unguarded.
func TestReplayGuardIsBounded(t *testing.T) {
	var g replayGuard
	mac := func(i int) []byte { s := sha256.Sum256(fmt.Appendf(nil, "%d", i)); return s[:] }
	expires := testNow.Add(5*time.Minute + time.Second)
	for i := range MaxRemembered {
		if g.claim(mac(i), expires, testNow) != claimed {
			t.Fatalf("claim %d refused", i)
		}
	}
	if got := g.claim(mac(-1), expires, testNow); got != guardFull {
		t.Fatalf("claim beyond MaxRemembered = %v, want guardFull", got)
	}
	if got := g.claim(mac(7), expires, testNow.Add(time.Minute)); got != replayed {
		t.Fatalf("claim of a held MAC = %v, want replayed", got)
	}
	g.release(mac(7))
	if got := g.claim(mac(7), expires, testNow.Add(time.Minute)); got != claimed {
		t.Fatalf("claim of a released MAC = %v, want claimed", got)
	}
	if got := g.claim(mac(-1), expires.Add(time.Minute), expires); got != claimed {
		t.Fatalf("claim after every entry expired = %v, want claimed", got)
	}
	if n := g.len(); n != 1 {
		t.Fatalf("guard holds %d entries after expiry, want 1", n)
	}
}

// Through the handler: entries of accepted requests are swept once stale.
func TestReplayGuardForgetsStaleSignatures(t *testing.T) {
	fake := newFakeRequester()
	clk := clocktesting.NewFakePassiveClock(testNow)
	r := newTestReceiver(t, fake, func(o *Options) { o.Clock = clk })
	for i := range 5 {
		body := fmt.Appendf(nil, `{"namespace":"team-a","name":"photos","n":%d}`, i)
		if rec := serve(r.Handler(), signedRequest(body, unixTS(testNow), testSecret)); rec.Code != http.StatusAccepted {
			t.Fatalf("request %d: %d", i, rec.Code)
		}
	}
	if n := r.keys.clusterWide.state.replays.len(); n != 5 {
		t.Fatalf("guard holds %d signatures, want 5", n)
	}
	clk.SetTime(testNow.Add(6 * time.Minute))
	if rec := serve(r.Handler(), signedRequest([]byte(directPhotos), unixTS(clk.Now()), testSecret)); rec.Code != http.StatusAccepted {
		t.Fatalf("later request: %d", rec.Code)
	}
	if n := r.keys.clusterWide.state.replays.len(); n != 1 {
		t.Fatalf("guard holds %d signatures after the window, want only the newest", n)
	}
}

// One request reaches at most MaxBucketsPerRequest buckets: more names are refused
// before any lookup, more matching StorageBuckets before any probe request.
func TestRequestNamesAtMostTenBuckets(t *testing.T) {
	if MaxBucketsPerRequest != 10 {
		t.Fatalf("MaxBucketsPerRequest = %d; docs/probing.md documents 10", MaxBucketsPerRequest)
	}
	fake := newFakeRequester()
	h := newTestReceiver(t, fake, nil).Handler()
	rec := serve(h, signedRequest([]byte(elevenBuckets), unixTS(testNow), testSecret))
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "more than 10 distinct buckets") {
		t.Fatalf("11 buckets: %d %s, want 400 naming the limit", rec.Code, rec.Body)
	}
	if calls := fake.Calls(); len(calls) != 0 {
		t.Fatalf("a refused request reached the Requester: %q", calls)
	}

	// Ten names pass the parser (and find nothing here).
	rec = serve(h, signedRequest([]byte(eventNaming(10)), unixTS(testNow), testSecret))
	if rec.Code != http.StatusNotFound || len(fake.Calls()) != 10 {
		t.Fatalf("10 buckets: %d %s, calls %q; want 404 after 10 lookups", rec.Code, rec.Body, fake.Calls())
	}

	// Two names used by eleven StorageBuckets (the same bucket name on several stores).
	fake.calls = nil
	for i := range 11 {
		bucket := []string{"bucket-00", "bucket-01"}[i%2]
		fake.byBucket[bucket] = append(fake.byBucket[bucket], types.NamespacedName{Namespace: "team-c", Name: fmt.Sprintf("sb-%02d", i)})
	}
	rec = serve(h, signedRequest([]byte(eventNaming(2)), unixTS(testNow), testSecret))
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "more than 10 StorageBuckets") {
		t.Fatalf("11 StorageBuckets: %d %s, want 400 naming the limit", rec.Code, rec.Body)
	}
	if len(fake.Probes()) != 0 {
		t.Fatalf("probes requested for a refused request: %v", fake.Probes())
	}
	// Refused, so not remembered: once fewer StorageBuckets match, the same signed
	// request is served.
	fake.byBucket["bucket-01"] = nil
	rec = serve(h, signedRequest([]byte(eventNaming(2)), unixTS(testNow), testSecret))
	if rec.Code != http.StatusAccepted || len(fake.Probes()) != 6 {
		t.Fatalf("6 StorageBuckets: %d %s, probes %v; want 202 and 6 probes", rec.Code, rec.Body, fake.Probes())
	}
}
