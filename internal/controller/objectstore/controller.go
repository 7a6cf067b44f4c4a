package objectstore

import (
	"context"
	"net/http"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	"github.com/bucketkeeper/bucketkeeper/internal/memo"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
)

// +kubebuilder:rbac:groups=bucketkeeper.io,resources=objectstores,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=bucketkeeper.io,resources=objectstores/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=bucketkeeper.io,resources=objectstores/finalizers,verbs=update

// Reconciler checks each store's credentials and reachability on its own
// health-check interval. Its Ready condition is what StorageBuckets consult before they
// send requests, so a store that is down costs one failing request per interval, not one
// per bucket.
type Reconciler struct {
	client.Client
	// APIReader lists across shards (see reconcileDelete).
	APIReader client.Reader
	Recorder  events.EventRecorder
	Stores    *stores.Registry
	Clock     clock.PassiveClock
	// Heartbeat bounds how often lastHealthCheckTime alone is rewritten.
	Heartbeat     time.Duration
	OnStatusWrite func(kind string)
	// OnHealth receives each health verdict (ready or not) and nil once the store is
	// deleted, for the per-store gauge; may be nil.
	OnHealth func(store string, ready *bool)
	// Budget receives this shard's part of each store's request budget (see
	// stores.Registry.Budget), so probes are paced by it; may be nil.
	Budget func(store string, perSecond float64, burst int)
	// Leases, when several shards share the stores, elects the one that checks each
	// store (see stores.Leases); nil: this instance checks every store.
	Leases *stores.Leases
	// Access checks stores whose accessProvider is IAM; may be nil.
	Access *stores.AccessProviders
	// ClusterID names the role the check of role policies asks about (one that
	// cannot exist).
	ClusterID string
	// IssuerHTTPClient reads an issuer's discovery document and key set, to compute
	// the thumbprint of a store's webIdentity that gives none and to check that the
	// issuer publishes this cluster's keys alone; nil: the system's roots.
	IssuerHTTPClient *http.Client
	// ClusterKeys reads the ServiceAccount token keys this cluster's API server
	// publishes (its /openid/v1/jwks), which a store's issuer must publish alone
	// (issuerkeys.go); nil refuses every webIdentity.
	ClusterKeys func(ctx context.Context) (iam.KeySet, error)
	// ReconcileTimeout bounds each reconcile as a whole (zero: no bound).
	ReconcileTimeout time.Duration
	// OnRetirement receives a retiring store's counts after each count, and nil once
	// it retires no more (metrics); may be nil.
	OnRetirement func(store string, st *bkv1.RetirementStatus)

	// lastChecked is when each store was last checked, by name; lastCounted when a
	// retiring store's buckets were last counted (retire.go).
	lastChecked, lastCounted memo.Map[string, time.Time]
	// webIdentity is, per store, its last registration (webidentity.go).
	webIdentity memo.Map[string, webIdentityRun]
	// issuerUnread is, per store that gives thumbprints, an issuer the operator could
	// not read and until when it is not tried again (issuerkeys.go).
	issuerUnread memo.Map[string, unreadIssuer]
}

// checkAllowed says whether a store may be checked now, or how long to wait.
func (r *Reconciler) checkAllowed(store string) time.Duration {
	now := r.Clock.Now()
	var wait time.Duration
	r.lastChecked.Update(store, func(last time.Time, ok bool) (time.Time, bool) {
		if ok && now.Sub(last) < defaults.MinStoreCheckGap {
			wait = defaults.MinStoreCheckGap - now.Sub(last)
			return last, true
		}
		return now, true
	})
	return wait
}

func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return reconcile.Run(ctx, r.Client, req, &bkv1.ObjectStore{}, reconcile.Lifecycle[*bkv1.ObjectStore]{
		Kind:     "ObjectStore",
		Status:   func(store *bkv1.ObjectStore) any { return store.Status },
		OnWrite:  r.OnStatusWrite,
		Deleting: r.reconcileDelete,
		Normal:   r.reconcileNormal,
	})
}

// SetupWithManager registers the reconciler: its stores, the credentials Secrets they
// name, the deletion of a StorageBucket or its leaving a store (either may let a
// store's deletion finish), a change a retiring store counts (retire.go) and the
// health checks a probe asks for.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&bkv1.ObjectStore{}, builder.WithPredicates(reconcile.SpecOrLifecycleChanged())).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.storesOfSecret), builder.WithPredicates(reconcile.CredentialsSecret())).
		Watches(&bkv1.StorageBucket{}, handler.EnqueueRequestsFromMapFunc(storeOfBucket), builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(event.CreateEvent) bool { return false },
			UpdateFunc: func(e event.UpdateEvent) bool {
				return leftAStore(e.ObjectOld, e.ObjectNew) || retirementChanged(e.ObjectOld, e.ObjectNew)
			},
		})).
		WatchesRawSource(r.Stores.CheckRequests()).
		WithOptions(controller.Options{RateLimiter: reconcile.RateLimiter(), ReconciliationTimeout: r.ReconcileTimeout}).
		Complete(r)
}

func (r *Reconciler) storesOfSecret(ctx context.Context, o client.Object) []ctrl.Request {
	var out []ctrl.Request
	for _, store := range reconcile.StoresReferencing(ctx, r.Client, o) {
		out = append(out, ctrl.Request{NamespacedName: types.NamespacedName{Name: store.Name}})
	}
	return out
}

// leftAStore says whether a StorageBucket is on fewer or other stores than before: a
// move finished or cancelled may let the deletion of the store it left finish (the
// map function wakes the stores of both versions).
func leftAStore(o, n client.Object) bool {
	return !slices.Equal(reconcile.StoresOfBucket(o.(*bkv1.StorageBucket)), reconcile.StoresOfBucket(n.(*bkv1.StorageBucket)))
}

// storeOfBucket wakes the store a bucket lives on and, while it moves, the store it
// moves to.
func storeOfBucket(_ context.Context, o client.Object) []ctrl.Request {
	var out []ctrl.Request
	for _, name := range reconcile.StoresOfBucket(o.(*bkv1.StorageBucket)) {
		out = append(out, ctrl.Request{NamespacedName: types.NamespacedName{Name: name}})
	}
	return out
}
