package store

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/memo"
)

// Per-store reconcile slots.
//
// A StorageBucket reconcile can wait on its store: each S3 call for up to the request
// timeout, the whole reconcile for up to the reconcile timeout, and all that time it holds
// one of the controller's workers. A store that accepts connections and never answers would
// take the workers one bucket after another until none is left, and the buckets of every
// other store would stall with it. So a store may have only so many reconciles in flight
// (see ReconcileCap), and never all the workers while there are two or more. A reconcile
// that finds its store's slots all taken does not wait for one (waiting would hold the
// worker after all): it goes back to the queue for BusyDelay, and the workers the hung
// store cannot take keep serving the other stores.
//
// The cap counts whole reconciles, not single S3 calls, so a reconcile never stops halfway
// for want of a slot, and it holds for every path: provisioning, configuration, probes and
// deletion alike.

// BusyDelay is how long a reconcile whose store has no free slot waits before it is
// tried again; up to half of it again is added at random so that the buckets of a busy
// store do not return in lockstep.
const BusyDelay = 2 * time.Second

// storeSlots counts in-flight reconciles per store.
type storeSlots struct {
	inFlight memo.Map[string, int]
}

// tryAcquire takes one of store's limit slots if one is free and returns the function that
// gives it back (safe to call more than once). limit <= 0 means no cap.
func (s *storeSlots) tryAcquire(store string, limit int) (release func(), ok bool) {
	if limit <= 0 {
		return func() {}, true
	}
	s.inFlight.Update(store, func(n int, _ bool) (int, bool) {
		if ok = n < limit; ok {
			n++
		}
		return n, n > 0
	})
	if !ok {
		return nil, false
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			s.inFlight.Update(store, func(n int, _ bool) (int, bool) { return n - 1, n > 1 })
		})
	}, true
}

// SlotLimited runs the StorageBucket reconciler inside a slot of the bucket's
// store (see the comment at the top of this file).
type SlotLimited struct {
	// Reader is the manager's cache: finding the store name costs no API request.
	Reader client.Reader
	Stores *Registry
	Inner  reconcile.Reconciler
	// Workers is the controller's MaxConcurrentReconciles, which the cap keeps one of
	// free while there is a single store.
	Workers int
}

func (l *SlotLimited) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sb := &bkv1.StorageBucket{}
	if err := l.Reader.Get(ctx, req.NamespacedName, sb); err != nil {
		// Gone or unreadable: the reconciler reports or forgets it without a store.
		return l.Inner.Reconcile(ctx, req)
	}
	store := sb.HomeStore()
	// Only counted: read from the cache without the deep copy of every store a List
	// otherwise makes on each reconcile.
	stores := &bkv1.ObjectStoreList{}
	if err := l.Reader.List(ctx, stores, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, err
	}
	limit := l.Stores.ReconcileCap(len(stores.Items), l.Workers)
	release, ok := l.Stores.slots.tryAcquire(store, limit)
	if !ok {
		log.FromContext(ctx).V(1).Info("all reconcile slots of the store are taken; trying again later",
			"store", store, "slots", limit)
		return ctrl.Result{RequeueAfter: BusyDelay + rand.N(BusyDelay/2)}, nil
	}
	defer release()
	return l.Inner.Reconcile(ctx, req)
}

// ReconcileCap is the slot limit of each store while stores ObjectStores exist and the
// controller has workers workers (0: no cap, if MaxReconcilesPerStore is 0):
//
//   - two or more stores: MaxReconcilesPerStore (by default three quarters of the
//     workers and always one less than all of them), which keeps workers for the other
//     stores' buckets;
//   - fewer: every worker but one (at least one). A single store that hangs still
//     cannot take every worker: the one left serves the first buckets of a store that
//     is added next, which would otherwise wait for the hung store's reconciles to time
//     out (--reconcile-timeout), and buckets naming a store that does not exist. The
//     cap costs the one store throughput even while it is healthy (a spare worker turns
//     away, for BusyDelay, each of its buckets it picks up while the others are
//     busy), so it keeps no more than the one worker that is needed: a mass creation on
//     the store runs on one worker less (a quarter of the default 4). With
//     --concurrency=1 there is no worker to spare and the cap is 1.
//
// The count is of the stores that exist, not of those the operator has talked to yet: a
// store that hangs from the start must not take every worker before another store's
// first bucket comes along.
func (r *Registry) ReconcileCap(stores, workers int) int {
	switch {
	case r.MaxReconcilesPerStore <= 0:
		return 0
	case stores >= 2:
		return r.MaxReconcilesPerStore
	default:
		return max(1, workers-1)
	}
}
