package objectstore

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
)

// reconcileNormal counts a retiring store's buckets (retire.go), then checks its health.
func (r *Reconciler) reconcileNormal(ctx context.Context, store *bkv1.ObjectStore, patcher *reconcile.StatusPatcher) (ctrl.Result, error) {
	wait, err := r.reportRetirement(ctx, store)
	if err != nil {
		return ctrl.Result{}, err
	}
	result, err := r.checkHealth(ctx, store, patcher)
	if wait > 0 && (result.RequeueAfter == 0 || wait < result.RequeueAfter) {
		result.RequeueAfter = wait
	}
	return result, err
}

// checkHealth checks the store's health, at most once per defaults.MinStoreCheckGap, and comes
// back after the store's health-check interval.
func (r *Reconciler) checkHealth(ctx context.Context, store *bkv1.ObjectStore, patcher *reconcile.StatusPatcher) (ctrl.Result, error) {
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
	checkSideAPI(ctx, store, r.accessProviderAPI(store))
	checkSideAPI(ctx, store, r.adminAPI(store))
	r.checkWebIdentity(ctx, store, patcher)
	return ctrl.Result{RequeueAfter: interval}, nil
}

// reportHeldElsewhere hands the verdict another shard wrote to the per-store gauge, so
// every shard's metrics say whether the store is ready.
func (r *Reconciler) reportHeldElsewhere(store *bkv1.ObjectStore) {
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
func (r *Reconciler) healthCheck(ctx context.Context, store *bkv1.ObjectStore) (reason, message string) {
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
func (r *Reconciler) setHealth(patcher *reconcile.StatusPatcher, store *bkv1.ObjectStore, reason, message string) {
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
