package receiver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

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
