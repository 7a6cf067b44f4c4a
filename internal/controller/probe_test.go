package controller_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/controller"
	"github.com/bucketkeeper/bucketkeeper/internal/metrics"
	"github.com/bucketkeeper/bucketkeeper/internal/receiver"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

func probeEvery(d time.Duration, mode bkv1.ProbeMode) func(*bkv1.StorageBucket) {
	return func(sb *bkv1.StorageBucket) {
		sb.Spec.Probe = bkv1.ProbeSpec{Interval: &metav1.Duration{Duration: d}, Timeout: &metav1.Duration{Duration: 3 * time.Second}, Mode: mode}
	}
}

func TestProbeReportsAvailability(t *testing.T) {
	f := newFixture(t, seaweed)
	sb := f.bucket("healthy", probeEvery(10*time.Second, bkv1.ProbeModeHead))
	got := f.waitCondition(sb, bkv1.ConditionAvailable, metav1.ConditionTrue, bkv1.ReasonProbeSucceeded)
	if got.Status.Available == nil || !*got.Status.Available || got.Status.LastProbeTime == nil || got.Status.LastProbeLatency == nil {
		t.Fatalf("probe status: available=%v lastProbeTime=%v latency=%v", got.Status.Available, got.Status.LastProbeTime, got.Status.LastProbeLatency)
	}
	// The first verdict of a new bucket is good news its BucketCreated event already
	// told. A ProbeSucceeded event would be recorded in the same pass, right after it;
	// each Event is sent on its own, so by the time BucketCreated is listed such an
	// Event would almost always be listed too.
	f.eventually(10*time.Second, "the BucketCreated event", func() error {
		if ev := f.eventReasons(got); ev[bkv1.ReasonBucketCreated] != 1 {
			return errf("events %v", ev)
		}
		return nil
	})
	if ev := f.eventReasons(got); ev[bkv1.ReasonProbeSucceeded] != 0 {
		t.Errorf("want no ProbeSucceeded event for the first verdict, got %v", ev)
	}

	// kubectl's table: the printer columns carry real values.
	table := f.table("storagebuckets")
	row := table[got.Name]
	if row == nil || row["Bucket"] != got.Status.BucketName || row["Ready"] != "True" || row["Available"] != "True" || row["Last-Probe"] == "" || row["Last-Probe"] == "<unknown>" {
		t.Fatalf("kubectl get sb row = %v", row)
	}
}

func TestReadWriteProbeLeavesNoCanary(t *testing.T) {
	f := newFixture(t, seaweed)
	// Versioned: deleting the canary must not leave versions or delete markers either.
	sb := f.bucket("canary", probeEvery(10*time.Second, bkv1.ProbeModeReadWrite), func(sb *bkv1.StorageBucket) { sb.Spec.Versioning = bkv1.VersioningEnabled })
	got := f.waitCondition(sb, bkv1.ConditionAvailable, metav1.ConditionTrue, bkv1.ReasonProbeSucceeded)
	before := requests.snapshot(f.store)
	f.requestProbe(sb, "rw-1")
	f.eventually(10*time.Second, "the requested ReadWrite probe", func() error {
		_, _, ops := since(before, requests.snapshot(f.store))
		if ops["PutObject"] != 1 || ops["GetObject"] != 1 || ops["DeleteObject"]+ops["DeleteObjects"] != 1 {
			return errf("ops %v", ops)
		}
		return nil
	})
	page, err := f.admin.ListObjectVersions(f.ctx, got.Status.BucketName, nil)
	must(t, err)
	if len(page.Versions) != 0 {
		t.Fatalf("the probe left %d versions or delete markers behind, e.g. %+v", len(page.Versions), page.Versions[0])
	}
}

// TestDuplicateWakeUpsProbeOnce: Reconcile decides from state whether a probe is due, so
// a burst of 100 wake-ups for one bucket costs at most one probe.
func TestDuplicateWakeUpsProbeOnce(t *testing.T) {
	f := newFixture(t, seaweed)
	sb := f.bucket("burst", probeEvery(time.Minute, bkv1.ProbeModeHead))
	f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)

	var mu sync.Mutex
	heads := 0
	stores := &controller.StoreRegistry{Client: k8s, APIReader: k8s, Factory: s3.New, Observer: func(_, op string, _ int, _ error) {
		if op == "HeadBucket" {
			mu.Lock()
			heads++
			mu.Unlock()
		}
	}}
	r := &controller.StorageBucketReconciler{Client: k8s, Recorder: events.NewFakeRecorder(100), Stores: stores, Clock: clock.RealClock{},
		SyncInterval: time.Hour, ClusterID: clusterID, Prober: &controller.Prober{Clock: clock.RealClock{}, Heartbeat: 5 * time.Minute}}
	for range 100 {
		if _, err := r.Reconcile(f.ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(sb)}); err != nil {
			t.Fatal(err)
		}
	}
	// One HEAD for the first (never probed here) pass: the bucket step's check, plus
	// the probe itself; the 99 others find nothing due.
	if heads > 2 {
		t.Fatalf("100 wake-ups caused %d HeadBucket requests", heads)
	}
}

func TestProbeRequestAnnotationProbesOnce(t *testing.T) {
	f := newFixture(t, seaweed)
	sb := f.bucket("asked", probeEvery(time.Hour, bkv1.ProbeModeHead))
	f.waitCondition(sb, bkv1.ConditionAvailable, metav1.ConditionTrue, bkv1.ReasonProbeSucceeded)
	time.Sleep(500 * time.Millisecond)
	before := requests.snapshot(f.store)
	f.requestProbe(sb, "please")
	f.eventually(10*time.Second, "the request to be handled", func() error {
		if got := f.get(sb); got.Status.LastHandledProbeRequest != "please" {
			return errf("lastHandledProbeRequest %q", got.Status.LastHandledProbeRequest)
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	if _, _, ops := since(before, requests.snapshot(f.store)); ops["HeadBucket"] != 1 {
		t.Fatalf("the annotation caused %d HeadBucket requests, want exactly 1 (%v)", ops["HeadBucket"], ops)
	}
}

func TestVanishedBucketIsReportedAndRecreated(t *testing.T) {
	f := newFixture(t, seaweed)
	sb := f.bucket("gone", probeEvery(time.Hour, bkv1.ProbeModeHead))
	got := f.waitCondition(sb, bkv1.ConditionAvailable, metav1.ConditionTrue, bkv1.ReasonProbeSucceeded)
	must(t, f.admin.DeleteBucket(f.ctx, got.Status.BucketName))
	f.requestProbe(sb, "after-delete")
	f.eventually(30*time.Second, "BucketNotFound then recreation", func() error {
		ev := f.eventReasons(got)
		if ev[bkv1.ReasonBucketNotFound] == 0 || ev[bkv1.ReasonBucketRecreated] == 0 {
			return errf("events %v", ev)
		}
		_, err := f.admin.HeadBucket(f.ctx, got.Status.BucketName)
		return err
	})
	f.requestProbe(sb, "after-recreate")
	f.waitCondition(sb, bkv1.ConditionAvailable, metav1.ConditionTrue, bkv1.ReasonProbeSucceeded)
}

// TestStoreOutage: with the store down, every bucket turns unavailable within two
// intervals while the store gets about one request per second in total; back up, all
// buckets are available again within one interval.
func TestStoreOutage(t *testing.T) {
	server := testenv.NewS3(t, testenv.Versity)
	f := newFixture(t, server)
	var sbs []*bkv1.StorageBucket
	for i := range 5 {
		sbs = append(sbs, f.bucket(fmt.Sprintf("b%d", i), probeEvery(10*time.Second, bkv1.ProbeModeHead)))
	}
	for _, sb := range sbs {
		f.waitCondition(sb, bkv1.ConditionAvailable, metav1.ConditionTrue, bkv1.ReasonProbeSucceeded)
	}

	must(t, server.Stop())
	down := time.Now()
	f.eventually(20*time.Second, "every bucket to turn unavailable", func() error {
		for _, sb := range sbs {
			c := findCond(f.get(sb), bkv1.ConditionAvailable)
			if c.Status == metav1.ConditionTrue {
				return errf("%s still available", sb.Name)
			}
		}
		return nil
	})
	t.Logf("all buckets unavailable %s after the store stopped", time.Since(down).Round(100*time.Millisecond))
	before := requests.snapshot(f.store)
	time.Sleep(15 * time.Second)
	total, _, ops := since(before, requests.snapshot(f.store))
	t.Logf("requests to the store during 15s of outage: %d %v", total, ops)
	if total > 20 {
		t.Errorf("a down store got %d requests in 15s; want about one per second at most", total)
	}
	for _, sb := range sbs {
		if c := findCond(f.get(sb), bkv1.ConditionAvailable); c.Status == metav1.ConditionUnknown && c.Reason != bkv1.ReasonStoreUnreachable {
			t.Errorf("%s: %s", sb.Name, describe(f.get(sb).Status.Conditions))
		}
	}

	must(t, server.Start())
	up := time.Now()
	f.eventually(15*time.Second, "every bucket to be available again", func() error {
		for _, sb := range sbs {
			if c := findCond(f.get(sb), bkv1.ConditionAvailable); c.Status != metav1.ConditionTrue {
				return errf("%s: %s %s", sb.Name, c.Status, c.Reason)
			}
		}
		return nil
	})
	t.Logf("all buckets available %s after the store came back", time.Since(up).Round(100*time.Millisecond))
}

// TestStatusEconomy: 50 healthy buckets probed every 10s for 60s: probes happen (about
// 300), status writes do not (at most one heartbeat each; the default is 5m).
func TestStatusEconomy(t *testing.T) {
	f := newFixture(t, seaweed)
	var sbs []*bkv1.StorageBucket
	for i := range 50 {
		sbs = append(sbs, f.bucket(fmt.Sprintf("eco-%02d", i), probeEvery(10*time.Second, bkv1.ProbeModeHead)))
	}
	for _, sb := range sbs {
		f.waitCondition(sb, bkv1.ConditionAvailable, metav1.ConditionTrue, bkv1.ReasonProbeSucceeded)
	}
	time.Sleep(2 * time.Second) // let the last creation writes pass

	w, err := k8sWatch.Watch(f.ctx, &bkv1.StorageBucketList{}, client.InNamespace(f.ns))
	must(t, err)
	defer w.Stop()
	probes := func() float64 {
		return testutil.ToFloat64(metrics.Probes.WithLabelValues(f.store, bkv1.ReasonProbeSucceeded))
	}
	probesBefore := probes()
	writes := 0
	timeout := time.After(60 * time.Second)
loop:
	for {
		select {
		case ev := <-w.ResultChan():
			if ev.Type == watch.Modified {
				writes++
			}
		case <-timeout:
			break loop
		}
	}
	n := int(probes() - probesBefore)
	t.Logf("60s, 50 buckets, 10s interval: %d probes, %d writes to the objects", n, writes)
	// More than one probe per bucket per interval is a fault; fewer is a loaded
	// machine lagging the schedule (the scheduler's own test pins the spread).
	if n < 200 || n > 350 {
		t.Errorf("%d probes in 60s; want about 300 (one per bucket per interval), never more", n)
	}
	if writes > 50 {
		t.Errorf("%d object writes in 60s for 50 healthy buckets; want at most one heartbeat each", writes)
	}
}

// TestReceiverRequestsProbes: a signed request probes within a second of arrival; an
// unsigned, stale or tampered one changes nothing.
func TestReceiverRequestsProbes(t *testing.T) {
	f := newFixture(t, seaweed)
	sb := f.bucket("hooked", probeEvery(time.Hour, bkv1.ProbeModeHead))
	// A second bucket for the event notification: a second request for the same
	// bucket within --min-probe-request-interval would wait for the interval's end.
	evented := f.bucket("hooked-event", probeEvery(time.Hour, bkv1.ProbeModeHead))
	f.waitCondition(sb, bkv1.ConditionAvailable, metav1.ConditionTrue, bkv1.ReasonProbeSucceeded)
	got := f.waitCondition(evented, bkv1.ConditionAvailable, metav1.ConditionTrue, bkv1.ReasonProbeSucceeded)
	time.Sleep(500 * time.Millisecond)

	post := func(body []byte, ts time.Time, sign func(ts string, body []byte) string) int {
		t.Helper()
		stamp := strconv.FormatInt(ts.Unix(), 10)
		req, err := http.NewRequest(http.MethodPost, "http://"+receiverAddr+"/v1/probe", bytes.NewReader(body))
		must(t, err)
		req.Header.Set("X-Bucketkeeper-Timestamp", stamp)
		if sign != nil {
			req.Header.Set("X-Bucketkeeper-Signature", sign(stamp, body))
		}
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	good := func(ts string, body []byte) string { return receiver.Sign(receiverSecret, ts, body) }
	direct := []byte(fmt.Sprintf(`{"namespace":%q,"name":%q}`, f.ns, sb.Name))

	before := requests.snapshot(f.store)
	for name, code := range map[string]int{
		"unsigned": post(direct, time.Now(), nil),
		"stale":    post(direct, time.Now().Add(-10*time.Minute), good),
		"tampered": post(direct, time.Now(), func(ts string, _ []byte) string { return good(ts, []byte(`{"namespace":"x","name":"y"}`)) }),
	} {
		if code != http.StatusUnauthorized {
			t.Errorf("%s request answered %d, want 401", name, code)
		}
	}
	time.Sleep(2 * time.Second)
	if _, _, ops := since(before, requests.snapshot(f.store)); ops["HeadBucket"] != 0 {
		t.Fatalf("rejected requests caused probes: %v", ops)
	}
	if cur := f.get(sb); cur.Annotations[bkv1.AnnotationProbeRequestedAt] != "" {
		t.Fatalf("a rejected request annotated the object")
	}

	// An S3 event notification naming the bucket, as stores send them.
	notification := []byte(fmt.Sprintf(`{"Records":[{"eventName":"s3:ObjectCreated:Put","s3":{"bucket":{"name":%q}}}]}`, got.Status.BucketName))
	for _, body := range [][]byte{direct, notification} {
		before := requests.snapshot(f.store)
		sent := time.Now()
		if code := post(body, sent, good); code != http.StatusAccepted {
			t.Fatalf("signed request answered %d, want 202", code)
		}
		f.eventually(5*time.Second, "the requested probe", func() error {
			if _, _, ops := since(before, requests.snapshot(f.store)); ops["HeadBucket"] < 1 {
				return errf("no probe yet")
			}
			return nil
		})
		if d := time.Since(sent); d > time.Second+250*time.Millisecond {
			t.Errorf("probe %s after the request; want within 1s", d)
		}
	}
}

func (f *fixture) requestProbe(sb *bkv1.StorageBucket, value string) {
	f.t.Helper()
	cur := f.get(sb)
	patch := client.MergeFrom(cur.DeepCopy())
	if cur.Annotations == nil {
		cur.Annotations = map[string]string{}
	}
	cur.Annotations[bkv1.AnnotationProbeRequestedAt] = value
	must(f.t, k8s.Patch(f.ctx, cur, patch))
}
