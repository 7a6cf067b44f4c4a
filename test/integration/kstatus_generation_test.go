package integration_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/controller/storagebucket"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
)

// TestKstatusFollowsTheGeneration: a spec change the controller has not yet seen reads
// as InProgress, however healthy the status it wrote for the previous generation, and as
// Current again once the controller has reconciled it. The bucket is served by a
// reconciler of the test's own, called by hand, so the moment between the change and
// its reconcile can be looked at.
func TestKstatusFollowsTheGeneration(t *testing.T) {
	f := newFixture(t, seaweed)
	sb := f.bucket("generations", func(sb *bkv1.StorageBucket) {
		sb.Labels = map[string]string{isolatedLabel: f.ns} // the suite's manager leaves it alone
	})
	r := &storagebucket.Reconciler{Client: k8s, Recorder: events.NewFakeRecorder(100), Clock: clock.RealClock{},
		Stores: &stores.Registry{Client: k8s, APIReader: k8s, Factory: s3.New}, SyncInterval: time.Hour, ClusterID: clusterID}
	key := client.ObjectKeyFromObject(sb)
	reconcileIsolated(t, r, key)

	f.eventually(30*time.Second, "the bucket to be Ready", func() error {
		if _, err := r.Reconcile(f.ctx, ctrl.Request{NamespacedName: key}); err != nil {
			return err
		}
		if c := findCond(f.get(sb), bkv1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
			return errf("conditions: %s", describe(f.get(sb).Status.Conditions))
		}
		return nil
	})
	if res := f.kstatusOf("StorageBucket", key); res.Status != status.CurrentStatus {
		t.Fatalf("kstatus of a Ready bucket = %s (%s), want Current", res.Status, res.Message)
	}

	f.updateSpec(sb, func(s *bkv1.StorageBucketSpec) { s.Tags = map[string]string{"team": "b"} })
	changed := f.get(sb)
	if changed.Status.ObservedGeneration >= changed.Generation {
		t.Fatalf("observedGeneration %d, generation %d: the change was observed without a reconcile", changed.Status.ObservedGeneration, changed.Generation)
	}
	if res := f.kstatusOf("StorageBucket", key); res.Status != status.InProgressStatus {
		t.Fatalf("kstatus after an unreconciled spec change = %s (%s), want InProgress", res.Status, res.Message)
	}

	if _, err := r.Reconcile(f.ctx, ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	if res := f.kstatusOf("StorageBucket", key); res.Status != status.CurrentStatus {
		t.Fatalf("kstatus after the change was reconciled = %s (%s), want Current; %s", res.Status, res.Message, describe(f.get(sb).Status.Conditions))
	}
}

// reconcileIsolated makes the test's own reconciler r carry out the deletion of an
// isolated StorageBucket when the test ends: no manager serves it.
func reconcileIsolated(t *testing.T, r *storagebucket.Reconciler, key client.ObjectKey) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		sb := &bkv1.StorageBucket{}
		if err := k8s.Get(ctx, key, sb); err != nil {
			return
		}
		_ = k8s.Delete(ctx, sb)
		for range 20 {
			if err := k8s.Get(ctx, key, &bkv1.StorageBucket{}); err != nil {
				return
			}
			_, _ = r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
		}
		t.Errorf("%s still there after its deletion was reconciled", key)
	})
}
