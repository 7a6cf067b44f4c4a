package receiver

import (
	"bytes"
	"context"
	"fmt"
	"maps"
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

// Namespaced keys of the tests: two for team-a (so a request can be moved from one to
// the other) and one for team-b.
var (
	keyA  = Key{ID: "team-a-ci", Secret: []byte("team-a-ci-secret-0123456789"), Namespaces: []string{"team-a"}}
	keyA2 = Key{ID: "team-a-deploy", Secret: []byte("team-a-deploy-secret-0123456"), Namespaces: []string{"team-a"}}
	keyB  = Key{ID: "team-b-ci", Secret: []byte("team-b-ci-secret-0123456789"), Namespaces: []string{"team-b"}}
)

// newKeyedReceiver is newTestReceiver with namespaced keys keyA, keyA2 and keyB and no
// cluster-wide key unless mutate adds one.
func newKeyedReceiver(t testing.TB, fake *fakeRequester, mutate func(*Options)) *Receiver {
	t.Helper()
	r := newTestReceiver(t, fake, func(o *Options) {
		o.ClusterWideSecret, o.NamespacedKeys = nil, true
		if mutate != nil {
			mutate(o)
		}
	})
	for _, k := range []Key{keyA, keyA2, keyB} {
		if err := r.SetKey(k); err != nil {
			t.Fatalf("SetKey(%s): %v", k.ID, err)
		}
	}
	return r
}

// keyedRequest is a POST signed now (testNow) with key k.
func keyedRequest(k Key, body string) *http.Request {
	return keyedRequestAt(k, body, unixTS(testNow))
}

func keyedRequestAt(k Key, body, ts string) *http.Request {
	req := httptest.NewRequest(http.MethodPost, ProbePath, strings.NewReader(body))
	req.Header.Set(KeyIDHeader, k.ID)
	req.Header.Set(TimestampHeader, ts)
	req.Header.Set(SignatureHeader, SignWithKey(k.ID, k.Secret, ts, []byte(body)))
	return req
}

func direct(key types.NamespacedName) string {
	return fmt.Sprintf(`{"namespace":%q,"name":%q}`, key.Namespace, key.Name)
}

func eventFor(buckets ...string) string {
	var records []string
	for _, b := range buckets {
		records = append(records, fmt.Sprintf(`{"eventName":"s3:ObjectCreated:Put","s3":{"bucket":{"name":%q},"object":{"key":"a.txt"}}}`, b))
	}
	return `{"Records":[` + strings.Join(records, ",") + `]}`
}

// answer is everything a caller sees of an answer but the date.
type answer struct {
	code   int
	header http.Header
	body   string
}

func answerOf(rec *httptest.ResponseRecorder) answer {
	h := rec.Result().Header.Clone()
	h.Del("Date")
	return answer{code: rec.Code, header: h, body: rec.Body.String()}
}

func (a answer) equal(b answer) bool {
	return a.code == b.code && a.body == b.body && maps.EqualFunc(a.header, b.header, slices.Equal)
}

// TestKeyCannotProbeNameOrDetectOtherNamespaces: a key of team-a probes team-a's
// StorageBuckets, and about team-b's gets the answer it gets about a StorageBucket that
// does not exist, without one lookup of team-b's: by name, by a bucket only team-b
// uses, by a bucket both use (only team-a's is named and probed), and by a bucket that
// eleven StorageBuckets of another namespace use (not the 400 of too many).
func TestKeyCannotProbeNameOrDetectOtherNamespaces(t *testing.T) {
	fake := newFakeRequester()
	fake.byBucket["mirror-only-bucket"] = []types.NamespacedName{keyMirror}
	for i := range 11 {
		fake.byBucket["crowded-bucket"] = append(fake.byBucket["crowded-bucket"], types.NamespacedName{Namespace: "team-c", Name: fmt.Sprintf("sb-%02d", i)})
	}
	h := newKeyedReceiver(t, fake, nil).Handler()
	send := func(body string) (answer, []string) {
		fake.calls = nil
		return answerOf(serve(h, keyedRequest(keyA, body))), fake.Calls()
	}

	missingDirect, calls := send(direct(types.NamespacedName{Namespace: "team-a", Name: "nope"}))
	if missingDirect.code != http.StatusNotFound || !slices.Equal(calls, []string{"Exists team-a/nope"}) {
		t.Fatalf("missing StorageBucket of team-a: %d %s, calls %q", missingDirect.code, missingDirect.body, calls)
	}
	for name, body := range map[string]string{
		"existing StorageBucket of team-b": direct(keyMirror),
		"missing StorageBucket of team-b":  direct(types.NamespacedName{Namespace: "team-b", Name: "nope"}),
		"existing StorageBucket of team-c": direct(types.NamespacedName{Namespace: "team-c", Name: "sb-00"}),
	} {
		got, calls := send(body)
		if !got.equal(missingDirect) {
			t.Errorf("%s: %+v, want the answer about a missing one of team-a %+v", name, got, missingDirect)
		}
		if len(calls) != 0 || len(fake.Probes()) != 0 {
			t.Errorf("%s: Requester calls %q, probes %v; want none", name, calls, fake.Probes())
		}
	}

	unused, calls := send(eventFor("nobody-uses-this"))
	if unused.code != http.StatusNotFound || !slices.Equal(calls, []string{"BucketsNamed nobody-uses-this in team-a"}) {
		t.Fatalf("unused bucket: %d %s, calls %q", unused.code, unused.body, calls)
	}
	for name, body := range map[string]string{
		"bucket only team-b uses":                eventFor("mirror-only-bucket"),
		"bucket eleven claims of team-c use":     eventFor("crowded-bucket"),
		"both, in one event":                     eventFor("mirror-only-bucket", "crowded-bucket"),
		"bucket team-b uses, then unused bucket": eventFor("mirror-only-bucket", "nobody-uses-this"),
	} {
		got, calls := send(body)
		if !got.equal(unused) {
			t.Errorf("%s: %+v, want the answer about an unused bucket %+v", name, got, unused)
		}
		for _, c := range calls {
			if !strings.HasSuffix(c, " in team-a") {
				t.Errorf("%s: lookup %q outside the key's namespace", name, c)
			}
		}
	}

	shared, calls := send(eventFor("photos-bucket"))
	if shared.code != http.StatusAccepted || shared.body != `{"requested":["team-a/photos"]}`+"\n" {
		t.Fatalf("bucket team-a and team-b use: %d %s, want 202 naming only team-a/photos", shared.code, shared.body)
	}
	if !slices.Equal(calls, []string{"BucketsNamed photos-bucket in team-a", "RequestProbe team-a/photos"}) {
		t.Errorf("calls %q", calls)
	}
	if got := fake.Probes(); !slices.Equal(got, []types.NamespacedName{keyPhotos}) {
		t.Errorf("probes %v, want only team-a/photos", got)
	}
}

// A Requester that answers with another namespace's StorageBuckets (a bug, or an index
// that ignores the namespace) still reaches only the key's.
func TestScopeHoldsAgainstAnOverreachingRequester(t *testing.T) {
	fake := &overreaching{newFakeRequester()}
	h := newKeyedReceiver(t, fake.fakeRequester, func(o *Options) { o.Requester = fake }).Handler()
	rec := serve(h, keyedRequest(keyA, eventFor("photos-bucket")))
	if rec.Code != http.StatusAccepted || !strings.Contains(rec.Body.String(), `["team-a/photos"]`) {
		t.Fatalf("%d %s, want 202 naming only team-a/photos", rec.Code, rec.Body)
	}
	if got := fake.Probes(); !slices.Equal(got, []types.NamespacedName{keyPhotos}) {
		t.Fatalf("probes %v, want only team-a/photos", got)
	}
}

type overreaching struct{ *fakeRequester }

func (o *overreaching) BucketsNamed(ctx context.Context, bucket, _ string) ([]types.NamespacedName, error) {
	return o.fakeRequester.BucketsNamed(ctx, bucket, "")
}

// A request naming an unknown key id, or a key id twice, or signed for one key and
// sent under another (even one with the same secret), or signed without the key id
// and sent with one, is refused on its headers or its MAC like any forgery; unknown ids
// leave nothing behind and never become a metric label.
func TestKeyIDsAreAuthenticated(t *testing.T) {
	fake := newFakeRequester()
	var mu sync.Mutex
	labels := map[string]int{}
	r := newKeyedReceiver(t, fake, func(o *Options) {
		o.Observe = func(key string, code int) { mu.Lock(); labels[fmt.Sprintf("%s %d", key, code)]++; mu.Unlock() }
	})
	twin := Key{ID: "team-a-twin", Secret: keyA.Secret, Namespaces: keyA.Namespaces}
	if err := r.SetKey(twin); err != nil {
		t.Fatal(err)
	}
	h := r.Handler()
	states := r.keyStates()
	body := direct(keyPhotos)

	for i := range 1000 {
		k := Key{ID: fmt.Sprintf("guessed-%d", i), Secret: []byte(fmt.Sprintf("guessed-secret-%016d", i))}
		counted := &countingBody{r: strings.NewReader(body)}
		req := keyedRequest(k, body)
		req.Body = counted
		if rec := serve(h, req); rec.Code != http.StatusUnauthorized || counted.read != 0 {
			t.Fatalf("unknown key id %s: %d, %d body bytes read; want 401 on the headers", k.ID, rec.Code, counted.read)
		}
	}
	if got := r.keyStates(); got != states {
		t.Fatalf("key states grew from %d to %d with unknown key ids", states, got)
	}

	moved := keyedRequest(keyA, body)
	moved.Header.Set(KeyIDHeader, twin.ID) // same secret, another id
	unkeyed := keyedRequest(keyA, body)
	unkeyed.Header.Set(SignatureHeader, Sign(keyA.Secret, unixTS(testNow), []byte(body)))
	twice := keyedRequest(keyA, body)
	twice.Header.Add(KeyIDHeader, keyA.ID)
	noID := keyedRequest(keyA, body)
	noID.Header.Del(KeyIDHeader)
	emptyID := keyedRequest(keyA, body)
	emptyID.Header.Set(KeyIDHeader, "")
	for name, req := range map[string]*http.Request{
		"signed for team-a-ci, sent as team-a-twin": moved, "signed without the key id": unkeyed,
		"key id twice": twice, "no key id and no cluster-wide key": noID, "empty key id": emptyID,
	} {
		if rec := serve(h, req); rec.Code != http.StatusUnauthorized || rec.Body.String() != `{"error":"`+msgUnauthorized+`"}`+"\n" {
			t.Errorf("%s: %d %s, want the generic 401", name, rec.Code, rec.Body)
		}
	}
	if len(fake.Calls()) != 0 {
		t.Fatalf("refused requests reached the Requester: %q", fake.Calls())
	}
	if rec := serve(h, keyedRequest(keyA, body)); rec.Code != http.StatusAccepted {
		t.Fatalf("signed request: %d %s", rec.Code, rec.Body)
	}
	mu.Lock()
	defer mu.Unlock()
	// A known key's failed MAC counts under its id (forgeries against it, or a
	// misconfigured caller); every other refusal under no key.
	want := map[string]int{ObserveNoKey + " 401": 1000 + 3, twin.ID + " 401": 1, keyA.ID + " 401": 1, keyA.ID + " 202": 1}
	if !maps.Equal(labels, want) {
		t.Fatalf("observed %v, want %v", labels, want)
	}
}

// The cluster-wide key, when configured, reaches every namespace with unkeyed
// requests, as before namespaced keys; it is observed as "*".
func TestClusterWideKeyReachesEveryNamespace(t *testing.T) {
	fake := newFakeRequester()
	var observed []string
	h := newKeyedReceiver(t, fake, func(o *Options) {
		o.ClusterWideSecret = testSecret
		o.Observe = func(key string, code int) { observed = append(observed, fmt.Sprintf("%s %d", key, code)) }
	}).Handler()
	rec := serve(h, signedRequest([]byte(minioEvent), unixTS(testNow), testSecret))
	if rec.Code != http.StatusAccepted || !strings.Contains(rec.Body.String(), `"team-b/photos-mirror"`) {
		t.Fatalf("%d %s, want 202 naming both namespaces' StorageBuckets", rec.Code, rec.Body)
	}
	if !slices.Equal(fake.Calls()[:1], []string{"BucketsNamed photos-bucket"}) {
		t.Errorf("calls %q, want one lookup in every namespace", fake.Calls())
	}
	if !slices.Equal(observed, []string{ObserveClusterWideKey + " 202"}) {
		t.Errorf("observed %q", observed)
	}
}

// Replays are judged per key: a request accepted with one key is refused when sent
// again, while the same body and timestamp signed with another key is a request of
// its own.
func TestReplayIsPerKey(t *testing.T) {
	fake := newFakeRequester()
	h := newKeyedReceiver(t, fake, nil).Handler()
	body := direct(keyPhotos)
	if rec := serve(h, keyedRequest(keyA, body)); rec.Code != http.StatusAccepted {
		t.Fatalf("first: %d", rec.Code)
	}
	if rec := serve(h, keyedRequest(keyA, body)); rec.Code != http.StatusConflict {
		t.Fatalf("replay with the same key: %d, want 409", rec.Code)
	}
	if rec := serve(h, keyedRequest(keyA2, body)); rec.Code != http.StatusAccepted {
		t.Fatalf("the same request signed with another key: %d, want 202", rec.Code)
	}
	if rec := serve(h, keyedRequest(keyA2, body)); rec.Code != http.StatusConflict {
		t.Fatalf("its replay: %d, want 409", rec.Code)
	}
}

// Rate limits are per key: a key that spent its budget (on StorageBuckets of another
// namespace as on missing ones: both cost the same) is refused while another key is
// served; and the total over all keys holds too, without charging a key for a request
// the total refused.
func TestRateLimitIsPerKeyAndInTotal(t *testing.T) {
	fake := newFakeRequester()
	clk := clocktesting.NewFakePassiveClock(testNow)
	r := newKeyedReceiver(t, fake, func(o *Options) {
		o.Clock, o.Burst, o.RequestsPerSecond, o.TotalBurst, o.TotalRequestsPerSecond = clk, 2, 0.25, 3, 0.5
	})
	h := r.Handler()
	for i, body := range []string{direct(keyMirror), direct(types.NamespacedName{Namespace: "team-a", Name: "nope"})} {
		if rec := serve(h, keyedRequest(keyA, body)); rec.Code != http.StatusNotFound {
			t.Fatalf("request %d of team-a-ci: %d, want 404", i, rec.Code)
		}
	}
	rec := serve(h, keyedRequest(keyA, direct(keyPhotos)))
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "4" {
		t.Fatalf("third request of team-a-ci: %d Retry-After %q, want 429 after 4s (0.25/s)", rec.Code, rec.Header().Get("Retry-After"))
	}
	if rec := serve(h, keyedRequest(keyB, direct(keyMirror))); rec.Code != http.StatusAccepted {
		t.Fatalf("team-b-ci while team-a-ci is limited: %d, want 202", rec.Code)
	}
	// Three requests so far: the total (burst 3) refuses team-a-deploy's first.
	tokens := r.keys.byID[keyA2.ID].state.limiter.TokensAt(clk.Now())
	rec = serve(h, keyedRequest(keyA2, direct(keyLogs)))
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "2" {
		t.Fatalf("over the total: %d Retry-After %q, want 429 after 2s (0.5/s)", rec.Code, rec.Header().Get("Retry-After"))
	}
	if after := r.keys.byID[keyA2.ID].state.limiter.TokensAt(clk.Now()); after != tokens {
		t.Fatalf("the total's refusal cost team-a-deploy a token: %v -> %v", tokens, after)
	}
	clk.SetTime(testNow.Add(2 * time.Second))
	if rec := serve(h, keyedRequest(keyA2, direct(keyLogs))); rec.Code != http.StatusAccepted {
		t.Fatalf("retried after the total refilled: %d, want 202", rec.Code)
	}
}

// SetKey refuses invalid keys without their secret in the error and stops a key that
// becomes invalid (fail closed); a mended or rotated key keeps its replay guard, and
// RemoveKey drops all the key's state.
func TestSetKeyAndRemoveKey(t *testing.T) {
	fake := newFakeRequester()
	r := newKeyedReceiver(t, fake, nil)
	h := r.Handler()
	tooMany := make([]string, MaxKeyNamespaces+1)
	for i := range tooMany {
		tooMany[i] = fmt.Sprintf("ns-%d", i)
	}
	for name, k := range map[string]Key{
		"short secret":         {ID: "k", Secret: []byte("short-secret"), Namespaces: []string{"team-a"}},
		"no namespace":         {ID: "k", Secret: keyA.Secret},
		"bad namespace":        {ID: "k", Secret: keyA.Secret, Namespaces: []string{"Team_A"}},
		"too many namespaces":  {ID: "k", Secret: keyA.Secret, Namespaces: tooMany},
		"id not a Secret name": {ID: "K:1", Secret: keyA.Secret, Namespaces: []string{"team-a"}},
	} {
		err := r.SetKey(k)
		if err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), string(k.Secret)) {
			t.Errorf("%s: the error reveals the secret: %v", name, err)
		}
	}
	if ids := r.keyIDs(); !slices.Equal(ids, []string{keyA.ID, keyA2.ID, keyB.ID}) {
		t.Fatalf("keys %q after refusals", ids)
	}

	body := direct(keyPhotos)
	if rec := serve(h, keyedRequest(keyA, body)); rec.Code != http.StatusAccepted {
		t.Fatalf("before: %d", rec.Code)
	}
	broken := keyA
	broken.Namespaces = nil
	if err := r.SetKey(broken); err == nil {
		t.Fatal("a key without namespaces was accepted")
	}
	if rec := serve(h, keyedRequest(keyA, direct(keyLogs))); rec.Code != http.StatusUnauthorized {
		t.Fatalf("broken key: %d, want 401", rec.Code)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(r.SetKey(keyA))
	if rec := serve(h, keyedRequest(keyA, body)); rec.Code != http.StatusConflict {
		t.Fatalf("mended key, replayed request: %d, want 409", rec.Code)
	}

	rotated := keyA
	rotated.Secret = []byte("team-a-ci-rotated-secret-0123")
	must(r.SetKey(rotated))
	if rec := serve(h, keyedRequest(keyA, direct(keyLogs))); rec.Code != http.StatusUnauthorized {
		t.Fatalf("old secret after rotation: %d, want 401", rec.Code)
	}
	if rec := serve(h, keyedRequest(rotated, direct(keyLogs))); rec.Code != http.StatusAccepted {
		t.Fatalf("new secret: %d, want 202", rec.Code)
	}
	widened := rotated
	widened.Namespaces = []string{"team-a", "team-b"}
	must(r.SetKey(widened))
	if rec := serve(h, keyedRequest(widened, direct(keyMirror))); rec.Code != http.StatusAccepted {
		t.Fatalf("after adding team-b: %d, want 202", rec.Code)
	}

	states := r.keyStates()
	r.RemoveKey(keyA.ID)
	if rec := serve(h, keyedRequest(widened, direct(keyLogs))); rec.Code != http.StatusUnauthorized {
		t.Fatalf("removed key: %d, want 401", rec.Code)
	}
	if got := r.keyStates(); got != states-1 {
		t.Fatalf("key states %d after RemoveKey, want %d", got, states-1)
	}
}

func TestParseNamespaces(t *testing.T) {
	cases := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{in: "team-a", want: []string{"team-a"}},
		{in: " team-a , team-b,,team-a,", want: []string{"team-a", "team-b"}},
		{in: "", want: nil},
		{in: " , ", want: nil},
		{in: "team-a,Team_B", wantErr: `"Team_B" is not a namespace name`},
		{in: "team-a,*", wantErr: `"*" is not a namespace name`},
		{in: "team-a/x", wantErr: `"team-a/x"`},
	}
	for _, c := range cases {
		got, err := ParseNamespaces(c.in)
		switch {
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("ParseNamespaces(%q) error %v, want one containing %q", c.in, err, c.wantErr)
		case c.wantErr == "" && (err != nil || !slices.Equal(got, c.want)):
			t.Errorf("ParseNamespaces(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

// The wire format of a keyed signature, computed independently (Python hmac) over
// "team-a-ci:1760000000.{...}".
func TestSignWithKeyMatchesWireFormat(t *testing.T) {
	got := SignWithKey("team-a-ci", []byte("team-a-ci-secret-0123456789"), "1760000000", []byte(directPhotos))
	want := "sha256=27786820f32ba2253d3871b76cc18e275f3dd5b377c620fba8e949f4aadb451b"
	if got != want {
		t.Fatalf("SignWithKey = %s, want %s", got, want)
	}
	if SignWithKey("", testSecret, "1", []byte("x")) != Sign(testSecret, "1", []byte("x")) {
		t.Fatal("SignWithKey without a key id differs from Sign")
	}
	if bytes.Equal([]byte(SignWithKey("a", testSecret, "1", nil)), []byte(Sign(testSecret, "1", nil))) {
		t.Fatal("a key id does not change the signature")
	}
}
