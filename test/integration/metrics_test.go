package integration_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/metrics"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// series reads one gauge or counter series of a vector without creating it
// (WithLabelValues would): ok is false when the series does not exist.
func series(t *testing.T, vec prometheus.Collector, labels map[string]string) (value float64, ok bool) {
	t.Helper()
	ch := make(chan prometheus.Metric, 64)
	go func() { vec.Collect(ch); close(ch) }()
	for m := range ch {
		var out dto.Metric
		if err := m.Write(&out); err != nil {
			t.Fatal(err)
		}
		match := len(out.GetLabel()) == len(labels)
		for _, l := range out.GetLabel() {
			if labels[l.GetName()] != l.GetValue() {
				match = false
			}
		}
		switch {
		case !match:
		case out.GetGauge() != nil:
			value, ok = out.GetGauge().GetValue(), true
		case out.GetCounter() != nil:
			value, ok = out.GetCounter().GetValue(), true
		}
	}
	return value, ok
}

// TestLastSuccessfulProbeGauge: the gauge holds the time of the last probe a bucket
// answered (the manager's clock is a fake one the test moves), stays put while probes
// fail, and goes away with the bucket, as bucketkeeper_bucket_available does.
func TestLastSuccessfulProbeGauge(t *testing.T) {
	f := newFixture(t, seaweed)
	t0 := time.Now().Truncate(time.Second)
	clk := clocktesting.NewFakeClock(t0)
	ctx, stop := context.WithCancel(context.Background())
	// The fake clock never reaches an hourly probe or drift check by itself: every
	// probe below is one the test asks for.
	done, err := startManager(ctx, operator.Options{WatchLabelSelector: isolatedLabel + "=" + f.ns, Clock: clk, SyncInterval: time.Hour})
	if err != nil {
		stop()
		t.Fatal(err)
	}
	t.Cleanup(func() { removeIsolated(t, f); stop(); <-done })

	sb := f.bucket("fresh", probeEvery(time.Hour, bkv1.ProbeModeHead), func(sb *bkv1.StorageBucket) {
		sb.Labels = map[string]string{isolatedLabel: f.ns}
	})
	bucket := map[string]string{"namespace": f.ns, "name": sb.Name}
	wantGauges := func(what string, lastSuccess time.Time, available float64) {
		t.Helper()
		if v, ok := series(t, metrics.BucketLastSuccessfulProbe, bucket); !ok || v != float64(lastSuccess.Unix()) {
			t.Fatalf("%s: last successful probe gauge = %v (present %v), want %d", what, v, ok, lastSuccess.Unix())
		}
		if v, ok := series(t, metrics.BucketProbeInterval, bucket); !ok || v != 3600 {
			t.Fatalf("%s: probe interval gauge = %v (present %v), want 3600", what, v, ok)
		}
		if v, ok := series(t, metrics.BucketAvailable, bucket); !ok || v != available {
			t.Fatalf("%s: availability gauge = %v (present %v), want %v", what, v, ok, available)
		}
	}

	got := f.waitCondition(sb, bkv1.ConditionAvailable, metav1.ConditionTrue, bkv1.ReasonProbeSucceeded)
	if !got.Status.LastProbeTime.Time.Equal(t0) {
		t.Fatalf("lastProbeTime %s, want the fake clock's %s", got.Status.LastProbeTime.Time, t0)
	}
	wantGauges("first probe", t0, 1)

	// A later successful probe moves the gauge to its own time.
	clk.Step(30 * time.Second)
	t1 := clk.Now()
	f.requestProbe(sb, "ok")
	waitHandled(f, sb, "ok")
	wantGauges("second successful probe", t1, 1)

	// A failed probe (the bucket vanished from the store) leaves it where it was.
	must(t, f.admin.DeleteBucket(f.ctx, got.Status.BucketName))
	clk.Step(30 * time.Second)
	f.requestProbe(sb, "fails")
	if h := waitHandled(f, sb, "fails"); h.Status.ConsecutiveProbeFailures == 0 {
		t.Fatalf("the probe after the bucket was deleted did not fail: %s", describe(h.Status.Conditions))
	}
	wantGauges("failed probe", t1, 0)

	// Deleting the StorageBucket removes every per-bucket series.
	must(t, k8s.Delete(f.ctx, sb))
	f.waitGone(sb)
	f.eventually(30*time.Second, "the per-bucket series to go with the bucket", func() error {
		for name, vec := range map[string]prometheus.Collector{
			"last successful probe": metrics.BucketLastSuccessfulProbe,
			"probe interval":        metrics.BucketProbeInterval,
			"available":             metrics.BucketAvailable,
		} {
			if v, ok := series(t, vec, bucket); ok {
				return fmt.Errorf("the %s series is still there (%v)", name, v)
			}
		}
		return nil
	})
}

// waitHandled waits until the probe request value was served and returns the bucket.
func waitHandled(f *fixture, sb *bkv1.StorageBucket, value string) *bkv1.StorageBucket {
	f.t.Helper()
	var got *bkv1.StorageBucket
	f.eventually(30*time.Second, "probe request "+value+" to be handled", func() error {
		got = f.get(sb)
		if got.Status.LastHandledProbeRequest != value {
			return errf("lastHandledProbeRequest %q", got.Status.LastHandledProbeRequest)
		}
		return nil
	})
	return got
}

// TestAvailabilityMetricOptOut: --disable-availability-metric drops every per-bucket
// series, while the per-store probe metrics still count the probes.
func TestAvailabilityMetricOptOut(t *testing.T) {
	f := newFixture(t, seaweed)
	ctx, stop := context.WithCancel(context.Background())
	done, err := startManager(ctx, operator.Options{WatchLabelSelector: isolatedLabel + "=" + f.ns, DisableAvailabilityMetric: true})
	if err != nil {
		stop()
		t.Fatal(err)
	}
	t.Cleanup(func() { removeIsolated(t, f); stop(); <-done })

	sb := f.bucket("quiet", probeEvery(time.Hour, bkv1.ProbeModeHead), func(sb *bkv1.StorageBucket) {
		sb.Labels = map[string]string{isolatedLabel: f.ns}
	})
	f.waitCondition(sb, bkv1.ConditionAvailable, metav1.ConditionTrue, bkv1.ReasonProbeSucceeded)
	bucket := map[string]string{"namespace": f.ns, "name": sb.Name}
	for name, vec := range map[string]prometheus.Collector{
		"bucketkeeper_bucket_last_successful_probe_timestamp_seconds": metrics.BucketLastSuccessfulProbe,
		"bucketkeeper_bucket_probe_interval_seconds":                  metrics.BucketProbeInterval,
		"bucketkeeper_bucket_available":                               metrics.BucketAvailable,
	} {
		if v, ok := series(t, vec, bucket); ok {
			t.Errorf("%s{namespace=%q,name=%q} = %v with the per-bucket metrics disabled", name, f.ns, sb.Name, v)
		}
	}
	// The probe did happen and is counted per store.
	if n, ok := series(t, metrics.Probes, map[string]string{"store": f.store, "result": bkv1.ReasonProbeSucceeded}); !ok || n < 1 {
		t.Errorf("bucketkeeper_probes_total for store %s: %v (present %v), want at least 1", f.store, n, ok)
	}
}

// TestObjectStoreReadyGauge: 0 while the store's health check fails, 1 once it passes,
// and gone with the store.
func TestObjectStoreReadyGauge(t *testing.T) {
	// A loopback port nothing listens on: the health check is refused at once.
	addr, err := testenv.FreeAddr()
	must(t, err)
	closed := "http://" + addr
	f := newFixture(t, seaweed, func(s *bkv1.ObjectStore) { s.Spec.Endpoint = closed })
	store := map[string]string{"store": f.store}
	wantReady := func(want float64) {
		t.Helper()
		f.eventually(60*time.Second, fmt.Sprintf("bucketkeeper_objectstore_ready{store=%q} = %v", f.store, want), func() error {
			if v, ok := series(t, metrics.ObjectStoreReady, store); !ok || v != want {
				return errf("%v (present %v)", v, ok)
			}
			return nil
		})
	}
	waitStore(f, bkv1.ReasonStoreUnreachable)
	wantReady(0)

	f.updateStore(func(s *bkv1.ObjectStoreSpec) { s.Endpoint = seaweed.Endpoint })
	waitStore(f, bkv1.ReasonReady)
	wantReady(1)

	f.deleteStore()
	f.waitGone(&bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: f.store}})
	f.eventually(30*time.Second, "the store's series to go with it", func() error {
		if v, ok := series(t, metrics.ObjectStoreReady, store); ok {
			return errf("still there: %v", v)
		}
		return nil
	})
}

// TestBucketAccessReadyGauge: 0 while an access waits for a bucket that does not exist,
// 1 once its key is issued, and gone with the access: what the
// BucketkeeperAccessNotReady alert reads.
func TestBucketAccessReadyGauge(t *testing.T) {
	f := newFixture(t, seaweed, withIAMOn(seaweed))
	ba := f.access("app", "app-s3", bkv1.BucketGrant{Name: "data", Mode: bkv1.AccessReadWrite})
	labels := map[string]string{"namespace": f.ns, "name": ba.Name}
	wantReady := func(want float64) {
		t.Helper()
		f.eventually(60*time.Second, fmt.Sprintf("bucketkeeper_bucketaccess_ready{namespace=%q,name=%q} = %v", f.ns, ba.Name, want), func() error {
			if v, ok := series(t, metrics.BucketAccessReady, labels); !ok || v != want {
				return errf("%v (present %v)", v, ok)
			}
			return nil
		})
	}
	f.waitAccessCondition(ba, bkv1.ConditionReady, metav1.ConditionFalse, bkv1.ReasonBucketNotReady)
	wantReady(0)

	f.bucket("data", func(sb *bkv1.StorageBucket) { sb.Spec.DeletionPolicy = bkv1.DeletionPolicyDelete })
	f.waitAccessReady(ba)
	wantReady(1)

	must(t, k8s.Delete(f.ctx, ba))
	f.eventually(60*time.Second, "the access's series to go with it", func() error {
		if v, ok := series(t, metrics.BucketAccessReady, labels); ok {
			return errf("still there: %v", v)
		}
		return nil
	})
}
