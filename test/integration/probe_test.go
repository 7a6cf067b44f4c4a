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

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/controller/storagebucket"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/metrics"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
	"github.com/bucketkeeper/bucketkeeper/internal/receiver"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
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
		if ev := f.waitEvent(got, bkv1.ReasonBucketCreated); ev[bkv1.ReasonBucketCreated] != 1 {
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
	for _, srv := range everyStore() {
		t.Run(string(srv.Kind), func(t *testing.T) {
			t.Parallel()
			testReadWriteProbeLeavesNoCanary(t, srv)
		})
	}
}

func testReadWriteProbeLeavesNoCanary(t *testing.T, srv *testenv.S3Server) {
	f := newFixture(t, srv)
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
// a burst of wake-ups for one bucket costs at most one probe per due time. The bucket is
// served by a reconciler of the test's own, on a fake clock: the test first sees a real
// probe, then sends bursts of wake-ups before, at and after each due time.
func TestDuplicateWakeUpsProbeOnce(t *testing.T) {
	f := newFixture(t, seaweed)
	sb := f.bucket("burst", probeEvery(time.Minute, bkv1.ProbeModeHead), func(sb *bkv1.StorageBucket) {
		sb.Labels = map[string]string{isolatedLabel: f.ns} // the suite's manager leaves it alone
	})

	heads := &headLog{times: map[string][]time.Time{}}
	var mu sync.Mutex
	probes := 0 // the probes this reconciler ran, as its metric sees them
	clk := clocktesting.NewFakeClock(time.Now())
	sched := &dueLog{clk: clk}
	stores := &stores.Registry{Client: k8s, APIReader: k8s, Factory: func(ctx context.Context, cfg s3.Config) (s3.Client, error) {
		c, err := s3.New(ctx, cfg)
		return countingHeads{Client: c, log: heads}, err
	}}
	r := &storagebucket.Reconciler{Client: k8s, Recorder: events.NewFakeRecorder(100), Stores: stores, Clock: clk,
		SyncInterval: time.Hour, ClusterID: clusterID, Prober: &storagebucket.Prober{Clock: clk, Heartbeat: 5 * time.Minute, Scheduler: sched,
			Observe: func(store string, _ bkv1.ProbeMode, _ string, _ time.Duration) {
				if store == f.store {
					mu.Lock()
					probes++
					mu.Unlock()
				}
			}}}
	key := client.ObjectKeyFromObject(sb)
	wake := func(n int) {
		t.Helper()
		for range n {
			if _, err := r.Reconcile(f.ctx, ctrl.Request{NamespacedName: key}); err != nil {
				t.Fatal(err)
			}
		}
	}
	probed := func() int {
		mu.Lock()
		defer mu.Unlock()
		return probes
	}
	reconcileIsolated(t, r, key)

	// Provision it; the first pass that finds the bucket provisioned probes at once.
	f.eventually(30*time.Second, "the bucket to be provisioned and probed", func() error {
		wake(1)
		if c := findCond(f.get(sb), bkv1.ConditionAvailable); c == nil || c.Reason != bkv1.ReasonProbeSucceeded {
			return errf("not probed yet: %s", describe(f.get(sb).Status.Conditions))
		}
		return nil
	})
	bucket := f.get(sb).Status.BucketName
	if n := probed(); n != 1 {
		t.Fatalf("%d probes after the first verdict, want 1", n)
	}

	for round := 1; round <= 2; round++ {
		due, ok := sched.last(key)
		if !ok || !due.After(clk.Now()) {
			t.Fatalf("round %d: next probe scheduled at %v (ok=%v), want after now %v", round, due, ok, clk.Now())
		}
		headsBefore := heads.count(bucket)
		// Up to a moment before the due time, wake-ups find nothing due.
		clk.SetTime(due.Add(-time.Millisecond))
		wake(50)
		if n, h := probed(), heads.count(bucket)-headsBefore; n != round || h != 0 {
			t.Fatalf("round %d: 50 wake-ups before the due time caused %d probes in all (want %d) and %d HeadBucket on %s (want 0)", round, n, round, h, bucket)
		}
		// At the due time, a burst costs exactly one probe: one HeadBucket on the bucket.
		clk.SetTime(due)
		wake(100)
		if n, h := probed(), heads.count(bucket)-headsBefore; n != round+1 || h != 1 {
			t.Fatalf("round %d: 100 wake-ups at the due time caused %d probes in all (want %d) and %d HeadBucket on %s (want 1)", round, n, round+1, h, bucket)
		}
	}
}

// dueLog is a probe scheduler on a fake clock: it records, per bucket, the last due
// time the reconciler asked for, and says it fired once the clock reaches that time, as
// probe.Scheduler would have sent the event by then (with no budget to hold it back).
type dueLog struct {
	clk clock.PassiveClock
	mu  sync.Mutex
	due map[types.NamespacedName]time.Time
}

func (d *dueLog) Schedule(key types.NamespacedName, _ string, due time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.due == nil {
		d.due = map[types.NamespacedName]time.Time{}
	}
	d.due[key] = due
}

func (d *dueLog) Forget(key types.NamespacedName) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.due, key)
}

func (d *dueLog) Lookup(key types.NamespacedName) (time.Time, bool, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	due, ok := d.due[key]
	return due, ok && !d.clk.Now().Before(due), ok
}

func (d *dueLog) last(key types.NamespacedName) (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	due, ok := d.due[key]
	return due, ok
}

// TestProbeRequestAnnotationProbesOnce: a new annotation value costs exactly one probe.
// Probes are counted by the probe metric of the test's store, which holds this bucket
// alone (drift checks send HeadBucket too, so HeadBucket counts would not tell). After
// the request is handled, a spec change (which probes once, at the new generation) is
// the fact that proves the manager has gone past the request: had the request been
// served twice, the count at that point would be three.
func TestProbeRequestAnnotationProbesOnce(t *testing.T) {
	f := newFixture(t, seaweed)
	sb := f.bucket("asked", probeEvery(time.Hour, bkv1.ProbeModeHead))
	f.waitCondition(sb, bkv1.ConditionAvailable, metav1.ConditionTrue, bkv1.ReasonProbeSucceeded)
	before := f.probes()
	f.requestProbe(sb, "please")
	f.eventually(10*time.Second, "the request to be handled", func() error {
		if got := f.get(sb); got.Status.LastHandledProbeRequest != "please" {
			return errf("lastHandledProbeRequest %q", got.Status.LastHandledProbeRequest)
		}
		return nil
	})
	if n := f.probes() - before; n != 1 {
		t.Fatalf("the annotation caused %d probes of %s, want exactly 1", n, sb.Name)
	}

	f.updateSpec(sb, func(s *bkv1.StorageBucketSpec) { s.Probe.Timeout = &metav1.Duration{Duration: 4 * time.Second} })
	f.waitCondition(sb, bkv1.ConditionAvailable, metav1.ConditionTrue, bkv1.ReasonProbeSucceeded)
	if n := f.probes() - before; n != 2 {
		t.Fatalf("the annotation and then a spec change caused %d probes of %s, want exactly 2", n, sb.Name)
	}
}

// probes is how many probes the manager has run on the test's store, whatever their
// verdict, from the probe metric.
func (f *fixture) probes() int {
	n := 0.0
	for _, reason := range []string{bkv1.ReasonProbeSucceeded, bkv1.ReasonProbeFailed, bkv1.ReasonBucketNotFound,
		bkv1.ReasonAccessDenied, bkv1.ReasonProbeTimeout, bkv1.ReasonStoreUnreachable} {
		n += testutil.ToFloat64(metrics.Probes.WithLabelValues(f.store, reason))
	}
	return int(n)
}

func TestPacedVanishedBucketIsReportedAndRecreated(t *testing.T) {
	t.Parallel() // mostly waiting on intervals: see the package doc in suite_test.go
	for _, srv := range everyStore() {
		t.Run(string(srv.Kind), func(t *testing.T) {
			t.Parallel()
			testVanishedBucketIsReportedAndRecreated(t, srv)
		})
	}
}

func testVanishedBucketIsReportedAndRecreated(t *testing.T, srv *testenv.S3Server) {
	f := newFixture(t, srv)
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

// TestPacedStoreOutage: with the store down, every bucket turns unavailable within two
// intervals, and then only the paced health check goes to the store (nothing to its
// buckets); back up, all buckets are available again within one interval. It runs on a
// Versity and an RGW server of its own (on RGW the outage stops the gateway, not the
// cluster behind it); SeaweedFS's restart is TestS3Lifecycle's.
func TestPacedStoreOutage(t *testing.T) {
	t.Parallel() // mostly waiting on intervals: see the package doc in suite_test.go
	for _, kind := range []testenv.S3Kind{testenv.Versity, testenv.RGW} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			testStoreOutage(t, testenv.NewS3(t, kind))
		})
	}
}

func testStoreOutage(t *testing.T, server *testenv.S3Server) {
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

	// While the store is known to be down, only its health check (ListBuckets, at most
	// one check per minimum gap, each of at most s3.MaxAttempts attempts) goes out; no
	// request reaches its buckets. Wait for three health checks at least (more attempts
	// than two checks can make) to prove time has passed.
	f.eventually(30*time.Second, "the store to be known as down", func() error {
		store := &bkv1.ObjectStore{}
		must(t, k8s.Get(f.ctx, client.ObjectKey{Name: f.store}, store))
		if c := findStoreCond(store, bkv1.ConditionReady); c == nil || c.Status == metav1.ConditionTrue {
			return errf("store conditions %v", store.Status.Conditions)
		}
		return nil
	})
	before := requests.snapshot(f.store)
	windowStart := time.Now()
	f.eventually(60*time.Second, "the store's health check to keep trying", func() error {
		if _, _, ops := since(before, requests.snapshot(f.store)); ops["ListBuckets"] <= 2*s3.MaxAttempts {
			return errf("ops %v", ops)
		}
		return nil
	})
	window := time.Since(windowStart)
	total, _, ops := since(before, requests.snapshot(f.store))
	t.Logf("requests to the store during %s of outage: %d %v", window.Round(100*time.Millisecond), total, ops)
	if other := total - ops["ListBuckets"]; other != 0 {
		t.Errorf("a store known to be down got %d requests other than its health check: %v", other, ops)
	}
	if limit := s3.MaxAttempts * (1 + int(window/defaults.MinStoreCheckGap)); ops["ListBuckets"] > limit {
		t.Errorf("%d health-check attempts in %s, more than one check per %s allows (%d)", ops["ListBuckets"], window, defaults.MinStoreCheckGap, limit)
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

// TestPacedStatusEconomy: 50 healthy buckets are probed again and again, each about once per
// interval and never in bursts, while their status is not written (at most one write
// each, for a heartbeat; the default heartbeat is 5m). A manager of the test's own counts
// HeadBucket per bucket and sends no drift checks, so every HeadBucket is a probe.
func TestPacedStatusEconomy(t *testing.T) {
	t.Parallel() // mostly waiting on intervals: see the package doc in suite_test.go
	const (
		interval = 4 * time.Second // the manager's default, for buckets that set none
		buckets  = 50
		rounds   = 4 // probes each bucket must get while the test watches
	)
	f := newFixture(t, seaweed)
	heads := &headLog{times: map[string][]time.Time{}}
	ctx, stop := context.WithCancel(f.ctx)
	done, err := startManager(ctx, operator.Options{WatchLabelSelector: isolatedLabel + "=" + f.ns, SyncInterval: time.Hour,
		DefaultProbeInterval: interval,
		S3Factory: func(ctx context.Context, cfg s3.Config) (s3.Client, error) {
			c, err := s3.New(ctx, cfg)
			return countingHeads{Client: c, log: heads}, err
		}})
	must(t, err)
	defer func() { removeIsolated(t, f); stop(); <-done }()

	var sbs []*bkv1.StorageBucket
	for i := range buckets {
		sbs = append(sbs, f.bucket(fmt.Sprintf("eco-%02d", i), func(sb *bkv1.StorageBucket) {
			sb.Labels = map[string]string{isolatedLabel: f.ns}
		}))
	}
	names := map[string]string{} // bucket name → StorageBucket name
	for _, sb := range sbs {
		got := f.waitCondition(sb, bkv1.ConditionAvailable, metav1.ConditionTrue, bkv1.ReasonProbeSucceeded)
		names[got.Status.BucketName] = sb.Name
	}

	// Status changes from here on, from a watch at the version of this list.
	list := &bkv1.StorageBucketList{}
	must(t, k8s.List(f.ctx, list, client.InNamespace(f.ns)))
	w, err := k8sWatch.Watch(f.ctx, &bkv1.StorageBucketList{}, client.InNamespace(f.ns),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	must(t, err)
	defer w.Stop()
	var mu sync.Mutex
	writes := map[string]int{}
	last := map[string]bkv1.StorageBucketStatus{}
	for _, sb := range list.Items {
		last[sb.Name] = sb.Status
	}
	go func() {
		for ev := range w.ResultChan() {
			obj, ok := ev.Object.(*bkv1.StorageBucket)
			if !ok || ev.Type != watch.Modified {
				continue
			}
			mu.Lock()
			if !equality.Semantic.DeepEqual(last[obj.Name], obj.Status) {
				writes[obj.Name]++
			}
			last[obj.Name] = obj.Status
			mu.Unlock()
		}
	}()

	from := map[string]int{}
	for bucket := range names {
		from[bucket] = heads.count(bucket)
	}
	start := time.Now()
	f.eventually(time.Duration(rounds+3)*interval+time.Minute, fmt.Sprintf("%d probes of every bucket", rounds), func() error {
		for bucket, name := range names {
			if n := len(heads.since(bucket, from[bucket])); n < rounds {
				return errf("%s probed %d times", name, n)
			}
		}
		return nil
	})
	window := time.Since(start)
	// Probes follow each bucket's slots, which are an interval apart give or take the
	// 10% jitter on each, so consecutive slots are at least 0.8 intervals apart. Load
	// only delays a probe: the first probe's delay (taken as at most one interval) is
	// all that can bring the others closer to the window's start.
	limit := 1 + int((window+interval)/(interval*8/10))
	total := 0
	for bucket, name := range names {
		probes := heads.since(bucket, from[bucket])
		total += len(probes)
		if len(probes) > limit {
			t.Errorf("%s was probed %d times in %s, more than one per slot (%d)", name, len(probes), window.Round(time.Millisecond), limit)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%s, %d buckets, %s interval: %d probes, status writes %v", window.Round(time.Millisecond), buckets, interval, total, writes)
	for name, n := range writes {
		if n > 1 {
			t.Errorf("%s: %d status writes while healthy, want at most one heartbeat", name, n)
		}
	}
}

// TestReceiverRequestsProbes: a signed request probes within a second of arrival; an
// unsigned, stale or tampered one changes nothing. Each bucket has a store of its own, so
// the probe metric of a store counts the probes of that one bucket.
func TestReceiverRequestsProbes(t *testing.T) {
	f := newFixture(t, seaweed)
	sb := f.bucket("hooked", probeEvery(time.Hour, bkv1.ProbeModeHead))
	// A second bucket for the event notification: a second request for the same
	// bucket within --min-probe-request-interval would wait for the interval's end.
	fe := newFixture(t, seaweed)
	evented := fe.bucket("hooked-event", probeEvery(time.Hour, bkv1.ProbeModeHead))
	f.waitCondition(sb, bkv1.ConditionAvailable, metav1.ConditionTrue, bkv1.ReasonProbeSucceeded)
	got := fe.waitCondition(evented, bkv1.ConditionAvailable, metav1.ConditionTrue, bkv1.ReasonProbeSucceeded)

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

	probesBefore := f.probes()
	for name, code := range map[string]int{
		"unsigned": post(direct, time.Now(), nil),
		"stale":    post(direct, time.Now().Add(-10*time.Minute), good),
		"tampered": post(direct, time.Now(), func(ts string, _ []byte) string { return good(ts, []byte(`{"namespace":"x","name":"y"}`)) }),
	} {
		if code != http.StatusUnauthorized {
			t.Errorf("%s request answered %d, want 401", name, code)
		}
	}
	// The receiver answers 401 before it asks for anything, so the object is unchanged
	// now or never; the signed request below then shows that exactly one probe follows.
	if cur := f.get(sb); cur.Annotations[bkv1.AnnotationProbeRequestedAt] != "" {
		t.Fatalf("a rejected request annotated the object")
	}

	// An S3 event notification naming the bucket, as stores send them.
	notification := []byte(fmt.Sprintf(`{"Records":[{"eventName":"s3:ObjectCreated:Put","s3":{"bucket":{"name":%q}}}]}`, got.Status.BucketName))
	for _, c := range []struct {
		body   []byte
		fx     *fixture
		obj    *bkv1.StorageBucket
		before int
	}{{direct, f, sb, probesBefore}, {notification, fe, evented, fe.probes()}} {
		if code := post(c.body, time.Now(), good); code != http.StatusAccepted {
			t.Fatalf("signed request answered %d, want 202", code)
		}
		// The bucket probes once an hour, so a probe now is the request's doing; how
		// soon it comes depends on the machine, and is not what this test measures.
		c.fx.eventually(30*time.Second, "the requested probe", func() error {
			if c.fx.probes() == c.before {
				return errf("no probe yet")
			}
			return nil
		})
		c.fx.eventually(5*time.Second, "the request to be recorded as handled", func() error {
			cur := c.fx.get(c.obj)
			if requested := cur.Annotations[bkv1.AnnotationProbeRequestedAt]; requested == "" || cur.Status.LastHandledProbeRequest != requested {
				return errf("requested %q, handled %q", requested, cur.Status.LastHandledProbeRequest)
			}
			return nil
		})
		if n := c.fx.probes() - c.before; n != 1 {
			t.Fatalf("%s: %d probes since the rejected requests, want exactly the one the signed request asked for", c.obj.Name, n)
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
