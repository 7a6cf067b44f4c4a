package integration_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
	"github.com/bucketkeeper/bucketkeeper/internal/receiver"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// headLog records when HeadBucket was sent, per bucket.
type headLog struct {
	mu    sync.Mutex
	times map[string][]time.Time
}

func (l *headLog) since(bucket string, from int) []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Time(nil), l.times[bucket][min(from, len(l.times[bucket])):]...)
}

func (l *headLog) count(bucket string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.times[bucket])
}

// countingHeads wraps a store client so every HeadBucket is recorded with its bucket.
type countingHeads struct {
	s3.Client
	log *headLog
}

func (c countingHeads) HeadBucket(ctx context.Context, bucket string) (string, error) {
	c.log.mu.Lock()
	c.log.times[bucket] = append(c.log.times[bucket], time.Now())
	c.log.mu.Unlock()
	return c.Client.HeadBucket(ctx, bucket)
}

// statusChanges counts the writes that changed a StorageBucket's status, from a watch
// started at a known version: every version arrives, so none is missed.
type statusChanges struct {
	mu   sync.Mutex
	n    int
	seen map[string]bool // resource versions the watch delivered
}

func (s *statusChanges) get() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// settled returns the count once the watch has delivered the bucket's current
// version: a write the API server already answered with may still be on its way.
func (s *statusChanges) settled(f *fixture, sb *bkv1.StorageBucket) int {
	f.t.Helper()
	rv := f.get(sb).ResourceVersion
	f.eventually(30*time.Second, "the watch to deliver version "+rv, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.seen[rv] {
			return errf("not delivered yet")
		}
		return nil
	})
	return s.get()
}

func watchStatusChanges(t *testing.T, f *fixture, sb *bkv1.StorageBucket) *statusChanges {
	t.Helper()
	cur := f.get(sb)
	w, err := k8sWatch.Watch(f.ctx, &bkv1.StorageBucketList{}, client.InNamespace(f.ns),
		client.MatchingFields{"metadata.name": sb.Name}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: cur.ResourceVersion}})
	must(t, err)
	t.Cleanup(w.Stop)
	out := &statusChanges{seen: map[string]bool{cur.ResourceVersion: true}}
	go func() {
		last := cur.Status
		for ev := range w.ResultChan() {
			obj, ok := ev.Object.(*bkv1.StorageBucket)
			if !ok || ev.Type != watch.Modified {
				continue
			}
			out.mu.Lock()
			if !equality.Semantic.DeepEqual(last, obj.Status) {
				out.n++
			}
			out.seen[obj.ResourceVersion] = true
			out.mu.Unlock()
			last = obj.Status
		}
	}()
	return out
}

// TestProbeRequestsAreBounded: however many annotation values or webhook calls arrive,
// a bucket gets at most one on-demand probe per --min-probe-request-interval (5s here),
// the requests inside an interval are served by one probe at its end,
// and the status is written once per probe, not once per value.
func TestProbeRequestsAreBounded(t *testing.T) {
	// Shorter than the default (10s) to keep the test short; the bound is the same.
	const interval = 5 * time.Second
	f := newFixture(t, seaweed)
	heads := &headLog{times: map[string][]time.Time{}}
	counting := func(ctx context.Context, cfg s3.Config) (s3.Client, error) {
		c, err := s3.New(ctx, cfg)
		return countingHeads{Client: c, log: heads}, err
	}
	addr, err := testenv.FreeAddr()
	must(t, err)
	ctx, stop := context.WithCancel(f.ctx)
	done, err := startManager(ctx, operator.Options{WatchLabelSelector: isolatedLabel + "=" + f.ns, S3Factory: counting,
		// No drift checks (they send HeadBucket too) while the test counts probes.
		SyncInterval:            time.Hour,
		MinProbeRequestInterval: interval,
		ReceiverBindAddress:     addr, ReceiverClusterWideSecret: receiverSecret})
	must(t, err)
	defer func() { stop(); <-done }()

	sb := f.bucket("throttled", probeEvery(time.Hour, bkv1.ProbeModeHead), func(sb *bkv1.StorageBucket) { sb.Labels = map[string]string{isolatedLabel: f.ns} })
	got := f.waitCondition(sb, bkv1.ConditionAvailable, metav1.ConditionTrue, bkv1.ReasonProbeSucceeded)
	bucket := got.Status.BucketName
	writes := watchStatusChanges(t, f, sb)

	// Twenty annotation values as fast as the API server takes them.
	first := heads.count(bucket)
	start := time.Now()
	const values = 20
	for i := range values {
		f.requestProbe(sb, fmt.Sprintf("burst-%02d", i))
	}
	took := time.Since(start)
	if took >= interval {
		t.Fatalf("setting %d annotations took %s, not inside one interval; the test cannot judge", values, took)
	}
	last := fmt.Sprintf("burst-%02d", values-1)
	f.eventually(3*interval, "the last value to be handled", func() error {
		if h := f.get(sb).Status.LastHandledProbeRequest; h != last {
			return errf("lastHandledProbeRequest %q", h)
		}
		return nil
	})
	probes := heads.since(bucket, first)
	// The first value is served at once; the other nineteen together at the end of
	// the interval.
	if len(probes) != 2 {
		t.Fatalf("%d annotation values caused %d HeadBucket requests for %s, want 2: %v", values, len(probes), bucket, probes)
	}
	if gap := probes[1].Sub(probes[0]); gap < interval-250*time.Millisecond {
		t.Fatalf("the two probes were %s apart, want at least the interval %s", gap, interval)
	}
	burstWrites := writes.settled(f, sb)
	t.Logf("%d annotation values in %s: probes at +0 and +%s, %d status writes", values, took.Round(time.Millisecond), probes[1].Sub(probes[0]).Round(time.Millisecond), burstWrites)
	if n := burstWrites; n > 2 {
		t.Fatalf("%d status writes for %d annotation values, want at most one per probe (2)", n, values)
	}

	// Webhook calls: ten distinct signed requests, each accepted and each setting a new
	// value, cost one probe at the end of the interval the last probe opened.
	post := func(body []byte, ts string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+receiver.ProbePath, bytes.NewReader(body))
		must(t, err)
		req.Header.Set(receiver.TimestampHeader, ts)
		req.Header.Set(receiver.SignatureHeader, receiver.Sign(receiverSecret, ts, body))
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	first = heads.count(bucket)
	writesBefore := burstWrites
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	var firstBody []byte
	for i := range 10 {
		body := fmt.Appendf(nil, `{"namespace":%q,"name":%q,"n":%d}`, f.ns, sb.Name, i)
		if i == 0 {
			firstBody = body
		}
		if code := post(body, ts); code != http.StatusAccepted {
			t.Fatalf("webhook call %d answered %d, want 202", i, code)
		}
	}
	if code := post(firstBody, ts); code != http.StatusConflict {
		t.Fatalf("a replayed webhook call answered %d, want 409", code)
	}
	value := f.get(sb).Annotations[bkv1.AnnotationProbeRequestedAt]
	f.eventually(3*interval, "the webhook's last value to be handled", func() error {
		if h := f.get(sb).Status.LastHandledProbeRequest; h != value {
			return errf("lastHandledProbeRequest %q, want %q", h, value)
		}
		return nil
	})
	webhookProbes := heads.since(bucket, first)
	if len(webhookProbes) != 1 {
		t.Fatalf("10 webhook calls caused %d HeadBucket requests for %s, want 1: %v", len(webhookProbes), bucket, webhookProbes)
	}
	if gap := webhookProbes[0].Sub(probes[1]); gap < interval-250*time.Millisecond {
		t.Fatalf("the webhook's probe came %s after the previous one, want at least the interval %s", gap, interval)
	}
	webhookWrites := writes.settled(f, sb) - writesBefore
	t.Logf("10 webhook calls: one probe %s after the previous one, %d status writes", webhookProbes[0].Sub(probes[1]).Round(time.Millisecond), webhookWrites)
	if n := webhookWrites; n > 1 {
		t.Fatalf("%d status writes for 10 webhook calls, want 1", n)
	}
}
