package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// TestStoreRetirementGauge: a retiring store's counts, one series per state, and
// whether it is paused, gone once it retires no more; another store's series stay.
func TestStoreRetirementGauge(t *testing.T) {
	t.Cleanup(func() { SetStoreRetirement("minio", nil); SetStoreRetirement("other", nil) })
	SetStoreRetirement("minio", &bkv1.RetirementStatus{Into: "ceph", Paused: true, Moved: 4, Moving: 2, Queued: 3, Skipped: 1})
	SetStoreRetirement("other", &bkv1.RetirementStatus{Into: "ceph", Remaining: 5})
	for state, want := range map[string]float64{"moved": 4, "moving": 2, "queued": 3, "skipped": 1, "remaining": 0} {
		if got := testutil.ToFloat64(StoreRetirementBuckets.WithLabelValues("minio", state)); got != want {
			t.Errorf("%s: %v, want %v", state, got, want)
		}
	}
	if p, q := testutil.ToFloat64(StoreRetirementPaused.WithLabelValues("minio")), testutil.ToFloat64(StoreRetirementPaused.WithLabelValues("other")); p != 1 || q != 0 {
		t.Errorf("paused: minio %v, other %v; want 1 and 0", p, q)
	}
	SetStoreRetirement("minio", nil)
	if n := testutil.CollectAndCount(StoreRetirementBuckets); n != 5 {
		t.Errorf("%d series once minio retires no more, want the other store's 5", n)
	}
	if n := testutil.CollectAndCount(StoreRetirementPaused); n != 1 {
		t.Errorf("%d paused series once minio retires no more, want the other store's 1", n)
	}
}
