package receiver

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

var fuzzMethods = []string{http.MethodPost, http.MethodGet, http.MethodPut, http.MethodDelete, http.MethodHead}

var allowedCodes = map[int]bool{200: true, 202: true, 400: true, 401: true, 404: true, 405: true, 409: true, 413: true, 429: true, 500: true}

// FuzzHandler feeds arbitrary bodies, timestamps and signatures to the real handler.
// When sign is true the signature is computed over the fuzzed timestamp and body, so
// the fuzzer reaches the parser and the Requester too; otherwise sig is sent verbatim.
// It checks that the handler never panics, answers only the documented codes, and
// never calls the Requester for a request that a separate, test-side check does not
// consider authentic; and that the same request sent again triggers nothing new: 409
// after a 202, otherwise the same answer as the first time.
//
// When keyed is true the request is sent under the namespaced key of team-a (and
// signed with it when sign is true), to two receivers: one in the full world of
// StorageBuckets, one in a world where only team-a's exist. The answers must be the
// same, byte for byte, in both (a key learns nothing of other namespaces), and no
// Requester call may be about another namespace.
func FuzzHandler(f *testing.F) {
	now := unixTS(testNow)
	stale := unixTS(testNow.Add(-6 * time.Minute))
	future := unixTS(testNow.Add(6 * time.Minute))
	seeds := []struct {
		method uint8
		body   string
		ts     string
		sig    string
		sign   bool
	}{
		{0, directPhotos, now, "", true},
		{0, minioEvent, now, "", true},
		{0, cephEvent, now, "", true},
		{0, `{"namespace":"team-a","name":"nope"}`, now, "", true},
		{0, `{"namespace":"team-a","name":"broken"}`, now, "", true},
		{0, `{"namespace":"team-a","name":"exists-fails"}`, now, "", true},
		{0, `{"Records":[{"s3":{"bucket":{"name":"lookup-fails"}}}]}`, now, "", true},
		{0, `{"Records":[{"s3":{"bucket":{"name":"Bad_Bucket"}}}]}`, now, "", true},
		{0, `{"Records":[]}`, now, "", true},
		{0, `{"namespace":"team-a","name":"photos","Records":[]}`, now, "", true},
		{0, `{"namespace":`, now, "", true},
		{0, `[]`, now, "", true},
		{0, ``, now, "", true},
		{0, directPhotos, stale, "", true},
		{0, directPhotos, future, "", true},
		{0, directPhotos, "+" + now, "", true},
		{0, directPhotos, now, Sign(testSecret, now, []byte(directPhotos+" ")), false},
		{0, directPhotos, now, Sign([]byte("wrong-secret-0123456789"), now, []byte(directPhotos)), false},
		{0, directPhotos, now, "sha256=" + strings.Repeat("0", 64), false},
		{0, directPhotos, now, "sha256=zz", false},
		{0, directPhotos, "", "", false},
		{0, directPhotos, now, strings.ToUpper(Sign(testSecret, now, []byte(directPhotos))), false},
		{0, directPhotos, now, "sha256=" + strings.ToUpper(strings.TrimPrefix(Sign(testSecret, now, []byte(directPhotos)), "sha256=")), false},
		{0, elevenBuckets, now, "", true},
		{0, `{"Records":[{"s3":{"bucket":{"name":"photos-bucket"},"object":{"key":".bucketkeeper/probe/u"}}}]}`, now, "", true},
		{0, `{"Records":[{"s3":{"bucket":{"name":"photos-bucket"},"object":{"key":".bucketkeeper%2Fprobe%2Fu"}}},` +
			`{"s3":{"bucket":{"name":"logs-bucket"},"object":{"key":"a"}}}]}`, now, "", true},
		{1, directPhotos, now, "", true},
		{2, directPhotos, now, "", true},
	}
	for _, s := range seeds {
		f.Add(s.method, []byte(s.body), s.ts, s.sig, s.sign, false)
	}
	for _, body := range []string{directPhotos, minioEvent, cephEvent, direct(keyMirror), `{"namespace":"team-b","name":"nope"}`,
		`{"Records":[{"s3":{"bucket":{"name":"nobody-uses-this"}}}]}`, elevenBuckets, `{"namespace":"team-a","name":"broken"}`} {
		f.Add(uint8(0), []byte(body), now, "", true, true)
	}
	f.Add(uint8(0), []byte(directPhotos), now, Sign(keyA.Secret, now, []byte(directPhotos)), false, true)

	f.Fuzz(func(t *testing.T, method uint8, body []byte, ts, sig string, sign, keyed bool) {
		m := fuzzMethods[int(method)%len(fuzzMethods)]
		keyID := ""
		if keyed {
			keyID = keyA.ID
		}
		if sign {
			sig = SignWithKey(keyID, secretOf(keyed), ts, body)
		}
		fake := newFakeRequester()
		h := newKeyedReceiver(t, fake, func(o *Options) { o.ClusterWideSecret = testSecret }).Handler()
		// Team-a's world alone, for the keyed requests' twin answers.
		own := newFakeRequester()
		for k := range own.existing {
			if k.Namespace != keyA.Namespaces[0] {
				delete(own.existing, k)
			}
		}
		for b, keys := range own.byBucket {
			own.byBucket[b] = slices.DeleteFunc(slices.Clone(keys), func(k types.NamespacedName) bool { return k.Namespace != keyA.Namespaces[0] })
		}
		ownH := newKeyedReceiver(t, own, func(o *Options) { o.ClusterWideSecret = testSecret }).Handler()

		sendTo := func(h http.Handler) answer {
			req := httptest.NewRequest(m, ProbePath, bytes.NewReader(body))
			// Set the map directly: fuzzed values need not be valid header text, and a
			// server behind a proxy could still see odd bytes.
			req.Header[TimestampHeader] = []string{ts}
			req.Header[SignatureHeader] = []string{sig}
			if keyed {
				req.Header[KeyIDHeader] = []string{keyID}
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			return answerOf(rec)
		}
		send := func() int {
			got := sendTo(h)
			if keyed {
				if twin := sendTo(ownH); !got.equal(twin) {
					t.Fatalf("team-a's key is answered %+v, and %+v where only team-a's StorageBuckets exist", got, twin)
				}
				for _, c := range fake.Calls() {
					if !strings.Contains(c, " team-a/") && !strings.HasSuffix(c, " in team-a") {
						t.Fatalf("team-a's key caused the Requester call %q", c)
					}
				}
			}
			return got.code
		}

		code := send()
		if !allowedCodes[code] {
			t.Fatalf("undocumented status %d for body %q", code, body)
		}
		authentic := m == http.MethodPost && len(body) <= MaxBodyBytes && independentlyFresh(ts) &&
			independentlyValid(keyID, secretOf(keyed), ts, sig, body)
		if calls := fake.Calls(); len(calls) > 0 && !authentic {
			t.Fatalf("Requester called (%q) for an unauthenticated request (ts %q, sig %q)", calls, ts, sig)
		}
		if !authentic && code != 401 && code != 405 && code != 413 {
			t.Fatalf("unauthenticated request answered %d", code)
		}
		if authentic && code == 401 {
			t.Fatalf("authentic request answered 401 (ts %q)", ts)
		}
		if code == 202 && len(fake.Probes()) == 0 {
			t.Fatal("202 without any probe requested")
		}
		if code == 200 && (len(fake.Probes()) != 0 || len(fake.Calls()) != 0) {
			t.Fatalf("200 (canary events only) yet the Requester was called: %q", fake.Calls())
		}

		probes := len(fake.Probes())
		again := send()
		if n := len(fake.Probes()); n != probes {
			t.Fatalf("the same request sent again requested %d more probes", n-probes)
		}
		switch {
		case code == 202 && again != 409:
			t.Fatalf("replay of an accepted request answered %d, want 409", again)
		case code != 202 && again != code:
			t.Fatalf("the same refused request answered %d, then %d", code, again)
		}
	})
}

// secretOf is the secret a fuzzed request is signed with: team-a's key's or the
// cluster-wide one.
func secretOf(keyed bool) []byte {
	if keyed {
		return keyA.Secret
	}
	return testSecret
}

// independentlyValid re-derives the signature with crypto/hmac directly rather than
// through the package, so a bug shared by Sign and the verifier cannot hide itself.
func independentlyValid(keyID string, secret []byte, ts, sig string, body []byte) bool {
	m := hmac.New(sha256.New, secret)
	if keyID != "" {
		m.Write([]byte(keyID + ":"))
	}
	m.Write([]byte(ts + "."))
	m.Write(body)
	return strings.HasPrefix(sig, "sha256=") && strings.EqualFold(sig[len("sha256="):], hex.EncodeToString(m.Sum(nil)))
}

func independentlyFresh(ts string) bool {
	if ts == "" || len(ts) > 18 || strings.Trim(ts, "0123456789") != "" {
		return false
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return false
	}
	d := testNow.Unix() - sec
	return d >= -300 && d <= 300
}
