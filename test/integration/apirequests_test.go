package integration_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
)

// apiCounter counts a manager's write requests to the API server by method and path
// (watches and reads are served by its cache).
type apiCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func (c *apiCounter) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		if req.Method != http.MethodGet {
			c.mu.Lock()
			c.counts[req.Method+" "+req.URL.Path]++
			c.mu.Unlock()
		}
		return next.RoundTrip(req)
	})
}

// matching returns the counts of the requests whose path contains every part.
func (c *apiCounter) matching(parts ...string) map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
outer:
	for k, v := range c.counts {
		for _, p := range parts {
			if !strings.Contains(k, p) {
				continue outer
			}
		}
		out[k] = v
	}
	return out
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestNewBucketCostsOnePass: a new StorageBucket is provisioned in one pass with the
// fewest API writes crash safety allows: the finalizer, the create intent in status
// (before CreateBucket), the connection Secret, the final status and one Event. Neither
// the finalizer's own update nor the Secret's creation wakes a second pass, which would
// re-read the whole configuration from the store.
func TestNewBucketCostsOnePass(t *testing.T) {
	f := newFixture(t, seaweed)
	counter := &apiCounter{counts: map[string]int{}}
	restCfg := rest.CopyConfig(cfg)
	restCfg.Wrap(counter.wrap)
	ctx, stop := context.WithCancel(f.ctx)
	done, err := startManagerOn(ctx, restCfg, operator.Options{WatchLabelSelector: isolatedLabel + "=" + f.ns})
	must(t, err)
	t.Cleanup(func() { stop(); <-done })
	isolated := func(sb *bkv1.StorageBucket) {
		sb.Labels = map[string]string{isolatedLabel: f.ns}
		sb.Spec.Probe = bkv1.ProbeSpec{Interval: &metav1.Duration{Duration: time.Hour}, Mode: bkv1.ProbeModeHead}
	}

	// A first bucket proves this manager has a client for the store: the measured one
	// then never waits for the store's health check.
	f.waitCondition(f.bucket("warm-up", isolated), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)

	before := requests.snapshot(f.store)
	sb := f.bucket("one-pass", isolated)
	got := f.waitCondition(sb, bkv1.ConditionAvailable, metav1.ConditionTrue, bkv1.ReasonProbeSucceeded)
	if c := findCond(got, bkv1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Ready: %+v", c)
	}
	f.eventually(10*time.Second, "the BucketCreated event", func() error {
		if ev := f.waitEvent(got, bkv1.ReasonBucketCreated); ev[bkv1.ReasonBucketCreated] != 1 {
			return errf("events %v", ev)
		}
		return nil
	})

	object := fmt.Sprintf("/apis/%s/namespaces/%s/storagebuckets/%s", bkv1.GroupVersion, f.ns, sb.Name)
	want := map[string]int{
		"PATCH " + object:             1, // the finalizer
		"PATCH " + object + "/status": 2, // the create intent, then the outcome
	}
	if got := counter.matching(object); !maps.Equal(got, want) {
		t.Errorf("writes to the StorageBucket = %v, want %v", got, want)
	}
	secrets := "/api/v1/namespaces/" + f.ns + "/secrets"
	if got := counter.matching(secrets); got["POST "+secrets] != 2 || len(counter.matching(secrets+"/one-pass-bucket")) != 0 {
		t.Errorf("Secret writes = %v, want one creation per bucket and nothing else for the measured one", got)
	}
	// Both buckets' Events: BucketCreated each, and nothing else.
	if got := counter.matching("/namespaces/" + f.ns + "/events"); len(got) != 1 || sum(got) != 2 {
		t.Errorf("Event writes for two new buckets = %v, want two creations", got)
	}
	_, _, ops := since(before, requests.snapshot(f.store))
	// One pass: HeadBucket to decide on creation and one for the first probe; the
	// configuration read once.
	if ops["HeadBucket"] != 2 || ops["CreateBucket"] != 1 || ops["GetBucketLifecycleConfiguration"] != 1 {
		t.Errorf("S3 requests of the new bucket = %v, want one pass", ops)
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
