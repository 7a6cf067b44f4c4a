package receiver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

const (
	directPhotos = `{"namespace":"team-a","name":"photos"}`
	// minioEvent is shaped like MinIO's webhook payload (extra top-level keys, many
	// record fields); two records for the same bucket must yield one lookup.
	minioEvent = `{"EventName":"s3:ObjectCreated:Put","Key":"photos-bucket/a.jpg","Records":[
	 {"eventVersion":"2.0","eventSource":"minio:s3","eventName":"s3:ObjectCreated:Put",
	  "s3":{"s3SchemaVersion":"1.0","configurationId":"Config","bucket":{"name":"photos-bucket","ownerIdentity":{"principalId":"minio"},"arn":"arn:aws:s3:::photos-bucket"},"object":{"key":"a.jpg","size":1}}},
	 {"eventVersion":"2.0","eventSource":"minio:s3","s3":{"bucket":{"name":"photos-bucket"},"object":{"key":"b.jpg"}}}]}`
	// cephEvent is shaped like a Ceph RGW notification with two buckets whose
	// StorageBuckets overlap (keyPhotos via both).
	cephEvent = `{"Records":[
	 {"eventVersion":"2.2","eventSource":"ceph:s3","s3":{"bucket":{"name":"shared-bucket","id":"x"}},"eventId":"1","opaqueData":""},
	 {"eventVersion":"2.2","eventSource":"ceph:s3","s3":{"bucket":{"name":"photos-bucket","id":"y"}},"eventId":"2","opaqueData":""}]}`
)

// sendMode says how a table case signs its request.
type sendMode int

const (
	signValid     sendMode = iota
	signTampered           // signed over a different body than sent
	signWrongKey           // signed with another secret
	signNone               // no headers at all
	signNoTS               // signature header only
	signNoSig              // timestamp header only
	signRaw                // header values taken verbatim from the case
	signDuplicate          // valid values, each header sent twice
)

type handlerCase struct {
	name    string
	method  string
	path    string
	body    string
	tsAt    time.Duration // timestamp relative to testNow
	mode    sendMode
	rawTS   string
	rawSig  string
	chunked bool // hide Content-Length so only MaxBytesReader can catch size
	opts    func(*Options)
	warmup  int // valid direct requests sent before this one

	wantCode   int
	wantProbes []types.NamespacedName
	wantCalls  []string // nil: don't care; empty: none at all
	wantInBody string
}

func (c handlerCase) request() *http.Request {
	method, path := c.method, c.path
	if method == "" {
		method = http.MethodPost
	}
	if path == "" {
		path = ProbePath
	}
	body := []byte(c.body)
	ts := unixTS(testNow.Add(c.tsAt))
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	if c.chunked {
		req.ContentLength = -1
	}
	switch c.mode {
	case signValid:
		req.Header.Set(SignatureHeader, Sign(testSecret, ts, body))
	case signTampered:
		req.Header.Set(SignatureHeader, Sign(testSecret, ts, append(body, ' ')))
	case signWrongKey:
		req.Header.Set(SignatureHeader, Sign([]byte("another-secret-of-enough-length"), ts, body))
	case signNoTS:
		req.Header.Set(SignatureHeader, Sign(testSecret, ts, body))
		return req
	case signNoSig:
	case signNone:
		return req
	case signRaw:
		ts = c.rawTS
		req.Header.Set(SignatureHeader, c.rawSig)
	case signDuplicate:
		sig := Sign(testSecret, ts, body)
		req.Header[SignatureHeader] = []string{sig, sig}
		req.Header[TimestampHeader] = []string{ts, ts}
		return req
	}
	req.Header.Set(TimestampHeader, ts)
	return req
}

func TestHandlerAnswers(t *testing.T) {
	none := []string{}
	bigBody := `{"namespace":"team-a","name":"photos","pad":"` + strings.Repeat("x", 65<<10) + `"}`
	validTS := unixTS(testNow)
	cases := []handlerCase{
		{name: "direct request is queued once", body: directPhotos, wantCode: 202,
			wantProbes: []types.NamespacedName{keyPhotos}, wantCalls: []string{"Exists team-a/photos", "RequestProbe team-a/photos"},
			wantInBody: `"requested":["team-a/photos"]`},
		{name: "direct request with extra fields", body: `{"namespace":"team-a","name":"logs","reason":"ci"}`, wantCode: 202,
			wantProbes: []types.NamespacedName{keyLogs}},
		{name: "timestamp 4m old is accepted", body: directPhotos, tsAt: -4 * time.Minute, wantCode: 202,
			wantProbes: []types.NamespacedName{keyPhotos}},
		{name: "timestamp exactly MaxAge old is accepted", body: directPhotos, tsAt: -5 * time.Minute, wantCode: 202,
			wantProbes: []types.NamespacedName{keyPhotos}},
		{name: "S3 event two records same bucket: one request per matching key", body: minioEvent, wantCode: 202,
			wantProbes: []types.NamespacedName{keyPhotos, keyMirror},
			wantCalls:  []string{"BucketsNamed photos-bucket", "RequestProbe team-a/photos", "RequestProbe team-b/photos-mirror"}},
		{name: "S3 event overlapping buckets deduplicates keys", body: cephEvent, wantCode: 202,
			wantProbes: []types.NamespacedName{keyPhotos, keyMirror}},

		{name: "stale timestamp (6m)", body: directPhotos, tsAt: -6 * time.Minute, wantCode: 401, wantCalls: none},
		{name: "future timestamp (6m)", body: directPhotos, tsAt: 6 * time.Minute, wantCode: 401, wantCalls: none},
		{name: "tampered body", body: directPhotos, mode: signTampered, wantCode: 401, wantCalls: none},
		{name: "wrong secret", body: directPhotos, mode: signWrongKey, wantCode: 401, wantCalls: none},
		{name: "missing headers", body: directPhotos, mode: signNone, wantCode: 401, wantCalls: none},
		{name: "missing timestamp", body: directPhotos, mode: signNoTS, wantCode: 401, wantCalls: none},
		{name: "missing signature", body: directPhotos, mode: signNoSig, wantCode: 401, wantCalls: none},
		{name: "duplicate headers", body: directPhotos, mode: signDuplicate, wantCode: 401, wantCalls: none},
		{name: "signature without sha256= prefix", body: directPhotos, mode: signRaw, rawTS: validTS,
			rawSig: strings.TrimPrefix(Sign(testSecret, validTS, []byte(directPhotos)), "sha256="), wantCode: 401, wantCalls: none},
		{name: "signature not hex", body: directPhotos, mode: signRaw, rawTS: validTS, rawSig: "sha256=zz", wantCode: 401, wantCalls: none},
		{name: "signature too short", body: directPhotos, mode: signRaw, rawTS: validTS,
			rawSig: Sign(testSecret, validTS, []byte(directPhotos))[:len("sha256=")+62], wantCode: 401, wantCalls: none},
		{name: "signature too long", body: directPhotos, mode: signRaw, rawTS: validTS,
			rawSig: Sign(testSecret, validTS, []byte(directPhotos)) + "00", wantCode: 401, wantCalls: none},
		{name: "timestamp with + sign", body: directPhotos, mode: signRaw, rawTS: "+" + validTS,
			rawSig: Sign(testSecret, "+"+validTS, []byte(directPhotos)), wantCode: 401, wantCalls: none},
		{name: "non-numeric timestamp", body: directPhotos, mode: signRaw, rawTS: "now",
			rawSig: Sign(testSecret, "now", []byte(directPhotos)), wantCode: 401, wantCalls: none},
		{name: "huge timestamp", body: directPhotos, mode: signRaw, rawTS: "99999999999999999999",
			rawSig: Sign(testSecret, "99999999999999999999", []byte(directPhotos)), wantCode: 401, wantCalls: none},

		{name: "65 KiB body with Content-Length", body: bigBody, wantCode: 413, wantCalls: none},
		{name: "65 KiB body chunked", body: bigBody, chunked: true, wantCode: 413, wantCalls: none},
		{name: "65 KiB body unsigned", body: bigBody, mode: signNone, wantCode: 401, wantCalls: none},
		{name: "65 KiB body with stale timestamp", body: bigBody, tsAt: -6 * time.Minute, wantCode: 401, wantCalls: none},
		{name: "65 KiB body, fresh headers, wrong key", body: bigBody, mode: signWrongKey, wantCode: 413, wantCalls: none},

		{name: "GET on probe path", method: http.MethodGet, body: "", wantCode: 405, wantCalls: none},
		{name: "PUT on probe path", method: http.MethodPut, body: directPhotos, wantCode: 405, wantCalls: none},
		{name: "unknown path", path: "/v1/other", body: directPhotos, wantCode: 404, wantCalls: none},
		{name: "healthz", method: http.MethodGet, path: HealthzPath, mode: signNone, wantCode: 200, wantCalls: none},

		{name: "unknown object", body: `{"namespace":"team-a","name":"nope"}`, wantCode: 404,
			wantCalls: []string{"Exists team-a/nope"}},
		{name: "S3 event for unknown bucket", body: `{"Records":[{"s3":{"bucket":{"name":"nobody-uses-this"}}}]}`, wantCode: 404,
			wantCalls: []string{"BucketsNamed nobody-uses-this"}},

		{name: "bad JSON", body: `{"namespace":`, wantCode: 400, wantCalls: none},
		{name: "trailing garbage", body: directPhotos + `x`, wantCode: 400, wantCalls: none},
		{name: "JSON array", body: `[1,2]`, wantCode: 400, wantCalls: none},
		{name: "JSON null", body: `null`, wantCode: 400, wantCalls: none},
		{name: "empty body", body: ``, wantCode: 400, wantCalls: none},
		{name: "neither shape", body: `{"foo":"bar"}`, wantCode: 400, wantCalls: none},
		{name: "both shapes", body: `{"namespace":"team-a","name":"photos","Records":[]}`, wantCode: 400, wantCalls: none},
		{name: "empty name", body: `{"namespace":"team-a","name":""}`, wantCode: 400, wantCalls: none},
		{name: "missing namespace", body: `{"name":"photos"}`, wantCode: 400, wantCalls: none},
		{name: "name not a string", body: `{"namespace":"team-a","name":7}`, wantCode: 400, wantCalls: none},
		{name: "invalid namespace", body: `{"namespace":"Team_A","name":"photos"}`, wantCode: 400, wantCalls: none},
		{name: "invalid name", body: `{"namespace":"team-a","name":"../etc"}`, wantCode: 400, wantCalls: none},
		{name: "empty Records", body: `{"Records":[]}`, wantCode: 400, wantCalls: none},
		{name: "Records not an array", body: `{"Records":{"s3":{}}}`, wantCode: 400, wantCalls: none},
		{name: "record without bucket", body: `{"Records":[{"s3":{"object":{"key":"a"}}}]}`, wantCode: 400, wantCalls: none},
		{name: "invalid bucket name", body: `{"Records":[{"s3":{"bucket":{"name":"Bad_Bucket"}}}]}`, wantCode: 400, wantCalls: none},
		{name: "AWS test event", body: `{"Service":"Amazon S3","Event":"s3:TestEvent","Bucket":"photos-bucket"}`, wantCode: 400, wantCalls: none},

		{name: "rate limit exceeded", body: directPhotos, warmup: 2,
			opts: func(o *Options) { o.Burst = 2; o.RequestsPerSecond = 0.25 }, wantCode: 429, wantCalls: none},

		{name: "Exists fails", body: `{"namespace":"team-a","name":"exists-fails"}`, wantCode: 500},
		{name: "BucketsNamed fails", body: `{"Records":[{"s3":{"bucket":{"name":"lookup-fails"}}}]}`, wantCode: 500},
		{name: "RequestProbe fails", body: `{"namespace":"team-a","name":"broken"}`, wantCode: 500},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fake := newFakeRequester()
			h := newTestReceiver(t, fake, c.opts).Handler()
			for i := range c.warmup {
				// Distinct bodies: the same signed request twice would be a replay.
				body := fmt.Sprintf(`{"namespace":"team-a","name":"photos","warmup":%d}`, i)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, signedRequest([]byte(body), unixTS(testNow), testSecret))
				if rec.Code != http.StatusAccepted {
					t.Fatalf("warm-up request: code %d", rec.Code)
				}
			}
			fake.calls, fake.probes = nil, nil

			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, c.request())
			res := rec.Result()
			body := rec.Body.String()

			if res.StatusCode != c.wantCode {
				t.Fatalf("code = %d, want %d (body %q)", res.StatusCode, c.wantCode, body)
			}
			if c.wantCalls != nil && !slices.Equal(fake.Calls(), c.wantCalls) {
				t.Errorf("Requester calls = %q, want %q", fake.Calls(), c.wantCalls)
			}
			if c.wantCode == 202 || c.wantProbes != nil {
				if got := fake.Probes(); !slices.Equal(got, c.wantProbes) {
					t.Errorf("probes = %v, want %v", got, c.wantProbes)
				}
			} else if len(fake.Probes()) != 0 {
				t.Errorf("probes = %v, want none", fake.Probes())
			}
			if c.wantInBody != "" && !strings.Contains(body, c.wantInBody) {
				t.Errorf("body %q does not contain %q", body, c.wantInBody)
			}
			checkHeaders(t, res, body, c.wantCode)
		})
	}
}

// checkHeaders pins what each code promises beyond itself: one generic 401 text, a
// generic 500 text, Allow on 405, Retry-After on 429, JSON bodies, and no connection
// kept after a 401 or 413.
func checkHeaders(t *testing.T, res *http.Response, body string, code int) {
	t.Helper()
	if code != 200 && res.Header.Get("Content-Type") != "application/json" {
		t.Errorf("Content-Type = %q", res.Header.Get("Content-Type"))
	}
	if code != 200 && !json.Valid([]byte(body)) {
		t.Errorf("body is not JSON: %q", body)
	}
	if (code == 401 || code == 413) && res.Header.Get("Connection") != "close" {
		t.Errorf("%d without Connection: close", code)
	}
	switch code {
	case 401:
		if want := `{"error":"` + msgUnauthorized + `"}` + "\n"; body != want {
			t.Errorf("401 body = %q, want the generic %q", body, want)
		}
	case 500:
		if strings.Contains(body, "secret-internal-detail") {
			t.Errorf("500 body leaks the Requester error: %q", body)
		}
	case 405:
		if res.Header.Get("Allow") == "" {
			t.Error("405 without Allow header")
		}
	case 429:
		if got := res.Header.Get("Retry-After"); got != "4" {
			t.Errorf("Retry-After = %q, want 4 (one token at 0.25/s)", got)
		}
	}
}

// Unauthenticated traffic must not spend the signed senders' rate-limit budget.
func TestUnauthenticatedRequestsDoNotSpendRateLimit(t *testing.T) {
	fake := newFakeRequester()
	h := newTestReceiver(t, fake, func(o *Options) { o.Burst = 1; o.RequestsPerSecond = 0.001 }).Handler()
	for range 5 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, signedRequest([]byte(directPhotos), unixTS(testNow), []byte("attacker-guess-0123456789")))
		if rec.Code != http.StatusUnauthorized {
			t.Fatalf("forged request: code %d", rec.Code)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, signedRequest([]byte(directPhotos), unixTS(testNow), testSecret))
	if rec.Code != http.StatusAccepted {
		t.Fatalf("signed request after forgeries: code %d, want 202", rec.Code)
	}
}

// Logs must carry neither the secret, nor signatures, nor raw request data, even at
// the most verbose level.
func TestLogsLeakNothing(t *testing.T) {
	var out strings.Builder
	log := funcr.New(func(prefix, args string) { out.WriteString(prefix + args + "\n") }, funcr.Options{Verbosity: 10})
	fake := newFakeRequester()
	h := newTestReceiver(t, fake, func(o *Options) { o.Log = log }).Handler()

	marker := "INJECTED\nlevel=error msg=forged"
	bodies := [][]byte{
		[]byte(directPhotos),
		[]byte(`{"namespace":"` + marker + `","name":"x"}`),
		[]byte(`{"Records":[{"s3":{"bucket":{"name":"` + marker + `"}}}]}`),
		[]byte(`{"namespace":"team-a","name":"broken"}`),
	}
	var sigs []string
	for _, b := range bodies {
		req := signedRequest(b, unixTS(testNow), testSecret)
		sigs = append(sigs, req.Header.Get(SignatureHeader))
		h.ServeHTTP(httptest.NewRecorder(), req)
		bad := signedRequest(b, marker, testSecret)
		sigs = append(sigs, bad.Header.Get(SignatureHeader))
		h.ServeHTTP(httptest.NewRecorder(), bad)
	}
	logged := out.String()
	if !strings.Contains(logged, "team-a/photos") {
		t.Fatalf("expected the accepted request to be logged, got:\n%s", logged)
	}
	for _, s := range append(sigs, string(testSecret), "INJECTED", strings.TrimPrefix(sigs[0], "sha256=")) {
		if strings.Contains(logged, s) {
			t.Errorf("log contains %q:\n%s", s, logged)
		}
	}
}

// countingBody is a request body that counts the bytes the handler reads from it.
type countingBody struct {
	r    io.Reader
	read int
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read += n
	return n, err
}

func (b *countingBody) Close() error { return nil }

// TestHeadersAreJudgedBeforeTheBody: a request whose headers already fail (missing,
// repeated, malformed signature, timestamp outside the replay window on either side)
// is answered 401 without a byte of its body read; one whose headers pass has its body
// read to verify the MAC, and is refused if the MAC is wrong. The replay window is
// judged on the receiver's clock, which the test moves.
func TestHeadersAreJudgedBeforeTheBody(t *testing.T) {
	body := []byte(directPhotos)
	signedAt := unixTS(testNow)
	goodSig := Sign(testSecret, signedAt, body)
	cases := []struct {
		name      string
		clockAt   time.Duration // receiver clock relative to testNow
		headers   map[string][]string
		wantCode  int
		wantsBody bool
	}{
		{name: "no headers", wantCode: 401},
		{name: "timestamp only", headers: map[string][]string{TimestampHeader: {signedAt}}, wantCode: 401},
		{name: "signature only", headers: map[string][]string{SignatureHeader: {goodSig}}, wantCode: 401},
		{name: "repeated signature", headers: map[string][]string{TimestampHeader: {signedAt}, SignatureHeader: {goodSig, goodSig}}, wantCode: 401},
		{name: "signature not hex", headers: map[string][]string{TimestampHeader: {signedAt}, SignatureHeader: {"sha256=" + strings.Repeat("z", 64)}}, wantCode: 401},
		{name: "signature of the wrong length", headers: map[string][]string{TimestampHeader: {signedAt}, SignatureHeader: {goodSig[:len(goodSig)-2]}}, wantCode: 401},
		{name: "clock one second past the window", clockAt: defaultMaxAge + time.Second,
			headers: map[string][]string{TimestampHeader: {signedAt}, SignatureHeader: {goodSig}}, wantCode: 401},
		{name: "clock one second before the window", clockAt: -defaultMaxAge - time.Second,
			headers: map[string][]string{TimestampHeader: {signedAt}, SignatureHeader: {goodSig}}, wantCode: 401},
		{name: "wrong MAC, fresh headers", headers: map[string][]string{TimestampHeader: {signedAt}, SignatureHeader: {"sha256=" + strings.Repeat("0", 64)}},
			wantCode: 401, wantsBody: true},
		{name: "clock at the window's end", clockAt: defaultMaxAge,
			headers: map[string][]string{TimestampHeader: {signedAt}, SignatureHeader: {goodSig}}, wantCode: 202, wantsBody: true},
		{name: "clock at the window's start", clockAt: -defaultMaxAge,
			headers: map[string][]string{TimestampHeader: {signedAt}, SignatureHeader: {goodSig}}, wantCode: 202, wantsBody: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(testNow)
			fake := newFakeRequester()
			h := newTestReceiver(t, fake, func(o *Options) { o.Clock = clk }).Handler()
			clk.SetTime(testNow.Add(c.clockAt))

			counted := &countingBody{r: bytes.NewReader(body)}
			req := httptest.NewRequest(http.MethodPost, ProbePath, nil)
			req.Body, req.ContentLength = counted, int64(len(body))
			maps.Copy(req.Header, c.headers)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)

			if rec.Code != c.wantCode {
				t.Fatalf("code = %d, want %d (%s)", rec.Code, c.wantCode, rec.Body)
			}
			switch {
			case c.wantsBody && counted.read != len(body):
				t.Errorf("read %d of the body's %d bytes, want all of it", counted.read, len(body))
			case !c.wantsBody && counted.read != 0:
				t.Errorf("read %d bytes of the body of a request refused on its headers, want none", counted.read)
			}
			if c.wantCode == 401 && len(fake.Calls()) != 0 {
				t.Errorf("Requester called for a refused request: %q", fake.Calls())
			}
		})
	}
}

// canaryEvent is an S3 event with one record per key, all in photos-bucket.
func canaryEvent(keys ...string) string {
	var records []string
	for _, k := range keys {
		records = append(records, fmt.Sprintf(`{"eventSource":"aws:s3","eventName":"ObjectCreated:Put",`+
			`"s3":{"bucket":{"name":"photos-bucket"},"object":{"key":%q,"size":40}}}`, k))
	}
	body := `{"Records":[`
	for i, r := range records {
		if i > 0 {
			body += ","
		}
		body += r
	}
	return body + `]}`
}

// TestCanaryEventsTriggerNoProbe: the events of a ReadWrite probe's own canary object
// (its PUT and DELETE) must not ask for another probe, or a bucket whose notifications
// point at the receiver would probe itself forever. Any other key still does.
func TestCanaryEventsTriggerNoProbe(t *testing.T) {
	const uid = "0b5c3c4e-0d7c-4f7e-9a55-3d2f1f0e6a11"
	cases := []struct {
		name       string
		body       string
		wantCode   int
		wantProbes []types.NamespacedName
	}{
		{"AWS: canary PUT", canaryEvent(".bucketkeeper/probe/" + uid), 200, nil},
		{"PUT and DELETE of the canary", canaryEvent(".bucketkeeper/probe/"+uid, ".bucketkeeper/probe/"+uid), 200, nil},
		{"MinIO: slashes URL-encoded", canaryEvent(".bucketkeeper%2Fprobe%2F" + uid), 200, nil},
		{"an application object beside the canary", canaryEvent(".bucketkeeper/probe/"+uid, "photos/a.jpg"), 202,
			[]types.NamespacedName{keyPhotos, keyMirror}},
		{"not under the prefix: nested", canaryEvent("data/.bucketkeeper/probe/" + uid), 202,
			[]types.NamespacedName{keyPhotos, keyMirror}},
		{"not under the prefix: sibling", canaryEvent(".bucketkeeper/probes/" + uid), 202,
			[]types.NamespacedName{keyPhotos, keyMirror}},
		{"record without an object", `{"Records":[{"s3":{"bucket":{"name":"photos-bucket"}}}]}`, 202,
			[]types.NamespacedName{keyPhotos, keyMirror}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fake := newFakeRequester()
			h := newTestReceiver(t, fake, nil).Handler()
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, signedRequest([]byte(c.body), unixTS(testNow), testSecret))
			if rec.Code != c.wantCode {
				t.Fatalf("code = %d, want %d (body %s)", rec.Code, c.wantCode, rec.Body)
			}
			if got := fake.Probes(); !slices.Equal(got, c.wantProbes) {
				t.Errorf("probes = %v, want %v", got, c.wantProbes)
			}
			if c.wantCode == 200 {
				if calls := fake.Calls(); len(calls) != 0 {
					t.Errorf("a canary-only event looked up %q", calls)
				}
				var res struct {
					Requested []string `json:"requested"`
					Ignored   string   `json:"ignored"`
				}
				if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil || res.Requested == nil || len(res.Requested) != 0 || res.Ignored == "" {
					t.Errorf("body %s: want an empty requested list and the reason", rec.Body)
				}
			}
		})
	}
}

// TestCanaryEventsDoNotSpendRateLimit: a store sends two events per ReadWrite probe of
// every bucket; they must leave the budget to the events that do ask for probes.
func TestCanaryEventsDoNotSpendRateLimit(t *testing.T) {
	fake := newFakeRequester()
	h := newTestReceiver(t, fake, func(o *Options) { o.Burst = 1; o.RequestsPerSecond = 0.001 }).Handler()
	for i := range 5 {
		rec := httptest.NewRecorder()
		body := canaryEvent(fmt.Sprintf(".bucketkeeper/probe/uid-%d", i))
		h.ServeHTTP(rec, signedRequest([]byte(body), unixTS(testNow), testSecret))
		if rec.Code != http.StatusOK {
			t.Fatalf("canary event %d: code %d", i, rec.Code)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, signedRequest([]byte(canaryEvent("photos/a.jpg")), unixTS(testNow), testSecret))
	if rec.Code != http.StatusAccepted {
		t.Fatalf("event after canary events: code %d, want 202", rec.Code)
	}
	if got := fake.Probes(); len(got) != 2 {
		t.Errorf("probes = %v, want the two StorageBuckets of photos-bucket", got)
	}
}
