package store

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
)

// TestStoreSlots: a store gets at most its limit of slots, a released slot is free again
// (once, however often release is called), and stores do not share slots.
func TestStoreSlots(t *testing.T) {
	var s storeSlots
	var releases []func()
	for i := range 3 {
		release, ok := s.tryAcquire("a", 3)
		if !ok {
			t.Fatalf("slot %d of 3 refused", i+1)
		}
		releases = append(releases, release)
	}
	if _, ok := s.tryAcquire("a", 3); ok {
		t.Fatal("a fourth slot was granted with a limit of 3")
	}
	if release, ok := s.tryAcquire("b", 3); !ok {
		t.Fatal("another store was refused while the first one is full")
	} else {
		release()
	}
	releases[0]()
	releases[0]() // a second release must not free a slot someone else holds
	if _, ok := s.tryAcquire("a", 3); !ok {
		t.Fatal("a released slot was not free again")
	}
	if _, ok := s.tryAcquire("a", 3); ok {
		t.Fatal("releasing twice freed two slots")
	}
	if _, ok := s.tryAcquire("a", 0); !ok {
		t.Fatal("limit 0 must mean no cap")
	}
}

// TestReconcileCap: with two or more stores each may have MaxReconcilesPerStore
// reconciles in flight; with fewer, every worker but one, so that a single hung store
// cannot take them all; with one worker there is nothing to keep; zero
// MaxReconcilesPerStore means no cap.
func TestReconcileCap(t *testing.T) {
	cases := []struct {
		perStore, stores, workers, want int
	}{
		{perStore: 3, stores: 0, workers: 4, want: 3},
		{perStore: 3, stores: 1, workers: 4, want: 3},
		{perStore: 3, stores: 2, workers: 4, want: 3},
		{perStore: 3, stores: 5, workers: 4, want: 3},
		{perStore: 6, stores: 1, workers: 8, want: 7},
		{perStore: 6, stores: 2, workers: 8, want: 6},
		{perStore: 1, stores: 1, workers: 2, want: 1},
		{perStore: 1, stores: 1, workers: 1, want: 1},
		{perStore: 1, stores: 1, workers: 0, want: 1},
		{perStore: 0, stores: 1, workers: 4, want: 0},
		{perStore: 0, stores: 2, workers: 4, want: 0},
	}
	for _, c := range cases {
		r := &Registry{MaxReconcilesPerStore: c.perStore}
		if got := r.ReconcileCap(c.stores, c.workers); got != c.want {
			t.Errorf("MaxReconcilesPerStore %d, %d stores, %d workers: cap %d, want %d", c.perStore, c.stores, c.workers, got, c.want)
		}
		if c.workers > 1 && c.perStore > 0 && r.ReconcileCap(c.stores, c.workers) >= c.workers {
			t.Errorf("%d stores, %d workers: one store may take every worker", c.stores, c.workers)
		}
	}
}

// blockingReconciler holds every reconcile until release is closed and counts them.
type blockingReconciler struct {
	entered atomic.Int32
	release chan struct{}
}

func (b *blockingReconciler) Reconcile(context.Context, ctrl.Request) (ctrl.Result, error) {
	b.entered.Add(1)
	<-b.release
	return ctrl.Result{}, nil
}

// TestSingleHungStoreLeavesAWorker: with one ObjectStore and four workers, three of its
// buckets' reconciles may hang; the fourth bucket is turned away to be tried again
// later, leaving its worker free, which serves the first bucket of a store added then.
func TestSingleHungStoreLeavesAWorker(t *testing.T) {
	const workers = 4
	scheme := runtime.NewScheme()
	if err := bkv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	bucket := func(name, store string) *bkv1.StorageBucket {
		return &bkv1.StorageBucket{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name},
			Spec:       bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: store}},
		}
	}
	objs := []client.Object{&bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "hung"}}}
	for i := range workers {
		objs = append(objs, bucket(fmt.Sprintf("hung-%d", i), "hung"))
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	inner := &blockingReconciler{release: make(chan struct{})}
	defer close(inner.release)
	l := &SlotLimited{
		Reader:  c,
		Stores:  &Registry{MaxReconcilesPerStore: defaults.MaxReconcilesPerStore(workers)},
		Inner:   inner,
		Workers: workers,
	}
	reconcileBucket := func(name string) (ctrl.Result, error) {
		return l.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: name}})
	}

	for i := range workers - 1 {
		go func() { _, _ = reconcileBucket(fmt.Sprintf("hung-%d", i)) }()
	}
	for deadline := time.Now().Add(5 * time.Second); inner.entered.Load() < workers-1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d reconciles of the one store started", inner.entered.Load(), workers-1)
		}
	}
	res, err := reconcileBucket(fmt.Sprintf("hung-%d", workers-1))
	if err != nil || res.RequeueAfter < BusyDelay {
		t.Fatalf("reconcile %d of the one store: %+v, %v; want it tried again after at least %v", workers, res, err, BusyDelay)
	}
	if n := inner.entered.Load(); n != workers-1 {
		t.Fatalf("%d reconciles of the one store in flight with %d workers, want %d", n, workers, workers-1)
	}

	// A second store appears: the worker kept free serves its first bucket at once.
	if err := c.Create(context.Background(), &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "new"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(context.Background(), bucket("first", "new")); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = reconcileBucket("first") }()
	for deadline := time.Now().Add(5 * time.Second); inner.entered.Load() < workers; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the new store's first bucket was not reconciled")
		}
	}
}
