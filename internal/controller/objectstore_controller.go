package controller

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
)

// +kubebuilder:rbac:groups=bucketkeeper.io,resources=objectstores,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=bucketkeeper.io,resources=objectstores/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=bucketkeeper.io,resources=objectstores/finalizers,verbs=update

// ObjectStoreReconciler checks each store's credentials and reachability on its own
// health-check interval. Its Ready condition is what StorageBuckets consult before they
// send requests, so a store that is down costs one failing request per interval, not one
// per bucket.
type ObjectStoreReconciler struct {
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
	// ReconcileTimeout bounds each reconcile as a whole (zero: no bound).
	ReconcileTimeout time.Duration

	mu          sync.Mutex
	lastChecked map[string]time.Time
}

// checkAllowed says whether a store may be checked now, or how long to wait.
func (r *ObjectStoreReconciler) checkAllowed(store string) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.Clock.Now()
	if last, ok := r.lastChecked[store]; ok && now.Sub(last) < defaults.MinStoreCheckGap {
		return defaults.MinStoreCheckGap - now.Sub(last)
	}
	if r.lastChecked == nil {
		r.lastChecked = map[string]time.Time{}
	}
	r.lastChecked[store] = now
	return 0
}

func (r *ObjectStoreReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return reconcile.Run(ctx, r.Client, req, &bkv1.ObjectStore{}, reconcile.Lifecycle[*bkv1.ObjectStore]{
		Kind:     "ObjectStore",
		Status:   func(store *bkv1.ObjectStore) any { return store.Status },
		OnWrite:  r.OnStatusWrite,
		Deleting: r.reconcileDelete,
		Normal:   r.reconcileNormal,
	})
}

// reconcileNormal checks the store's health, at most once per defaults.MinStoreCheckGap, and comes
// back after the store's health-check interval.
func (r *ObjectStoreReconciler) reconcileNormal(ctx context.Context, store *bkv1.ObjectStore, patcher *reconcile.StatusPatcher) (ctrl.Result, error) {
	interval := defaults.StoreHealthCheckInterval
	if store.Spec.HealthCheck.Interval != nil {
		interval = store.Spec.HealthCheck.Interval.Duration
	}
	if r.Budget != nil {
		perSecond, burst := r.Stores.Budget(store)
		r.Budget(store.Name, perSecond, burst)
	}
	if wait := r.checkAllowed(store.Name); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	if r.Leases != nil {
		held, wait, err := r.Leases.Hold(ctx, store, stores.LeaseDuration(interval))
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("taking the health-check Lease of store %s: %w", store.Name, err)
		}
		if !held {
			// Another shard checks this store and writes its verdict; look again
			// when its Lease would expire, to take over from a shard that died. A
			// check this shard's probes ask for (RequestCheck) waits for the
			// holder's next one: the store is not checked twice per interval.
			r.reportHeldElsewhere(store)
			return ctrl.Result{RequeueAfter: wait}, nil
		}
	}
	reason, message := r.healthCheck(ctx, store)
	r.setHealth(patcher, store, reason, message)
	r.checkAccessProvider(ctx, store)
	return ctrl.Result{RequeueAfter: interval}, nil
}

// reportHeldElsewhere hands the verdict another shard wrote to the per-store gauge, so
// every shard's metrics say whether the store is ready.
func (r *ObjectStoreReconciler) reportHeldElsewhere(store *bkv1.ObjectStore) {
	c := reconcile.FindCondition(store.Status.Conditions, bkv1.ConditionReady)
	if r.OnHealth == nil || c == nil || c.Reason == bkv1.ReasonInUse {
		return
	}
	ready := c.Status == metav1.ConditionTrue
	r.OnHealth(store.Name, &ready)
}

// healthCheck sends one signed ListBuckets for a single bucket (s3.Client.Ping): it proves
// the endpoint answers, TLS is trusted and the credentials are accepted, and costs one
// small page however many buckets the account has. What a failed check means is the
// kind's health verdict (reconcile.KindVerdicts): AccessDenied, for one, still means Ready.
func (r *ObjectStoreReconciler) healthCheck(ctx context.Context, store *bkv1.ObjectStore) (reason, message string) {
	c, err := r.Stores.ClientFor(ctx, store)
	if err != nil {
		se := reconcile.AsStepError(err, "building the store client")
		return se.Reason, se.Message
	}
	ctx, cancel := context.WithTimeout(ctx, defaults.StoreHealthCheckTimeout)
	defer cancel()
	return reconcile.HealthVerdict(c.Ping(ctx))
}

// setHealth records the verdict. lastHealthCheckTime moves on every change of verdict
// and otherwise at most once per heartbeat, so a healthy store costs almost no writes.
func (r *ObjectStoreReconciler) setHealth(patcher *reconcile.StatusPatcher, store *bkv1.ObjectStore, reason, message string) {
	status := metav1.ConditionFalse
	if reason == bkv1.ReasonReady {
		status = metav1.ConditionTrue
	}
	before := reconcile.FindCondition(store.Status.Conditions, bkv1.ConditionReady)
	changed := before == nil || before.Status != status || before.Reason != reason || before.ObservedGeneration != store.Generation
	now := r.Clock.Now()
	if changed {
		eventType := corev1.EventTypeNormal
		if status != metav1.ConditionTrue {
			eventType = corev1.EventTypeWarning
		}
		patcher.AfterWrite(func() { r.Recorder.Eventf(store, nil, eventType, reason, "HealthCheck", "%s", message) })
	}
	if changed || store.Status.LastHealthCheckTime == nil || now.Sub(store.Status.LastHealthCheckTime.Time) >= r.Heartbeat {
		t := metav1.NewTime(now)
		store.Status.LastHealthCheckTime = &t
	}
	reconcile.SetCondition(&store.Status.Conditions, store.Generation, bkv1.ConditionReady, status, reason, message)
	if r.OnHealth != nil {
		ready := status == metav1.ConditionTrue
		r.OnHealth(store.Name, &ready)
	}
	// Reconciling and Stalled are what kstatus (and every GitOps tool built on it)
	// reads: without them a store that answered once and then went away would count
	// as Current. They never both hold, as kstatus reads whichever comes first.
	conds := &store.Status.Conditions
	switch {
	case status == metav1.ConditionTrue:
		reconcile.RemoveCondition(conds, bkv1.ConditionReconciling)
		reconcile.RemoveCondition(conds, bkv1.ConditionStalled)
		store.Status.ObservedGeneration = store.Generation
	case reconcile.StoreVerdictOf(reason).Terminal:
		// Retrying cannot help: a person must fix the credentials or the trust.
		reconcile.RemoveCondition(conds, bkv1.ConditionReconciling)
		reconcile.SetCondition(conds, store.Generation, bkv1.ConditionStalled, metav1.ConditionTrue, reason, message)
		store.Status.ObservedGeneration = store.Generation
	default:
		// Unreachable or not yet checked: the next health check may succeed.
		reconcile.RemoveCondition(conds, bkv1.ConditionStalled)
		reconcile.SetCondition(conds, store.Generation, bkv1.ConditionReconciling, metav1.ConditionTrue, reason, message)
	}
}

// reconcileDelete refuses to let a store go while buckets still use it: their deletion
// policies need the store to be carried out.
func (r *ObjectStoreReconciler) reconcileDelete(ctx context.Context, store *bkv1.ObjectStore, patcher *reconcile.StatusPatcher) (ctrl.Result, error) {
	// Asked of the API server, not the cache: with sharding (--watch-label-selector)
	// the cache holds only this instance's buckets, and every shard's must be gone.
	users := &bkv1.StorageBucketList{}
	if err := r.APIReader.List(ctx, users, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector(IndexStorageBucketStore, store.Name)}); err != nil {
		return ctrl.Result{}, err
	}
	if n := len(users.Items); n > 0 {
		names := make([]string, 0, min(n, 5))
		for _, sb := range users.Items[:min(n, 5)] {
			names = append(names, claimOf(&sb))
		}
		more := ""
		if n > 5 {
			more = fmt.Sprintf(" and %d more", n-5)
		}
		msg := fmt.Sprintf("deletion waits: %d StorageBuckets still use this store (%s%s); delete them first", n, strings.Join(names, ", "), more)
		if c := reconcile.FindCondition(store.Status.Conditions, bkv1.ConditionReady); c == nil || c.Reason != bkv1.ReasonInUse {
			patcher.AfterWrite(func() { r.Recorder.Eventf(store, nil, corev1.EventTypeWarning, bkv1.ReasonInUse, "Delete", "%s", msg) })
		}
		reconcile.SetCondition(&store.Status.Conditions, store.Generation, bkv1.ConditionReady, metav1.ConditionFalse, bkv1.ReasonInUse, msg)
		return ctrl.Result{}, nil // a StorageBucket going away re-enqueues the store
	}
	r.Stores.Forget(store.Name)
	if r.Access != nil {
		r.Access.Forget(store.Name)
	}
	r.mu.Lock()
	delete(r.lastChecked, store.Name)
	r.mu.Unlock()
	if r.OnHealth != nil {
		r.OnHealth(store.Name, nil)
	}
	err := reconcile.PatchMetadata(ctx, r.Client, store, func(o *bkv1.ObjectStore) { controllerutil.RemoveFinalizer(o, bkv1.Finalizer) })
	return ctrl.Result{}, client.IgnoreNotFound(err)
}

// checkAccessProvider sets the store's AccessProviderReady condition: for IAM, a
// signed ListUsers of one item proves the endpoint answers and the operator may
// manage users; other providers carry no condition.
func (r *ObjectStoreReconciler) checkAccessProvider(ctx context.Context, store *bkv1.ObjectStore) {
	if r.Access == nil || stores.AccessProviderOf(store) != bkv1.AccessProviderIAM {
		reconcile.RemoveCondition(&store.Status.Conditions, bkv1.ConditionAccessProviderReady)
		return
	}
	status, reason, message := metav1.ConditionTrue, bkv1.ReasonReady, "the IAM endpoint answers and lets the operator manage users"
	d, err := r.Access.DriverFor(ctx, store)
	if err == nil {
		err = d.Check(ctx)
	}
	if err != nil {
		status, reason, message = metav1.ConditionFalse, bkv1.ReasonAccessProviderUnavailable, fmt.Sprintf("IAM check failed: %v", err)
		switch iam.KindOf(err) {
		case iam.KindAccessDenied:
			reason = bkv1.ReasonAccessDenied
		case iam.KindInvalidCredentials:
			reason = bkv1.ReasonCredentialsInvalid
		}
	}
	reconcile.SetCondition(&store.Status.Conditions, store.Generation, bkv1.ConditionAccessProviderReady, status, reason, message)
}
